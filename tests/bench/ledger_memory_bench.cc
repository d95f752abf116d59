// The ledger's own memory: heap bytes per confirmed (held) pod, per pending pod, and per assumed
// pod, measured with glibc's mallinfo2() around the ledger's operations (in-use heap blocks plus
// mmapped blocks; allocator slack inside blocks is counted, freed-but-retained pages are not).
// Process RSS per pod is measured end to end by tests/perf/run.sh; this is the ledger-level
// number. One iteration per benchmark: the result is a counter, not a time.
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "server/ledger/ledger.h"

namespace fitledger {
namespace {

constexpr int kNodes = 5000;
constexpr int kPodsPerNode = 30;

int64_t HeapBytes() {
  struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
}

// A Kubernetes-shaped UID (36 characters).
std::string Uid(int64_t i) { return absl::StrCat("6b1f4c2e-9a3d-4e5f-8b7c-", 100000000000 + i); }
std::string NodeName(int i) { return absl::StrCat("node-", i); }

Resources Req() {
  Resources r;
  r.milli_cpu = 100;
  r.memory_bytes = int64_t{128} << 20;
  r.pods = 1;
  return r;
}

std::unique_ptr<Ledger> LedgerWithNodes() {
  auto ledger = std::make_unique<Ledger>(AccountingPolicy{}, ScoringStrategy::kLeastAllocated);
  std::vector<NodeRecord> nodes;
  for (int i = 0; i < kNodes; ++i) {
    NodeRecord n;
    n.name = NodeName(i);
    n.allocatable.milli_cpu = 32000;
    n.allocatable.memory_bytes = int64_t{128} << 30;
    n.allocatable.pods = 110;
    nodes.push_back(std::move(n));
  }
  ledger->ReplaceNodes(nodes);
  return ledger;
}

std::vector<PodRecord> BoundPods(int count, int64_t uid_base) {
  std::vector<PodRecord> pods;
  pods.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    PodRecord p;
    p.uid = Uid(uid_base + i);
    p.node_name = NodeName(i % kNodes);
    p.requests = Req();
    pods.push_back(std::move(p));
  }
  return pods;
}

// 150,000 bound pods applied as the watcher applies a LIST (ReplacePods). The records themselves
// are freed before the second reading.
void BM_HeapBytesPerHeldPod(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::unique_ptr<Ledger> ledger = LedgerWithNodes();
    const int64_t before = HeapBytes();
    {
      std::vector<PodRecord> pods = BoundPods(count, 0);
      ledger->ReplacePods({pods.begin(), pods.end()});
    }
    const int64_t after = HeapBytes();
    state.counters["bytes_per_pod"] = static_cast<double>(after - before) / count;
    state.counters["pods"] = count;
    benchmark::DoNotOptimize(ledger->pod_count());
  }
}
BENCHMARK(BM_HeapBytesPerHeldPod)->Arg(150000)->Iterations(1)->Unit(benchmark::kMillisecond);

// Unbound pods the watch has shown (kept for Bind's requests).
void BM_HeapBytesPerPendingPod(benchmark::State& state) {
  const int count = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::unique_ptr<Ledger> ledger = LedgerWithNodes();
    std::vector<PodRecord> pods = BoundPods(count, 0);
    for (PodRecord& p : pods) p.node_name.clear();
    const int64_t before = HeapBytes();
    for (const PodRecord& p : pods) ledger->UpsertPod(p);
    const int64_t after = HeapBytes();
    state.counters["bytes_per_pod"] = static_cast<double>(after - before) / count;
  }
}
BENCHMARK(BM_HeapBytesPerPendingPod)->Arg(20000)->Iterations(1)->Unit(benchmark::kMillisecond);

// Pods assumed by Bind (TryAssume). `marginal` = 0: 150,000 pods assumed on an empty view, so
// the pod table grows as it does for held pods (comparable to BM_HeapBytesPerHeldPod).
// `marginal` = 1: 20,000 more on top of the 150,000-pod view, where the table has room: only the
// entries' out-of-line strings (uid, namespace, name) show. Namespace and name are kept for
// reconciliation, so an assumed entry holds more than a confirmed one.
void BM_HeapBytesPerAssumedPod(benchmark::State& state) {
  const bool marginal = state.range(0) != 0;
  const int count = marginal ? 20000 : kNodes * kPodsPerNode;
  for (auto _ : state) {
    std::unique_ptr<Ledger> ledger = LedgerWithNodes();
    if (marginal) {
      std::vector<PodRecord> pods = BoundPods(kNodes * kPodsPerNode, 0);
      ledger->ReplacePods({pods.begin(), pods.end()});
    }
    std::vector<std::string> uids, names;
    for (int i = 0; i < count; ++i) {
      uids.push_back(Uid(10000000 + i));
      names.push_back(absl::StrCat("checkout-api-7d9f8b6c5d-", i));
    }
    const absl::Time now = absl::Now();
    const Resources r = Req();
    const int64_t before = HeapBytes();
    for (int i = 0; i < count; ++i) {
      auto outcome = ledger->TryAssume(uids[static_cast<size_t>(i)], "default",
                                       names[static_cast<size_t>(i)], NodeName(i % kNodes), r, now);
      if (!outcome.ok()) state.SkipWithError("TryAssume failed");
    }
    const int64_t after = HeapBytes();
    state.counters["bytes_per_pod"] = static_cast<double>(after - before) / count;
    state.counters["pods"] = count;
  }
}
BENCHMARK(BM_HeapBytesPerAssumedPod)
    ->ArgName("marginal")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fitledger

BENCHMARK_MAIN();
