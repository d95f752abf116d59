#include "server/kube/api_client.h"

#include <curl/curl.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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

struct StreamState {
  const std::function<bool(absl::string_view)>* on_line;
  const std::atomic<bool>* cancel;
  size_t max_line_bytes;
  std::string buffer;
  std::string* error_body;
  CURL* curl;
  bool stopped = false;
  bool line_too_long = false;
  // GetStreamed: the body of a 200 goes to `on_bytes` as it arrives, not split into lines.
  const std::function<bool(absl::string_view)>* on_bytes = nullptr;
};

size_t StreamWrite(char* data, size_t size, size_t n, void* user) {
  auto* state = static_cast<StreamState*>(user);
  size_t len = size * n;
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
  state->buffer.append(data, len);
  size_t start = 0;
  while (true) {
    size_t nl = state->buffer.find('\n', start);
    if (nl == std::string::npos) break;
    absl::string_view line(state->buffer.data() + start, nl - start);
    start = nl + 1;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!(*state->on_line)(line)) {
      state->stopped = true;
      return 0;  // aborts the transfer
    }
  }
  state->buffer.erase(0, start);
  if (state->buffer.size() > state->max_line_bytes) {
    state->line_too_long = true;
    return 0;  // aborts the transfer
  }
  return len;
}

int StreamProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* state = static_cast<StreamState*>(user);
  if (state->cancel != nullptr && state->cancel->load()) {
    state->stopped = true;
    return 1;
  }
  return 0;
}

}  // namespace

ApiClient::ApiClient(Connection connection) : connection_(std::move(connection)) { GlobalInit(); }

ApiClient::~ApiClient() {
  MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* ApiClient::Acquire() {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void ApiClient::Release(void* handle) {
  MutexLock lock(&mu_);
  if (idle_.size() < 16) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

void* ApiClient::Configure(void* handle, const std::string& path) {
  CURL* curl = static_cast<CURL*>(handle);
  curl_easy_reset(curl);
  std::string url = connection_.server + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  // Notice a dead peer (a silent watch on a vanished host) in ~1 min, not the kernel's ~11.
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
  if (connection_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!connection_.ca_pem.empty()) SetBlob(curl, CURLOPT_CAINFO_BLOB, connection_.ca_pem);
  if (!connection_.ca_file.empty())
    curl_easy_setopt(curl, CURLOPT_CAINFO, connection_.ca_file.c_str());
  if (!connection_.client_cert_pem.empty()) {
    SetBlob(curl, CURLOPT_SSLCERT_BLOB, connection_.client_cert_pem);
    curl_easy_setopt(curl, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!connection_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, connection_.client_cert_file.c_str());
  }
  if (!connection_.client_key_pem.empty()) {
    SetBlob(curl, CURLOPT_SSLKEY_BLOB, connection_.client_key_pem);
    curl_easy_setopt(curl, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (!connection_.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, connection_.client_key_file.c_str());
  }
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, "User-Agent: fitledger");
  std::string token = connection_.token;
  if (!connection_.token_file.empty()) {
    std::ifstream in(connection_.token_file);  // re-read: service-account tokens rotate
    std::stringstream buffer;
    buffer << in.rdbuf();
    token = std::string(absl::StripAsciiWhitespace(buffer.str()));
  }
  if (!token.empty()) {
    std::string auth = "Authorization: Bearer " + token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  return headers;
}

absl::StatusOr<HttpResponse> ApiClient::Request(absl::string_view method, const std::string& path,
                                                const std::string& body, absl::Duration timeout) {
  CURL* curl = static_cast<CURL*>(Acquire());
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  auto* headers = static_cast<curl_slist*>(Configure(curl, path));
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
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendToString);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    absl::Status status = TransportError(rc, error);
    curl_easy_cleanup(curl);  // the connection may be broken: don't pool it
    return status;
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.code);
  Release(curl);
  return response;
}

absl::StatusOr<long> ApiClient::Stream(const std::string& path,
                                       const std::function<bool(absl::string_view line)>& on_line,
                                       const std::atomic<bool>* cancel, absl::Duration max_duration,
                                       size_t max_line_bytes, std::string* error_body) {
  CURL* curl = curl_easy_init();  // a watch holds its connection: not pooled
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  auto* headers = static_cast<curl_slist*>(Configure(curl, path));
  StreamState state{&on_line, cancel, max_line_bytes, {}, error_body, curl};
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(max_duration)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, StreamWrite);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, StreamProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &state);
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (state.line_too_long) {
    return absl::ResourceExhaustedError(absl::StrCat("kubernetes API: a watch line exceeds ",
                                                     max_line_bytes, " bytes; stream aborted"));
  }
  if (state.stopped) return code;
  // A stream that ends (even by timeout) after a 200 is a normal end of a watch.
  if (rc != CURLE_OK && !(code == 200 && rc == CURLE_OPERATION_TIMEDOUT)) {
    if (code == 200 && rc != CURLE_COULDNT_CONNECT) return code;  // dropped mid-stream: resume
    return TransportError(rc, error);
  }
  return code;
}

absl::StatusOr<long> ApiClient::GetStreamed(const std::string& path,
                                            const std::function<bool(absl::string_view)>& on_bytes,
                                            const std::atomic<bool>* cancel, absl::Duration timeout,
                                            std::string* error_body) {
  CURL* curl = static_cast<CURL*>(Acquire());
  if (curl == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  auto* headers = static_cast<curl_slist*>(Configure(curl, path));
  const std::function<bool(absl::string_view)> no_lines;
  StreamState state{&no_lines, cancel, 0, {}, error_body, curl};
  state.on_bytes = &on_bytes;
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, StreamWrite);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, StreamProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &state);
  CURLcode rc = curl_easy_perform(curl);
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_slist_free_all(headers);
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
  return code;
}

}  // namespace fitledger::kube
