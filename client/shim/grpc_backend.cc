#include "client/shim/grpc_backend.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/reuse_pool.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/fitledger/v1/api_conventions.h"
#include "server/service/convert.h"

namespace fitledger::shim {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

// One call in flight: what gRPC fills and what its completion needs.
template <typename Request, typename Response, typename Done>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
  Done done;
};

// A Filter's or Prioritize's messages, kept between calls (ReusePool). Built fresh, a Filter with
// 500 candidates costs 500 string allocations for its request and as many for its reply, each
// freed on another thread than the one that allocated it (the request is built on an I/O thread,
// the reply arrives on gRPC's); Clear()ed and reused, it costs almost none.
template <typename Request, typename Response>
struct Messages {
  Request request;
  Response response;
};
using FilterMessages = Messages<v1::ExtenderArgs, v1::ExtenderFilterResult>;
using PrioritizeMessages = Messages<v1::ExtenderArgs, v1::HostPriorityList>;

// At most this many idle message pairs per verb (more than the calls kube-scheduler keeps in
// flight), and none whose request was larger than kKeepBytes: one odd, huge pod does not stay
// pinned in the pool.
constexpr size_t kMaxIdleMessages = 32;
constexpr size_t kKeepBytes = 1 << 20;

// One pooled call: the context is single-use, the messages come from and go back to `pool`.
template <typename M, typename Done>
struct PooledCall {
  PooledCall(ReusePool<M>* pool, Done done)
      : pool(pool), messages(pool->Take()), done(std::move(done)) {}
  ~PooledCall() {
    // gRPC serialized the request, so its size is cached: no second walk of the message.
    if (static_cast<size_t>(messages->request.GetCachedSize()) > kKeepBytes) return;
    messages->request.Clear();
    messages->response.Clear();
    pool->Keep(std::move(messages));
  }
  ReusePool<M>* const pool;
  grpc::ClientContext context;
  std::unique_ptr<M> messages;
  Done done;
};

// Positions of `names` among `candidates`, in the order of `names`; a name that is no candidate
// is dropped (and counted in `*dropped`). The server answers in candidate order, so one merge
// walk usually suffices; otherwise a hash index is built once.
class CandidateIndex {
 public:
  explicit CandidateIndex(const google::protobuf::RepeatedPtrField<std::string>& candidates)
      : candidates_(candidates) {}

  std::vector<size_t> InOrder(const google::protobuf::RepeatedPtrField<std::string>& names,
                              int* dropped) {
    std::vector<size_t> out;
    out.reserve(names.size());
    int next = 0;
    for (const std::string& name : names) {
      while (next < candidates_.size() && candidates_[next] != name) ++next;
      if (next == candidates_.size()) break;
      out.push_back(static_cast<size_t>(next++));
    }
    if (out.size() == static_cast<size_t>(names.size())) return out;
    out.clear();
    for (const std::string& name : names) {
      if (const size_t* i = Find(name)) {
        out.push_back(*i);
      } else {
        ++*dropped;
      }
    }
    return out;
  }

  const size_t* Find(absl::string_view name) {
    if (index_.empty()) {
      index_.reserve(candidates_.size());
      for (int i = 0; i < candidates_.size(); ++i) index_.emplace(candidates_[i], i);
    }
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &it->second;
  }

 private:
  const google::protobuf::RepeatedPtrField<std::string>& candidates_;
  absl::flat_hash_map<absl::string_view, size_t> index_;
};

}  // namespace

struct GrpcBackend::Stubs {
  std::unique_ptr<v1::Extender::Stub> extender;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
  ReusePool<FilterMessages> filter_messages{kMaxIdleMessages};
  ReusePool<PrioritizeMessages> prioritize_messages{kMaxIdleMessages};
};

std::shared_ptr<grpc::ChannelInterface> DialServer(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

GrpcBackend::GrpcBackend(std::string target, std::shared_ptr<grpc::ChannelInterface> channel,
                         Options options)
    : target_(std::move(target)),
      options_(options),
      stubs_(
          new Stubs{v1::Extender::NewStub(channel), grpc::health::v1::Health::NewStub(channel)}) {}

GrpcBackend::~GrpcBackend() = default;

namespace {

// A failed call's status, naming the component that failed: a status fitledger-server's services
// sent (they mark every reply) passes as it is; any other came from gRPC itself.
absl::Status CallFailure(const std::string& target, const grpc::ClientContext& context,
                         const grpc::Status& status, absl::Duration timeout) {
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (context.GetServerTrailingMetadata().count(v1::kServerOriginMetadata) > 0) {
    return absl::Status(code, status.error_message());
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(absl::StrCat(
        "fitledger-server at ", target, " did not answer within ", absl::FormatDuration(timeout)));
  }
  return absl::Status(
      code, absl::StrCat("fitledger-server at ", target, " unreachable: ", status.error_message()));
}

// The ExtenderArgs of a Filter or a Prioritize: the pod and the candidates' names, in order.
void FillArgs(const Pod& pod, absl::Span<const absl::string_view> candidates,
              v1::ExtenderArgs* request) {
  PodToProto(pod, request->mutable_pod());
  request->mutable_node_names()->Reserve(static_cast<int>(candidates.size()));
  for (absl::string_view name : candidates) request->add_node_names(name.data(), name.size());
}

}  // namespace

void GrpcBackend::Filter(const Pod& pod, absl::Span<const absl::string_view> candidates,
                         FilterDone done) {
  using FilterCall = PooledCall<FilterMessages, FilterDone>;
  auto* call = new FilterCall(&stubs_->filter_messages, std::move(done));
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  FillArgs(pod, candidates, &call->messages->request);
  stubs_->extender->async()->Filter(
      &call->context, &call->messages->request, &call->messages->response,
      [this, call](grpc::Status status) {
        std::unique_ptr<FilterCall> owned(call);
        if (!status.ok()) {
          return call->done(CallFailure(target_, call->context, status, options_.timeout));
        }
        const v1::ExtenderFilterResult& r = call->messages->response;
        if (!r.error().empty()) return call->done(absl::InternalError(r.error()));
        FilterResult answer;
        CandidateIndex index(call->messages->request.node_names());
        int dropped = 0;
        answer.fits = index.InOrder(r.node_names(), &dropped);
        for (const auto& [name, why] : r.failed_nodes()) {
          if (const size_t* i = index.Find(name)) {
            answer.failed.emplace_back(*i, why);
          } else {
            ++dropped;
          }
        }
        for (const auto& [name, why] : r.failed_and_unresolvable_nodes()) {
          if (const size_t* i = index.Find(name)) {
            answer.unresolvable.emplace_back(*i, why);
          } else {
            ++dropped;
          }
        }
        if (dropped > 0) {
          LogWarn("shim: fitledger-server answered nodes that were not candidates; dropped",
                  {{"verb", "filter"}, {"dropped", absl::StrCat(dropped)}});
        }
        call->done(std::move(answer));
      });
}

void GrpcBackend::Prioritize(const Pod& pod, absl::Span<const absl::string_view> candidates,
                             PrioritizeDone done) {
  using PrioritizeCall = PooledCall<PrioritizeMessages, PrioritizeDone>;
  auto* call = new PrioritizeCall(&stubs_->prioritize_messages, std::move(done));
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  FillArgs(pod, candidates, &call->messages->request);
  stubs_->extender->async()->Prioritize(
      &call->context, &call->messages->request, &call->messages->response,
      [this, call](grpc::Status status) {
        std::unique_ptr<PrioritizeCall> owned(call);
        webhook::PrioritizeAnswer answer;
        if (!status.ok()) {
          answer.status = CallFailure(target_, call->context, status, options_.timeout);
          return call->done(std::move(answer));
        }
        CandidateIndex index(call->messages->request.node_names());
        int next = 0;  // the server answers in candidate order: try that first
        const auto& candidates = call->messages->request.node_names();
        for (const v1::HostPriority& host : call->messages->response.items()) {
          if (next < candidates.size() && candidates[next] == host.host()) {
            answer.scores.emplace_back(next++, host.score());
          } else if (const size_t* i = index.Find(host.host())) {
            answer.scores.emplace_back(*i, host.score());
          }
        }
        call->done(std::move(answer));
      });
}

void GrpcBackend::Bind(const BindArgs& args, StatusDone done) {
  using BindCall = Call<v1::ExtenderBindingArgs, v1::ExtenderBindingResult, StatusDone>;
  auto* call = new BindCall;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  call->request.set_pod_namespace(args.pod_namespace);
  call->request.set_pod_name(args.pod_name);
  call->request.set_pod_uid(args.pod_uid);
  call->request.set_node(args.node);
  call->done = std::move(done);
  stubs_->extender->async()->Bind(
      &call->context, &call->request, &call->response, [this, call](grpc::Status status) {
        std::unique_ptr<BindCall> owned(call);
        if (!status.ok()) {
          return call->done(CallFailure(target_, call->context, status, options_.timeout));
        }
        call->done(call->response.error().empty() ? absl::OkStatus()
                                                  : absl::InternalError(call->response.error()));
      });
}

void GrpcBackend::Preempt(const PreemptArgs& args, PreemptDone done) {
  using PreemptCall = Call<v1::ExtenderPreemptionArgs, v1::ExtenderPreemptionResult, PreemptDone>;
  auto* call = new PreemptCall;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  PreemptArgsToProto(args, &call->request);
  call->done = std::move(done);
  stubs_->extender->async()->Preempt(
      &call->context, &call->request, &call->response, [this, call](grpc::Status status) {
        std::unique_ptr<PreemptCall> owned(call);
        if (!status.ok()) {
          return call->done(CallFailure(target_, call->context, status, options_.timeout));
        }
        call->done(VictimsFromProto(call->response));
      });
}

void GrpcBackend::CheckReady(StatusDone done) {
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  using CheckCall = Call<HealthCheckRequest, HealthCheckResponse, StatusDone>;
  auto* call = new CheckCall;
  const absl::Duration timeout = std::min(options_.timeout, absl::Seconds(2));
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  call->done = std::move(done);
  stubs_->health->async()->Check(
      &call->context, &call->request, &call->response, [this, call, timeout](grpc::Status status) {
        std::unique_ptr<CheckCall> owned(call);
        if (!status.ok()) {
          return call->done(absl::UnavailableError(absl::StrCat(
              "fitledger-server at ", target_, " unreachable: ",
              absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), ": ",
              status.error_message().empty() ? absl::FormatDuration(timeout)
                                             : status.error_message())));
        }
        if (call->response.status() != HealthCheckResponse::SERVING) {
          return call->done(absl::UnavailableError(
              absl::StrCat("fitledger-server at ", target_, " is ",
                           HealthCheckResponse::ServingStatus_Name(call->response.status()))));
        }
        call->done(absl::OkStatus());
      });
}

}  // namespace fitledger::shim
