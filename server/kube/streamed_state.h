// A WatchList's initial state as it streams in (Watcher), kept apart so it can be tested alone.
#ifndef FITLEDGER_SERVER_KUBE_STREAMED_STATE_H_
#define FITLEDGER_SERVER_KUBE_STREAMED_STATE_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace fitledger::kube {

// A WatchList's initial state as it streams: objects by key, in arrival order, where a later
// event for the same key replaces or removes the earlier one. A sequence and an index (not a
// node-based map): the state of 150,000 pods is held once, as a LIST's would be. The index holds
// positions only, hashed and compared by the key inside the object (KeyOf: a pod's UID, a
// node's name), so it keeps no copy of a key and stays valid as the sequence grows.
// `Items`: std::vector, or std::deque for the pods (see Ledger::ReplacePods).
//
// The index is built at the first Put or Remove, not before: the API server sends a WatchList's
// initial state as one ADDED event per object of its snapshot, and a later event is ADDED only
// when the object's previous version did not match the watch (k8s.io/apiserver
// pkg/storage/cacher/cache_watcher.go: processInterval sends the watchCacheInterval's objects,
// convertToWatchEvent makes ADDED of "current passes the filter, previous did not"), so an
// ADDED object is not in the state (one that left it had its DELETED); a pod's UID is never
// reused. A stream of Adds has nothing to look up. A quiet sync of 150,000 pods builds no index at
// all (one hash and one probe into a table of several MiB per pod; its share of the sync's CPU:
// docs/performance.md, "Earlier findings").
template <typename T, typename KeyOf, typename Items = std::vector<T>>
class StreamedState {
 public:
  StreamedState() = default;
  StreamedState(const StreamedState&) = delete;  // the index points at items_
  StreamedState& operator=(const StreamedState&) = delete;

  // An ADDED event: appended while there is no index. Should a server repeat an ADDED for a key
  // before any MODIFIED or DELETED, both are kept, in order (every consumer of a state applies
  // it in order, a later object replacing an earlier one with its key).
  void Add(T value) {
    if (indexed_) return Put(std::move(value));
    items_.push_back(std::move(value));
    present_.push_back(true);
  }
  // A MODIFIED event (or an ADDED after the index exists): replaces the object with its key, in
  // its place, or appends it.
  void Put(T value) {
    BuildIndex();
    auto it = index_.find(absl::string_view(KeyOf()(value)));
    if (it == index_.end()) {
      items_.push_back(std::move(value));
      present_.push_back(true);
      index_.insert(items_.size() - 1);
    } else {
      items_[*it] = std::move(value);  // the same key: its place in the index holds
      present_[*it] = true;
    }
  }
  // A DELETED event.
  void Remove(absl::string_view key) {
    BuildIndex();
    auto it = index_.find(key);
    if (it != index_.end()) present_[*it] = false;
  }
  // The objects present, moved out (compacted in place: no second copy of the state).
  Items Take() {
    Index(0, Hash{&items_}, Eq{&items_}).swap(index_);
    indexed_ = false;
    size_t kept = 0;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (!present_[i]) continue;
      if (kept != i) items_[kept] = std::move(items_[i]);
      ++kept;
    }
    items_.resize(kept);
    std::vector<bool>().swap(present_);
    return std::move(items_);
  }

 private:
  // Indexes what Add appended; a key appended twice keeps its later object (in the later place).
  void BuildIndex() {
    if (indexed_) return;
    indexed_ = true;
    index_.reserve(items_.size());
    for (size_t i = 0; i < items_.size(); ++i) {
      auto [it, inserted] = index_.insert(i);
      if (inserted) continue;
      present_[*it] = false;
      index_.erase(it);
      index_.insert(i);
    }
  }

  // An index entry is a position in items_; a lookup is by key.
  struct Hash {
    using is_transparent = void;
    const Items* items;
    size_t operator()(size_t i) const { return (*this)(absl::string_view(KeyOf()((*items)[i]))); }
    size_t operator()(absl::string_view key) const { return absl::Hash<absl::string_view>()(key); }
  };
  struct Eq {
    using is_transparent = void;
    const Items* items;
    absl::string_view Key(size_t i) const { return KeyOf()((*items)[i]); }
    absl::string_view Key(absl::string_view key) const { return key; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Key(a) == Key(b);
    }
  };
  using Index = absl::flat_hash_set<size_t, Hash, Eq>;

  Items items_;
  std::vector<bool> present_;
  Index index_{0, Hash{&items_}, Eq{&items_}};
  bool indexed_ = false;  // index_ holds every position of items_
};

}  // namespace fitledger::kube

#endif  // FITLEDGER_SERVER_KUBE_STREAMED_STATE_H_
