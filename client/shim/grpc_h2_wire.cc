#include "client/shim/grpc_h2_wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fitledger::shim {
namespace {

// Connects a non-blocking socket to `address` by `deadline`; -1 with `error` set on failure.
int ConnectOne(int family, const sockaddr* address, socklen_t length, absl::Time deadline,
               std::string* error) {
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = absl::StrCat("socket: ", strerror(errno));
    return -1;
  }
  if (connect(fd, address, length) != 0) {
    // EAGAIN (a Unix socket's full backlog) is a failure: only EINPROGRESS is pending.
    if (errno != EINPROGRESS) {
      *error = absl::StrCat("connect: ", strerror(errno));
      close(fd);
      return -1;
    }
    if (!WaitFd(fd, POLLOUT, deadline)) {
      *error = "connect: timed out";
      close(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      *error = absl::StrCat("connect: ", strerror(so_error));
      close(fd);
      return -1;
    }
  }
  if (family != AF_UNIX) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

// grpc-message is percent-encoded (gRPC's HTTP/2 protocol document).
std::string PercentDecode(absl::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size() && absl::ascii_isxdigit(in[i + 1]) &&
        absl::ascii_isxdigit(in[i + 2])) {
      auto hex = [](char c) { return absl::ascii_isdigit(c) ? c - '0' : (c | 0x20) - 'a' + 10; };
      out.push_back(static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2])));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

// gRPC's mapping of an HTTP status without grpc-status (doc/http-grpc-status-mapping.md).
grpc::StatusCode FromHttpStatus(int status) {
  switch (status) {
    case 400:
      return grpc::StatusCode::INTERNAL;
    case 401:
      return grpc::StatusCode::UNAUTHENTICATED;
    case 403:
      return grpc::StatusCode::PERMISSION_DENIED;
    case 404:
      return grpc::StatusCode::UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return grpc::StatusCode::UNAVAILABLE;
    default:
      return grpc::StatusCode::UNKNOWN;
  }
}

// gRPC's mapping of RST_STREAM codes (doc/PROTOCOL-HTTP2.md, "Errors").
grpc::StatusCode FromResetCode(uint32_t code) {
  switch (code) {
    case NGHTTP2_REFUSED_STREAM:
      return grpc::StatusCode::UNAVAILABLE;
    case NGHTTP2_CANCEL:
      return grpc::StatusCode::CANCELLED;
    case NGHTTP2_ENHANCE_YOUR_CALM:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case NGHTTP2_INADEQUATE_SECURITY:
      return grpc::StatusCode::PERMISSION_DENIED;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

nghttp2_nv Nv(absl::string_view name, absl::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

absl::StatusOr<H2Target> ParseH2Target(absl::string_view target) {
  H2Target t;
  if (absl::ConsumePrefix(&target, "unix://")) {
    if (!absl::StartsWith(target, "/")) {
      return absl::InvalidArgumentError("unix:// needs an absolute path (unix:///path)");
    }
  }
  if (absl::StartsWith(target, "/") || absl::ConsumePrefix(&target, "unix:")) {
    if (target.empty() || target.size() >= sizeof(sockaddr_un::sun_path)) {
      return absl::InvalidArgumentError("bad unix socket path");
    }
    t.unix_socket = true;
    t.path = std::string(target);
    t.authority = "localhost";
    return t;
  }
  absl::ConsumePrefix(&target, "dns:///");
  t.authority = std::string(target);
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == target.size()) {
    return absl::InvalidArgumentError("expected unix:///path or host:port");
  }
  absl::string_view host = target.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError("unclosed [ in the host");
  }
  int port = 0;
  if (host.empty() || !absl::SimpleAtoi(target.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return absl::InvalidArgumentError("expected unix:///path or host:port");
  }
  t.host = std::string(host);
  t.port = std::string(target.substr(colon + 1));
  return t;
}

std::unique_ptr<const H2Target> ParsedH2TargetOrNull(absl::string_view target) {
  absl::StatusOr<H2Target> parsed = ParseH2Target(target);
  if (!parsed.ok()) return nullptr;
  return std::make_unique<const H2Target>(*std::move(parsed));
}

int MillisLeft(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
}

bool WaitFd(int fd, short events, absl::Time deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // let the next recv/send report it
  }
}

int DialH2(const H2Target& target, absl::Time deadline, std::string* error) {
  if (target.unix_socket) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, target.path.data(), target.path.size());
    return ConnectOne(AF_UNIX, reinterpret_cast<const sockaddr*>(&address), sizeof(address),
                      deadline, error);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(target.host.c_str(), target.port.c_str(), &hints, &found);
      rc != 0) {
    *error = absl::StrCat("resolve ", target.host, ": ", gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ConnectOne(a->ai_family, a->ai_addr, a->ai_addrlen, deadline, error);
  }
  freeaddrinfo(found);
  return fd;
}

bool NewH2ClientSession(nghttp2_session** session, const nghttp2_session_callbacks* callbacks,
                        void* user) {
  if (nghttp2_session_client_new(session, callbacks, user) != 0) return false;
  // Large windows, as gRPC's own client advertises, so a large reply needs no round trips.
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 8 << 20},
  };
  if (nghttp2_submit_settings(*session, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) {
    return false;
  }
  return nghttp2_session_set_local_window_size(*session, NGHTTP2_FLAG_NONE, 0, 16 << 20) == 0;
}

std::array<nghttp2_nv, 8> GrpcRequestHeaders(absl::string_view method, absl::string_view authority,
                                             absl::string_view timeout) {
  return {
      Nv(":method", "POST"),
      Nv(":scheme", "http"),
      Nv(":path", method),
      Nv(":authority", authority),
      Nv("content-type", "application/grpc"),
      Nv("te", "trailers"),
      Nv("grpc-timeout", timeout),
      Nv("user-agent", "fitledger-shim"),
  };
}

std::string GrpcTimeout(absl::Time deadline) {
  const int64_t ms = std::max<int64_t>(
      1, absl::ToInt64Milliseconds(absl::Ceil(deadline - absl::Now(), absl::Milliseconds(1))));
  if (ms <= 99'999'999) return absl::StrCat(ms, "m");
  return absl::StrCat(std::min<int64_t>(ms / 1000, 99'999'999), "S");
}

void StartGrpcFrame(size_t size, std::string* frame) {
  frame->resize(5 + size);
  (*frame)[0] = 0;
  (*frame)[1] = static_cast<char>(size >> 24);
  (*frame)[2] = static_cast<char>(size >> 16);
  (*frame)[3] = static_cast<char>(size >> 8);
  (*frame)[4] = static_cast<char>(size);
}

void FrameGrpcMessage(absl::string_view message, std::string* frame) {
  StartGrpcFrame(message.size(), frame);
  if (!message.empty()) std::memcpy(frame->data() + 5, message.data(), message.size());
}

void H2Reply::Clear() {
  body.clear();
  http_status = 0;
  grpc_status = -1;
  grpc_message.clear();
  reset_code = 0;
  too_large = false;
}

void H2Reply::OnHeader(absl::string_view name, absl::string_view value) {
  if (name == ":status") {
    if (!absl::SimpleAtoi(value, &http_status)) http_status = 0;
  } else if (name == "grpc-status") {
    if (!absl::SimpleAtoi(value, &grpc_status) || grpc_status < 0) grpc_status = 2;
  } else if (name == "grpc-message") {
    grpc_message = PercentDecode(value);
  }
}

bool H2Reply::OnData(const uint8_t* data, size_t length, size_t max_body) {
  if (too_large) return true;
  if (body.size() + length > max_body + 5) {
    too_large = true;
    body.clear();
    return false;
  }
  body.append(reinterpret_cast<const char*>(data), length);
  return true;
}

grpc::Status H2Reply::Outcome(size_t max_body, absl::string_view* message, bool* unseen) const {
  *unseen = false;
  if (too_large) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("reply larger than ", max_body, " bytes"));
  }
  if (grpc_status > 0) {
    const auto code = grpc_status <= grpc::StatusCode::UNAUTHENTICATED
                          ? static_cast<grpc::StatusCode>(grpc_status)
                          : grpc::StatusCode::UNKNOWN;
    return grpc::Status(code, grpc_message);
  }
  if (grpc_status < 0) {
    if (http_status != 0 && http_status != 200) {
      return grpc::Status(FromHttpStatus(http_status),
                          absl::StrCat("HTTP status ", http_status, " from the server"));
    }
    if (reset_code != 0) {
      *unseen = reset_code == NGHTTP2_REFUSED_STREAM;
      return grpc::Status(
          FromResetCode(reset_code),
          absl::StrCat("stream reset by the server: ", nghttp2_http2_strerror(reset_code)));
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "the reply has no grpc-status");
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(body.data());
  const size_t length = body.size() < 5 ? 0
                                        : (size_t{bytes[1]} << 24 | size_t{bytes[2]} << 16 |
                                           size_t{bytes[3]} << 8 | size_t{bytes[4]});
  if (body.size() < 5 || body.size() != 5 + length) {
    return grpc::Status(
        grpc::StatusCode::INTERNAL,
        absl::StrCat("the reply is not one gRPC message (", body.size(), " bytes)"));
  }
  if (bytes[0] != 0) return grpc::Status(grpc::StatusCode::INTERNAL, "the reply is compressed");
  *message = absl::string_view(body.data() + 5, length);
  return grpc::Status::OK;
}

}  // namespace fitledger::shim
