#!/usr/bin/env python3
"""Turns tests/perf/run.sh's results.jsonl into one Markdown table: medians over the repeats,
ratios against the Go baseline (from runs interleaved in the same session), and each target as
met / missed with its number."""
import argparse
import json
import statistics
import sys


def f0(v):
    return "n/a" if v is None else f"{v:.0f}"


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.results) if line.strip()]

    def select(kind, **match):
        return [r for r in rows if r["kind"] == kind and all(r.get(k) == v for k, v in match.items())]

    def med(kind, field, **match):
        return median([r.get(field) for r in select(kind, **match)])

    n = args.clients
    out = []
    out.append("| measurement | fitledger | Go baseline | ratio | target | verdict |")
    out.append("|---|---|---|---|---|---|")

    def row(name, ours, base=None, ratio=None, target="", ok=None, fmt="{:.0f}"):
        f = lambda v: "n/a" if v is None else fmt.format(v)
        verdict = "" if ok is None else ("met" if ok else "**missed**")
        out.append(f"| {name} | {f(ours)} | {f(base) if base is not None else ''} | "
                   f"{'' if ratio is None else f'{ratio:.1f}x'} | {target} | {verdict} |")

    def latency_row(name, cpu_label, kind, cpu_field, **match):  # "p50 / p99; CPU" in one cell
        out.append(f"| {name}: p50 / p99 (us); {cpu_label} (us) | "
                   f"{f0(med(kind, 'p50_us', **match))} / {f0(med(kind, 'p99_us', **match))}; "
                   f"{f0(med(kind, cpu_field, **match))} | | | | |")

    s1_p50, g1_p50 = med("shim", "p50_us", clients=1), med("go", "p50_us", clients=1)
    s1_p99, g1_p99 = med("shim", "p99_us", clients=1), med("go", "p99_us", clients=1)
    sn_rps, gn_rps = med("shim", "rps", clients=n), med("go", "rps", clients=n)
    sn_p99, gn_p99 = med("shim", "p99_us", clients=n), med("go", "p99_us", clients=n)
    s1_rps, g1_rps = med("shim", "rps", clients=1), med("go", "rps", clients=1)
    ratio = lambda a, b: (a / b) if a and b else None

    row("Filter via shim, 1 client: p50 (us)", s1_p50, g1_p50, ratio(g1_p50, s1_p50),
        "<= 150", s1_p50 is not None and s1_p50 <= 150)
    row("Filter via shim, 1 client: p99 (us)", s1_p99, g1_p99, ratio(g1_p99, s1_p99),
        "<= 500; <= 1/3 of Go", s1_p99 is not None and s1_p99 <= 500 and
        (g1_p99 is None or s1_p99 * 3 <= g1_p99))
    row("Filter via shim, 1 client: calls/s", s1_rps, g1_rps, ratio(s1_rps, g1_rps))
    row(f"Filter via shim, {n} clients: calls/s", sn_rps, gn_rps, ratio(sn_rps, gn_rps),
        ">= 10,000; >= 3x Go", sn_rps is not None and sn_rps >= 10000 and
        (gn_rps is None or sn_rps >= 3 * gn_rps))
    row(f"Filter via shim, {n} clients: p99 (us)", sn_p99, gn_p99, ratio(gn_p99, sn_p99),
        "<= 1/3 of Go", sn_p99 is not None and gn_p99 is not None and sn_p99 * 3 <= gn_p99)
    for c in (1, n):
        ours, base = med("shim", "cpu_us_per_call", clients=c), med("go", "cpu_us_per_call", clients=c)
        row(f"CPU per Filter call, {c} client(s): shim + server vs Go process (us)", ours, base,
            ratio(base, ours))
    if select("shim_grpc"):
        # The shim above dials the server's unary listener (grpc.unaryListen); this one gRPC's
        # server (grpc.listen), in the same rounds.
        q1_p50, q1_p99 = med("shim_grpc", "p50_us", clients=1), med("shim_grpc", "p99_us", clients=1)
        qn_rps = med("shim_grpc", "rps", clients=n)
        out.append(f"| Filter via shim on gRPC's server (grpc.listen), 1 client: p50 / p99 (us) | "
                   f"{f0(q1_p50)} / {f0(q1_p99)} | | | | |")
        row(f"Filter via shim on gRPC's server (grpc.listen), {n} clients: calls/s", qn_rps, gn_rps,
            ratio(qn_rps, gn_rps))
        for c in (1, n):
            row(f"CPU per Filter call via shim on gRPC's server, {c} client(s): shim + server (us)",
                med("shim_grpc", "cpu_us_per_call", clients=c))
    if select("inprocess"):
        i1_p50, i1_p99 = med("inprocess", "p50_us", clients=1), med("inprocess", "p99_us", clients=1)
        in_rps, in_p99 = med("inprocess", "rps", clients=n), med("inprocess", "p99_us", clients=n)
        row("Server webhook (in-process, the chart default), 1 client: p50 (us)", i1_p50, g1_p50, ratio(g1_p50, i1_p50),
            "<= 150", i1_p50 is not None and i1_p50 <= 150)
        row("Server webhook (in-process, the chart default), 1 client: p99 (us)", i1_p99, g1_p99, ratio(g1_p99, i1_p99),
            "<= 500; <= 1/3 of Go", i1_p99 is not None and i1_p99 <= 500 and
            (g1_p99 is None or i1_p99 * 3 <= g1_p99))
        row(f"Server webhook (in-process, the chart default), {n} clients: calls/s", in_rps, gn_rps, ratio(in_rps, gn_rps),
            ">= 10,000; >= 3x Go", in_rps is not None and in_rps >= 10000 and
            (gn_rps is None or in_rps >= 3 * gn_rps))
        row(f"Server webhook (in-process, the chart default), {n} clients: p99 (us)", in_p99, gn_p99, ratio(gn_p99, in_p99),
            "<= 1/3 of Go", in_p99 is not None and gn_p99 is not None and in_p99 * 3 <= gn_p99)
        for c in (1, n):
            ours, base = med("inprocess", "cpu_us_per_call", clients=c), med("go", "cpu_us_per_call", clients=c)
            row(f"Server webhook: CPU per Filter call, {c} client(s): server vs Go process (us)", ours, base,
                ratio(base, ours))
    if select("noise"):
        row("Noise floor: GET /healthz on the shim (no gRPC), 1 client: p50 / p99 (us)",
            med("noise", "p50_us"))
        out[-1] = out[-1].replace(f"| {f0(med('noise', 'p50_us'))} |",
                                  f"| {f0(med('noise', 'p50_us'))} / {f0(med('noise', 'p99_us'))} |", 1)
    if select("go_onecpu"):
        # The same 1-client runs with wrk and the serving processes pinned to one vCPU.
        o1_p50, o1_p99 = med("go_onecpu", "p50_us"), med("go_onecpu", "p99_us")
        for kind, name in (("shim_onecpu", "Filter via shim"),
                           ("inprocess_onecpu", "Server webhook (in-process)")):
            if not select(kind):
                continue
            p50, p99 = med(kind, "p50_us"), med(kind, "p99_us")
            row(f"{name}, 1 client, one vCPU (taskset): p50 (us)", p50, o1_p50, ratio(o1_p50, p50))
            row(f"{name}, 1 client, one vCPU (taskset): p99 (us)", p99, o1_p99, ratio(o1_p99, p99))
            row(f"{name}, 1 client, one vCPU (taskset): CPU per call (us)",
                med(kind, "cpu_us_per_call"), med("go_onecpu", "cpu_us_per_call"),
                ratio(med("go_onecpu", "cpu_us_per_call"), med(kind, "cpu_us_per_call")))
    for kind, where in (("wake_free", "placed by the kernel"), ("wake_onecpu", "on one vCPU")):
        if select(kind):
            latency_row("Wake-up floor: 1-byte Unix socket round trip between two threads, "
                        f"{where}", "CPU per round trip", kind, "cpu_us_per_round_trip")
    row("Filter, direct gRPC, 1 client: p50 (us)", med("grpc", "p50_us", clients=1))
    row("Filter, direct gRPC, 1 client: p99 (us)", med("grpc", "p99_us", clients=1), None, None,
        "<= 200", (med("grpc", "p99_us", clients=1) or 1e9) <= 200)
    row(f"Filter, direct gRPC, {n} clients: calls/s", med("grpc", "rps", clients=n))
    row(f"Filter, direct gRPC, {n} clients: p99 (us)", med("grpc", "p99_us", clients=n))
    for c in (1, n):
        row(f"CPU per direct gRPC Filter call, {c} client(s): server (us)",
            med("grpc", "cpu_us_per_call", clients=c))
    if select("grpc_h2load"):
        h1_p99 = med("grpc_h2load", "p99_us", clients=1)
        row("Filter, direct gRPC from h2load, 1 client: p50 (us)", med("grpc_h2load", "p50_us", clients=1))
        row("Filter, direct gRPC from h2load, 1 client: p99 (us)", h1_p99, None, None,
            "<= 200", (h1_p99 or 1e9) <= 200)
        row(f"Filter, direct gRPC from h2load, {n} clients: calls/s", med("grpc_h2load", "rps", clients=n))
        row(f"Filter, direct gRPC from h2load, {n} clients: p99 (us)", med("grpc_h2load", "p99_us", clients=n))
        for c in (1, n):
            row(f"CPU per h2load gRPC Filter call, {c} client(s): server (us)",
                med("grpc_h2load", "cpu_us_per_call", clients=c))
    if select("unary_h2load"):
        u1_p99 = med("unary_h2load", "p99_us", clients=1)
        row("Filter, direct gRPC to the unary listener from h2load, 1 client: p50 (us)",
            med("unary_h2load", "p50_us", clients=1))
        row("Filter, direct gRPC to the unary listener from h2load, 1 client: p99 (us)", u1_p99,
            None, None, "<= 200", (u1_p99 or 1e9) <= 200)
        row(f"Filter, direct gRPC to the unary listener from h2load, {n} clients: calls/s",
            med("unary_h2load", "rps", clients=n))
        row(f"Filter, direct gRPC to the unary listener from h2load, {n} clients: p99 (us)",
            med("unary_h2load", "p99_us", clients=n))
        for c in (1, n):
            row(f"CPU per h2load Filter call to the unary listener, {c} client(s): server (us)",
                med("unary_h2load", "cpu_us_per_call", clients=c))
    for kind, client in (("echo_grpc", "the C++ gRPC client"), ("echo_h2load", "h2load")):
        if select(kind):
            latency_row("Floor of the hop: the same Filter answered by grpc_echo_server (no work), "
                        f"from {client}, 1 client", "server CPU per call", kind,
                        "cpu_us_per_call", clients=1)
    cyc = med("cycle", "pods_per_s")
    row("Filter + bind cycle (serial filter, 16 binders): pods/s", cyc, None, None, ">= 3,000",
        cyc is not None and cyc >= 3000)
    if select("cycle"):
        out.append(f"| in the cycle: filter p50 / p99, bind p50 / p99 (us) | "
                   f"{f0(med('cycle', 'filter_p50_us'))} / {f0(med('cycle', 'filter_p99_us'))}, "
                   f"{f0(med('cycle', 'bind_p50_us'))} / {f0(med('cycle', 'bind_p99_us'))} | | | | |")
    if select("cycle"):
        out.append(f"| in the cycle: CPU per pod, sim (API server) / server / shim (us) | "
                   f"{f0(med('cycle', 'cpu_us_per_pod_sim'))} / {f0(med('cycle', 'cpu_us_per_pod_server'))}"
                   f" / {f0(med('cycle', 'cpu_us_per_pod_shim'))} | | | | |")
    if select("cycle_inprocess"):
        cip = med("cycle_inprocess", "pods_per_s")
        row("Server webhook (in-process, the chart default): filter + bind cycle, pods/s", cip, None, None, ">= 3,000",
            cip is not None and cip >= 3000)
        out.append(f"| Server webhook, in the cycle: filter p50 / p99, bind p50 / p99 (us); CPU per pod sim / server (us) | "
                   f"{f0(med('cycle_inprocess', 'filter_p50_us'))} / {f0(med('cycle_inprocess', 'filter_p99_us'))}, "
                   f"{f0(med('cycle_inprocess', 'bind_p50_us'))} / {f0(med('cycle_inprocess', 'bind_p99_us'))}; "
                   f"{f0(med('cycle_inprocess', 'cpu_us_per_pod_sim'))} / {f0(med('cycle_inprocess', 'cpu_us_per_pod_server'))} | | | | |")
    sync_ms = med("sync", "serving_ms")
    go_ms = med("go_sync", "serving_ms")
    row("Initial sync 5,000 nodes + 150,000 pods: start -> SERVING (ms)", sync_ms, go_ms,
        ratio(go_ms, sync_ms), "<= 3,000", sync_ms is not None and sync_ms <= 3000)
    rss = med("sync", "rss_kib")
    go_rss = med("go_sync", "rss_kib")
    mib = lambda k: None if k is None else k / 1024
    row("Server RSS holding that view (MiB, 2 s after SERVING)", mib(rss), mib(go_rss),
        ratio(go_rss, rss), "<= 200", rss is not None and rss / 1024 <= 200)
    hwm = med("sync", "hwm_kib")
    row("Peak RSS while syncing, VmHWM (MiB)", mib(hwm), mib(med("go_sync", "hwm_kib")),
        ratio(med("go_sync", "hwm_kib"), hwm), "<= 300", hwm is not None and hwm / 1024 <= 300)
    empty = med("sync_empty", "rss_kib")
    if rss is not None and empty is not None:
        row("Process RSS per held pod: (RSS(150k pods) - RSS(0 pods)) / 150,000 (bytes)",
            (rss - empty) * 1024 / 150000)
    assume = select("assume")
    if assume and assume[0].get("bound"):
        a = assume[0]
        row(f"Process RSS per assumed pod: delta over {a['bound']} binds held Assumed (bytes)",
            (a["rss_after_kib"] - a["rss_before_kib"]) * 1024 / a["bound"])
    labels = {
        "BM_HeapBytesPerHeldPod/150000": "held (confirmed) pod, 150,000 listed",
        "BM_HeapBytesPerPendingPod/20000": "pending (unbound, watched) pod, 20,000",
        "BM_HeapBytesPerAssumedPod/marginal:0": "assumed pod, 150,000 on an empty view",
        "BM_HeapBytesPerAssumedPod/marginal:1": "assumed pod, 20,000 more on the 150,000 view",
    }
    for r in select("ledger_memory"):
        key = r["name"].replace("/iterations:1", "")
        row(f"Ledger heap bytes per {labels.get(key, key)} (mallinfo2)", r["bytes_per_pod"])
    print(f"\nMedians of {args.repeats} run(s) of {args.seconds:g} s; ratio = how many times "
          f"better fitledger is than the Go baseline (>1 is better).\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
