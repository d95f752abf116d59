#!/usr/bin/env python3
"""The link-level layer check (issue 50): what each of fitledger's libraries and programs links.

The include check (check_includes.py) sees headers; this one sees the link graph CMake builds
(tests/layers/link_graph.cmake writes it: each target's direct link dependencies). It follows
each target's dependencies to the end and fails when:
  - a fitledger target links one of a higher layer (the layers of docs/how-it-works.md, by
    library: a library takes the layer of its highest file);
  - a target of the core (layers 0-4: common, model, base, reflector, extender) reaches gRPC,
    Boost or OpenSSL, or fitledger's gRPC-generated libraries: the server's core does not link
    the HTTP server or gRPC;
  - fitledger-sim reaches a fitledger target above the model layer, or gRPC (it must not share
    fitledger's API client, ledger or request code);
  - a fitledger target has no layer here (a new library must be given one).

  tests/layers/check_links.py BUILD_DIR/link_graph.tsv
  tests/layers/check_links.py --self-test
"""
import re
import sys

SIM = "sim"
LAYERS = {
    "fitledger_common": 0,
    "fitledger_yaml": 0,
    "fitledger_model": 1,
    "fitledger_proto_messages": 1,
    # The gRPC stubs: their headers are layer 1 to the include check, but linking them brings
    # gRPC, which only the adapters and programs link.
    "fitledger_proto": 5,
    "fitledger_health_proto": 5,
    "fitledger_config": 2,
    "fitledger_server_config": 2,
    "fitledger_shim_config": 2,
    "fitledger_ledger": 2,
    "fitledger_kube_objects": 2,
    "fitledger_kube": 3,  # the API client (2) with the reflector and its sinks (3)
    "fitledger_extender": 4,
    "fitledger_convert": 5,
    "fitledger_extender_backend": 5,
    "fitledger_webhook": 5,
    "fitledger_shim": 5,
    "fitledger_service": 6,
    "fitledger_ctl": 6,
    "fitledger-server": 6,
    "fitledger-shim": 6,
    "fitledgerctl": 6,
    "fitledger_sim": SIM,
    "fitledger-sim": SIM,
}
CORE_TOP = 4  # layers 0..4 are the core
# What the core and the sim must not reach: the RPC stack and the HTTP server's.
HEAVY = re.compile(r"^(gRPC::|Boost::|OpenSSL::)|^fitledger_(proto|health_proto)$")
GRPC = re.compile(r"^gRPC::|^fitledger_(proto|health_proto)$")


def parse(text):
    graph = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        target = parts[0]
        deps = [d for d in (parts[2].split(";") if len(parts) > 2 else []) if d]
        graph[target] = deps
    return graph


def closure(graph, target):
    seen, stack = set(), list(graph.get(target, []))
    while stack:
        dep = stack.pop()
        if dep in seen:
            continue
        seen.add(dep)
        stack.extend(graph.get(dep, []))
    return seen


def is_ours(name):
    return name.startswith("fitledger")


def check(graph, layers=LAYERS):
    problems = []
    for target in sorted(graph):
        if is_ours(target) and target not in layers:
            problems.append(f"{target}: no layer in tests/layers/check_links.py LAYERS")
    for target in sorted(graph):
        layer = layers.get(target)
        if layer is None:
            continue
        for dep in sorted(closure(graph, target)):
            dep_layer = layers.get(dep)
            if layer == SIM:
                if is_ours(dep) and dep_layer != SIM and (dep_layer is None or dep_layer > 1):
                    problems.append(f"{target} (sim) links {dep} (layer {dep_layer}): the sim may "
                                    "use common and model only")
                if GRPC.search(dep):
                    problems.append(f"{target} (sim) links {dep}")
                continue
            if is_ours(dep) and dep_layer is not None:
                if dep_layer == SIM:
                    problems.append(f"{target} (layer {layer}) links the sim's {dep}")
                elif dep_layer > layer:
                    problems.append(f"{target} (layer {layer}) links {dep} (layer {dep_layer})")
            if layer <= CORE_TOP and HEAVY.search(dep):
                problems.append(f"{target} (layer {layer}, the core) links {dep}")
    return problems


def self_test():
    clean = parse("a_lib\tSTATIC_LIBRARY\tfitledger_common;absl::status\n"
                  "fitledger_common\tSTATIC_LIBRARY\tabsl::status\n")
    layers = {"fitledger_common": 0, "a_lib": 0, "fitledger_extender": 4, "fitledger_webhook": 5,
              "fitledger_sim": SIM, "fitledger_kube": 3, "fitledger_model": 1}
    failures = []
    if check(clean, layers):
        failures.append(f"a clean graph failed: {check(clean, layers)}")
    cases = {
        "upward, through a middle library":
            ("fitledger_extender\tSTATIC_LIBRARY\tfitledger_kube\n"
             "fitledger_kube\tSTATIC_LIBRARY\tfitledger_webhook\n"
             "fitledger_webhook\tSTATIC_LIBRARY\t\n",
             "fitledger_kube (layer 3) links fitledger_webhook (layer 5)"),
        "the core reaching gRPC":
            ("fitledger_kube\tSTATIC_LIBRARY\tfitledger_model\n"
             "fitledger_model\tSTATIC_LIBRARY\t$X\n", "fitledger_kube (layer 3, the core) links gRPC::grpc++"),
        "the sim reaching the reflector":
            ("fitledger_sim\tSTATIC_LIBRARY\tfitledger_model;fitledger_kube\n"
             "fitledger_kube\tSTATIC_LIBRARY\t\n", "fitledger_sim (sim) links fitledger_kube"),
        "a library with no layer":
            ("fitledger_new\tSTATIC_LIBRARY\tfitledger_common\n", "fitledger_new: no layer"),
    }
    for name, (text, expected) in cases.items():
        found = check(parse(text.replace("$X", "gRPC::grpc++")), layers)
        if not any(expected in p for p in found):
            failures.append(f"{name}: expected '{expected}', got {found}")
    for f in failures:
        print("SELF-TEST FAILED:", f)
    if not failures:
        print(f"self-test: {len(cases) + 1} cases ok")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        graph = parse(f.read())
    if not any(is_ours(t) for t in graph):
        print(f"{argv[1]}: no fitledger target in the graph")
        return 1
    problems = check(graph)
    for p in problems:
        print(p)
    print(f"{len(graph)} targets, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
