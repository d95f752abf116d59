// MessagePool: a gRPC callback-method MessageAllocator that reuses request/response pairs.
//
// gRPC's default allocator builds a fresh request and response per call and destroys them after
// it, so a Filter with 500 candidate names costs 500 string allocations to parse and 500 more to
// answer, and as many frees. A pooled pair is Clear()ed instead: protobuf keeps the cleared
// strings and sub-messages allocated and the next parse reuses them, so a steady stream of
// similar calls allocates almost nothing for its messages.
//
// A pair whose request fails `keep` (by default: more than `keep_limit` serialized bytes; the
// owner can pass an O(1) rule for its message, see ExtenderService) is freed rather than pooled,
// so one large call does not pin its memory; at most `max_pooled` idle pairs are kept. Thread-safe.
// Must outlive every call it served (the gRPC server is shut down before the service that owns it
// is destroyed).
#ifndef FITLEDGER_SERVER_SERVICE_MESSAGE_POOL_H_
#define FITLEDGER_SERVER_SERVICE_MESSAGE_POOL_H_

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "grpcpp/support/message_allocator.h"

namespace fitledger {

template <typename Request, typename Response>
class MessagePool final : public grpc::MessageAllocator<Request, Response> {
 public:
  using KeepFn = std::function<bool(const Request&)>;
  // Keeps a pair when its request serialized to at most `keep_limit` bytes. ByteSizeLong walks
  // the whole message (~1.9 us for a 500-name Filter), so hot callers pass their own rule.
  explicit MessagePool(size_t max_pooled = 64, size_t keep_limit = 1 << 20)
      : MessagePool(max_pooled, [keep_limit](const Request& request) {
          return request.ByteSizeLong() <= keep_limit;
        }) {}
  MessagePool(size_t max_pooled, KeepFn keep) : max_pooled_(max_pooled), keep_(std::move(keep)) {}
  ~MessagePool() override {
    for (Holder* holder : idle_) delete holder;
  }
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    {
      MutexLock lock(&mu_);
      if (!idle_.empty()) {
        Holder* holder = idle_.back();
        idle_.pop_back();
        return holder;
      }
    }
    return new Holder(this);
  }

  // Idle pairs ready for reuse (for tests and metrics).
  size_t idle() const {
    MutexLock lock(&mu_);
    return idle_.size();
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(MessagePool* pool) : pool_(pool) {
      this->set_request(&request_);
      this->set_response(&response_);
    }
    void Release() override { pool_->Return(this); }

    Request request_;
    Response response_;

   private:
    MessagePool* const pool_;
  };

  void Return(Holder* holder) {
    if (!keep_(holder->request_)) {
      delete holder;
      return;
    }
    holder->request_.Clear();
    holder->response_.Clear();
    {
      MutexLock lock(&mu_);
      if (idle_.size() < max_pooled_) {
        idle_.push_back(holder);
        return;
      }
    }
    delete holder;
  }

  const size_t max_pooled_;
  const KeepFn keep_;
  mutable Mutex mu_;
  std::vector<Holder*> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_MESSAGE_POOL_H_
