#include "client/shim/grpc_h2.h"

#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/shim/grpc_h2_wire.h"
#include "grpcpp/client_context.h"

namespace fitledger::shim {

namespace {

// A connect cut short by the caller's deadline with less time than this is not held against the
// server (no backoff).
constexpr absl::Duration kMinConnectBudget = absl::Milliseconds(250);

std::string& ThreadFrame() {
  thread_local std::string frame;
  return frame;
}

H2Reply& ThreadReply() {
  thread_local H2Reply reply;
  return reply;
}

}  // namespace

// One HTTP/2 connection, used by one call at a time.
class H2Connection {
 public:
  ~H2Connection() {
    if (session_ != nullptr) nghttp2_session_del(session_);
    if (fd_ >= 0) close(fd_);
  }

  static std::unique_ptr<H2Connection> Open(const H2Target& target, absl::Time deadline,
                                            std::string* error) {
    const int fd = DialH2(target, deadline, error);
    if (fd < 0) return nullptr;
    std::unique_ptr<H2Connection> c(new H2Connection(fd, target.authority));
    if (!c->Init()) {
      *error = "cannot start an HTTP/2 session";
      return nullptr;
    }
    return c;
  }

  bool healthy() const { return !broken_ && !goaway_; }

  // Reads whatever the server sent while the connection was idle (SETTINGS, PING, GOAWAY) and
  // answers it. False when the connection cannot take a call.
  bool Refresh(absl::Time deadline) {
    if (!healthy()) return false;
    std::string& buffer = ReadBuffer();
    for (;;) {
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n > 0) {
        if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer.data()), n) <
            0) {
          broken_ = true;
        }
        if (broken_ || static_cast<size_t>(n) < buffer.size()) break;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) broken_ = true;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    if (healthy() && !Flush(deadline)) broken_ = true;
    return healthy() && nghttp2_session_want_read(session_) != 0;
  }

  // One unary call. `frame` is the request with its 5-byte prefix; what came back lands in
  // `reply`. A non-OK status here is a transport failure (the stream's own outcome is
  // reply->Outcome); `*retryable` is true when nothing of the request reached the server.
  grpc::Status Call(absl::string_view method, absl::string_view frame, H2Reply* reply,
                    size_t max_body, absl::Time deadline, bool* retryable) {
    *retryable = false;
    reply->Clear();
    reply_ = reply;
    max_body_ = max_body;
    send_ = frame;
    sent_ = 0;
    closed_ = false;
    wrote_ = false;
    const std::string timeout = GrpcTimeout(deadline);
    const auto headers = GrpcRequestHeaders(method, authority_, timeout);
    nghttp2_data_provider provider{};
    provider.read_callback = &H2Connection::ReadRequest;
    stream_id_ = nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(),
                                        &provider, nullptr);
    if (stream_id_ < 0) {
      broken_ = true;  // e.g. stream ids used up: a new connection
      *retryable = true;
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("cannot start a stream: ", nghttp2_strerror(stream_id_)));
    }
    std::string& buffer = ReadBuffer();
    for (;;) {
      // A reply that keeps arriving (or one over the limit, read only to be dropped) does not
      // keep the call past its deadline.
      if (absl::Now() >= deadline) return Lost(deadline, "deadline exceeded");
      if (!Flush(deadline)) {
        *retryable = !wrote_;
        return Lost(deadline, "cannot write to the server");
      }
      if (closed_) break;
      if (nghttp2_session_want_read(session_) == 0) {
        broken_ = true;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server ended the connection");
      }
      if (!WaitFd(fd_, POLLIN, deadline)) return Lost(deadline, "deadline exceeded");
      const ssize_t n = recv(fd_, buffer.data(), buffer.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) return Lost(deadline, "connection closed by the server");
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buffer.data()), n) <
          0) {
        broken_ = true;
        return grpc::Status(grpc::StatusCode::INTERNAL, "malformed HTTP/2 from the server");
      }
    }
    if (!Flush(deadline)) broken_ = true;  // WINDOW_UPDATEs queued by the reply; the call is done
    return grpc::Status::OK;
  }

 private:
  H2Connection(int fd, std::string authority) : fd_(fd), authority_(std::move(authority)) {}

  static std::string& ReadBuffer() {
    thread_local std::string buffer(kH2ReadChunk, '\0');
    return buffer;
  }

  bool Init() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_on_header_callback(callbacks, &H2Connection::OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &H2Connection::OnData);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &H2Connection::OnStreamClose);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &H2Connection::OnFrame);
    const bool ok = NewH2ClientSession(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    return ok;
  }

  // Writes every frame nghttp2 has queued. False on a write error or the deadline.
  bool Flush(absl::Time deadline) {
    out_.clear();
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        broken_ = true;
        return false;
      }
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), n);
    }
    size_t done = 0;
    while (done < out_.size()) {
      const ssize_t n = send(fd_, out_.data() + done, out_.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += n;
        wrote_ = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && WaitFd(fd_, POLLOUT, deadline)) {
        continue;
      }
      broken_ = true;
      return false;
    }
    if (out_.capacity() > kKeepBufferBytes) std::string().swap(out_);
    return true;
  }

  // The call failed on the transport: the connection is not reused.
  grpc::Status Lost(absl::Time deadline, absl::string_view what) {
    broken_ = true;
    if (absl::Now() >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(what));
  }

  static ssize_t ReadRequest(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source*, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    const size_t n = std::min(length, c->send_.size() - c->sent_);
    std::memcpy(buf, c->send_.data() + c->sent_, n);
    c->sent_ += n;
    if (c->sent_ == c->send_.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t name_length, const uint8_t* value, size_t value_length, uint8_t,
                      void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (frame->hd.stream_id != c->stream_id_) return 0;
    c->reply_->OnHeader(absl::string_view(reinterpret_cast<const char*>(name), name_length),
                        absl::string_view(reinterpret_cast<const char*>(value), value_length));
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                    size_t length, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (stream_id != c->stream_id_) return 0;
    if (!c->reply_->OnData(data, length, c->max_body_)) {
      nghttp2_submit_rst_stream(c->session_, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user) {
    auto* c = static_cast<H2Connection*>(user);
    if (stream_id != c->stream_id_) return 0;
    c->closed_ = true;
    c->reply_->reset_code = error_code;
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_GOAWAY) static_cast<H2Connection*>(user)->goaway_ = true;
    return 0;
  }

  const int fd_;
  const std::string authority_;
  nghttp2_session* session_ = nullptr;
  std::string out_;
  bool broken_ = false;
  bool goaway_ = false;
  bool wrote_ = false;  // bytes of the current call reached the socket

  // The current call.
  int32_t stream_id_ = -1;
  absl::string_view send_;
  size_t sent_ = 0;
  H2Reply* reply_ = nullptr;
  size_t max_body_ = 0;
  bool closed_ = false;
};

GrpcH2Client::GrpcH2Client(std::string target, Options options)
    : target_(std::move(target)), parsed_(ParsedH2TargetOrNull(target_)), options_([&] {
        options.initial_backoff = std::max(options.initial_backoff, absl::ZeroDuration());
        options.max_backoff = std::max(options.max_backoff, options.initial_backoff);
        return options;
      }()) {}

GrpcH2Client::~GrpcH2Client() = default;

absl::Status GrpcH2Client::CheckTarget(absl::string_view target) {
  return ParseH2Target(target).status();
}

int GrpcH2Client::connections_dialled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dialled_;
}

int GrpcH2Client::RefreshIdle() {
  std::vector<std::unique_ptr<H2Connection>> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle.swap(idle_);
  }
  int left = 0;
  for (auto& c : idle) {
    if (!c->Refresh(absl::Now() + absl::Seconds(1))) continue;
    ++left;
    Give(std::move(c));
  }
  return left;
}

std::unique_ptr<H2Connection> GrpcH2Client::Take(grpc::Status* status, absl::Time deadline) {
  for (;;) {
    std::unique_ptr<H2Connection> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (c->Refresh(deadline)) return c;
  }
  if (parsed_ == nullptr) {
    *status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("bad server address ", target_, ": ",
                                        ParseH2Target(target_).status().message()));
    return nullptr;
  }
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = dial_generation_;
    if (const absl::Time now = absl::Now(); now < retry_after_) {
      *status = grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          absl::StrCat("cannot connect to ", target_, ": ", last_dial_error_, " (next attempt in ",
                       absl::ToInt64Milliseconds(retry_after_ - now), " ms)"));
      return nullptr;
    }
  }
  std::string error;
  const absl::Time start = absl::Now();
  std::unique_ptr<H2Connection> c = H2Connection::Open(*parsed_, deadline, &error);
  std::lock_guard<std::mutex> lock(mu_);
  if (c == nullptr) {
    const absl::Time now = absl::Now();
    // A dial counts against the server unless the caller's deadline cut it short before it had
    // a fair chance, or another dial has succeeded since it began; failures at once double the
    // backoff once.
    const bool fair = now < deadline || deadline - start >= kMinConnectBudget;
    if (fair && generation == dial_generation_ && now >= retry_after_) {
      backoff_ = std::clamp(backoff_ * 2, options_.initial_backoff, options_.max_backoff);
      retry_after_ = now + backoff_;
      last_dial_error_ = error;
    }
    *status = grpc::Status(absl::Now() >= deadline ? grpc::StatusCode::DEADLINE_EXCEEDED
                                                   : grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("cannot connect to ", target_, ": ", error));
    return nullptr;
  }
  backoff_ = absl::ZeroDuration();
  retry_after_ = absl::InfinitePast();
  ++dial_generation_;
  ++dialled_;
  return c;
}

void GrpcH2Client::Give(std::unique_ptr<H2Connection> connection) {
  if (!connection->healthy()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(idle_.size()) < options_.max_idle_connections) {
    idle_.push_back(std::move(connection));
  }
}

grpc::Status GrpcH2Client::Call(absl::string_view method,
                                const google::protobuf::MessageLite& request,
                                google::protobuf::MessageLite* response, absl::Time deadline) {
  const size_t size = request.ByteSizeLong();
  if (size > 0xffffffffu) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request too large");
  }
  std::string& frame = StartFrame(size);
  request.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(frame.data() + 5));
  absl::string_view reply;
  grpc::Status status = CallFrame(method, frame, deadline, &reply);
  if (status.ok() && !response->ParseFromArray(reply.data(), static_cast<int>(reply.size()))) {
    status = grpc::Status(grpc::StatusCode::INTERNAL, "cannot parse the reply");
  }
  ReleaseLargeBuffers();
  return status;
}

grpc::Status GrpcH2Client::CallBytes(absl::string_view method, absl::string_view request,
                                     absl::Time deadline, std::string* reply) {
  if (request.size() > 0xffffffffu) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request too large");
  }
  std::string& frame = StartFrame(request.size());
  std::memcpy(frame.data() + 5, request.data(), request.size());
  absl::string_view bytes;
  grpc::Status status = CallFrame(method, frame, deadline, &bytes);
  if (status.ok()) reply->assign(bytes.data(), bytes.size());
  ReleaseLargeBuffers();
  return status;
}

void GrpcH2Client::ReleaseLargeBuffers() {
  if (std::string& frame = ThreadFrame(); frame.capacity() > kKeepBufferBytes) {
    std::string().swap(frame);
  }
  if (std::string& body = ThreadReply().body; body.capacity() > kKeepBufferBytes) {
    std::string().swap(body);
  }
}

std::string& GrpcH2Client::StartFrame(size_t size) {
  std::string& frame = ThreadFrame();
  StartGrpcFrame(size, &frame);
  return frame;
}

grpc::Status GrpcH2Client::CallFrame(absl::string_view method, const std::string& frame,
                                     absl::Time deadline, absl::string_view* reply) {
  H2Reply& got = ThreadReply();
  grpc::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (absl::Now() >= deadline) {
      // Not sent: a request the caller has given up on never reaches the server.
      if (attempt == 0)
        status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
      break;
    }
    std::unique_ptr<H2Connection> c = Take(&status, deadline);
    if (c == nullptr) break;
    bool retryable = false;
    status = c->Call(method, frame, &got, options_.max_response_bytes, deadline, &retryable);
    Give(std::move(c));
    if (status.ok()) status = got.Outcome(options_.max_response_bytes, reply, &retryable);
    // A request the server cannot have seen goes once more, on a new connection.
    if (status.ok() || !retryable || absl::Now() >= deadline) break;
  }
  return status;
}

namespace {
absl::Time DeadlineOf(const grpc::ClientContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}
}  // namespace

grpc::Status H2ExtenderStub::CallBytes(absl::string_view method, absl::string_view request,
                                       absl::Time deadline, std::string* reply) {
  return client_->CallBytes(method, request, deadline, reply);
}

bool H2ExtenderStub::StartBytes(absl::string_view method, absl::string_view request,
                                absl::Time deadline, BytesDone done) {
  return mux_ != nullptr && mux_->Call(method, request, deadline, std::move(done));
}

grpc::Status H2ExtenderStub::Filter(grpc::ClientContext* context, const v1::ExtenderArgs& request,
                                    v1::ExtenderFilterResult* response) {
  return client_->Call("/fitledger.v1.Extender/Filter", request, response, DeadlineOf(context));
}

grpc::Status H2ExtenderStub::Prioritize(grpc::ClientContext* context,
                                        const v1::ExtenderArgs& request,
                                        v1::HostPriorityList* response) {
  return client_->Call("/fitledger.v1.Extender/Prioritize", request, response, DeadlineOf(context));
}

grpc::Status H2ExtenderStub::Bind(grpc::ClientContext* context,
                                  const v1::ExtenderBindingArgs& request,
                                  v1::ExtenderBindingResult* response) {
  return client_->Call("/fitledger.v1.Extender/Bind", request, response, DeadlineOf(context));
}

grpc::Status H2ExtenderStub::Preempt(grpc::ClientContext* context,
                                     const v1::ExtenderPreemptionArgs& request,
                                     v1::ExtenderPreemptionResult* response) {
  return client_->Call("/fitledger.v1.Extender/Preempt", request, response, DeadlineOf(context));
}

grpc::Status H2HealthStub::Check(grpc::ClientContext* context,
                                 const grpc::health::v1::HealthCheckRequest& request,
                                 grpc::health::v1::HealthCheckResponse* response) {
  constexpr char kCheck[] = "/grpc.health.v1.Health/Check";
  const absl::Time deadline = DeadlineOf(context);
  if (mux_ != nullptr) {
    // Filter's own way while it is up: readiness then says what Filter will find.
    struct Outcome {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      grpc::Status status;
      std::string reply;
    };
    auto outcome = std::make_shared<Outcome>();
    if (mux_->Call(kCheck, request.SerializeAsString(), deadline,
                   [outcome](const grpc::Status& status, absl::string_view reply) {
                     std::lock_guard<std::mutex> lock(outcome->mu);
                     outcome->status = status;
                     outcome->reply.assign(reply.data(), reply.size());
                     outcome->done = true;
                     outcome->cv.notify_all();
                   })) {
      std::unique_lock<std::mutex> lock(outcome->mu);
      outcome->cv.wait(lock, [&] { return outcome->done; });
      if (outcome->status.ok() && !response->ParseFromString(outcome->reply)) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "cannot parse the reply");
      }
      return outcome->status;
    }
  }
  return client_->Call(kCheck, request, response, deadline);
}

}  // namespace fitledger::shim
