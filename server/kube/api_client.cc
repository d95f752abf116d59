#include "server/kube/api_client.h"

#include <curl/curl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"

namespace fitledger::kube {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t AppendToString(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

absl::Status TransportError(CURLcode code, const char* detail) {
  std::string message = absl::StrCat("kubernetes API: ", curl_easy_strerror(code));
  if (detail != nullptr && *detail != '\0') absl::StrAppend(&message, ": ", detail);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
      return absl::UnavailableError(message);  // nothing was sent
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(message);
    default:
      return absl::UnknownError(message);  // the request may have been sent
  }
}

void SetBlob(CURL* curl, CURLoption option, const std::string& pem) {
  curl_blob blob;
  blob.data = const_cast<char*>(pem.data());
  blob.len = pem.size();
  blob.flags = CURL_BLOB_COPY;
  curl_easy_setopt(curl, option, &blob);
}

}  // namespace

// The sockets of the running Streams and the cancel flag each runs with. libcurl opens and closes
// a Stream's sockets through the callbacks below, which keep this set; InterruptStreams shuts the
// matching ones down, so the blocked transfer wakes at once. A socket leaves the set under the
// lock before it is closed, so a shutdown never reaches a descriptor the process reused.
class ApiClient::StreamSockets {
 public:
  struct Opener {
    StreamSockets* sockets;
    const std::atomic<bool>* cancel;
  };
  void Add(int fd, const std::atomic<bool>* cancel) {
    MutexLock lock(&mu_);
    open_.emplace_back(fd, cancel);
  }
  void Close(int fd) {
    {
      MutexLock lock(&mu_);
      for (size_t i = 0; i < open_.size(); ++i) {
        if (open_[i].first == fd) {
          open_[i] = open_.back();
          open_.pop_back();
          break;
        }
      }
    }
    close(fd);
  }
  void Interrupt(const std::atomic<bool>* cancel) {
    MutexLock lock(&mu_);
    for (const auto& [fd, c] : open_) {
      if (c == cancel) shutdown(fd, SHUT_RDWR);
    }
  }
  // CURLOPT_OPENSOCKETFUNCTION with an Opener; CURLOPT_CLOSESOCKETFUNCTION with this.
  static curl_socket_t OpenSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
    if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
    auto* opener = static_cast<Opener*>(user);
    int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd < 0) return CURL_SOCKET_BAD;
    opener->sockets->Add(fd, opener->cancel);
    return fd;
  }
  static int CloseSocket(void* user, curl_socket_t fd) {
    static_cast<StreamSockets*>(user)->Close(fd);
    return 0;
  }

 private:
  Mutex mu_;
  std::vector<std::pair<int, const std::atomic<bool>*>> open_ ABSL_GUARDED_BY(mu_);
};

namespace {

// A gzip body of one or more members, decoded as it arrives. kube-apiserver (1.37,
// WatchListCompression) compresses a WatchList answer when the client accepts gzip, and closes
// its gzip writer at each flush, so the body is a series of gzip members
// (apiserver/pkg/endpoints/handlers/watch.go, perFlushGzipWriter); RFC 1952 allows that, Go's
// gzip.Reader reads it, and libcurl (7.88) fails at the second member with CURLE_WRITE_ERROR.
class GzipMembers {
 public:
  GzipMembers() {
    // 16 + MAX_WBITS: a gzip header and trailer, not zlib's.
    ok_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK;
  }
  ~GzipMembers() {
    if (ok_) inflateEnd(&z_);
  }
  GzipMembers(const GzipMembers&) = delete;
  GzipMembers& operator=(const GzipMembers&) = delete;

  // Decodes `len` bytes, handing what they decode to on_bytes in pieces of up to kOut bytes.
  // Returns false, with the reason in *error, on a damaged body or when on_bytes returns false
  // (*error empty).
  template <typename F>
  bool Feed(const char* data, size_t len, F&& on_bytes, std::string* error) {
    if (!ok_) {
      *error = "gzip: cannot initialize zlib";
      return false;
    }
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z_.avail_in = static_cast<uInt>(len);
    out_.resize(kOut);
    for (;;) {
      if (member_ended_) {
        if (z_.avail_in == 0) return true;
        inflateReset(&z_);  // the next member
        member_ended_ = false;
      }
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = kOut;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      const size_t produced = kOut - z_.avail_out;
      if (produced > 0 && !on_bytes(out_.data(), produced)) return false;
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
        continue;
      }
      if (rc == Z_BUF_ERROR || (rc == Z_OK && z_.avail_in == 0 && z_.avail_out != 0)) {
        return true;  // all input used: the rest of the member comes in the next bytes
      }
      if (rc != Z_OK) {
        *error = absl::StrCat("gzip: ", z_.msg != nullptr ? z_.msg : "damaged data");
        return false;
      }
    }
  }

 private:
  static constexpr uInt kOut = 256 << 10;
  z_stream z_{};
  bool ok_ = false;
  bool member_ended_ = false;
  std::string out_;
};

struct StreamState {
  const std::function<bool(absl::string_view)>* on_line;
  const std::atomic<bool>* cancel;
  size_t max_line_bytes;
  std::string buffer;
  std::string* error_body;
  CURL* curl;
  bool stopped = false;
  bool line_too_long = false;
  // The exec plugin's client-certificate generation: the stream ends when it moves on.
  const ExecCredentialSource* exec = nullptr;
  uint64_t started_generation = 0;
  // GetStreamed: the body of a 200 goes to `on_bytes` as it arrives, not split into lines.
  const std::function<bool(absl::string_view)>* on_bytes = nullptr;
  std::string padded = {};  // a chunk's last line, with kStreamLinePadding bytes after it
  // Stream: the body's format, known at its first bytes (by the response's Content-Type).
  bool format_known = false;
  bool frames = false;  // StreamFormat::kProtobufFrames
  StreamFormat* format = nullptr;
  // Stream: the body's Content-Encoding, known at its first bytes. libcurl's decoding is off
  // for streams: a WatchList answer is gzip as one member per flush (see GzipMembers). (A
  // LIST's gzip is one member: GetStreamed leaves it to libcurl.)
  bool decode_here = false;
  bool encoding_known = false;
  std::unique_ptr<GzipMembers> gzip = nullptr;
  std::string encoding_error = {};  // why the body could not be decoded
};

// A protobuf watch body (see StreamFormat): each frame's bytes go to `on_line`. A frame cut by
// the chunk's end is completed in state->buffer.
size_t FrameWrite(StreamState* state, const char* data, size_t len) {
  auto length_of = [](const char* p) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return (size_t{u[0]} << 24) | (size_t{u[1]} << 16) | (size_t{u[2]} << 8) | size_t{u[3]};
  };
  auto emit = [state](absl::string_view frame) {
    if (frame.empty() || (*state->on_line)(frame)) return true;
    state->stopped = true;
    return false;
  };
  auto too_long = [state](size_t length) {
    if (length <= state->max_line_bytes) return false;
    state->line_too_long = true;
    return true;
  };
  size_t pos = 0;
  std::string& pending = state->buffer;
  if (!pending.empty()) {
    if (pending.size() < 4) {
      const size_t take = std::min(4 - pending.size(), len);
      pending.append(data, take);
      pos = take;
      if (pending.size() < 4) return len;
    }
    const size_t length = length_of(pending.data());
    if (too_long(length)) return 0;  // aborts the transfer
    const size_t take = std::min(4 + length - pending.size(), len - pos);
    pending.append(data + pos, take);
    pos += take;
    if (pending.size() < 4 + length) return len;
    if (!emit(absl::string_view(pending).substr(4))) return 0;
    pending.clear();
  }
  while (pos < len) {
    if (len - pos < 4) {
      pending.assign(data + pos, len - pos);
      break;
    }
    const size_t length = length_of(data + pos);
    if (too_long(length)) return 0;
    if (len - pos - 4 < length) {
      pending.assign(data + pos, len - pos);
      break;
    }
    if (!emit(absl::string_view(data + pos + 4, length))) return 0;
    pos += 4 + length;
  }
  return len;
}

// The decoded body's bytes: the body of a 200 split into lines or frames (or handed to
// on_bytes), any other status's kept as error_body. Returns len, or 0 to abort the transfer.
size_t ConsumeBody(StreamState* state, char* data, size_t len) {
  long code = 0;
  curl_easy_getinfo(state->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) {
    if (state->error_body->size() < (1 << 20)) state->error_body->append(data, len);
    return len;
  }
  if (state->on_bytes != nullptr) {
    if (!(*state->on_bytes)(absl::string_view(data, len))) {
      state->stopped = true;
      return 0;  // aborts the transfer
    }
    return len;
  }
  if (!state->format_known) {
    state->format_known = true;
    char* type = nullptr;
    curl_easy_getinfo(state->curl, CURLINFO_CONTENT_TYPE, &type);
    state->frames = type != nullptr && absl::StartsWithIgnoreCase(type, kProtobufMediaType);
    if (state->format != nullptr) {
      *state->format = state->frames ? StreamFormat::kProtobufFrames : StreamFormat::kJsonLines;
    }
  }
  if (state->frames) return FrameWrite(state, data, len);
  // Complete lines are handed on from libcurl's buffer when kStreamLinePadding bytes of it follow
  // them (all but the chunk's last line, with libcurl's 256 KiB buffer); a line cut by the
  // chunk's end (into state->buffer, completed by the next chunk) and a chunk's last line (into
  // state->padded) are copied, with the padding after them.
  auto emit = [state](absl::string_view line) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty() || (*state->on_line)(line)) return true;
    state->stopped = true;
    return false;
  };
  size_t pos = 0;
  if (!state->buffer.empty()) {
    const void* nl = memchr(data, '\n', len);
    if (nl == nullptr) {
      pos = len;
      state->buffer.append(data, len);
    } else {
      pos = static_cast<const char*>(nl) - data + 1;
      state->buffer.append(data, pos - 1);
      const size_t size = state->buffer.size();
      state->buffer.append(kStreamLinePadding, '\0');
      if (!emit(absl::string_view(state->buffer.data(), size))) return 0;  // aborts the transfer
      state->buffer.clear();
    }
  }
  while (pos < len) {
    const void* nl = memchr(data + pos, '\n', len - pos);
    if (nl == nullptr) {
      state->buffer.assign(data + pos, len - pos);
      break;
    }
    const size_t end = static_cast<const char*>(nl) - data;
    absl::string_view line(data + pos, end - pos);
    if (len - end < kStreamLinePadding) {
      state->padded.assign(line.data(), line.size());
      state->padded.append(kStreamLinePadding, '\0');
      line = absl::string_view(state->padded.data(), line.size());
    }
    if (!emit(line)) return 0;  // aborts the transfer
    pos = end + 1;
  }
  if (state->buffer.size() > state->max_line_bytes) {
    state->line_too_long = true;
    return 0;  // aborts the transfer
  }
  return len;
}

size_t StreamWrite(char* data, size_t size, size_t n, void* user) {
  auto* state = static_cast<StreamState*>(user);
  const size_t len = size * n;
  if (state->decode_here && !state->encoding_known) {
    state->encoding_known = true;
    curl_header* header = nullptr;
    std::string encoding;
    if (curl_easy_header(state->curl, "Content-Encoding", 0, CURLH_HEADER, -1, &header) ==
        CURLHE_OK) {
      encoding = absl::AsciiStrToLower(absl::StripAsciiWhitespace(header->value));
    }
    if (encoding == "gzip") {
      state->gzip = std::make_unique<GzipMembers>();
    } else if (!encoding.empty() && encoding != "identity") {
      state->encoding_error = absl::StrCat("unsupported Content-Encoding \"", encoding, "\"");
      return 0;  // aborts the transfer
    }
  }
  if (state->gzip == nullptr) return ConsumeBody(state, data, len);
  const bool fed = state->gzip->Feed(
      data, len,
      [state](char* bytes, size_t count) { return ConsumeBody(state, bytes, count) == count; },
      &state->encoding_error);
  return fed ? len : 0;
}

int StreamProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* state = static_cast<StreamState*>(user);
  if (state->cancel != nullptr && state->cancel->load()) {
    state->stopped = true;
    return 1;
  }
  if (state->exec != nullptr && state->exec->cert_generation() != state->started_generation) {
    state->stopped = true;  // reconnect with the new client certificate
    return 1;
  }
  return 0;
}

// Runs a transfer whose body goes to `state` (StreamWrite, StreamProgress) for at most
// `timeout`; `error` (CURL_ERROR_SIZE bytes) gets curl's message, `*code` the HTTP status. The
// handle keeps no pointer into this frame afterwards (so it may go back to the pool).
CURLcode PerformStreamed(CURL* curl, StreamState* state, absl::Duration timeout, char* error,
                         long* code) {
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, StreamWrite);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, state);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, StreamProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, state);
  // Reads of up to 256 KiB rather than libcurl's 16: a state of 150,000 pods (~600 MB) arrives
  // in a quarter as many reads and write callbacks, and fewer lines are cut between two of them.
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 256L << 10);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, code);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 1L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, nullptr);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, nullptr);
  return rc;
}

// scheme://authority[/prefix] split for tls-server-name. IPv6 hosts keep their brackets.
struct ServerUrl {
  std::string scheme;
  std::string host;
  std::string port;
  std::string prefix;
};

ServerUrl SplitServer(const std::string& server) {
  ServerUrl u;
  size_t sep = server.find("://");
  u.scheme = server.substr(0, sep);
  std::string rest = server.substr(sep + 3);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) u.prefix = rest.substr(slash);
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  } else {
    u.host = authority;
  }
  if (u.port.empty()) u.port = u.scheme == "https" ? "443" : "80";
  return u;
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);  // re-read: service-account and other file tokens rotate
  if (!in)
    return absl::UnavailableError(absl::StrCat("kubernetes API: cannot read tokenFile ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(buffer.str()));
}

}  // namespace

ApiClient::ApiClient(Connection connection, ApiClientOptions options)
    : connection_(std::move(connection)),
      exec_(connection_.exec.has_value()
                ? std::make_unique<ExecCredentialSource>(*connection_.exec, options.exec)
                : nullptr),
      max_idle_connections_(options.max_idle_connections),
      stream_sockets_(std::make_unique<StreamSockets>()) {
  GlobalInit();
  base_url_ = connection_.server;
  if (!connection_.tls_server_name.empty() && absl::StartsWith(connection_.server, "https://")) {
    // libcurl has no option to verify a name other than the URL's host, so the URL carries
    // tls-server-name (SNI and certificate check, as Go's tls.Config.ServerName) and CONNECT_TO
    // sends the connection to the server's real address; the Host header stays the server's.
    ServerUrl u = SplitServer(connection_.server);
    std::string name = connection_.tls_server_name;
    if (name.find(':') != std::string::npos && name[0] != '[') name = "[" + name + "]";
    base_url_ = absl::StrCat("https://", name, ":", u.port, u.prefix);
    connect_to_ = absl::StrCat(name, ":", u.port, ":", u.host, ":", u.port);
    std::string authority = connection_.server.substr(8);
    authority = authority.substr(0, authority.find('/'));
    host_header_ = absl::StrCat("Host: ", authority);
  }
  proxy_ = connection_.proxy_url;
  if (absl::StartsWith(absl::AsciiStrToLower(proxy_), "socks5://")) {
    // Go's SOCKS5 dialer (net/http socks_bundle.go) hands the host name to the proxy to resolve:
    // that is libcurl's socks5h.
    proxy_ = absl::StrCat("socks5h://", proxy_.substr(9));
  }
}

std::string UrlEncode(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  return out;
}

void ApiClient::InterruptStreams(const std::atomic<bool>* cancel) {
  stream_sockets_->Interrupt(cancel);
}

ApiClient::~ApiClient() {
  MutexLock lock(&mu_);
  for (auto& [h, generation] : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* ApiClient::Acquire() {
  const uint64_t generation = exec_ != nullptr ? exec_->cert_generation() : 0;
  std::vector<void*> stale;
  void* found = nullptr;
  {
    MutexLock lock(&mu_);
    while (!idle_.empty()) {
      auto [h, g] = idle_.back();
      idle_.pop_back();
      if (g == generation) {
        found = h;
        break;
      }
      stale.push_back(h);  // connected with a client certificate the plugin has replaced
    }
  }
  for (void* h : stale) curl_easy_cleanup(static_cast<CURL*>(h));
  return found != nullptr ? found : curl_easy_init();
}

void ApiClient::Release(void* handle) {
  const uint64_t generation = exec_ != nullptr ? exec_->cert_generation() : 0;
  {
    MutexLock lock(&mu_);
    if (idle_.size() < max_idle_connections_) {
      idle_.emplace_back(handle, generation);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

absl::StatusOr<ApiClient::Auth> ApiClient::CurrentAuth() {
  Auth auth;
  if (exec_ != nullptr) {
    absl::StatusOr<ExecCredential> cred = exec_->Get(absl::Now());
    if (!cred.ok()) {
      return absl::UnavailableError(
          absl::StrCat("kubernetes API credentials: ", cred.status().message()));
    }
    auth.token = std::move(cred->token);
    auth.client_cert_pem = std::move(cred->client_cert_pem);
    auth.client_key_pem = std::move(cred->client_key_pem);
    auth.exec_generation = cred->generation;
    return auth;
  }
  auth.token = connection_.token;
  if (auth.token.empty() && !connection_.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadToken(connection_.token_file);
    if (!token.ok()) return token.status();
    auth.token = *std::move(token);
  }
  return auth;
}

bool ApiClient::RefreshAfterUnauthorized(const Auth& used) {
  if (exec_ == nullptr || used.exec_generation == 0) return false;
  absl::StatusOr<ExecCredential> cred =
      exec_->RefreshAfterUnauthorized(used.exec_generation, absl::Now());
  if (!cred.ok()) {
    LogWarn("refreshing the exec plugin's credential after a 401 failed",
            {{"error", std::string(cred.status().message())}});
    return false;
  }
  return cred->generation != used.exec_generation;
}

std::pair<void*, void*> ApiClient::Configure(void* handle, const std::string& path,
                                             const Auth& auth, absl::string_view accept) {
  CURL* curl = static_cast<CURL*>(handle);
  curl_easy_reset(curl);
  std::string url = base_url_ + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  // Notice a dead peer (a silent watch on a vanished host) in ~1 min, not the kernel's ~11.
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 10L);
  if (!connection_.disable_compression) curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  if (!proxy_.empty()) {
    curl_easy_setopt(curl, CURLOPT_PROXY, proxy_.c_str());
    // An explicit proxy-url is used for every host, whatever $no_proxy says (http.ProxyURL).
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "");
  }
  curl_slist* connect_to = nullptr;
  if (!connect_to_.empty()) {
    connect_to = curl_slist_append(connect_to, connect_to_.c_str());
    curl_easy_setopt(curl, CURLOPT_CONNECT_TO, connect_to);
  }
  if (connection_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  // Data wins over a file (clientcmd: "certificate-authority-data will override").
  if (!connection_.ca_pem.empty()) {
    SetBlob(curl, CURLOPT_CAINFO_BLOB, connection_.ca_pem);
  } else if (!connection_.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, connection_.ca_file.c_str());
  }
  const std::string& cert_pem =
      auth.client_cert_pem.empty() ? connection_.client_cert_pem : auth.client_cert_pem;
  const std::string& key_pem =
      auth.client_key_pem.empty() ? connection_.client_key_pem : auth.client_key_pem;
  if (!cert_pem.empty()) {
    SetBlob(curl, CURLOPT_SSLCERT_BLOB, cert_pem);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!connection_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, connection_.client_cert_file.c_str());
  }
  if (!key_pem.empty()) {
    SetBlob(curl, CURLOPT_SSLKEY_BLOB, key_pem);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!connection_.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, connection_.client_key_file.c_str());
  }
  curl_slist* headers = nullptr;
  const std::string accept_header = absl::StrCat("Accept: ", accept);
  headers = curl_slist_append(headers, accept_header.c_str());
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "User-Agent: fitledger");
  if (!host_header_.empty()) headers = curl_slist_append(headers, host_header_.c_str());
  if (!auth.token.empty()) {
    std::string header = "Authorization: Bearer " + auth.token;
    headers = curl_slist_append(headers, header.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  return {headers, connect_to};
}

absl::StatusOr<HttpResponse> ApiClient::Request(absl::string_view method, const std::string& path,
                                                const std::string& body, absl::Duration timeout) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Auth> auth = CurrentAuth();
    if (!auth.ok()) return auth.status();
    CURL* curl = static_cast<CURL*>(Acquire());
    if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
    auto [headers, connect_to] = Configure(curl, path, *auth);
    HttpResponse response;
    char error[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    std::string method_str(method);
    if (method_str == "POST") {
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    } else if (method_str != "GET") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method_str.c_str());
      if (!body.empty()) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
      }
    }
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(timeout)));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendToString);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(static_cast<curl_slist*>(headers));
    curl_slist_free_all(static_cast<curl_slist*>(connect_to));
    if (rc != CURLE_OK) {
      absl::Status status = TransportError(rc, error);
      curl_easy_cleanup(curl);  // the connection may be broken: don't pool it
      return status;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.code);
    Release(curl);
    // client-go's exec roundTripper refreshes the credential on a 401; nothing was done with the
    // request, so it is sent once more with the new one.
    if (response.code == 401 && attempt == 0 && RefreshAfterUnauthorized(*auth)) continue;
    return response;
  }
}

absl::StatusOr<long> ApiClient::Stream(const std::string& path,
                                       const std::function<bool(absl::string_view line)>& on_line,
                                       const std::atomic<bool>* cancel, absl::Duration max_duration,
                                       size_t max_line_bytes, std::string* error_body,
                                       absl::string_view accept, StreamFormat* format) {
  if (format != nullptr) *format = StreamFormat::kJsonLines;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Auth> auth = CurrentAuth();
    if (!auth.ok()) return auth.status();
    CURL* curl = curl_easy_init();  // a watch holds its connection: not pooled
    if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
    auto [headers, connect_to] = Configure(curl, path, *auth, accept);
    // The body is decoded here (StreamWrite), gzip being the one encoding asked for.
    curl_easy_setopt(curl, CURLOPT_HTTP_CONTENT_DECODING, 0L);
    if (!connection_.disable_compression) curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "gzip");
    StreamState state{&on_line, cancel, max_line_bytes, {}, error_body, curl};
    state.decode_here = true;
    state.format = format;
    if (exec_ != nullptr) {
      state.exec = exec_.get();
      state.started_generation = exec_->cert_generation();
    }
    char error[CURL_ERROR_SIZE] = {0};
    StreamSockets::Opener opener{stream_sockets_.get(), cancel};
    if (cancel != nullptr) {
      curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, &StreamSockets::OpenSocket);
      curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &opener);
      curl_easy_setopt(curl, CURLOPT_CLOSESOCKETFUNCTION, &StreamSockets::CloseSocket);
      curl_easy_setopt(curl, CURLOPT_CLOSESOCKETDATA, stream_sockets_.get());
    }
    long code = 0;
    CURLcode rc = PerformStreamed(curl, &state, max_duration, error, &code);
    curl_slist_free_all(static_cast<curl_slist*>(headers));
    curl_slist_free_all(static_cast<curl_slist*>(connect_to));
    curl_easy_cleanup(curl);
    if (state.line_too_long) {
      return absl::ResourceExhaustedError(absl::StrCat("kubernetes API: a watch line exceeds ",
                                                       max_line_bytes, " bytes; stream aborted"));
    }
    if (!state.encoding_error.empty()) {
      return absl::UnavailableError(
          absl::StrCat("kubernetes API: a stream's body: ", state.encoding_error));
    }
    // Cancelled (InterruptStreams may have cut the connection before the progress callback saw
    // the flag): the caller asked for the end, whatever the transfer reported.
    if (state.stopped || (cancel != nullptr && cancel->load())) return code;
    // A stream that ends (even by timeout) after a 200 is a normal end of a watch.
    if (rc != CURLE_OK && !(code == 200 && rc == CURLE_OPERATION_TIMEDOUT)) {
      if (code == 200 && rc != CURLE_COULDNT_CONNECT) {  // dropped mid-stream: resume
        LogWarn("kubernetes API: a stream broke",
                {{"path", path}, {"error", std::string(TransportError(rc, error).message())}});
        return code;
      }
      return TransportError(rc, error);
    }
    if (code == 401 && attempt == 0 && RefreshAfterUnauthorized(*auth)) {
      error_body->clear();
      continue;
    }
    return code;
  }
}

absl::StatusOr<long> ApiClient::GetStreamed(const std::string& path,
                                            const std::function<bool(absl::string_view)>& on_bytes,
                                            const std::atomic<bool>* cancel, absl::Duration timeout,
                                            std::string* error_body) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<Auth> auth = CurrentAuth();
    if (!auth.ok()) return auth.status();
    CURL* curl = static_cast<CURL*>(Acquire());
    if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
    auto [headers, connect_to] = Configure(curl, path, *auth);
    const std::function<bool(absl::string_view)> no_lines;
    StreamState state{&no_lines, cancel, 0, {}, error_body, curl};
    state.on_bytes = &on_bytes;
    char error[CURL_ERROR_SIZE] = {0};
    // No socket callbacks here (InterruptStreams is for Streams): this handle, and the
    // connection it opens, go back to the pool, where an interrupt of `cancel` would cut another
    // request's connection (and libcurl would send that request again). The progress callback
    // still ends this transfer within about a second of *cancel.
    long code = 0;
    CURLcode rc = PerformStreamed(curl, &state, timeout, error, &code);
    curl_slist_free_all(static_cast<curl_slist*>(headers));
    curl_slist_free_all(static_cast<curl_slist*>(connect_to));
    if (state.stopped) {
      curl_easy_cleanup(curl);  // aborted mid-body: don't pool it
      return absl::CancelledError("kubernetes API: the response was abandoned");
    }
    if (rc != CURLE_OK) {
      absl::Status status = TransportError(rc, error);
      curl_easy_cleanup(curl);
      return status;
    }
    Release(curl);
    // As Request: a 401 refreshes an exec credential and the read is made once more.
    if (code == 401 && attempt == 0 && RefreshAfterUnauthorized(*auth)) {
      error_body->clear();
      continue;
    }
    return code;
  }
}

}  // namespace fitledger::kube
