#include "server/ledger/ledger.h"

#include <algorithm>
#include <array>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fitledger {

bool AccountingPolicy::Ignores(absl::string_view resource) const {
  // fit.go fitsRequest: only extended resources are ever ignored; a group is the part of the
  // name before "/".
  if (!IsExtendedResourceName(resource)) return false;
  if (std::find(ignored_resources.begin(), ignored_resources.end(), resource) !=
      ignored_resources.end()) {
    return true;
  }
  absl::string_view group = resource.substr(0, resource.find('/'));
  return std::find(ignored_resource_groups.begin(), ignored_resource_groups.end(), group) !=
         ignored_resource_groups.end();
}

bool AccountingPolicy::Accounts(absl::string_view resource) const {
  if (Ignores(resource)) return false;
  if (all) return true;
  return std::find(managed.begin(), managed.end(), resource) != managed.end();
}

namespace {

std::vector<ResourceWeight> DefaultScoringResources(const AccountingPolicy& policy) {
  std::vector<ResourceWeight> out;
  if (policy.all) {
    // NodeResourcesFitArgs' default scoringStrategy.resources.
    out = {{std::string(kResourceCpu), 1}, {std::string(kResourceMemory), 1}};
  } else {
    for (const std::string& name : policy.managed) out.push_back({name, 1});
  }
  return out;
}

// NodeResourcesFit's reasons (pkg/scheduler/framework/plugins/noderesources/fit.go: "Too many
// pods", "Insufficient " + the resource's name) and the separator the extender's FailedNodes
// text joins them with. FitLocked and Filter's common case both word their reasons from these.
constexpr absl::string_view kTooManyPods = "Too many pods";
constexpr absl::string_view kInsufficient = "Insufficient ";
constexpr absl::string_view kReasonSeparator = ", ";

}  // namespace

Ledger::Ledger(AccountingPolicy policy, ScoringStrategy scoring,
               std::vector<ResourceWeight> scoring_resources)
    : policy_(std::move(policy)),
      scoring_(scoring),
      scoring_resources_(scoring_resources.empty() ? DefaultScoringResources(policy_)
                                                   : std::move(scoring_resources)) {}

// --- Fit ---

FitResult Ledger::FitLocked(const NodeState& node, const Resources& requests,
                            const Resources* released) const {
  FitResult result;
  FitLocked(node, requests, released, &result);
  return result;
}

void Ledger::FitLocked(const NodeState& node, const Resources& requests, const Resources* released,
                       FitResult* out) const {
  FitResult& result = *out;
  result.fits = true;
  result.unresolvable = false;
  result.reasons.clear();
  const Resources& alloc = node.allocatable();
  // Appends one reason (`prefix` then `name`, e.g. "Insufficient " "cpu") to the joined list.
  auto fail = [&result](absl::string_view prefix, absl::string_view name, bool unresolvable) {
    result.fits = false;
    absl::StrAppend(&result.reasons, result.reasons.empty() ? "" : kReasonSeparator, prefix, name);
    if (unresolvable) result.unresolvable = true;
  };
  auto used = [&](int64_t confirmed, int64_t assumed, int64_t freed) {
    return confirmed + assumed - freed;
  };
  if (policy_.all) {
    int64_t pods = used(node.confirmed().pods, node.assumed().pods, released ? released->pods : 0);
    // Never unresolvable: evicting pods frees pod slots (fit.go leaves Unresolvable unset).
    if (pods + 1 > alloc.pods) fail(kTooManyPods, "", false);
  }
  if (requests.milli_cpu == 0 && requests.memory_bytes == 0 &&
      requests.ephemeral_storage_bytes == 0 && requests.scalars.empty()) {
    return;
  }
  auto check = [&](absl::string_view name, int64_t want, int64_t allocatable, int64_t in_use) {
    if (want <= 0 || !policy_.Accounts(name)) return;
    if (want > allocatable - in_use) fail(kInsufficient, name, want > allocatable);
  };
  check(kResourceCpu, requests.milli_cpu, alloc.milli_cpu,
        used(node.confirmed().milli_cpu, node.assumed().milli_cpu,
             released ? released->milli_cpu : 0));
  check(kResourceMemory, requests.memory_bytes, alloc.memory_bytes,
        used(node.confirmed().memory_bytes, node.assumed().memory_bytes,
             released ? released->memory_bytes : 0));
  check(kResourceEphemeralStorage, requests.ephemeral_storage_bytes, alloc.ephemeral_storage_bytes,
        used(node.confirmed().ephemeral_storage_bytes, node.assumed().ephemeral_storage_bytes,
             released ? released->ephemeral_storage_bytes : 0));
  for (const auto& [name, want] : requests.scalars) {
    check(name, want, alloc.Get(name),
          used(node.confirmed().Get(name), node.assumed().Get(name),
               released ? released->Get(name) : 0));
  }
}

const Resources* Ledger::OwnLocked(absl::string_view uid, absl::string_view node_name) const {
  if (uid.empty()) return nullptr;
  auto it = pods_.find(uid);
  if (it == pods_.end() || it->second.node_name != node_name) return nullptr;
  return &it->second.requests;
}

namespace {

// What a node's room lacks for a pod, in Filter's common case.
constexpr unsigned kShortOfPods = 1;
constexpr unsigned kShortOfCpu = 2;
constexpr unsigned kShortOfMemory = 4;
constexpr unsigned kShortOfStorage = 8;

// FitLocked's reasons for a node short of `short_of` (a combination of the above), joined as it
// joins them: static text, so Filter's common case stores none.
absl::string_view PlainReasons(unsigned short_of) {
  static const std::array<std::string, 16> kTexts = [] {
    std::array<std::string, 16> texts;
    for (unsigned m = 1; m < texts.size(); ++m) {
      std::vector<std::string> parts;
      if ((m & kShortOfPods) != 0) parts.emplace_back(kTooManyPods);
      if ((m & kShortOfCpu) != 0) parts.push_back(absl::StrCat(kInsufficient, kResourceCpu));
      if ((m & kShortOfMemory) != 0) {
        parts.push_back(absl::StrCat(kInsufficient, kResourceMemory));
      }
      if ((m & kShortOfStorage) != 0) {
        parts.push_back(absl::StrCat(kInsufficient, kResourceEphemeralStorage));
      }
      texts[m] = absl::StrJoin(parts, kReasonSeparator);
    }
    return texts;
  }();
  return kTexts[short_of & 15];
}

}  // namespace

FilterResult Ledger::Filter(const Resources& requests,
                            absl::Span<const absl::string_view> node_names,
                            absl::string_view uid) const {
  FilterResult out;
  out.fits.reserve(node_names.size());
  // The common case, decided from the node's room alone: every resource is accounted and the
  // pod requests no scalar resources, and this is not the node the pod's own entry is on.
  // Anything else takes FitLocked's full check.
  const bool plain = policy_.all && requests.scalars.empty();
  FitResult fit;  // reused for every node that takes the full check
  const auto fits = [](int64_t want, int64_t room) { return want <= 0 || want <= room; };
  ReaderMutexLock lock(&mu_);
  // The pod's own entry (an assumption whose outcome is unknown, or a lagging view of a bound
  // pod) is left out on its node: it must not keep the pod off the node it may already hold.
  const PodEntry* own = nullptr;
  if (!uid.empty()) {
    auto it = pods_.find(uid);
    if (it != pods_.end()) own = &it->second;
  }
  for (size_t i = 0; i < node_names.size(); ++i) {
    auto it = nodes_.find(node_names[i]);
    if (it == nodes_.end() || !it->second.known) {
      out.failed.emplace_back(i, "node not found");
      continue;
    }
    const Resources* released =
        own != nullptr && own->node_name == node_names[i] ? &own->requests : nullptr;
    if (plain && released == nullptr) {
      const NodeState::Room& room = it->second.room();
      unsigned short_of = 0;
      if (room.pods < 1) short_of |= kShortOfPods;
      if (!fits(requests.milli_cpu, room.milli_cpu)) short_of |= kShortOfCpu;
      if (!fits(requests.memory_bytes, room.memory_bytes)) short_of |= kShortOfMemory;
      if (!fits(requests.ephemeral_storage_bytes, room.ephemeral_storage_bytes)) {
        short_of |= kShortOfStorage;
      }
      if (short_of == 0) {
        out.fits.push_back(i);
        continue;
      }
      // Decided from the room too, as FitLocked decides from the sums: the same reasons in the
      // same order (static text, one per combination), unresolvable when a resource it lacks
      // exceeds the node's allocatable (fit.go fitsRequest: InsufficientResource.Unresolvable).
      // Filter answers hundreds of such nodes per call.
      const Resources& alloc = it->second.allocatable();
      const bool unresolvable =
          ((short_of & kShortOfCpu) != 0 && requests.milli_cpu > alloc.milli_cpu) ||
          ((short_of & kShortOfMemory) != 0 && requests.memory_bytes > alloc.memory_bytes) ||
          ((short_of & kShortOfStorage) != 0 &&
           requests.ephemeral_storage_bytes > alloc.ephemeral_storage_bytes);
      (unresolvable ? out.unresolvable : out.failed).emplace_back(i, PlainReasons(short_of));
      continue;
    }
    FitLocked(it->second, requests, released, &fit);
    if (fit.fits) {
      out.fits.push_back(i);
      continue;
    }
    // The text, stored once per distinct text (a few per call; more are each stored anew
    // past kDistinct rather than searched for).
    constexpr size_t kDistinct = 16;
    absl::string_view text;
    for (size_t k = 0; k < out.texts.size() && k < kDistinct; ++k) {
      if (out.texts[k] == fit.reasons) {
        text = out.texts[k];
        break;
      }
    }
    if (text.data() == nullptr) text = out.texts.emplace_back(fit.reasons);
    (fit.unresolvable ? out.unresolvable : out.failed).emplace_back(i, text);
  }
  return out;
}

int64_t Ledger::ScoreLocked(const NodeState& node, const Resources& requests,
                            const Resources* released) const {
  // noderesources/resource_allocation.go score + calculateResourceAllocatableRequest, then
  // least_allocated.go / most_allocated.go, in int64 as upstream (with 128-bit products so that
  // huge extended amounts cannot overflow).
  int64_t node_score = 0;
  int64_t weight_sum = 0;
  for (const ResourceWeight& resource : scoring_resources_) {
    const absl::string_view name = resource.name;
    int64_t allocatable = 0;
    int64_t requested = 0;
    auto used = [&](int64_t confirmed, int64_t assumed, int64_t freed) {
      return confirmed + assumed - freed;
    };
    if (name == kResourceCpu) {
      allocatable = node.allocatable().milli_cpu;
      requested = used(node.confirmed().non_zero_milli_cpu, node.assumed().non_zero_milli_cpu,
                       released ? released->non_zero_milli_cpu : 0) +
                  requests.non_zero_milli_cpu;
    } else if (name == kResourceMemory) {
      allocatable = node.allocatable().memory_bytes;
      requested = used(node.confirmed().non_zero_memory_bytes, node.assumed().non_zero_memory_bytes,
                       released ? released->non_zero_memory_bytes : 0) +
                  requests.non_zero_memory_bytes;
    } else {
      const int64_t want = requests.Get(name);
      // An extended (scalar) resource the pod does not request is not scored.
      if (want == 0 && IsScalarResourceName(name)) continue;
      if (name != kResourceEphemeralStorage && !IsScalarResourceName(name)) continue;
      allocatable = node.allocatable().Get(name);
      requested = used(node.confirmed().Get(name), node.assumed().Get(name),
                       released ? released->Get(name) : 0) +
                  want;
    }
    if (allocatable == 0) continue;  // the scorer skips it: no score, no weight
    int64_t score = 0;
    if (scoring_ == ScoringStrategy::kLeastAllocated) {
      // leastRequestedScore
      score = requested > allocatable
                  ? 0
                  : static_cast<int64_t>(static_cast<__int128>(allocatable - requested) *
                                         kMaxNodeScore / allocatable);
    } else {
      // mostRequestedScore: pods with no requests may push requested past capacity.
      const int64_t capped = std::min(requested, allocatable);
      score = static_cast<int64_t>(static_cast<__int128>(capped) * kMaxNodeScore / allocatable);
    }
    node_score += score * resource.weight;
    weight_sum += resource.weight;
  }
  return weight_sum == 0 ? 0 : node_score / weight_sum;
}

std::vector<int64_t> Ledger::NodeScores(const Resources& requests,
                                        absl::Span<const absl::string_view> node_names,
                                        absl::string_view uid) const {
  std::vector<int64_t> scores(node_names.size(), 0);
  ReaderMutexLock lock(&mu_);
  for (size_t i = 0; i < node_names.size(); ++i) {
    auto it = nodes_.find(node_names[i]);
    if (it == nodes_.end() || !it->second.known) continue;
    scores[i] = ScoreLocked(it->second, requests, OwnLocked(uid, node_names[i]));
  }
  return scores;
}

std::vector<int64_t> Ledger::Prioritize(const Resources& requests,
                                        absl::Span<const absl::string_view> node_names,
                                        absl::string_view uid) const {
  std::vector<int64_t> scores = NodeScores(requests, node_names, uid);
  // Scaled once, at the end, to the extender's range; kube-scheduler scales it back by x10.
  constexpr int64_t kRatio = kMaxNodeScore / kMaxExtenderPriority;
  for (int64_t& score : scores) score = (score + kRatio / 2) / kRatio;
  return scores;
}

std::map<std::string, std::vector<std::string>> Ledger::Preempt(
    const Resources& requests,
    const std::map<std::string, std::vector<std::string>>& candidates) const {
  std::map<std::string, std::vector<std::string>> out;
  ReaderMutexLock lock(&mu_);
  for (const auto& [node_name, victims] : candidates) {
    auto it = nodes_.find(node_name);
    if (it == nodes_.end() || !it->second.known) continue;
    Resources released;
    absl::flat_hash_set<absl::string_view> counted;  // a victim listed twice is evicted once
    for (const std::string& uid : victims) {
      if (!counted.insert(uid).second) continue;
      auto pod = pods_.find(uid);
      if (pod != pods_.end() && pod->second.node_name == node_name) {
        released.Add(pod->second.requests);
      }
    }
    if (FitLocked(it->second, requests, &released).fits) out.emplace(node_name, victims);
  }
  return out;
}

// --- Binding ---

absl::StatusOr<AssumeOutcome> Ledger::TryAssume(const std::string& uid,
                                                const std::string& namespace_name,
                                                const std::string& name,
                                                const std::string& node_name,
                                                const Resources& requests, absl::Time now,
                                                std::optional<AssumedPod>* elsewhere) {
  MutexLock lock(&mu_);
  auto existing = pods_.find(uid);
  if (existing != pods_.end()) {
    PodEntry& entry = existing->second;
    bool assumed = entry.is_assumed();
    if (entry.node_name != node_name) {
      if (elsewhere != nullptr) {
        if (assumed) {
          *elsewhere = ViewLocked(uid, entry);
        } else {
          elsewhere->reset();
        }
      }
      return absl::AlreadyExistsError(absl::StrCat(
          "pod ", namespace_name, "/", name, " is already ", assumed ? "assumed on" : "bound to",
          " node ", entry.node_name,
          assumed && entry.assumption->bind_in_flight ? " (a bind to it is in flight)" : ""));
    }
    if (!assumed) return AssumeOutcome::kAlreadyConfirmed;
    // The same node again (a retry after an unknown outcome, or a repeat): the pod's own entry
    // is the reservation; nothing is counted twice.
    entry.assumption->bind_in_flight = true;
    entry.assumption->epoch = clock_++;
    return AssumeOutcome::kAlreadyAssumed;
  }
  auto node = nodes_.find(node_name);
  if (node == nodes_.end() || !node->second.known) {
    return absl::NotFoundError(absl::StrCat("node ", node_name, " not found"));
  }
  FitResult fit = FitLocked(node->second, requests, nullptr);
  if (!fit.fits) {
    ++counters_.assume_rejected;
    return absl::FailedPreconditionError(absl::StrCat(
        "pod ", namespace_name, "/", name, " no longer fits node ", node_name, ": ", fit.reasons));
  }
  PodEntry entry;
  entry.assumption = std::make_unique<Assumption>();
  entry.node_name = node_name;
  entry.requests = requests;
  entry.assumption->namespace_name = namespace_name;
  entry.assumption->name = name;
  entry.assumption->assumed_at = now;
  entry.assumption->bind_in_flight = true;
  entry.assumption->epoch = clock_++;
  AddLocked(uid, std::move(entry));
  ++counters_.assumed;
  return AssumeOutcome::kAssumed;
}

absl::Status Ledger::MoveAssumption(const std::string& uid, uint64_t epoch,
                                    const std::string& node_name, const Resources& requests,
                                    absl::Time now) {
  MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed() || it->second.assumption->epoch != epoch ||
      it->second.assumption->bind_in_flight) {
    return absl::AbortedError(
        absl::StrCat("pod uid ", uid, " changed while its earlier bind was being settled"));
  }
  PodEntry& entry = it->second;
  if (entry.node_name == node_name) {
    entry.assumption->bind_in_flight = true;
    entry.assumption->epoch = clock_++;
    return absl::OkStatus();
  }
  auto node = nodes_.find(node_name);
  if (node == nodes_.end() || !node->second.known) {
    return absl::NotFoundError(absl::StrCat("node ", node_name, " not found"));
  }
  // The entry is on another node, so nothing of it is counted on `node_name`.
  FitResult fit = FitLocked(node->second, requests, nullptr);
  if (!fit.fits) {
    ++counters_.assume_rejected;
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", entry.assumption->namespace_name, "/", entry.assumption->name,
                     " no longer fits node ", node_name, ": ", fit.reasons));
  }
  nodes_[entry.node_name].SubtractAssumed(entry.requests);
  std::string old_node = std::exchange(entry.node_name, node_name);
  entry.requests = requests;
  nodes_[node_name].AddAssumed(entry.requests);
  DropNodeIfEmptyLocked(old_node);
  entry.assumption->assumed_at = now;
  entry.assumption->bind_in_flight = true;
  entry.assumption->bound_at = 0;
  entry.assumption->epoch = clock_++;
  ++counters_.moved;
  return absl::OkStatus();
}

void Ledger::MarkBound(const std::string& uid, const std::string& node_name) {
  MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed()) return;
  PodEntry& entry = it->second;
  entry.assumption->bind_in_flight = false;
  entry.assumption->outcome_unknown = false;  // a pod is bound at most once: nothing else can land
  entry.assumption->epoch = clock_++;
  entry.assumption->bound_at = clock_++;
  if (entry.node_name != node_name) {
    nodes_[entry.node_name].SubtractAssumed(entry.requests);
    std::string old_node = std::exchange(entry.node_name, node_name);
    nodes_[node_name].AddAssumed(entry.requests);
    DropNodeIfEmptyLocked(old_node);
  }
}

void Ledger::MarkBindUnknown(const std::string& uid) {
  MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed()) return;
  it->second.assumption->bind_in_flight = false;
  if (it->second.assumption->bound_at == 0) it->second.assumption->outcome_unknown = true;
  it->second.assumption->epoch = clock_++;
}

bool Ledger::Forget(const std::string& uid) {
  MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed()) return false;
  if (it->second.assumption->outcome_unknown || it->second.assumption->bound_at != 0) {
    // An earlier binding may still land (or did): this failure settles nothing.
    it->second.assumption->bind_in_flight = false;
    it->second.assumption->epoch = clock_++;
    return false;
  }
  RemoveLocked(uid);
  ++counters_.forgotten;
  return true;
}

bool Ledger::ForgetGone(const std::string& uid) {
  MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed()) return false;
  RemoveLocked(uid);
  ++counters_.forgotten;
  return true;
}

// --- The watch ---

void Ledger::UpsertNode(const NodeRecord& node) {
  MutexLock lock(&mu_);
  UpsertNodeLocked(node);
}

void Ledger::UpsertNodeLocked(const NodeRecord& node) {
  NodeState& state = nodes_[node.name];
  state.known = true;
  state.SetAllocatable(node.allocatable);
}

void Ledger::DeleteNode(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  it->second.known = false;
  it->second.SetAllocatable(Resources());
  DropNodeIfEmptyLocked(name);
}

void Ledger::ReplaceNodes(const std::vector<NodeRecord>& nodes) {
  MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (auto& [name, state] : nodes_) {
    state.known = false;
    state.SetAllocatable(Resources());
    names.push_back(name.str());
  }
  for (const NodeRecord& node : nodes) UpsertNodeLocked(node);
  for (const std::string& name : names) DropNodeIfEmptyLocked(name);
}

void Ledger::UpsertPod(PodRecord pod) {
  MutexLock lock(&mu_);
  UpsertPodLocked(std::move(pod));
}

void Ledger::UpsertPodLocked(PodRecord&& pod) {
  if (pod.uid.empty()) return;
  auto it = pods_.find(pod.uid);
  if (pod.terminal) {
    pending_.erase(pod.uid);
    if (it != pods_.end()) {
      if (it->second.is_assumed()) ++counters_.forgotten;
      RemoveLocked(pod.uid);
    }
    return;
  }
  if (pod.node_name.empty()) {
    if (it != pods_.end() && it->second.is_assumed() && pod.deleting) {
      RemoveLocked(pod.uid);
      ++counters_.forgotten;
    }
    if (pod.deleting) {
      pending_.erase(pod.uid);
    } else {
      pending_[pod.uid].requests = pod.requests;
    }
    return;
  }
  if (!pending_.empty()) pending_.erase(pod.uid);
  if (it == pods_.end()) {
    PodEntry entry;
    entry.node_name = std::move(pod.node_name);
    entry.requests = pod.requests;
    AddLocked(std::move(pod.uid), std::move(entry));
    return;
  }
  if (it->second.is_assumed()) {
    ConfirmLocked(it->second, pod);
    ++counters_.confirmed;
    return;
  }
  // Already confirmed: re-account a resize (or, defensively, a node change).
  PodEntry& entry = it->second;
  if (entry.node_name == pod.node_name && entry.requests == pod.requests) return;
  nodes_[entry.node_name].SubtractConfirmed(entry.requests);
  std::string old_node = std::exchange(entry.node_name, pod.node_name);
  entry.requests = pod.requests;
  nodes_[entry.node_name].AddConfirmed(entry.requests);
  if (old_node != entry.node_name) DropNodeIfEmptyLocked(old_node);
}

void Ledger::DeletePod(const std::string& uid) {
  MutexLock lock(&mu_);
  pending_.erase(uid);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  if (it->second.is_assumed()) ++counters_.forgotten;
  RemoveLocked(uid);
}

uint64_t Ledger::BeginPodList() {
  MutexLock lock(&mu_);
  return clock_++;
}

void Ledger::ReplacePods(std::deque<PodRecord> pods, uint64_t list_started) {
  MutexLock lock(&mu_);
  // The state's UIDs, as views of `pods` (which outlives the set): built only when there are pods
  // to check against it (not at the first sync), and without a copy of each UID.
  absl::flat_hash_set<absl::string_view> listed;
  if (!pods_.empty()) {
    listed.reserve(pods.size());
    for (const PodRecord& pod : pods) listed.insert(pod.uid);
  }
  std::vector<std::string> gone;
  std::vector<std::string> released;
  for (const auto& [uid, entry] : pods_) {
    if (listed.contains(uid)) continue;
    if (!entry.is_assumed()) {
      gone.push_back(uid);
    } else if (entry.assumption->bound_at != 0 && entry.assumption->bound_at < list_started) {
      // Bound before the LIST was sent, and a consistent LIST lacks it: it was deleted (or
      // finished) while the watch was away. Its outcome is known, so nothing can still land.
      released.push_back(uid);
    }
  }
  for (const std::string& uid : gone) RemoveLocked(uid);
  for (const std::string& uid : released) RemoveLocked(uid);
  counters_.released_at_relist += released.size();
  pending_.clear();
  listed.clear();  // its views are into `pods`, whose strings move into the ledger now
  pods_.reserve(pods_.size() + pods.size());
  while (!pods.empty()) {
    UpsertPodLocked(std::move(pods.front()));
    pods.pop_front();
  }
}

// --- Reconciliation ---

std::vector<AssumedPod> Ledger::AssumedOlderThan(absl::Time cutoff) const {
  std::vector<AssumedPod> out;
  ReaderMutexLock lock(&mu_);
  for (const auto& [uid, entry] : pods_) {
    if (!entry.is_assumed() || entry.assumption->bind_in_flight ||
        entry.assumption->assumed_at > cutoff) {
      continue;
    }
    out.push_back(ViewLocked(uid, entry));
  }
  return out;
}

bool Ledger::Settle(const std::string& uid, uint64_t epoch, ApiPodState state,
                    const PodRecord* pod) {
  MutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed() || it->second.assumption->epoch != epoch ||
      it->second.assumption->bind_in_flight) {
    return false;
  }
  if (state == ApiPodState::kBound) {
    if (pod == nullptr || pod->node_name.empty()) return false;
    ConfirmLocked(it->second, *pod);
    ++counters_.reconcile_confirmed;
    return true;
  }
  if (state == ApiPodState::kUnbound && it->second.assumption->bound_at != 0) {
    return false;  // it was bound: "unbound" is a stale answer (the watch will tell)
  }
  RemoveLocked(uid);
  ++counters_.reconcile_forgotten;
  return true;
}

// --- Introspection ---

std::optional<AssumedPod> Ledger::AssumedEntry(const std::string& uid) const {
  ReaderMutexLock lock(&mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.is_assumed()) return std::nullopt;
  return ViewLocked(uid, it->second);
}

AssumedPod Ledger::ViewLocked(const std::string& uid, const PodEntry& e) const {
  AssumedPod out;
  out.uid = uid;
  out.namespace_name = e.assumption->namespace_name;
  out.name = e.assumption->name;
  out.node_name = e.node_name;
  out.requests = e.requests;
  out.assumed_at = e.assumption->assumed_at;
  out.bind_in_flight = e.assumption->bind_in_flight;
  out.epoch = e.assumption->epoch;
  out.outcome_unknown = e.assumption->outcome_unknown;
  out.bound_known = e.assumption->bound_at != 0;
  return out;
}

absl::StatusOr<Resources> Ledger::PendingPodRequests(const std::string& uid) const {
  ReaderMutexLock lock(&mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end()) {
    return absl::NotFoundError(absl::StrCat("pod uid ", uid, " is not a pending pod"));
  }
  return it->second.requests;
}

std::vector<NodeSummary> Ledger::Nodes() const {
  std::vector<NodeSummary> out;
  {
    ReaderMutexLock lock(&mu_);
    out.reserve(nodes_.size());
    for (const auto& [name, state] : nodes_) {
      out.push_back({name.str(), state.known, state.allocatable(), state.confirmed(),
                     state.assumed(), state.confirmed().pods, state.assumed().pods});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const NodeSummary& a, const NodeSummary& b) { return a.name < b.name; });
  return out;
}

std::vector<AssumedPod> Ledger::Assumed() const {
  std::vector<AssumedPod> out;
  {
    ReaderMutexLock lock(&mu_);  // one snapshot: binds in flight and settled ones alike
    for (const auto& [uid, entry] : pods_) {
      if (entry.is_assumed()) out.push_back(ViewLocked(uid, entry));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const AssumedPod& a, const AssumedPod& b) { return a.assumed_at < b.assumed_at; });
  return out;
}

absl::StatusOr<Explanation> Ledger::Explain(const Resources& requests, const std::string& node_name,
                                            const std::string& uid) const {
  ReaderMutexLock lock(&mu_);  // the verdict and the numbers from one snapshot
  auto it = nodes_.find(node_name);
  if (it == nodes_.end() || !it->second.known) {
    return absl::NotFoundError(absl::StrCat("node ", node_name, " not found"));
  }
  const NodeState& state = it->second;
  Explanation out;
  out.fit = FitLocked(state, requests, OwnLocked(uid, node_name));
  out.node = {node_name,           state.known,     state.allocatable(),
              state.confirmed(),   state.assumed(), state.confirmed().pods,
              state.assumed().pods};
  if (!uid.empty()) {
    // Leave the pod's own counted requests out of the numbers, as the verdict does.
    auto pod = pods_.find(uid);
    if (pod != pods_.end() && pod->second.node_name == node_name) {
      (pod->second.is_assumed() ? out.node.assumed : out.node.confirmed)
          .Subtract(pod->second.requests);
    }
  }
  return out;
}

LedgerCounters Ledger::counters() const {
  ReaderMutexLock lock(&mu_);
  return counters_;
}

size_t Ledger::pod_count() const {
  ReaderMutexLock lock(&mu_);
  return pods_.size();
}

// --- Private ---

void Ledger::NodeState::SetAllocatable(const Resources& allocatable) {
  allocatable_ = allocatable;
  UpdateRoom();
}
void Ledger::NodeState::AddConfirmed(const Resources& requests) {
  confirmed_.Add(requests);
  UpdateRoom();
}
void Ledger::NodeState::SubtractConfirmed(const Resources& requests) {
  confirmed_.Subtract(requests);
  UpdateRoom();
}
void Ledger::NodeState::AddAssumed(const Resources& requests) {
  assumed_.Add(requests);
  UpdateRoom();
}
void Ledger::NodeState::SubtractAssumed(const Resources& requests) {
  assumed_.Subtract(requests);
  UpdateRoom();
}
void Ledger::NodeState::UpdateRoom() {
  room_.milli_cpu = allocatable_.milli_cpu - confirmed_.milli_cpu - assumed_.milli_cpu;
  room_.memory_bytes = allocatable_.memory_bytes - confirmed_.memory_bytes - assumed_.memory_bytes;
  room_.ephemeral_storage_bytes = allocatable_.ephemeral_storage_bytes -
                                  confirmed_.ephemeral_storage_bytes -
                                  assumed_.ephemeral_storage_bytes;
  room_.pods = allocatable_.pods - confirmed_.pods - assumed_.pods;
}

void Ledger::AddLocked(std::string uid, PodEntry entry) {
  NodeState& node = nodes_[entry.node_name];
  if (entry.is_assumed()) {
    node.AddAssumed(entry.requests);
  } else {
    node.AddConfirmed(entry.requests);
  }
  pods_.insert_or_assign(std::move(uid), std::move(entry));
}

void Ledger::RemoveLocked(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  std::string node_name = std::move(it->second.node_name);
  NodeState& node = nodes_[node_name];
  if (it->second.is_assumed()) {
    node.SubtractAssumed(it->second.requests);
  } else {
    node.SubtractConfirmed(it->second.requests);
  }
  pods_.erase(it);
  DropNodeIfEmptyLocked(node_name);
}

void Ledger::ConfirmLocked(PodEntry& entry, const PodRecord& pod) {
  nodes_[entry.node_name].SubtractAssumed(entry.requests);
  std::string old_node = std::exchange(entry.node_name, pod.node_name);
  entry.requests = pod.requests;
  entry.assumption.reset();
  nodes_[entry.node_name].AddConfirmed(entry.requests);
  if (old_node != entry.node_name) DropNodeIfEmptyLocked(old_node);
}

void Ledger::DropNodeIfEmptyLocked(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.known) return;
  if (it->second.confirmed().IsZero() && it->second.assumed().IsZero()) nodes_.erase(it);
}

}  // namespace fitledger
