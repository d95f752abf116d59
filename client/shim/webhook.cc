#include "client/shim/webhook.h"

#include <cstdint>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/shim/extender_bytes.h"
#include "client/shim/json_codec.h"
#include "common/status_macros.h"
#include "google/protobuf/arena.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace fitledger::shim {
namespace {

// Per-thread scratch reused across requests: the JSON decoder, the raw node views, and the first
// block of each request's arena.
struct Scratch {
  JsonDecoder decoder;
  // Filter's and Prioritize's replies when they come as messages, reused call after call:
  // Clear() keeps their strings allocated. (Their requests are decoded into an arena on
  // arena_block: the pod's maps would otherwise free and allocate their entries every call.)
  v1::ExtenderFilterResult filter_result;
  v1::HostPriorityList priorities;

  // What a huge request (full Node objects) allocated does not stay in every pool thread.
  static constexpr size_t kKeepBodyBytes = 1 << 20;
  auto ReleaseAfter(absl::string_view body) {
    return absl::Cleanup([this, large = body.size() > kKeepBodyBytes] {
      if (reply.capacity() > kKeepBodyBytes) std::string().swap(reply);
      if (!large) return;
      filter_result = v1::ExtenderFilterResult();
      priorities = v1::HostPriorityList();
      std::string().swap(request);
      names = {};
      filter_view = {};
      priority_view = {};
    });
  }
  // Bytes and views for a transport that carries bytes (Webhook::bytes_); the views point into
  // `reply` (or into the messages above) until the next request.
  std::string request;
  std::string reply;
  std::vector<absl::string_view> names;
  FilterResultView filter_view;
  HostPriorityView priority_view;
  std::vector<absl::string_view> raw_nodes;
  std::vector<absl::string_view> passing_nodes;
  std::vector<char> arena_block = std::vector<char>(256 << 10);
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

google::protobuf::ArenaOptions ArenaOptionsFor(Scratch& scratch) {
  google::protobuf::ArenaOptions options;
  options.initial_block = scratch.arena_block.data();
  options.initial_block_size = scratch.arena_block.size();
  return options;
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

bool IsUnavailable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return false;
    default:
      return true;
  }
}

std::string PodKey(const v1::Pod& pod) {
  return absl::StrCat(pod.metadata().namespace_(), "/", pod.metadata().name());
}

// The indexes into `candidates` of `names`, in the order of `names`; names that are not
// candidates are dropped (the protocol requires a subset). The server answers in candidate
// order, so one merge walk usually suffices; otherwise a hash index is built.
template <typename NameOf>
std::vector<int> MatchCandidates(int candidate_count, NameOf name_of,
                                 const std::vector<absl::string_view>& names) {
  std::vector<int> indexes;
  indexes.reserve(names.size());
  int next = 0;
  for (absl::string_view name : names) {
    while (next < candidate_count && name_of(next) != name) ++next;
    if (next == candidate_count) break;
    indexes.push_back(next++);
  }
  if (indexes.size() == names.size()) return indexes;
  absl::flat_hash_map<absl::string_view, int> index;
  index.reserve(candidate_count);
  for (int i = 0; i < candidate_count; ++i) index.emplace(name_of(i), i);
  indexes.clear();
  for (absl::string_view name : names) {
    if (auto it = index.find(name); it != index.end()) indexes.push_back(it->second);
  }
  return indexes;
}

// Decodes filter's and prioritize's `body` into `args`. With `as_bytes`, the candidate
// names go to scratch.names as views and `*names` points there, unless the body has full Nodes:
// those go as a message, the names in it, and `*names` stays null.
absl::Status DecodeArgs(Scratch& scratch, const std::string& body, bool as_bytes,
                        v1::ExtenderArgs* args, std::vector<absl::string_view>* raw_nodes,
                        std::vector<absl::string_view>** names) {
  *names = as_bytes ? &scratch.names : nullptr;
  RETURN_IF_ERROR(scratch.decoder.DecodeExtenderArgs(body, args, raw_nodes, *names));
  if (*names != nullptr && args->has_nodes()) {
    for (absl::string_view name : **names) args->add_node_names(name.data(), name.size());
    *names = nullptr;
  }
  return absl::OkStatus();
}

constexpr char kFilterMethod[] = "/fitledger.v1.Extender/Filter";
constexpr char kPrioritizeMethod[] = "/fitledger.v1.Extender/Prioritize";

// Reads a reply's `bytes` into `view` with `read`, or, of another shape, into `message` with
// protobuf (then `*in_message`). INTERNAL when neither can.
template <typename View>
grpc::Status ReadReply(absl::string_view bytes, bool (*read)(absl::string_view, View*), View* view,
                       google::protobuf::MessageLite* message, bool* in_message) {
  *in_message = false;
  if (read(bytes, view)) return grpc::Status::OK;
  *in_message = true;
  if (!message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot parse the reply");
  }
  return grpc::Status::OK;
}

// Prioritize's answer from its message, when the reply came in that shape.
void AssignPriorities(const v1::HostPriorityList& message, HostPriorityView* result) {
  result->clear();
  for (const v1::HostPriority& item : message.items()) {
    result->emplace_back(item.host(), item.score());
  }
}

}  // namespace

// A Filter or Prioritize answered later: what its completion needs of the request.
struct Webhook::Pending {
  Verb verb = Verb::kFilter;
  std::vector<absl::string_view> names;  // the candidates: views into the request's body or owned
  std::string owned;                     // candidates that are not in the body (StartLater)
  bool names_plain = false;              // no candidate needs escaping
  std::string pod;                       // "namespace/name", for the log
  Reply reply;
  ReplyDone done;
};

absl::string_view VerbName(Verb verb) {
  switch (verb) {
    case Verb::kFilter:
      return "filter";
    case Verb::kPrioritize:
      return "prioritize";
    case Verb::kBind:
      return "bind";
    case Verb::kPreempt:
      return "preempt";
  }
  return "unknown";
}

std::shared_ptr<grpc::Channel> DialServer(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

Webhook::Webhook(std::unique_ptr<v1::Extender::StubInterface> extender,
                 std::unique_ptr<grpc::health::v1::Health::StubInterface> health, Options options,
                 Metrics* metrics, const Logger* logger)
    : extender_(std::move(extender)),
      bytes_(dynamic_cast<ExtenderBytesCaller*>(extender_.get())),
      health_(std::move(health)),
      options_(options),
      metrics_(metrics),
      logger_(logger) {}

Webhook::~Webhook() = default;

void Webhook::Handle(Verb verb, const std::string& body, Reply* reply) const {
  reply->status = 200;
  reply->body.clear();
  switch (verb) {
    case Verb::kFilter:
      Filter(body, reply, nullptr);
      return;
    case Verb::kPrioritize:
      Prioritize(body, reply, nullptr);
      return;
    case Verb::kBind:
      return Bind(body, reply);
    case Verb::kPreempt:
      return Preempt(body, reply);
  }
}

bool Webhook::HandleLater(Verb verb, const std::string& body, Reply* reply, ReplyDone done) const {
  reply->status = 200;
  reply->body.clear();
  switch (verb) {
    case Verb::kFilter:
      return Filter(body, reply, &done);
    case Verb::kPrioritize:
      return Prioritize(body, reply, &done);
    case Verb::kBind:
    case Verb::kPreempt:
      Handle(verb, body, reply);
      return true;
  }
  return true;
}

bool Webhook::StartLater(Verb verb, absl::string_view method, const std::string& body,
                         absl::string_view pod, ReplyDone* done) const {
  Scratch& scratch = ThreadScratch();
  std::unique_ptr<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    if (!pending_pool_.empty()) {
      pending = std::move(pending_pool_.back());
      pending_pool_.pop_back();
    }
  }
  if (pending == nullptr) pending = std::make_unique<Pending>();
  pending->verb = verb;
  // The candidates outlive this thread's next request: views into `body` stay valid until the
  // reply is written; those into the decoder's buffer (names with escapes) are copied. The
  // scratch's views stay as they are, for the call here if the transport does not take it.
  pending->names.assign(scratch.names.begin(), scratch.names.end());
  const auto begin = reinterpret_cast<uintptr_t>(body.data());
  const auto end = begin + body.size();
  auto outside = [&](absl::string_view name) {
    const auto at = reinterpret_cast<uintptr_t>(name.data());
    return at < begin || at + name.size() > end;
  };
  size_t copied = 0;
  for (absl::string_view name : pending->names) copied += outside(name) ? name.size() : 0;
  pending->owned.clear();
  if (copied > 0) {
    pending->owned.reserve(copied);
    for (absl::string_view& name : pending->names) {
      if (!outside(name)) continue;
      const size_t at = pending->owned.size();
      pending->owned.append(name.data(), name.size());
      name = absl::string_view(pending->owned.data() + at, name.size());
    }
  }
  pending->names_plain = scratch.decoder.node_names_plain();
  pending->pod.assign(pod.data(), pod.size());
  pending->done = std::move(*done);
  Pending* p = pending.get();
  if (bytes_->StartBytes(method, scratch.request, absl::Now() + options_.server_timeout,
                         [this, p](const grpc::Status& status, absl::string_view bytes) {
                           FinishLater(p, status, bytes);
                         })) {
    pending.release();  // FinishLater's now; it may have run already
    return true;
  }
  // Not started: the caller calls and answers now.
  *done = std::move(pending->done);
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_pool_.push_back(std::move(pending));
  return false;
}

void Webhook::FinishLater(Pending* p, const grpc::Status& status, absl::string_view bytes) const {
  Scratch& scratch = ThreadScratch();  // the completing thread's
  Reply& reply = p->reply;
  reply.status = 200;
  reply.body.clear();
  grpc::Status s = status;
  bool in_message = false;
  if (p->verb == Verb::kFilter) {
    FilterResultView* result = &scratch.filter_view;
    if (s.ok()) {
      s = ReadReply(bytes, &ReadFilterResult, result, &scratch.filter_result, &in_message);
    }
    if (!s.ok()) {
      ServerFailure(Verb::kFilter, s, p->pod, &reply);
    } else {
      if (in_message) result->Assign(scratch.filter_result);
      AnswerNames(p->names, p->names_plain, result, p->pod, &reply);
    }
  } else {
    HostPriorityView* result = &scratch.priority_view;
    if (s.ok()) {
      s = ReadReply(bytes, &ReadHostPriorityList, result, &scratch.priorities, &in_message);
    }
    if (!s.ok()) {
      ServerFailure(Verb::kPrioritize, s, p->pod, &reply);
    } else {
      if (in_message) AssignPriorities(scratch.priorities, result);
      EncodeHostPriorityList(*result, &reply.body);
    }
  }
  p->done(reply);
  p->done = nullptr;
  if (reply.body.capacity() > Scratch::kKeepBodyBytes) std::string().swap(reply.body);
  if (p->names.capacity() > 4096) p->names = {};
  if (p->owned.capacity() > Scratch::kKeepBodyBytes) std::string().swap(p->owned);
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_pool_.emplace_back(p);
}

void Webhook::AnswerNames(const std::vector<absl::string_view>& candidates, bool plain,
                          FilterResultView* result, absl::string_view pod, Reply* reply) const {
  if (!result->node_indexes.empty()) {
    // Asked by position (a server that does not know the flag answers names, read below). Each
    // index is a candidate's; one out of range or out of order (a repeat) is dropped, and so are
    // names beside the indexes.
    bool dropped = !result->node_names.empty();
    result->node_names.clear();
    size_t next = 0;
    for (uint32_t i : result->node_indexes) {
      if (i < next || i >= candidates.size()) {
        dropped = true;
        continue;
      }
      result->node_names.push_back(candidates[i]);
      next = size_t{i} + 1;
    }
    if (dropped) {
      logger_->Log(LogLevel::kWarn,
                   "server answered node indexes that were not the candidates'; dropped",
                   {{"verb", "filter"}, {"pod", pod}});
    }
  } else {
    std::vector<int> keep = MatchCandidates(
        candidates.size(), [&](int i) { return candidates[i]; }, result->node_names);
    if (keep.size() != result->node_names.size()) {
      logger_->Log(LogLevel::kWarn, "server answered nodes that were not candidates; dropped",
                   {{"verb", "filter"}, {"pod", pod}});
      result->node_names.clear();
      for (int i : keep) result->node_names.push_back(candidates[i]);
    }
  }
  // Each name is now a candidate's, or equal to one: as plain as they are.
  EncodeFilterResult(*result, &reply->body, plain);
  if (logger_->Enabled(LogLevel::kDebug)) {
    logger_->Log(LogLevel::kDebug, "filter",
                 {{"verb", "filter"},
                  {"pod", pod},
                  {"candidates", absl::StrCat(candidates.size())},
                  {"failed", absl::StrCat(result->failed_nodes.size() +
                                          result->failed_and_unresolvable_nodes.size())}});
  }
}

bool Webhook::LogFailureNow() const {
  const int64_t now = absl::ToUnixNanos(absl::Now());
  int64_t last = last_failure_log_ns_.load(std::memory_order_relaxed);
  return now - last >= absl::ToInt64Nanoseconds(absl::Seconds(1)) &&
         last_failure_log_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

void Webhook::BadRequest(Verb verb, const absl::Status& status, Reply* reply) const {
  reply->status = 400;
  EncodeError(status.message(), &reply->body);
  if (LogFailureNow()) {
    logger_->Log(LogLevel::kWarn, "bad request",
                 {{"verb", VerbName(verb)}, {"error", status.message()}});
  }
}

void Webhook::ServerFailure(Verb verb, const grpc::Status& status, absl::string_view pod,
                            Reply* reply) const {
  const std::string code = CodeName(status.error_code());
  metrics_->CountServerError(VerbName(verb), code);
  const std::string message =
      IsUnavailable(status.error_code())
          ? absl::StrCat("fitledger server unavailable: ", code, ": ", status.error_message())
          : absl::StrCat("fitledger server rejected ", VerbName(verb), ": ", code, ": ",
                         status.error_message());
  if (verb == Verb::kFilter || verb == Verb::kBind) {
    reply->status = 200;
  } else {
    reply->status = status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 400 : 503;
  }
  EncodeError(message, &reply->body);
  if (LogFailureNow()) {
    logger_->Log(LogLevel::kWarn, "server call failed",
                 {{"verb", VerbName(verb)},
                  {"pod", pod},
                  {"grpc_code", code},
                  {"error", status.error_message()}});
  }
}

template <typename View, typename CallWithMessages>
grpc::Status Webhook::CallExtender(absl::string_view method, const v1::ExtenderArgs& args,
                                   const std::vector<absl::string_view>* names,
                                   bool (*read)(absl::string_view, View*),
                                   CallWithMessages call_with_messages, View* view,
                                   google::protobuf::MessageLite* message, bool* in_message) const {
  const absl::Time deadline = absl::Now() + options_.server_timeout;
  *in_message = true;
  if (names == nullptr) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    return call_with_messages(&context);
  }
  Scratch& scratch = ThreadScratch();
  scratch.request.clear();
  WriteExtenderArgs(args.has_pod() ? &args.pod() : nullptr, *names, method == kFilterMethod,
                    &scratch.request);
  grpc::Status s = bytes_->CallBytes(method, scratch.request, deadline, &scratch.reply);
  if (!s.ok()) return s;
  return ReadReply(absl::string_view(scratch.reply), read, view, message, in_message);
}

grpc::Status Webhook::CallFilter(const v1::ExtenderArgs& args,
                                 const std::vector<absl::string_view>* names,
                                 FilterResultView* result) const {
  v1::ExtenderFilterResult& message = ThreadScratch().filter_result;
  bool in_message = false;
  grpc::Status s = CallExtender(
      kFilterMethod, args, names, &ReadFilterResult,
      [&](grpc::ClientContext* context) { return extender_->Filter(context, args, &message); },
      result, &message, &in_message);
  if (s.ok() && in_message) result->Assign(message);
  return s;
}

grpc::Status Webhook::CallPrioritize(const v1::ExtenderArgs& args,
                                     const std::vector<absl::string_view>* names,
                                     HostPriorityView* result) const {
  v1::HostPriorityList& message = ThreadScratch().priorities;
  bool in_message = false;
  grpc::Status s = CallExtender(
      kPrioritizeMethod, args, names, &ReadHostPriorityList,
      [&](grpc::ClientContext* context) { return extender_->Prioritize(context, args, &message); },
      result, &message, &in_message);
  if (s.ok() && in_message) AssignPriorities(message, result);
  return s;
}

bool Webhook::Filter(const std::string& body, Reply* reply, ReplyDone* done) const {
  Scratch& scratch = ThreadScratch();
  google::protobuf::Arena arena(ArenaOptionsFor(scratch));
  auto* args = google::protobuf::Arena::CreateMessage<v1::ExtenderArgs>(&arena);
  FilterResultView* result = &scratch.filter_view;
  auto release = scratch.ReleaseAfter(body);
  scratch.filter_result.Clear();
  std::vector<absl::string_view>* names = nullptr;
  if (absl::Status s =
          DecodeArgs(scratch, body, bytes_ != nullptr, args, &scratch.raw_nodes, &names);
      !s.ok()) {
    BadRequest(Verb::kFilter, s, reply);
    return true;
  }
  if (done != nullptr && names != nullptr) {
    scratch.request.clear();
    WriteExtenderArgs(args->has_pod() ? &args->pod() : nullptr, *names,
                      /*reply_node_indexes=*/true, &scratch.request);
    if (StartLater(Verb::kFilter, kFilterMethod, body, PodKey(args->pod()), done)) return false;
  }
  if (grpc::Status s = CallFilter(*args, names, result); !s.ok()) {
    ServerFailure(Verb::kFilter, s, PodKey(args->pod()), reply);
    return true;
  }
  if (!args->has_nodes()) {
    // nodeCacheCapable: answer names, a subset of the candidates.
    bool plain = scratch.decoder.node_names_plain();  // when the decoder read the names
    if (names == nullptr) {
      scratch.names.assign(args->node_names().begin(), args->node_names().end());
      names = &scratch.names;
      plain = false;
    }
    AnswerNames(*names, plain, result, PodKey(args->pod()), reply);
    return true;
  }
  // Full nodes: answer the passing nodes' objects exactly as kube-scheduler sent them.
  const auto& items = args->nodes().items();
  if (result->node_names.empty()) {
    for (const v1::Node& node : scratch.filter_result.nodes().items()) {
      result->node_names.push_back(node.metadata().name());
    }
  }
  std::vector<int> keep = MatchCandidates(
      items.size(), [&](int i) -> absl::string_view { return items[i].metadata().name(); },
      result->node_names);
  scratch.passing_nodes.clear();
  for (int i : keep) scratch.passing_nodes.push_back(scratch.raw_nodes[i]);
  EncodeFilterResultWithNodes(*result, scratch.passing_nodes, &reply->body);
  if (logger_->Enabled(LogLevel::kDebug)) {
    logger_->Log(LogLevel::kDebug, "filter",
                 {{"verb", "filter"},
                  {"pod", PodKey(args->pod())},
                  {"candidates", absl::StrCat(args->nodes().items_size())},
                  {"failed", absl::StrCat(result->failed_nodes.size() +
                                          result->failed_and_unresolvable_nodes.size())}});
  }
  return true;
}

bool Webhook::Prioritize(const std::string& body, Reply* reply, ReplyDone* done) const {
  Scratch& scratch = ThreadScratch();
  google::protobuf::Arena arena(ArenaOptionsFor(scratch));
  auto* args = google::protobuf::Arena::CreateMessage<v1::ExtenderArgs>(&arena);
  auto release = scratch.ReleaseAfter(body);
  scratch.priorities.Clear();
  std::vector<absl::string_view>* names = nullptr;
  if (absl::Status s = DecodeArgs(scratch, body, bytes_ != nullptr, args, nullptr, &names);
      !s.ok()) {
    BadRequest(Verb::kPrioritize, s, reply);
    return true;
  }
  if (done != nullptr && names != nullptr) {
    scratch.request.clear();
    WriteExtenderArgs(args->has_pod() ? &args->pod() : nullptr, *names,
                      /*reply_node_indexes=*/false, &scratch.request);
    if (StartLater(Verb::kPrioritize, kPrioritizeMethod, body, PodKey(args->pod()), done)) {
      return false;
    }
  }
  if (grpc::Status s = CallPrioritize(*args, names, &scratch.priority_view); !s.ok()) {
    ServerFailure(Verb::kPrioritize, s, PodKey(args->pod()), reply);
    return true;
  }
  EncodeHostPriorityList(scratch.priority_view, &reply->body);
  return true;
}

void Webhook::Bind(const std::string& body, Reply* reply) const {
  Scratch& scratch = ThreadScratch();
  v1::ExtenderBindingArgs args;
  if (absl::Status s = scratch.decoder.DecodeBindingArgs(body, &args); !s.ok()) {
    return BadRequest(Verb::kBind, s, reply);
  }
  const std::string pod = absl::StrCat(args.pod_namespace(), "/", args.pod_name());
  v1::ExtenderBindingResult result;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.server_timeout));
  if (grpc::Status s = extender_->Bind(&context, args, &result); !s.ok()) {
    return ServerFailure(Verb::kBind, s, pod, reply);
  }
  EncodeError(result.error(), &reply->body);
  logger_->Log(result.error().empty() ? LogLevel::kDebug : LogLevel::kInfo, "bind",
               {{"verb", "bind"}, {"pod", pod}, {"node", args.node()}, {"error", result.error()}});
}

void Webhook::Preempt(const std::string& body, Reply* reply) const {
  Scratch& scratch = ThreadScratch();
  google::protobuf::Arena arena(ArenaOptionsFor(scratch));
  auto* args = google::protobuf::Arena::CreateMessage<v1::ExtenderPreemptionArgs>(&arena);
  if (absl::Status s = scratch.decoder.DecodePreemptionArgs(body, args); !s.ok()) {
    return BadRequest(Verb::kPreempt, s, reply);
  }
  auto* result = google::protobuf::Arena::CreateMessage<v1::ExtenderPreemptionResult>(&arena);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.server_timeout));
  if (grpc::Status s = extender_->Preempt(&context, *args, result); !s.ok()) {
    return ServerFailure(Verb::kPreempt, s, PodKey(args->pod()), reply);
  }
  EncodePreemptionResult(*result, &reply->body);
}

absl::Status Webhook::CheckReady() const {
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + std::min(options_.server_timeout, absl::Seconds(2))));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = health_->Check(&context, request, &response);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "fitledger server unavailable: ", CodeName(s.error_code()), ": ", s.error_message()));
  }
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat("fitledger server is ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  return absl::OkStatus();
}

}  // namespace fitledger::shim
