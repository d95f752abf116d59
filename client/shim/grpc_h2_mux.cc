#include "client/shim/grpc_h2_mux.h"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "client/shim/grpc_h2_wire.h"

namespace fitledger::shim {
namespace {

// Finished calls kept for reuse.
constexpr size_t kMaxPooledCalls = 256;
// The longest a connection's thread sleeps: a call's deadline is noticed at most this late.
constexpr absl::Duration kDeadlineTick = absl::Milliseconds(50);

}  // namespace

// One call, from Call() to its completion.
struct MuxCall {
  std::string method;
  std::string frame;  // the request, 5-byte prefix included
  size_t sent = 0;    // bytes of frame nghttp2 has taken
  absl::Time deadline;
  GrpcH2MuxClient::Done done;
  H2Reply reply;
  bool resent = false;  // already offered again after the server refused it unseen
  // Set when the call ends for a reason of its own (deadline, a lost connection, Stop) rather
  // than by its stream closing normally; then the reply is not read.
  grpc::Status ended = grpc::Status::OK;
  bool ended_early = false;

  void Reset() {
    frame.clear();
    sent = 0;
    done = nullptr;
    reply.Clear();
    resent = false;
    ended = grpc::Status::OK;
    ended_early = false;
    if (frame.capacity() > kKeepBufferBytes) std::string().swap(frame);
    if (reply.body.capacity() > kKeepBufferBytes) std::string().swap(reply.body);
  }
};

// One connection and its thread. Thread-safe: callers submit under mu_; the thread reads,
// writes what callers could not, expires deadlines and completes calls (outside mu_).
class MuxConnection {
 public:
  explicit MuxConnection(GrpcH2MuxClient* client) : client_(client) {
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  ~MuxConnection() {
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      up_ = false;
    }
    Wake();
    if (thread_.joinable()) thread_.join();
  }

  bool up() const {
    std::lock_guard<std::mutex> lock(mu_);
    return up_;
  }

  // Starts `call` on this connection if it is up. False when it is not, or when the request
  // could not be written and the server cannot have seen it (the call is then not kept).
  bool Submit(MuxCall* call) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!up_) return false;
    const std::string timeout = GrpcTimeout(call->deadline);
    const auto headers = GrpcRequestHeaders(call->method, client_->parsed_->authority, timeout);
    nghttp2_data_provider provider{};
    provider.source.ptr = call;
    provider.read_callback = &MuxConnection::ReadRequest;
    call->sent = 0;
    const int32_t id =
        nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(), &provider, call);
    if (id < 0) {
      LoseLocked();  // e.g. stream ids used up: the thread dials a new connection
      return false;
    }
    calls_.emplace(id, call);
    const bool nothing_pending = out_.size() == out_sent_;
    size_t written = 0;
    if (!FlushLocked(&written)) {
      if (nothing_pending && written == 0) {
        // Nothing of it left this process (a server that went away since the last call): it
        // goes another way and this connection is redialled.
        calls_.erase(id);
        nghttp2_session_set_stream_user_data(session_, id, nullptr);
        LoseLocked();
        return false;
      }
      LoseLocked();  // the thread completes it UNAVAILABLE
    }
    return true;
  }

 private:
  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }

  // The connection is lost: no new calls; the thread ends those on it and redials.
  void LoseLocked() {
    up_ = false;
    lost_ = true;
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
    Wake();
  }

  // Hands nghttp2's queued frames to the socket without waiting: what does not fit stays in
  // out_ for the thread (woken for it). False on a write error. `*written`: bytes sent now.
  bool FlushLocked(size_t* written) {
    *written = 0;
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return false;
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    while (out_sent_ < out_.size()) {
      const ssize_t n =
          send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_sent_ += static_cast<size_t>(n);
        *written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (std::this_thread::get_id() != reader_) Wake();  // it polls for POLLOUT
        return true;
      }
      return false;
    }
    out_.clear();
    out_sent_ = 0;
    if (out_.capacity() > kKeepBufferBytes) std::string().swap(out_);
    return true;
  }

  // Ends every call on the connection with `status` (into finished_) and closes it.
  void CloseLocked(const grpc::Status& status) {
    for (auto& [id, call] : calls_) {
      nghttp2_session_set_stream_user_data(session_, id, nullptr);
      call->ended = status;
      call->ended_early = true;
      finished_.push_back(call);
    }
    calls_.clear();
    if (session_ != nullptr) nghttp2_session_del(session_);
    session_ = nullptr;
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    up_ = false;
    lost_ = false;
    out_.clear();
    out_sent_ = 0;
  }

  // Resets the streams whose deadline has passed; returns the next deadline of those left.
  absl::Time ExpireLocked(absl::Time now) {
    absl::Time next = absl::InfiniteFuture();
    for (auto it = calls_.begin(); it != calls_.end();) {
      MuxCall* call = it->second;
      if (call->deadline > now) {
        next = std::min(next, call->deadline);
        ++it;
        continue;
      }
      nghttp2_session_set_stream_user_data(session_, it->first, nullptr);
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, it->first, NGHTTP2_CANCEL);
      call->ended = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
      call->ended_early = true;
      finished_.push_back(call);
      calls_.erase(it++);
    }
    return next;
  }

  // Dials until connected or stopping; false when stopping.
  bool Connect() {
    const GrpcH2MuxClient::Options& o = client_->options_;
    absl::Duration backoff = absl::ZeroDuration();
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return false;
      }
      std::string error;
      const int fd = DialH2(*client_->parsed_, absl::Now() + o.dial_timeout, &error);
      if (fd >= 0) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) {
          close(fd);
          return false;
        }
        fd_ = fd;
        size_t written = 0;
        if (Init() && FlushLocked(&written)) {
          up_ = true;
          return true;
        }
        CloseLocked(grpc::Status::OK);
      }
      backoff = std::clamp(backoff * 2, o.initial_backoff, o.max_backoff);
      pollfd p{wake_fd_, POLLIN, 0};
      if (poll(&p, 1, MillisLeft(absl::Now() + backoff)) > 0) Drain();
    }
  }

  bool Init() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &MuxConnection::OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &MuxConnection::OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                           &MuxConnection::OnStreamClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &MuxConnection::OnFrame);
    const bool ok = NewH2ClientSession(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    return ok;
  }

  void Drain() {
    uint64_t count = 0;
    (void)!read(wake_fd_, &count, sizeof(count));
  }

  void Run() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reader_ = std::this_thread::get_id();
    }
    std::string buffer(kH2ReadChunk, '\0');
    std::vector<MuxCall*> finished;
    while (Connect()) {
      for (;;) {
        short events = POLLIN;
        absl::Time next;
        int fd;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_ || lost_) break;
          next = ExpireLocked(absl::Now());
          size_t written = 0;
          if (!FlushLocked(&written)) {  // the resets, and what callers could not write
            LoseLocked();
            continue;
          }
          if (out_sent_ < out_.size()) events |= POLLOUT;
          finished.swap(finished_);
          fd = fd_;
        }
        Complete(&finished);
        pollfd p[2] = {{fd, events, 0}, {wake_fd_, POLLIN, 0}};
        // Calls started since `next` was taken may have earlier deadlines: a tick bounds how
        // late one is noticed (no wake-up per call to say so).
        const int n = poll(p, 2, MillisLeft(std::min(next, absl::Now() + kDeadlineTick)));
        if (n < 0 && errno != EINTR) {
          std::lock_guard<std::mutex> lock(mu_);
          LoseLocked();
          continue;
        }
        if (n > 0 && p[1].revents != 0) Drain();
        if (n <= 0 || p[0].revents == 0) continue;
        std::lock_guard<std::mutex> lock(mu_);
        if (lost_) continue;
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
          const ssize_t got = recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
          if (got > 0) {
            if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer.data()),
                                         static_cast<size_t>(got)) < 0) {
              LoseLocked();
              continue;
            }
          } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            LoseLocked();
            continue;
          }
        }
        size_t written = 0;
        if (!FlushLocked(&written)) {
          LoseLocked();
        } else if (nghttp2_session_want_read(session_) == 0 &&
                   nghttp2_session_want_write(session_) == 0) {
          LoseLocked();  // the server's GOAWAY, with every stream it kept now closed
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        CloseLocked(stopping_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the shim is stopping")
                              : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                             "the connection to the server was lost"));
        finished.swap(finished_);
      }
      Complete(&finished);
    }
  }

  // Runs the completions of `calls` (outside mu_) and empties it.
  void Complete(std::vector<MuxCall*>* calls) {
    const size_t max_body = client_->options_.max_response_bytes;
    for (MuxCall* call : *calls) {
      absl::string_view message;
      bool unseen = false;
      grpc::Status status =
          call->ended_early ? call->ended : call->reply.Outcome(max_body, &message, &unseen);
      if (unseen && !call->resent && absl::Now() < call->deadline) {
        call->resent = true;
        call->reply.Clear();
        if (client_->Submit(call, this)) continue;
      }
      call->done(status, message);
      client_->GiveCall(call);
    }
    calls->clear();
  }

  static ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* call = static_cast<MuxCall*>(source->ptr);
    const size_t n = std::min(length, call->frame.size() - call->sent);
    std::memcpy(buf, call->frame.data() + call->sent, n);
    call->sent += n;
    if (call->sent == call->frame.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_length, const uint8_t* value, size_t value_length, uint8_t,
                      void*) {
    auto* call =
        static_cast<MuxCall*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
    if (call == nullptr) return 0;
    call->reply.OnHeader(absl::string_view(reinterpret_cast<const char*>(name), name_length),
                         absl::string_view(reinterpret_cast<const char*>(value), value_length));
    return 0;
  }

  static int OnData(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                    size_t length, void* user) {
    auto* call = static_cast<MuxCall*>(nghttp2_session_get_stream_user_data(session, stream_id));
    if (call == nullptr) return 0;
    auto* c = static_cast<MuxConnection*>(user);
    if (!call->reply.OnData(data, length, c->client_->options_.max_response_bytes)) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* user) {
    auto* call = static_cast<MuxCall*>(nghttp2_session_get_stream_user_data(session, stream_id));
    if (call == nullptr) return 0;
    auto* c = static_cast<MuxConnection*>(user);
    call->reply.reset_code = error_code;
    c->calls_.erase(stream_id);
    c->finished_.push_back(call);
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_GOAWAY) static_cast<MuxConnection*>(user)->up_ = false;
    return 0;
  }

  GrpcH2MuxClient* const client_;
  int wake_fd_ = -1;  // eventfd: Stop, a lost connection, output waiting for POLLOUT
  std::thread thread_;

  mutable std::mutex mu_;
  // Guarded by mu_ (nghttp2's callbacks run inside mem_recv / mem_send, under it).
  int fd_ = -1;
  nghttp2_session* session_ = nullptr;
  bool up_ = false;    // connected and taking calls
  bool lost_ = false;  // to be closed and redialled by the thread
  bool stopping_ = false;
  std::thread::id reader_;                        // the thread's id, once it runs
  absl::flat_hash_map<int32_t, MuxCall*> calls_;  // by stream id: in flight
  std::vector<MuxCall*> finished_;                // to complete, outside mu_
  std::string out_;                               // frames not yet written from out_sent_
  size_t out_sent_ = 0;
};

GrpcH2MuxClient::GrpcH2MuxClient(std::string target, Options options)
    : target_(std::move(target)), parsed_(ParsedH2TargetOrNull(target_)), options_([&] {
        options.connections = std::max(1, options.connections);
        options.initial_backoff = std::max(options.initial_backoff, absl::Milliseconds(1));
        options.max_backoff = std::max(options.max_backoff, options.initial_backoff);
        return options;
      }()) {
  for (int i = 0; i < options_.connections; ++i) {
    connections_.push_back(std::make_unique<MuxConnection>(this));
  }
}

GrpcH2MuxClient::~GrpcH2MuxClient() {
  Stop();
  for (MuxCall* call : pool_) delete call;
}

void GrpcH2MuxClient::Start() {
  std::lock_guard<std::mutex> lock(start_mu_);
  if (started_ || stopped_ || parsed_ == nullptr) return;
  started_ = true;
  for (auto& c : connections_) c->Start();
}

void GrpcH2MuxClient::Stop() {
  std::lock_guard<std::mutex> lock(start_mu_);
  if (stopped_) return;
  stopped_ = true;
  if (!started_) return;
  for (auto& c : connections_) c->Stop();
}

int GrpcH2MuxClient::connections_up() const {
  int up = 0;
  for (const auto& c : connections_) up += c->up() ? 1 : 0;
  return up;
}

MuxCall* GrpcH2MuxClient::TakeCall() {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!pool_.empty()) {
      MuxCall* call = pool_.back();
      pool_.pop_back();
      return call;
    }
  }
  return new MuxCall;
}

void GrpcH2MuxClient::GiveCall(MuxCall* call) {
  call->Reset();
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.size() < kMaxPooledCalls) {
      pool_.push_back(call);
      return;
    }
  }
  delete call;
}

bool GrpcH2MuxClient::Submit(MuxCall* call, const MuxConnection* skip) {
  const size_t n = connections_.size();
  size_t first = 0;
  if (skip == nullptr) {
    first = next_.fetch_add(1, std::memory_order_relaxed) % n;
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (connections_[i].get() == skip) first = i + 1;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    MuxConnection* c = connections_[(first + i) % n].get();
    if (c != skip && c->Submit(call)) return true;
  }
  return false;
}

bool GrpcH2MuxClient::Call(absl::string_view method, absl::string_view request, absl::Time deadline,
                           Done done) {
  if (parsed_ == nullptr || request.size() > 0xffffffffu || absl::Now() >= deadline) return false;
  MuxCall* call = TakeCall();
  call->method.assign(method.data(), method.size());
  FrameGrpcMessage(request, &call->frame);
  call->deadline = deadline;
  call->done = std::move(done);
  // Counted first: the call may complete (and its caller look at the count) before Submit
  // returns here.
  taken_.fetch_add(1, std::memory_order_relaxed);
  if (Submit(call, nullptr)) return true;
  taken_.fetch_sub(1, std::memory_order_relaxed);
  GiveCall(call);
  return false;
}

}  // namespace fitledger::shim
