#include "sim/server.h"

#include <sys/socket.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file.h"
#include "common/json_access.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "sim/field_validation.h"
#include "sim/kinds.h"
#include "sim/objects.h"
#include "sim/protobuf.h"
#include "sim/status.h"
#include "sim/tables.h"
#include "sim/watch_stream.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

// Not "application/json" exactly: cpp-httplib would gzip that when the client accepts gzip,
// and its streaming compressor holds watch events back.
constexpr size_t kWatchBatch = 1000;

// A Status as the answer: JSON, or Kubernetes' protobuf (`protobuf`: a watch of pods or nodes
// whose Accept prefers it), as kube-apiserver writes an error in the encoding the request
// negotiated (apiserver pkg/endpoints/handlers/responsewriters/writers.go ErrorNegotiated ->
// WriteObjectNegotiated).
void SetStatusContent(httplib::Response& res, int code, const json& status, bool protobuf) {
  res.status = code;
  if (protobuf) {
    absl::StatusOr<std::string> envelope = ProtobufEnvelope(status);
    if (envelope.ok()) return res.set_content(*envelope, kProtobufMediaType);
  }
  res.set_content(Dump(status), kJsonContentType);
}

void SendStatus(httplib::Response& res, int code, absl::string_view reason,
                absl::string_view message, bool protobuf = false) {
  SetStatusContent(res, code, StatusObject(code, reason, message), protobuf);
}

void SendError(httplib::Response& res, const absl::Status& status) {
  const HttpError error = HttpErrorOf(status);
  SendStatus(res, error.code, error.reason, status.message());
}

// One field error of ValidateListOptions (apimachinery pkg/apis/meta/internalversion/validation):
// field.Forbidden or field.NotSupported.
struct FieldError {
  std::string field;
  std::string cause;   // "FieldValueForbidden" or "FieldValueNotSupported"
  std::string detail;  // "Forbidden: ..." or "Unsupported value: ..."
};

FieldError Forbidden(const std::string& field, const std::string& why) {
  return {field, "FieldValueForbidden", "Forbidden: " + why};
}

// 422 Invalid for ListOptions, as errors.NewInvalid words it: `ListOptions.meta.k8s.io "" is
// invalid: <field>: <detail>` (several errors as "[a, b]").
void SendInvalidListOptions(httplib::Response& res, const std::vector<FieldError>& errors,
                            bool protobuf) {
  std::vector<std::string> parts;
  json causes = json::array();
  for (const FieldError& e : errors) {
    parts.push_back(absl::StrCat(e.field, ": ", e.detail));
    causes.push_back({{"reason", e.cause}, {"message", e.detail}, {"field", e.field}});
  }
  std::string aggregate =
      parts.size() == 1 ? parts[0] : absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  json status = StatusObject(422, "Invalid",
                             absl::StrCat("ListOptions.meta.k8s.io \"\" is invalid: ", aggregate));
  status["details"] = {{"group", "meta.k8s.io"}, {"kind", "ListOptions"}, {"causes", causes}};
  SetStatusContent(res, 422, status, protobuf);
}

// The "too large resource version" error (apiserver pkg/storage/errors.go
// NewTooLargeResourceVersionError): 504 Timeout with cause ResourceVersionTooLarge.
json TooLargeResourceVersion(uint64_t wanted, uint64_t current) {
  json status = StatusObject(
      504, "Timeout",
      absl::StrCat("Timeout: Too large resource version: ", wanted, ", current: ", current));
  status["details"] = {{"causes", json::array({{{"reason", "ResourceVersionTooLarge"},
                                                {"message", "Too large resource version"}}})},
                       {"retryAfterSeconds", 1}};
  return status;
}

// How long a read asking for a resourceVersion newer than the store's waits for it, as the watch
// cache does (cacher/watch_cache.go, blockTimeout) before answering "too large".
constexpr absl::Duration kWaitForResourceVersion = absl::Seconds(3);

void SendJson(httplib::Response& res, int code, const std::string& body) {
  res.status = code;
  res.set_content(body, kJsonContentType);
}

void SendOk(httplib::Response& res) { SendJson(res, 200, "{\"ok\":true}"); }

std::string ListJson(Kind kind, const ListResult& list) {
  std::string out = absl::StrCat(
      "{\"kind\":\"", InfoOf(kind).list_kind, "\",\"apiVersion\":\"", InfoOf(kind).group_version,
      "\",\"metadata\":{\"resourceVersion\":\"", list.resource_version, "\"");
  if (!list.continue_token.empty()) {
    absl::StrAppend(&out, ",\"continue\":\"", list.continue_token, "\"");
    if (list.remaining_items.has_value()) {
      absl::StrAppend(&out, ",\"remainingItemCount\":", *list.remaining_items);
    }
  }
  size_t total = out.size() + 16;
  for (const ObjectPtr& item : list.items) total += item->json.size() + 1;
  out.reserve(total);
  out.append("},\"items\":[");
  for (size_t i = 0; i < list.items.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(list.items[i]->json);
  }
  out.append("]}");
  return out;
}

// Parses a JSON request body into an object; an error Status otherwise.
absl::StatusOr<json> ParseBody(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the request body is not a JSON object");
  }
  return j;
}

// `on`: true/false, defaulting to true when absent.
absl::StatusOr<bool> OnOff(const std::string& body) {
  if (body.empty()) return true;
  auto j = ParseBody(body);
  if (!j.ok()) return j.status();
  auto it = j->find("on");
  if (it == j->end()) return true;
  if (!it->is_boolean()) return absl::InvalidArgumentError("\"on\" must be true or false");
  return it->get<bool>();
}

// The backlog Go's net package listens with on Linux (net/sock_linux.go, maxListenerBacklog):
// net.core.somaxconn, or SOMAXCONN when it cannot be read.
int ListenBacklog() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int n = 0;
  if (!(in >> n) || n <= 0) return SOMAXCONN;
  return n;
}

// A watch's ERROR event carrying `status`, in the stream's encoding.
std::string WatchErrorEvent(bool protobuf, const json& status) {
  if (!protobuf) return absl::StrCat("{\"type\":\"ERROR\",\"object\":", Dump(status), "}\n");
  std::string frame;
  AppendWatchFrame("ERROR", ProtobufEnvelope(status).value_or(""), &frame);
  return frame;
}

// Whether an Accept-Encoding names gzip, by kube-apiserver's rule
// (apiserver/pkg/endpoints/handlers/responsewriters/compression.go ContentEncodingSupported):
// one of its comma-separated tokens, trimmed, is exactly "gzip" ("gzip;q=1" is not).
bool AcceptsGzipToken(absl::string_view accept_encoding) {
  for (absl::string_view token : absl::StrSplit(accept_encoding, ',')) {
    if (absl::StripAsciiWhitespace(token) == "gzip") return true;
  }
  return false;
}

// `bytes` as one gzip member at level 1 (responsewriters gzipContentEncodingLevel).
std::string GzipMemberOf(absl::string_view bytes) {
  z_stream z{};
  std::string out;
  if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return out;
  out.resize(deflateBound(&z, bytes.size()) + 32);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(rc == Z_STREAM_END ? out.size() - z.avail_out : 0);
  deflateEnd(&z);
  return out;
}

}  // namespace

struct SimServer::WatchState : WatchStream<ObjectPtr, ObjectFilter> {};

SimServer::SimServer(SimConfig config, ClusterStore* store)
    : config_(std::move(config)),
      store_(store),
      objects_(store),
      watch_list_(config_.watch_list),
      watch_lag_(config_.watch_lag),
      token_(config_.token) {}

SimServer::~SimServer() { Stop(); }

std::string SimServer::url() const {
  return absl::StrCat(config_.tls.enabled() ? "https" : "http", "://",
                      absl::StrContains(host_, ':') ? absl::StrCat("[", host_, "]") : host_, ":",
                      port_);
}

absl::Status SimServer::Start(const std::string& host, int port) {
  {
    MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("already started");
    started_ = true;
  }
  if (config_.tls.enabled()) {
    auto ssl = std::make_unique<httplib::SSLServer>(
        config_.tls.cert_file.c_str(), config_.tls.key_file.c_str(),
        config_.tls.client_ca_file.empty() ? nullptr : config_.tls.client_ca_file.c_str());
    if (!ssl->is_valid()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot load TLS files (certFile ", config_.tls.cert_file, ", keyFile ",
                       config_.tls.key_file, ", clientCAFile ", config_.tls.client_ca_file, ")"));
    }
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  const int threads = config_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_max_count(100000);
  http_->set_keep_alive_timeout(2);
  http_->set_payload_max_length(config_.max_body_bytes);
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
  http_->Get(".*", handler);
  http_->Post(".*", handler);
  http_->Put(".*", handler);
  http_->Patch(".*", handler);
  http_->Delete(".*", handler);
  httplib::Server::HandlerWithResponse error_handler = [](const httplib::Request&,
                                                          httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = res.status == 413 ? "the request body is too large"
                          : res.status == 404
                              ? "the server could not find the requested resource"
                              : absl::StrCat("request failed with HTTP ", res.status);
    SendStatus(res, res.status, ReasonForCode(res.status), message);
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(std::move(error_handler));
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendStatus(res, 500, "InternalError", absl::StrCat("fitledger-sim: ", what));
      });
  host_ = host;
  // httplib's own options on the listening socket; its descriptor is kept for the backlog below.
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  if (port == 0) {
    port_ = http_->bind_to_any_port(host);
    if (port_ <= 0) return absl::UnavailableError(absl::StrCat("cannot bind ", host, ":0"));
  } else {
    if (!http_->bind_to_port(host, port)) {
      return absl::UnavailableError(absl::StrCat("cannot bind ", host, ":", port));
    }
    port_ = port;
  }
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed in Debian's compiled
  // library): a burst of new connections (a client opening one per concurrent bind) overflowed
  // it, and each dropped SYN cost its client a second. The API server listens as every Go
  // program does, with the kernel's limit (net/sock_linux.go, maxListenerBacklog:
  // /proc/sys/net/core/somaxconn, else SOMAXCONN). On Linux a second listen() on a listening
  // socket sets its backlog.
  if (::listen(listen_fd_, ListenBacklog()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port_));
  }
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  kubelet_thread_ = std::thread([this] { KubeletLoop(); });
  controllers_ = std::make_unique<Controllers>(
      store_,
      [this](const std::string& ns, const std::string& name) { OnPodTerminating(ns, name); });
  controllers_->Start();
  return absl::OkStatus();
}

void SimServer::Stop() {
  {
    MutexLock lock(&mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
  }
  stopping_ = true;
  DropWatches();
  stop_signal_.Notify();
  kubelet_signal_.Notify();
  if (http_) http_->stop();
  if (listener_.joinable()) listener_.join();
  if (kubelet_thread_.joinable()) kubelet_thread_.join();
  if (controllers_) controllers_->Stop();
}

void SimServer::DropWatches() {
  ++watch_epoch_;
  store_->NotifyAll();
}

void SimServer::SleepUntil(absl::Time deadline) {
  while (!stopping_) {
    uint64_t gen = stop_signal_.generation();
    if (stopping_ || absl::Now() >= deadline) return;
    stop_signal_.WaitForChange(gen, deadline);
  }
}

bool SimServer::IsDown() const {
  MutexLock lock(&mu_);
  return down_ || absl::Now() < down_until_;
}

void SimServer::Handle(const httplib::Request& req, httplib::Response& res) {
  if (absl::StartsWith(req.path, "/sim/")) {
    HandleAdmin(req, res);
    return;
  }
  std::string token;
  {
    MutexLock lock(&mu_);
    token = token_;
  }
  if (!token.empty() && req.get_header_value("Authorization") != absl::StrCat("Bearer ", token)) {
    SendStatus(res, 401, "Unauthorized", "Unauthorized");
    return;
  }
  const std::string key = RequestKey(req);
  if (IsDown()) {
    SendStatus(res, 503, "ServiceUnavailable",
               "fitledger-sim: the API server is down (fault injected)");
  } else if (req.method != "GET" && req.has_param("dryRun")) {
    // kube-apiserver validates a dryRun=All write and stores nothing; the sim has no dry path
    // through its store, so it refuses the write rather than persist it (`kubectl apply
    // --dry-run=server` would otherwise change the demo). A known difference, recorded by
    // TestDifferentialSimAgainstAPIServer ("kubectl create --dry-run=server").
    SendStatus(res, 400, "BadRequest",
               "fitledger-sim does not support dryRun: nothing was changed (kube-apiserver would "
               "validate the request and persist nothing)");
  } else {
    HandleApi(req, res);
  }
  CountRequest(key, res.body.size());  // a watch's stream counts as it is written
}

std::string SimServer::RequestKey(const httplib::Request& req) {
  std::vector<std::string> parts = absl::StrSplit(req.path, '/', absl::SkipEmpty());
  // A group's resources (/apis/GROUP/VERSION/...) count as the core group's do (Leases).
  if (parts.size() >= 3 && parts[0] == "apis") {
    parts.erase(parts.begin() + 1);
    parts[0] = "api";
  }
  // Collections: /api/v1/{pods,nodes} and /api/v1/namespaces/NS/pods.
  const bool collection = (parts.size() == 3 && parts[0] == "api") ||
                          (parts.size() == 5 && parts[0] == "api" && parts[2] == "namespaces");
  std::string resource = parts.empty() ? "/" : parts.back();
  if (parts.size() >= 6 && parts[0] == "api" && parts[2] == "namespaces") {
    resource = parts.size() == 6 ? parts[4] : absl::StrCat(parts[4], "/", parts[6]);
  } else if (parts.size() == 4 && parts[0] == "api") {
    resource = parts[2];
  }
  std::string verb = req.method;
  if (collection && req.method == "GET") {
    const std::string watch = req.get_param_value("watch");
    if (watch == "true" || watch == "1") {
      verb = req.get_param_value("sendInitialEvents") == "true" ? "WATCHLIST" : "WATCH";
    } else {
      verb = "LIST";
    }
  } else if (req.method == "GET") {
    verb = "GET";
  } else if (req.method == "POST") {
    verb = absl::EndsWith(resource, "/binding") ? "BIND" : "CREATE";
  }
  std::string key = absl::StrCat(verb, " ", resource);
  if (collection && req.method == "GET") {
    for (const char* selector : {"fieldSelector", "labelSelector"}) {
      if (req.has_param(selector)) {
        absl::StrAppend(&key, " ", selector, "=", req.get_param_value(selector));
      }
    }
    if (verb == "LIST" || verb == "WATCHLIST") {
      const std::string rv = req.get_param_value("resourceVersion");
      absl::StrAppend(&key, " resourceVersion=",
                      req.has_param("continue") ? "(continue)"
                      : rv.empty()              ? "\"\""
                      : rv == "0"               ? "0"
                                                : "N");
    }
  }
  return key;
}

bool SimServer::TakeTooLarge() {
  int64_t left = too_large_times_.load();
  while (left > 0 && !too_large_times_.compare_exchange_weak(left, left - 1)) {
  }
  return left > 0;
}

void SimServer::CountRequest(const std::string& key, size_t bytes) {
  MutexLock lock(&stats_mu_);
  RequestCount& count = request_counts_[key];
  ++count.requests;
  count.bytes += static_cast<int64_t>(bytes);
}

void SimServer::CountBytes(const std::string& key, size_t bytes) {
  MutexLock lock(&stats_mu_);
  request_counts_[key].bytes += static_cast<int64_t>(bytes);
}

void SimServer::Discovery(const std::string& path, httplib::Response& res) {
  if (path == "/version") {
    SendJson(res, 200,
             Dump(json{{"major", "1"},
                       {"minor", "30"},
                       {"gitVersion", "v1.30.0-fitledger-sim"},
                       {"gitCommit", "0000000000000000000000000000000000000000"},
                       {"gitTreeState", "clean"},
                       {"buildDate", "2024-01-01T00:00:00Z"},
                       {"goVersion", "go1.22.0"},
                       {"compiler", "gc"},
                       {"platform", "linux/amd64"}}));
  } else if (path == "/api") {
    SendJson(res, 200,
             Dump(json{{"kind", "APIVersions"},
                       {"versions", json::array({"v1"})},
                       {"serverAddressByClientCIDRs",
                        json::array({{{"clientCIDR", "0.0.0.0/0"},
                                      {"serverAddress", absl::StrCat(host_, ":", port_)}}})}}));
  } else {
    // The root's paths: every group (sim/object_api.h).
    SendJson(res, 200, *ObjectApi::Discovery("/"));
  }
}

void SimServer::HandleApi(const httplib::Request& req, httplib::Response& res) {
  const std::string& path = req.path;
  const std::string& method = req.method;
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  const bool get = method == "GET";
  if (get && (parts.empty() || path == "/version" || path == "/api")) {
    Discovery(path, res);
    return;
  }
  // Field validation of a create's or an update's body, which the API server's handlers do as
  // they decode it, before anything else (handlers/create.go, update.go): 422 for a bad
  // fieldValidation, 400 under Strict, Warning headers under Warn (sim/field_validation.h).
  if (std::optional<ApiPath> route = ParseApiPath(path);
      route.has_value() && route->kind.has_value() &&
      ((method == "POST" && route->name.empty()) ||
       (method == "PUT" && !route->name.empty() &&
        (route->subresource.empty() || route->subresource == "status")))) {
    absl::StatusOr<FieldValidation> validation =
        ParseFieldValidation(req.get_param_value("fieldValidation"),
                             method == "POST" ? "CreateOptions" : "UpdateOptions");
    if (!validation.ok()) return SendError(res, validation.status());
    const KindInfo& info = InfoOf(*route->kind);
    std::vector<std::string> warnings;
    absl::Status decoded =
        ApplyFieldValidation(*validation, info.name, info.version,
                             StrictDecodingErrors(*route->kind, req.body), &warnings);
    if (!decoded.ok()) return SendError(res, decoded);
    for (const std::string& warning : warnings) res.set_header("Warning", WarningHeader(warning));
  }
  // Discovery of the groups, OpenAPI, updates and the other kinds (sim/object_api.h).
  ApiRequest api_request{
      method,   path, req.get_header_value("Content-Type"), req.get_header_value("Accept"),
      req.body, {}};
  for (const auto& [key, value] : req.params) api_request.params.emplace(key, value);
  if (std::optional<ApiResponse> answer = objects_.Handle(api_request)) {
    return SendJson(res, answer->code, answer->body);
  }
  // LIST and WATCH of the kinds other than pods and nodes.
  if (std::optional<ApiPath> route = ParseApiPath(path);
      get && route.has_value() && route->kind.has_value() && route->name.empty() &&
      *route->kind != Kind::kPod && *route->kind != Kind::kNode) {
    return HandleListOrWatch(req, res, *route->kind, route->namespace_name);
  }
  auto not_found = [&] {
    SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
  };
  auto method_not_allowed = [&] {
    SendStatus(res, 405, "MethodNotAllowed",
               absl::StrCat("the server does not allow this method on the requested resource"));
  };
  if (parts.size() < 3 || parts[0] != "api" || parts[1] != "v1") {
    not_found();
    return;
  }
  const size_t n = parts.size();
  const std::string& resource = parts[2];
  if (n == 3) {  // cluster-scoped collections and all-namespace lists
    if (!get) return method_not_allowed();
    if (resource == "pods") return HandleListOrWatch(req, res, Kind::kPod, "");
    if (resource == "nodes") return HandleListOrWatch(req, res, Kind::kNode, "");
    if (resource == "namespaces") {
      json items = json::array();
      for (const char* ns : {"default", "kube-node-lease", "kube-public", "kube-system"}) {
        items.push_back({{"metadata", {{"name", ns}}}, {"status", {{"phase", "Active"}}}});
      }
      return SendJson(res, 200,
                      Dump(json{{"kind", "NamespaceList"},
                                {"apiVersion", "v1"},
                                {"metadata", {{"resourceVersion", "1"}}},
                                {"items", items}}));
    }
    return not_found();
  }
  if (resource == "nodes" && n == 4) {
    if (!get) return method_not_allowed();
    auto node = store_->Get(Kind::kNode, "", parts[3]);
    if (!node.ok()) return SendError(res, node.status());
    if (WantsTable(req.get_header_value("Accept"))) {
      return SendJson(
          res, 200,
          TableJson(Kind::kNode, {*node}, (*node)->resource_version, "", 0, true, absl::Now()));
    }
    return SendJson(res, 200, (*node)->json);
  }
  if (resource != "namespaces") return not_found();
  const std::string& ns = parts[3];
  if (n == 4) {
    if (!get) return method_not_allowed();
    return SendJson(res, 200,
                    Dump(json{{"kind", "Namespace"},
                              {"apiVersion", "v1"},
                              {"metadata", {{"name", ns}}},
                              {"status", {{"phase", "Active"}}}}));
  }
  const std::string& sub = parts[4];
  if (sub != "pods") return not_found();
  if (n == 5) {
    if (get) return HandleListOrWatch(req, res, Kind::kPod, ns);
    if (method == "POST") return HandleCreatePod(req, res, ns);
    return method_not_allowed();
  }
  const std::string& name = parts[5];
  if (n == 6) {
    if (get) {
      auto pod = store_->Get(Kind::kPod, ns, name);
      if (!pod.ok()) return SendError(res, pod.status());
      if (WantsTable(req.get_header_value("Accept"))) {
        return SendJson(
            res, 200,
            TableJson(Kind::kPod, {*pod}, (*pod)->resource_version, "", 0, true, absl::Now()));
      }
      return SendJson(res, 200, (*pod)->json);
    }
    if (method == "DELETE") return HandleDeletePod(req, res, ns, name);
    return method_not_allowed();
  }
  if (n == 7 && parts[6] == "binding") {
    if (method != "POST") return method_not_allowed();
    return HandleBinding(req, res, ns, name);
  }
  if (n == 7 && parts[6] == "status") {
    if (!get) return method_not_allowed();
    auto pod = store_->Get(Kind::kPod, ns, name);
    if (!pod.ok()) return SendError(res, pod.status());
    return SendJson(res, 200, (*pod)->json);
  }
  not_found();
}

void SimServer::HandleListOrWatch(const httplib::Request& req, httplib::Response& res, Kind kind,
                                  const std::string& namespace_name) {
  ObjectFilter filter;
  filter.kind = kind;
  filter.namespace_name = namespace_name;
  auto fields = FieldSelector::Parse(req.get_param_value("fieldSelector"), kind);
  if (!fields.ok()) return SendError(res, fields.status());
  filter.fields = *std::move(fields);
  auto labels = LabelSelector::Parse(req.get_param_value("labelSelector"));
  if (!labels.ok()) return SendError(res, labels.status());
  filter.labels = *std::move(labels);
  const bool table = WantsTable(req.get_header_value("Accept"));
  absl::StatusOr<TableObject> table_object =
      ParseIncludeObject(req.get_param_value("includeObject"));
  if (table && !table_object.ok()) return SendError(res, table_object.status());
  const std::string watch_param = req.get_param_value("watch");
  const bool watch = watch_param == "true" || watch_param == "1";
  const std::string rv = req.get_param_value("resourceVersion");
  const std::string match = req.get_param_value("resourceVersionMatch");
  const std::string continue_token = req.get_param_value("continue");
  const bool has_send_initial = req.has_param("sendInitialEvents");
  // Pods and nodes are watched in protobuf when the client prefers it, as kube-scheduler's
  // informers do (sim/protobuf.h), and the watch's errors come in it too; the other kinds, and
  // LISTs, stay JSON (sim/README.md).
  const bool protobuf = watch && !table && (kind == Kind::kPod || kind == Kind::kNode) &&
                        PrefersProtobuf(req.get_header_value("Accept"));
  int64_t limit = 0;
  if (req.has_param("limit") && !absl::SimpleAtoi(req.get_param_value("limit"), &limit)) {
    return SendStatus(res, 400, "BadRequest", "limit: Invalid value: must be an integer", protobuf);
  }
  // A negative limit is no limit, from the watch cache (cacher.go computeListLimit: 0 or below is
  // none) as from etcd (etcd3/store.go GetList pages only when limit > 0): every item, no
  // continue. Diff "LIST pods limit=-1". (A limit that is no integer: 400, in the sim's words.)
  if (limit < 0) limit = 0;
  // ValidateListOptions (apimachinery pkg/apis/meta/internalversion/validation/validation.go).
  std::vector<FieldError> errors;
  if (watch) {
    if (has_send_initial) {
      if (match != "NotOlderThan") {
        errors.push_back(Forbidden("resourceVersionMatch",
                                   "sendInitialEvents requires setting resourceVersionMatch to "
                                   "NotOlderThan"));
      }
      if (!watch_list_.load()) {
        errors.push_back(Forbidden("sendInitialEvents",
                                   "sendInitialEvents is forbidden for watch unless the WatchList "
                                   "feature gate is enabled"));
      }
    }
    if (!match.empty()) {
      if (!has_send_initial) {
        errors.push_back(Forbidden("resourceVersionMatch",
                                   "resourceVersionMatch is forbidden for watch unless "
                                   "sendInitialEvents is provided"));
      }
      if (match != "NotOlderThan") {
        errors.push_back({"resourceVersionMatch", "FieldValueNotSupported",
                          absl::StrCat("Unsupported value: \"", match,
                                       "\": supported values: \"NotOlderThan\"")});
      }
      if (!continue_token.empty()) {
        errors.push_back(Forbidden("resourceVersionMatch",
                                   "resourceVersionMatch is forbidden when continue is provided"));
      }
    }
  } else {
    if (!match.empty()) {
      if (rv.empty()) {
        errors.push_back(Forbidden("resourceVersionMatch",
                                   "resourceVersionMatch is forbidden unless resourceVersion is "
                                   "provided"));
      }
      if (!continue_token.empty()) {
        errors.push_back(Forbidden("resourceVersionMatch",
                                   "resourceVersionMatch is forbidden when continue is provided"));
      }
      if (match != "Exact" && match != "NotOlderThan") {
        errors.push_back({"resourceVersionMatch", "FieldValueNotSupported",
                          absl::StrCat("Unsupported value: \"", match,
                                       "\": supported values: \"Exact\", \"NotOlderThan\", \"\"")});
      }
      if (match == "Exact" && rv == "0") {
        errors.push_back(Forbidden("resourceVersionMatch",
                                   "resourceVersionMatch \"exact\" is forbidden for "
                                   "resourceVersion \"0\""));
      }
    }
    if (has_send_initial) {
      errors.push_back(Forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
  }
  if (!errors.empty()) return SendInvalidListOptions(res, errors, protobuf);
  uint64_t rv_number = 0;
  if (!rv.empty() && !absl::SimpleAtoi(rv, &rv_number)) {
    return SendStatus(
        res, 400, "BadRequest",
        absl::StrCat(
            "invalid resource version: resourceVersion: Invalid value: ", GoQuote(rv),
            ": strconv.ParseUint: parsing ", GoQuote(rv), ": ",
            std::all_of(rv.begin(), rv.end(), [](char c) { return absl::ascii_isdigit(c); })
                ? "value out of range"
                : "invalid syntax"),
        protobuf);
  }
  // Fault: a watch cache behind the version a state read (LIST, WatchList) asks for, e.g. an API
  // server that just restarted; answered at once rather than after the 3 s wait.
  const bool behind = rv_number > 0 && (!watch || has_send_initial) && TakeTooLarge();
  if (behind && !watch) {
    res.status = 504;
    res.set_header("Retry-After", "1");  // from retryAfterSeconds, as ErrorNegotiated does
    return res.set_content(Dump(TooLargeResourceVersion(rv_number, rv_number - 1)),
                           kJsonContentType);
  }
  if (watch) {
    auto state = std::make_shared<WatchState>();
    state->protobuf = protobuf;
    if (behind) {
      state->error_line =
          WatchErrorEvent(state->protobuf, TooLargeResourceVersion(rv_number, rv_number - 1));
    }
    state->filter = std::move(filter);
    state->table = table;
    if (table) state->table_object = *table_object;
    state->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    state->stats_key = RequestKey(req);
    return ServeWatch(req, res, std::move(state));
  }
  // Which state a LIST reads (apiserver semantics for get and list:
  // storage/cacher/delegator/interface.go ShouldDelegateList and cacher.go; etcd3/store.go
  // GetList).
  ListRequest list;
  list.filter = std::move(filter);
  if (!continue_token.empty()) {
    if (!rv.empty() && rv != "0") {
      return SendStatus(res, 400, "BadRequest",
                        "specifying resource version is not allowed when using continue");
    }
    list.continue_token = continue_token;
    list.limit = limit;
  } else if (rv.empty()) {
    list.limit = limit;  // a consistent read of the latest state, paged
  } else if (rv == "0") {
    // Served from the watch cache, which ignores limit for resourceVersion=0 (cacher.go; the
    // reflector relies on it, client-go tools/cache/reflector.go list()).
    list.limit = 0;
  } else {
    if (rv_number > store_->resource_version() &&
        !store_->WaitForResourceVersion(rv_number, kWaitForResourceVersion)) {
      res.status = 504;
      // apiserver responsewriters/writers.go ErrorNegotiated: a Status with retryAfterSeconds
      // also carries it as the Retry-After header, which client-go's retries follow.
      res.set_header("Retry-After", "1");
      return res.set_content(Dump(TooLargeResourceVersion(rv_number, store_->resource_version())),
                             kJsonContentType);
    }
    if (match == "Exact" || (match.empty() && limit > 0)) {
      // Exact, or the legacy exact read of resourceVersion=N with a limit (from etcd).
      list.exact = rv_number;
    }
    list.limit = limit;
  }
  auto result = store_->List(list);
  if (!result.ok()) return SendError(res, result.status());
  if (result->continue_expired) {
    // etcd3/store.go handleCompactedErrorForPaging: 410 with a token that continues at the
    // latest state.
    json status = StatusObject(
        410, "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can "
        "start a new list without the continue parameter, or use the continue token in this "
        "response to retrieve the remainder of the results. Continuing with the provided token "
        "results in an inconsistent list - objects that were created, modified, or deleted "
        "between the time the first chunk was returned and now may show up in the list.");
    status["metadata"] = {{"continue", result->continue_token}};
    res.status = 410;
    return res.set_content(Dump(status), kJsonContentType);
  }
  if (table) {
    return SendJson(res, 200,
                    TableJson(kind, result->items, result->resource_version, result->continue_token,
                              result->remaining_items, true, absl::Now(), *table_object));
  }
  SendJson(res, 200, ListJson(kind, *result));
}

void SimServer::ServeWatch(const httplib::Request& req, httplib::Response& res,
                           std::shared_ptr<WatchState> state) {
  const absl::Time now = absl::Now();
  absl::Duration timeout = config_.max_watch_duration;
  if (req.has_param("timeoutSeconds")) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(req.get_param_value("timeoutSeconds"), &seconds) || seconds < 0) {
      return SendStatus(res, 400, "BadRequest", "timeoutSeconds: Invalid value");
    }
    if (seconds > 0) timeout = std::min(timeout, absl::Seconds(seconds));
  }
  state->deadline = now + timeout;
  state->epoch = watch_epoch_.load();
  state->next_bookmark = now + config_.bookmark_interval;
  const std::string rv = req.get_param_value("resourceVersion");
  // A watch from "" or "0" that names neither sendInitialEvents nor resourceVersionMatch is a
  // WatchList while the WatchList feature is on, as in 1.37 (handlers/get.go ListResource applies
  // apimachinery pkg/apis/meta/internalversion/defaults.go SetListOptionsDefaults before
  // validating): its initial state ends with the annotated bookmark, and it may be gzipped.
  // Checked by TestDifferentialSimAgainstAPIServer ("WATCH pods from resourceVersion=... with
  // bookmarks").
  const bool defaulted_watch_list = watch_list_.load() && !req.has_param("sendInitialEvents") &&
                                    req.get_param_value("resourceVersionMatch").empty() &&
                                    (rv.empty() || rv == "0");
  const bool has_send_initial = req.has_param("sendInitialEvents") || defaulted_watch_list;
  const bool send_initial =
      req.get_param_value("sendInitialEvents") == "true" || defaulted_watch_list;
  auto error_line = [&](const json& status) { return WatchErrorEvent(state->protobuf, status); };
  if (!state->error_line.empty()) {
    // Answered with the error event already set.
  } else if ((has_send_initial && send_initial) ||
             (!has_send_initial && (rv.empty() || rv == "0"))) {
    // The current objects first as ADDED: a legacy watch from "" or "0", or a WatchList
    // (sendInitialEvents=true, resourceVersionMatch=NotOlderThan) from "", "0" or N (a state at
    // least as new as N; the watch cache waits for N, then answers "too large" as an ERROR event:
    // cacher.go Watch, waitUntilWatchCacheFreshAndForceAllEvents).
    uint64_t wanted = 0;
    if (!rv.empty() && rv != "0") {
      (void)absl::SimpleAtoi(rv, &wanted);  // validated by the caller
    }
    if (wanted > store_->resource_version() &&
        !store_->WaitForResourceVersion(wanted, kWaitForResourceVersion)) {
      state->error_line = error_line(TooLargeResourceVersion(wanted, store_->resource_version()));
    } else {
      auto list = store_->List(state->filter, 0, "");
      if (!list.ok()) return SendError(res, list.status());
      state->initial = std::move(list->items);
      state->cursor = list->resource_version;
      // cacher/cache_watcher.go convertToWatchEvent: the first bookmark at or after the initial
      // state carries the annotation; sent only to watches that allow bookmarks
      // (storage.ListOptions initialEventsEndBookmarkRequired).
      state->initial_events_end = has_send_initial && state->bookmarks;
    }
  } else if (has_send_initial && (rv.empty() || rv == "0")) {
    state->cursor = store_->resource_version();  // sendInitialEvents=false: from now, no state
  } else {
    auto start = store_->WatchStart(rv);
    if (start.ok()) {
      state->cursor = *start;
    } else if (start.status().code() == absl::StatusCode::kOutOfRange) {
      state->error_line = error_line(StatusObject(410, "Expired", start.status().message()));
    } else {
      return SendError(res, start.status());
    }
  }
  // kube-apiserver 1.37 (WatchListCompression, on by default there; watchListCompression here):
  // a WatchList (sendInitialEvents=true with allowWatchBookmarks, handlers/get.go
  // isListWatchRequest) whose Accept-Encoding names gzip is answered gzip, one member per flush
  // (handlers/watch.go perFlushGzipWriter); here one member per write. Checked against
  // kube-apiserver by upstream_TestWatchListStreamsReadEveryGzipMember (the members) and, on
  // the sim, by WatcherGzipTest.
  state->gzip = config_.watch_list_compression && has_send_initial && send_initial &&
                state->bookmarks && AcceptsGzipToken(req.get_header_value("Accept-Encoding"));
  if (state->gzip) {
    res.set_header("Content-Encoding", "gzip");
    res.set_header("Vary", "Accept-Encoding");
  }
  ++watches_open_;
  res.status = 200;
  res.set_chunked_content_provider(
      state->protobuf ? kProtobufWatchContentType : kJsonContentType,
      [this, state](size_t, httplib::DataSink& sink) { return WatchStep(*state, sink); },
      [this](bool) { --watches_open_; });
}

WatchGate SimServer::Gate(uint64_t epoch) const {
  WatchGate gate;
  gate.closed = stopping_ || epoch != watch_epoch_.load();
  gate.bookmark_interval = config_.bookmark_interval;
  MutexLock lock(&mu_);
  gate.bookmarks_only = bookmarks_only_;
  gate.lag = watch_lag_;
  return gate;
}

bool SimServer::WatchStep(WatchState& state, httplib::DataSink& sink) {
  // ClusterStore's kinds, for WatchStep (sim/watch_stream.h).
  struct Feed {
    ClusterStore* store;
    absl::string_view kind;
    absl::string_view api_version;
    size_t max_batch;
    void AppendObject(WatchState& s, const ObjectPtr& object, std::string* out) const {
      if (!s.table) {
        out->append(object->json);
        return;
      }
      out->append(TableJson(s.filter.kind, {object}, object->resource_version, "", 0,
                            !s.sent_columns, absl::Now(), s.table_object));
      s.sent_columns = true;
    }
    absl::string_view Envelope(const ObjectPtr& object) const {
      return object->protobuf.Get(object->json);
    }
    ChangeSignal& signal() const { return store->signal(kind_id); }
    WatchBatch Poll(const WatchState& s, absl::Time now, absl::Duration lag) const {
      return store->Poll(s.filter, s.cursor, now, lag, max_batch);
    }
    absl::string_view TypeName(const WatchEvent& e) const { return EventTypeName(e.type); }
    uint64_t resource_version() const { return store->resource_version(); }
    Kind kind_id;
  };
  const Feed feed{store_, InfoOf(state.filter.kind).name, InfoOf(state.filter.kind).group_version,
                  kWatchBatch, state.filter.kind};
  return sim::WatchStep(
      state, sink, feed,
      [&](const std::string& text) {
        if (!state.gzip) {
          CountBytes(state.stats_key, text.size());
          return sink.write(text.data(), text.size());
        }
        const std::string member = GzipMemberOf(text);
        CountBytes(state.stats_key, member.size());  // the bytes on the wire
        return !member.empty() && sink.write(member.data(), member.size());
      },
      [&] { return Gate(state.epoch); });
}

void SimServer::HandleCreatePod(const httplib::Request& req, httplib::Response& res,
                                const std::string& namespace_name) {
  auto pod = store_->CreatePod(req.body, namespace_name);
  if (!pod.ok()) return SendError(res, pod.status());
  if (!(*pod)->fields.node_name.empty()) OnPodBound(namespace_name, (*pod)->fields.name);
  SendJson(res, 201, (*pod)->json);
}

void SimServer::HandleDeletePod(const httplib::Request& req, httplib::Response& res,
                                const std::string& namespace_name, const std::string& name) {
  ClusterStore::DeleteRequest request;
  auto grace = [&](const json& value) -> absl::Status {
    if (!value.is_number_integer()) {
      return absl::InvalidArgumentError("gracePeriodSeconds must be an integer");
    }
    request.grace_period_seconds = value.get<int64_t>();
    return absl::OkStatus();
  };
  if (!req.body.empty()) {
    auto options = ParseBody(req.body);
    if (!options.ok()) return SendError(res, options.status());
    absl::StatusOr<DeletePreconditions> preconditions = ParseDeletePreconditions(*options);
    if (!preconditions.ok()) return SendError(res, preconditions.status());
    request.uid = std::move(preconditions->uid);
    request.resource_version = std::move(preconditions->resource_version);
    if (auto it = options->find("gracePeriodSeconds"); it != options->end() && !it->is_null()) {
      if (absl::Status s = grace(*it); !s.ok()) return SendError(res, s);
    }
  }
  if (req.has_param("gracePeriodSeconds")) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(req.get_param_value("gracePeriodSeconds"), &seconds)) {
      return SendStatus(res, 400, "BadRequest", "gracePeriodSeconds: Invalid value");
    }
    request.grace_period_seconds = seconds;
  }
  auto deleted = store_->DeletePod(namespace_name, name, request);
  if (!deleted.ok()) return SendError(res, deleted.status());
  // The deleted object, or the pod with its deletion pending (pods are ReturnDeletedObject:
  // pkg/registry/core/pod/storage/storage.go); 200 either way (handlers/delete.go).
  SendJson(res, 200, deleted->object->json);
  if (!deleted->deleted) OnPodTerminating(namespace_name, name);
}

void SimServer::HandleBinding(const httplib::Request& req, httplib::Response& res,
                              const std::string& namespace_name, const std::string& name) {
  auto binding = ParseBody(req.body);
  if (!binding.ok()) return SendError(res, binding.status());
  const json& metadata = binding->contains("metadata") ? (*binding)["metadata"] : json();
  const json& target = binding->contains("target") ? (*binding)["target"] : json();
  if ((binding->contains("metadata") && !metadata.is_object()) ||
      (binding->contains("target") && !target.is_object())) {
    return SendStatus(res, 400, "BadRequest", "Binding metadata and target must be objects");
  }
  // The create handler's namespace check (rest.EnsureObjectNamespaceMatchesRequestNamespace),
  // then BindingREST.Create (pkg/registry/core/pod/storage/storage.go).
  const std::string binding_namespace = JsonStr(metadata, "namespace");
  if (!binding_namespace.empty() && binding_namespace != namespace_name) {
    return SendStatus(res, 400, "BadRequest",
                      "the namespace of the provided object does not match the namespace sent on "
                      "the request");
  }
  if (JsonStr(metadata, "name") != name) {
    return SendStatus(res, 400, "BadRequest", "name in URL does not match name in Binding object");
  }
  // ValidatePodBinding's errors come back as a plain aggregate, not a Status: the API server
  // answers 500 with reason "" (responsewriters ErrorToAPIStatus).
  std::vector<std::string> invalid;
  const std::string kind = JsonStr(target, "kind");
  if (!kind.empty() && kind != "Node") {
    invalid.push_back(absl::StrCat("target.kind: Unsupported value: \"", kind,
                                   "\": supported values: \"Node\", \"<empty>\""));
  }
  const std::string node = JsonStr(target, "name");
  if (node.empty()) {
    invalid.push_back("target.name: Required value");
  } else if (kind.empty() || kind == "Node") {
    // ValidateNodeName (NameIsDNSSubdomain, pkg/apis/core/validation). Checked by
    // TestDifferentialSimAgainstAPIServer ("POST binding to an invalid node name").
    for (std::string& e : Dns1123SubdomainErrors("target.name", node)) {
      invalid.push_back(std::move(e));
    }
  }
  if (!invalid.empty()) {
    json status = StatusObject(
        500, "",
        invalid.size() == 1 ? invalid[0] : absl::StrCat("[", absl::StrJoin(invalid, ", "), "]"));
    status.erase("reason");
    res.status = 500;
    return res.set_content(Dump(status), kJsonContentType);
  }
  ClusterStore::BindRequest request;
  request.uid = JsonStr(metadata, "uid");
  request.resource_version = JsonStr(metadata, "resourceVersion");
  request.node = node;
  request.target_kind = kind;
  if (auto it = metadata.find("annotations");
      metadata.is_object() && it != metadata.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      if (value.is_string()) request.annotations.emplace_back(key, value.get<std::string>());
    }
  }
  if (auto it = metadata.find("labels");
      metadata.is_object() && it != metadata.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      if (value.is_string()) request.labels.emplace_back(key, value.get<std::string>());
    }
  }
  std::optional<BindingFault> fault;
  {
    MutexLock lock(&mu_);
    const std::string key = absl::StrCat(namespace_name, "/", name);
    for (BindingFault& f : binding_faults_) {
      if (f.times == 0 || !(f.all || f.names.count(key) > 0)) continue;
      if (f.times > 0) --f.times;
      fault = f;
      break;
    }
  }
  if (fault.has_value() && !fault->hang) {
    int code = fault->code;
    std::string message =
        code == 404 ? absl::StrCat("pods \"", name, "\" not found")
                    : absl::StrCat("fitledger-sim: injected binding failure (HTTP ", code, ")");
    return SendStatus(res, code, ReasonForCode(code), message);
  }
  if (fault.has_value()) {
    ++bindings_held_;
    SleepUntil(absl::Now() + fault->hang_for);
    --bindings_held_;
    if (!fault->then_bind) {
      return SendStatus(res, 504, "Timeout",
                        "Timeout: request did not complete within the allowed duration");
    }
  }
  auto bound = store_->Bind(namespace_name, name, request);
  if (!bound.ok()) return SendError(res, bound.status());
  OnPodBound(namespace_name, name);
  // createHandler answers 201 and fills a Status result's code (handlers/create.go).
  SendJson(res, 201,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\","
           "\"code\":201}");
}

void SimServer::OnPodBound(const std::string& namespace_name, const std::string& name) {
  if (!config_.kubelet.enabled) return;
  if (config_.kubelet.admit_delay <= absl::ZeroDuration()) {
    store_->AdmitPod(namespace_name, name);
    return;
  }
  {
    MutexLock lock(&mu_);
    delayed_.push_back(
        DelayedAdmission{absl::Now() + config_.kubelet.admit_delay, namespace_name, name});
  }
  kubelet_signal_.Notify();
}

void SimServer::OnPodTerminating(const std::string& namespace_name, const std::string& name) {
  if (!config_.kubelet.enabled || config_.kubelet.admit_delay <= absl::ZeroDuration()) {
    store_->TerminatePod(namespace_name, name, config_.kubelet.enabled);
    return;
  }
  {
    MutexLock lock(&mu_);
    delayed_.push_back(DelayedAdmission{absl::Now() + config_.kubelet.admit_delay, namespace_name,
                                        name, /*terminate=*/true});
  }
  kubelet_signal_.Notify();
}

void SimServer::KubeletLoop() {
  while (!stopping_) {
    const uint64_t generation = kubelet_signal_.generation();
    std::vector<DelayedAdmission> due;
    absl::Time next = absl::Now() + absl::Seconds(10);
    {
      MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      auto split = std::stable_partition(delayed_.begin(), delayed_.end(),
                                         [&](const DelayedAdmission& d) { return d.due > now; });
      due.assign(std::make_move_iterator(split), std::make_move_iterator(delayed_.end()));
      delayed_.erase(split, delayed_.end());
      for (const DelayedAdmission& d : delayed_) next = std::min(next, d.due);
    }
    for (const DelayedAdmission& d : due) {
      if (d.terminate) {
        store_->TerminatePod(d.namespace_name, d.name, /*kubelet_enabled=*/true);
      } else {
        store_->AdmitPod(d.namespace_name, d.name);
      }
    }
    if (due.empty()) kubelet_signal_.WaitForChange(generation, next);
  }
}

void SimServer::HandleAdmin(const httplib::Request& req, httplib::Response& res) {
  const std::string& path = req.path;
  const bool post = req.method == "POST";
  if (path == "/sim/stats" && req.method == "GET") {
    StoreStats stats = store_->Stats();
    json out = {{"pods", stats.pods_by_phase},
                {"rejections", stats.rejections_by_reason},
                {"bindings", stats.bindings},
                {"nodes", stats.nodes},
                {"resourceVersion", stats.resource_version},
                {"watchesOpen", watches_open_.load()},
                {"bindingsHeld", bindings_held_.load()}};
    return SendJson(res, 200, Dump(out));
  }
  if (path == "/sim/requests" && (req.method == "GET" || req.method == "DELETE")) {
    json by_request = json::object();
    int64_t requests = 0, bytes = 0;
    {
      MutexLock lock(&stats_mu_);
      for (const auto& [key, count] : request_counts_) {
        by_request[key] = {{"requests", count.requests}, {"bytes", count.bytes}};
        requests += count.requests;
        bytes += count.bytes;
      }
      if (req.method == "DELETE") request_counts_.clear();
    }
    return SendJson(
        res, 200, Dump(json{{"requests", requests}, {"bytes", bytes}, {"byRequest", by_request}}));
  }
  if (path == "/sim/faults/too-large" && post) {
    auto body = ParseBody(req.body.empty() ? "{}" : req.body);
    if (!body.ok()) return SendError(res, body.status());
    int64_t times = 1;
    if (body->contains("times")) {
      if (!(*body)["times"].is_number_integer() || (*body)["times"].get<int64_t>() < 0) {
        return SendStatus(res, 400, "BadRequest", "\"times\" must be an integer >= 0");
      }
      times = (*body)["times"].get<int64_t>();
    }
    too_large_times_ = times;
    return SendOk(res);
  }
  if (path == "/sim/features/watch-list" && post) {
    auto on = OnOff(req.body);
    if (!on.ok()) return SendError(res, on.status());
    watch_list_ = *on;
    return SendOk(res);
  }
  if (path == "/sim/faults/binding" && req.method == "DELETE") {
    MutexLock lock(&mu_);
    binding_faults_.clear();
    return SendOk(res);
  }
  if (path == "/sim/faults/binding" && post) {
    auto body = ParseBody(req.body);
    if (!body.ok()) return SendError(res, body.status());
    BindingFault fault;
    if (body->contains("all")) {
      if (!(*body)["all"].is_boolean())
        return SendStatus(res, 400, "BadRequest", "\"all\" must be a boolean");
      fault.all = (*body)["all"].get<bool>();
    }
    if (body->contains("names")) {
      if (!(*body)["names"].is_array())
        return SendStatus(res, 400, "BadRequest", "\"names\" must be a list");
      for (const json& n : (*body)["names"]) {
        if (!n.is_string() || !absl::StrContains(n.get<std::string>(), '/')) {
          return SendStatus(res, 400, "BadRequest", "\"names\" entries are \"namespace/name\"");
        }
        fault.names.insert(n.get<std::string>());
      }
    }
    if (!fault.all && fault.names.empty()) {
      return SendStatus(res, 400, "BadRequest", "give \"names\" or \"all\": true");
    }
    const std::string mode = JsonStr(*body, "mode");
    if (mode == "error") {
      if (!body->contains("code") || !(*body)["code"].is_number_integer() ||
          (*body)["code"].get<int>() < 400 || (*body)["code"].get<int>() > 599) {
        return SendStatus(res, 400, "BadRequest", "mode error needs \"code\" 400..599");
      }
      fault.code = (*body)["code"].get<int>();
    } else if (mode == "hang") {
      fault.hang = true;
      if (!body->contains("seconds") || !(*body)["seconds"].is_number() ||
          (*body)["seconds"].get<double>() < 0) {
        return SendStatus(res, 400, "BadRequest", "mode hang needs \"seconds\" >= 0");
      }
      fault.hang_for = absl::Seconds((*body)["seconds"].get<double>());
      if (body->contains("thenBind")) {
        if (!(*body)["thenBind"].is_boolean())
          return SendStatus(res, 400, "BadRequest", "\"thenBind\" must be a boolean");
        fault.then_bind = (*body)["thenBind"].get<bool>();
      }
    } else {
      return SendStatus(res, 400, "BadRequest", "\"mode\" must be \"error\" or \"hang\"");
    }
    if (body->contains("times")) {
      if (!(*body)["times"].is_number_integer() || (*body)["times"].get<int64_t>() < 1) {
        return SendStatus(res, 400, "BadRequest", "\"times\" must be a positive integer");
      }
      fault.times = (*body)["times"].get<int64_t>();
    }
    MutexLock lock(&mu_);
    binding_faults_.push_back(std::move(fault));
    return SendOk(res);
  }
  if (path == "/sim/auth/token" && post) {
    auto body = ParseBody(req.body);
    if (!body.ok()) return SendError(res, body.status());
    if (!body->contains("token") || !(*body)["token"].is_string()) {
      return SendStatus(res, 400, "BadRequest", "give {\"token\": \"...\"}");
    }
    MutexLock lock(&mu_);
    token_ = (*body)["token"].get<std::string>();
    return SendOk(res);
  }
  if (path == "/sim/faults/drop-watches" && post) {
    DropWatches();
    return SendOk(res);
  }
  if (path == "/sim/faults/expire" && post) {
    store_->ExpireHistory();
    return SendOk(res);
  }
  if (path == "/sim/faults/bookmarks-only" && post) {
    auto on = OnOff(req.body);
    if (!on.ok()) return SendError(res, on.status());
    {
      MutexLock lock(&mu_);
      bookmarks_only_ = *on;
    }
    store_->NotifyAll();
    return SendOk(res);
  }
  if (path == "/sim/faults/down" && post) {
    auto body = req.body.empty() ? absl::StatusOr<json>(json::object()) : ParseBody(req.body);
    if (!body.ok()) return SendError(res, body.status());
    bool down = true;
    absl::Time until = absl::InfinitePast();
    if (body->contains("seconds")) {
      if (!(*body)["seconds"].is_number() || (*body)["seconds"].get<double>() < 0) {
        return SendStatus(res, 400, "BadRequest", "\"seconds\" must be a number >= 0");
      }
      down = false;
      until = absl::Now() + absl::Seconds((*body)["seconds"].get<double>());
    } else {
      auto on = OnOff(req.body);
      if (!on.ok()) return SendError(res, on.status());
      down = *on;
    }
    {
      MutexLock lock(&mu_);
      down_ = down;
      down_until_ = until;
    }
    if (down || until > absl::Now()) DropWatches();
    return SendOk(res);
  }
  if (path == "/sim/restart" && post) {
    store_->ForgetHistory();
    DropWatches();
    return SendOk(res);
  }
  if (path == "/sim/watch-lag" && post) {
    auto body = ParseBody(req.body);
    if (!body.ok()) return SendError(res, body.status());
    auto lag = ParseDuration(JsonStr(*body, "lag"));
    if (!lag.ok()) return SendError(res, lag.status());
    {
      MutexLock lock(&mu_);
      watch_lag_ = *lag;
    }
    store_->NotifyAll();
    return SendOk(res);
  }
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  if (post && parts.size() == 5 && parts[1] == "pods" && parts[4] == "phase") {
    auto body = ParseBody(req.body);
    if (!body.ok()) return SendError(res, body.status());
    auto pod = store_->SetPodPhase(parts[2], parts[3], JsonStr(*body, "phase"));
    if (!pod.ok()) return SendError(res, pod.status());
    return SendJson(res, 200, (*pod)->json);
  }
  SendStatus(res, 404, "NotFound", absl::StrCat("unknown admin path ", req.method, " ", path));
}

}  // namespace fitledger::sim
