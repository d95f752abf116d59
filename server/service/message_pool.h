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
#include <memory>
#include <utility>

#include "common/reuse_pool.h"
#include "grpcpp/support/message_allocator.h"

namespace fitledger {

template <typename Request, typename Response>
class MessagePool final : public grpc::MessageAllocator<Request, Response> {
 public:
  using KeepFn = std::function<bool(const Request&)>;
  // Keeps a pair when its request serialized to at most `keep_limit` bytes. ByteSizeLong walks
  // the whole message (docs/performance.md, "Earlier findings"), so hot callers pass their own
  // rule.
  explicit MessagePool(size_t max_pooled = 64, size_t keep_limit = 1 << 20)
      : MessagePool(max_pooled, [keep_limit](const Request& request) {
          return request.ByteSizeLong() <= keep_limit;
        }) {}
  MessagePool(size_t max_pooled, KeepFn keep) : keep_(std::move(keep)), idle_(max_pooled) {}
  MessagePool(const MessagePool&) = delete;
  MessagePool& operator=(const MessagePool&) = delete;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return idle_.Take([this] { return std::make_unique<Holder>(this); }).release();
  }

  // Idle pairs ready for reuse (for tests and metrics).
  size_t idle() const { return idle_.idle(); }

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
    std::unique_ptr<Holder> owned(holder);
    if (!keep_(owned->request_)) return;
    owned->request_.Clear();
    owned->response_.Clear();
    idle_.Keep(std::move(owned));
  }

  const KeepFn keep_;
  ReusePool<Holder> idle_;
};

}  // namespace fitledger

#endif  // FITLEDGER_SERVER_SERVICE_MESSAGE_POOL_H_
