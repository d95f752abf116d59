#!/usr/bin/env python3
"""The include check (issue 50): no product file includes a file of a higher layer.

The layers, lowest first (docs/how-it-works.md, "Layers"):
  0 common      common/
  1 model       model/ (quantities, resource names and lists, the pod, pod requests),
                proto/ (the wire messages, compiled from proto/fitledger)
  2 base        config/; server/ledger/; the API client and the object decoders in server/kube/
  3 reflector   server/kube/reflector, rejection_detector, watcher, lease_watcher
  4 extender    server/service/ extender, reconciler, leader_fence
  5 adapters    webhook/; server/service/ convert, extender_backend, grpc_services, rpc_metrics,
                message_pool; client/shim/grpc_backend
  6 programs    server/service/server_app, server/main.cc, client/shim/main.cc, client/ctl/
  sim/ is a program of its own that may use only layers 0 and 1 (and itself): it must not share
  fitledger's API client, ledger or request code (its kubelet judges pods with its own code).

A file may include its own layer and the ones below. KNOWN lists the upward includes the tree
has today, each with the layer it breaks; the check fails on any upward include not listed, and
on a listed one that is gone (so the list only shrinks). Prints every violation it finds.

  tests/layers/check_includes.py [SOURCE_DIR]
  tests/layers/check_includes.py --self-test   (the check finds what it must, on a made-up tree)
"""
import os
import re
import sys

LAYER_NAMES = ["common", "model", "base", "reflector", "extender", "adapters", "programs"]

RULES = [  # (path prefix, layer); the longest matching prefix wins
    ("common/", 0),
    ("model/", 1),
    ("proto/", 1),
    ("fitledger/v1/", 1),  # generated proto headers, as included
    ("health/", 1),
    ("config/", 2),
    ("server/ledger/", 2),
    ("server/kube/", 2),
    ("server/kube/reflector", 3),
    ("server/kube/rejection_detector", 3),
    ("server/kube/watcher", 3),
    ("server/kube/lease_watcher", 3),
    ("server/service/", 4),
    ("server/service/convert", 5),
    ("server/service/extender_backend", 5),
    ("server/service/grpc_services", 5),
    ("server/service/rpc_metrics", 5),
    ("server/service/message_pool", 5),
    ("webhook/", 5),
    ("client/shim/grpc_backend", 5),
    ("server/service/server_app", 6),
    ("server/main.cc", 6),
    ("client/shim/main.cc", 6),
    ("client/ctl/", 6),
]
SIM_MAY_USE = 1  # sim/ includes nothing above the model layer

# Upward includes in the tree today: (file, included file). Each is a fix still to make.
KNOWN = {
}

SOURCE_DIRS = ["common", "model", "server", "config", "webhook", "client", "sim", "proto"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    best, layer = -1, None
    for prefix, value in RULES:
        if path.startswith(prefix) and len(prefix) > best:
            best, layer = len(prefix), value
    return layer


def product_files(root):
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".cc", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def violations(root):
    found = {}
    for path in sorted(product_files(root)):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            includes = [m.group(1) for m in map(INCLUDE.match, f) if m]
        if path.startswith("sim/"):
            for inc in includes:
                if inc.startswith("sim/"):
                    continue
                target = layer_of(inc)
                if target is not None and target > SIM_MAY_USE:
                    found[(path, inc)] = f"sim/ uses layer {LAYER_NAMES[target]} ({inc})"
            continue
        mine = layer_of(path)
        if mine is None:
            continue
        for inc in includes:
            target = layer_of(inc)
            if target is not None and target > mine:
                found[(path, inc)] = (f"{LAYER_NAMES[mine]} includes {LAYER_NAMES[target]}")
    return found


def self_test():
    import tempfile
    cases = {  # file -> (its text, the violations expected from it)
        "common/a.h": ('#include "model/pod.h"\n', {("common/a.h", "model/pod.h")}),
        "model/pod.h": ('#include "common/a.h"\n', set()),
        "server/kube/objects.cc": ('#include "server/kube/watcher.h"\n',
                                   {("server/kube/objects.cc", "server/kube/watcher.h")}),
        "server/kube/watcher.h": ('#include "server/ledger/ledger.h"\n', set()),
        "server/service/extender.h": ('#include "webhook/backend.h"\n',
                                      {("server/service/extender.h", "webhook/backend.h")}),
        "webhook/backend.h": ('#include "server/service/extender.h"\n', set()),
        "sim/store.cc": ('#include "sim/kubelet.h"\n#include "model/quantity.h"\n'
                         '#include "server/ledger/ledger.h"\n',
                         {("sim/store.cc", "server/ledger/ledger.h")}),
    }
    with tempfile.TemporaryDirectory() as root:
        for path, (text, _) in cases.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        found = set(violations(root))
    want = set().union(*(v for _, v in cases.values()))
    if found != want:
        print(f"self-test FAILED: found {sorted(found)}, want {sorted(want)}")
        return 1
    print(f"self-test: the {len(want)} planted upward includes found, nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    found = violations(os.path.abspath(root))
    new = {k: v for k, v in found.items() if k not in KNOWN}
    fixed = [k for k in KNOWN if k not in found]
    for (path, inc), why in sorted(found.items()):
        mark = "known" if (path, inc) in KNOWN else "NEW"
        print(f"{mark}: {path} includes {inc}: {why}")
    for path, inc in fixed:
        print(f"FIXED: {path} no longer includes {inc}: remove it from KNOWN")
    print(f"{len(found)} upward includes ({len(found) - len(new)} known, {len(new)} new); "
          f"{len(fixed)} known ones gone")
    return 1 if new or fixed else 0


if __name__ == "__main__":
    sys.exit(main())
