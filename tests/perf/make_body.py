#!/usr/bin/env python3
"""Writes a kube-scheduler Filter request (ExtenderArgs, nodeCacheCapable: true) to stdout.

The pod is tests/perf/pod_4k.json (compact, ~4.5 KB); the candidates are `--candidates` node
names spread evenly over a generated fitledger-sim cluster of `--nodes` nodes named node-<i>.
Usage: make_body.py [--pod FILE] [--nodes 5000] [--candidates 500] [--offset 0]
"""
import argparse
import json
import os
import sys


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--pod", default=os.path.join(here, "pod_4k.json"))
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--offset", type=int, default=0)
    args = parser.parse_args()
    with open(args.pod) as f:
        pod = json.load(f)
    stride = max(1, args.nodes // args.candidates)
    names = [f"node-{(args.offset + i * stride) % args.nodes}" for i in range(args.candidates)]
    body = {"Pod": pod, "Nodes": None, "NodeNames": names}
    sys.stdout.write(json.dumps(body, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
