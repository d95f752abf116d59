#!/usr/bin/env python3
"""kube-scheduler's Filter requests (ExtenderArgs) on a running fitledger-sim's cluster.

Writes two bodies, as kube-scheduler's extender client marshals them (Go's encoding/json:
compact, the fields of ExtenderArgs in order Pod, Nodes, NodeNames; TypeMeta left out of the
objects, as informer objects carry none):

  --names-out FILE   nodeCacheCapable: true:  {"Pod":{...},"Nodes":null,"NodeNames":[500 names]}
  --nodes-out FILE   nodeCacheCapable: false: {"Pod":{...},"Nodes":{"metadata":{},"items":[500
                     nodes]},"NodeNames":null}

The candidates are `--candidates` of the sim's nodes (LIST /api/v1/nodes, sorted by name as the
API server lists them) spread evenly over the list, as the nodes that passed kube-scheduler's own
filters would be; `--candidates-out` writes their names, one a line, `--node-names-out` every
node's name, and `--pod-out` the pending pod alone (tests/bench/cycle_load's template). The pod is one of the sim's
generated pods of workload `--app` (realistic objects: `generate.objects: realistic`) turned into
the pending pod the scheduler holds: no spec.nodeName, status Pending, the kubelet's
managedFields entry gone, and its main container requesting `--requests` (so it does not fit the
nodes `generate.fullNodes` filled). It keeps its other managedFields (kube-controller-manager's,
kubectl's), its ownerReferences and its kubectl last-applied-configuration annotation.
`--no-managed-fields` drops managedFields as current kube-scheduler's pod informer does
(pkg/scheduler/scheduler.go, newPodInformer's transform); the default keeps them (issue 24's
payload, the heavier case).

  make_body.py --api http://127.0.0.1:PORT --names-out N.json --nodes-out F.json
               [--pod-out POD.json] [--node-names-out ALL.txt]
               [--candidates-out C.txt] [--candidates 500] [--namespace bench]
               [--app checkout-api] [--requests cpu=500m,memory=1Gi] [--no-managed-fields]
  make_body.py --check FILE [--candidates 500]   validate a body's shape; exit 1 if it is wrong

Standard library only.
"""
import argparse
import json
import sys
import urllib.parse
import urllib.request

POD_MIN_BYTES = 3000
POD_MAX_BYTES = 6144


def get(api, path):
    with urllib.request.urlopen(api.rstrip("/") + path, timeout=120) as reply:
        return json.load(reply)


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def strip_type_meta(obj):
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return obj


def parse_requests(text):
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name or not value:
            raise SystemExit(f"--requests: want name=quantity[,...], got {text!r}")
        out[name.strip()] = value.strip()
    return out


def pending_pod(running, requests, keep_managed_fields):
    """The pending pod kube-scheduler holds, made from one of the sim's running pods."""
    pod = strip_type_meta(json.loads(json.dumps(running)))
    meta = pod["metadata"]
    meta["name"] = meta["generateName"] + "fltr7"
    meta["uid"] = "5c9e2a4f-7b1d-4e3a-9f6c-2d8b0a1e3c57"
    meta["resourceVersion"] = "48213377"
    if keep_managed_fields:
        meta["managedFields"] = [m for m in meta.get("managedFields", [])
                                 if m.get("subresource") != "status"]
    else:
        meta.pop("managedFields", None)
    applied_key = "kubectl.kubernetes.io/last-applied-configuration"
    applied = json.loads(meta["annotations"][applied_key])
    applied["metadata"]["name"] = meta["name"]
    spec = pod["spec"]
    spec.pop("nodeName", None)
    for containers in (spec["containers"], applied["spec"]["containers"]):
        main = containers[0]
        main.setdefault("resources", {})["requests"] = dict(requests)
        if "memory" in requests and "limits" in main["resources"]:
            main["resources"]["limits"]["memory"] = requests["memory"]
    meta["annotations"][applied_key] = compact(applied) + "\n"
    pod["status"] = {"phase": "Pending", "qosClass": running["status"].get("qosClass", "Burstable")}
    return pod


def check_pod(pod, keep_managed_fields=True):
    """Problems with the body's pod (an empty list when it has the shape issue 24 asks for)."""
    problems = []
    size = len(compact(pod).encode())
    if not POD_MIN_BYTES <= size <= POD_MAX_BYTES:
        problems.append(f"Pod is {size} bytes, want {POD_MIN_BYTES}..{POD_MAX_BYTES}")
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    if keep_managed_fields and not meta.get("managedFields"):
        problems.append("Pod has no metadata.managedFields")
    if not meta.get("ownerReferences"):
        problems.append("Pod has no metadata.ownerReferences")
    if not meta.get("labels"):
        problems.append("Pod has no labels")
    try:
        applied = json.loads(meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
        if applied.get("kind") != "Pod":
            problems.append("last-applied-configuration is not a Pod")
    except (KeyError, TypeError, ValueError) as e:
        problems.append(f"no parseable last-applied-configuration annotation ({e!r})")
    containers = spec.get("containers") or [{}]
    if not containers[0].get("env"):
        problems.append("the main container has no env")
    if not (containers[0].get("livenessProbe") and containers[0].get("readinessProbe")):
        problems.append("the main container lacks probes")
    if not spec.get("volumes"):
        problems.append("Pod has no volumes")
    if spec.get("nodeName"):
        problems.append("Pod is bound (spec.nodeName set)")
    if not containers[0].get("resources", {}).get("requests"):
        problems.append("the main container requests nothing")
    if "kind" in pod or "apiVersion" in pod:
        problems.append("Pod carries TypeMeta (kube-scheduler's informer objects have none)")
    return problems


def check_body(body, candidates):
    """Problems with a Filter body (an empty list when it is well formed)."""
    if not isinstance(body, dict) or list(body) != ["Pod", "Nodes", "NodeNames"]:
        return [f"top-level keys are {list(body) if isinstance(body, dict) else type(body)}, "
                "want Pod, Nodes, NodeNames in that order"]
    problems = check_pod(body["Pod"], keep_managed_fields="managedFields" in body["Pod"]["metadata"])
    names, nodes = body["NodeNames"], body["Nodes"]
    if (names is None) == (nodes is None):
        problems.append("exactly one of Nodes and NodeNames must be null")
    elif names is not None:
        if len(names) != candidates or len(set(names)) != candidates:
            problems.append(f"NodeNames: {len(names)} names ({len(set(names))} distinct), "
                            f"want {candidates}")
        if any(not isinstance(n, str) or not n for n in names):
            problems.append("NodeNames holds something other than names")
    else:
        items = nodes.get("items") or []
        got = {n.get("metadata", {}).get("name") for n in items}
        if list(nodes) != ["metadata", "items"] or len(items) != candidates or len(got) != candidates:
            problems.append(f"Nodes: {len(items)} items ({len(got)} distinct), want {candidates}, "
                            "as {\"metadata\":{},\"items\":[...]}")
        for n in items[:5]:
            if "kind" in n or "apiVersion" in n:
                problems.append("Nodes.items carry TypeMeta")
                break
            if not n.get("status", {}).get("allocatable"):
                problems.append("a node has no status.allocatable")
                break
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", help="fitledger-sim's URL, http://127.0.0.1:PORT")
    parser.add_argument("--names-out")
    parser.add_argument("--nodes-out")
    parser.add_argument("--candidates-out")
    parser.add_argument("--node-names-out")
    parser.add_argument("--pod-out")
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--namespace", default="bench")
    parser.add_argument("--app", default="checkout-api",
                        help="the workload (app.kubernetes.io/name) whose pod becomes the pending pod")
    parser.add_argument("--requests", default="cpu=500m,memory=1Gi")
    parser.add_argument("--no-managed-fields", action="store_true")
    parser.add_argument("--check", metavar="FILE", help="validate a body instead")
    args = parser.parse_args()

    if args.check:
        with open(args.check, "rb") as f:
            problems = check_body(json.load(f), args.candidates)
        for p in problems:
            print(f"{args.check}: {p}", file=sys.stderr)
        return 1 if problems else 0

    if not args.api or not (args.names_out or args.nodes_out):
        parser.error("--api and at least one of --names-out / --nodes-out are required")
    nodes = get(args.api, "/api/v1/nodes")["items"]
    nodes.sort(key=lambda n: n["metadata"]["name"])
    if len(nodes) < args.candidates:
        raise SystemExit(f"the sim has {len(nodes)} nodes, fewer than --candidates {args.candidates}")
    stride = len(nodes) // args.candidates
    chosen = [strip_type_meta(nodes[i * stride]) for i in range(args.candidates)]
    selector = urllib.parse.quote(f"app.kubernetes.io/name={args.app}")
    pods = get(args.api, f"/api/v1/namespaces/{args.namespace}/pods?limit=1&labelSelector={selector}")
    if not pods["items"]:
        raise SystemExit(f"no pod of app {args.app} in namespace {args.namespace}: does the sim "
                         "generate realistic objects (generate.objects: realistic)?")
    pod = pending_pod(pods["items"][0], parse_requests(args.requests), not args.no_managed_fields)
    problems = check_pod(pod, not args.no_managed_fields)
    if problems:
        raise SystemExit("the pending pod is not of the wanted shape: " + "; ".join(problems))

    names = [n["metadata"]["name"] for n in chosen]
    bodies = []
    if args.names_out:
        bodies.append((args.names_out, {"Pod": pod, "Nodes": None, "NodeNames": names}))
    if args.nodes_out:
        bodies.append((args.nodes_out,
                       {"Pod": pod, "Nodes": {"metadata": {}, "items": chosen}, "NodeNames": None}))
    for path, body in bodies:
        problems = check_body(body, args.candidates)
        if problems:
            raise SystemExit(f"{path}: " + "; ".join(problems))
        with open(path, "w") as f:
            f.write(compact(body))
    if args.candidates_out:
        with open(args.candidates_out, "w") as f:
            f.write("\n".join(names) + "\n")
    if args.node_names_out:
        with open(args.node_names_out, "w") as f:
            f.write("\n".join(n["metadata"]["name"] for n in nodes) + "\n")
    if args.pod_out:
        with open(args.pod_out, "w") as f:
            f.write(compact(pod))
    pod_bytes = len(compact(pod).encode())
    name_len = sum(len(n) for n in names) / len(names)
    print(f"make_body: pod {pod_bytes} bytes ({args.app}); {len(names)} candidates, names of "
          f"{name_len:.0f} characters on average; "
          + ", ".join(f"{p}: {len(compact(b).encode())} bytes" for p, b in bodies), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
