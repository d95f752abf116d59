// grpc_echo_server: the floor of a gRPC Filter hop on this machine. It serves fitledger's
// Extender/Filter the way fitledger-server does (callback method, pooled messages) but does no
// work: every candidate passes, with no pod decoding and no ledger. What a client measures
// against it is the cost of gRPC itself (framing, HTTP/2, threads, the socket) for the same
// messages. tests/perf/run.sh puts fitledger-shim in front of it (the "hop" system): the most the
// split layout could do on the machine if fitledger-server's work cost nothing.
//
//   grpc_echo_server [--listen 127.0.0.1:0 | --listen unix:///path] --port_file FILE
//                    [--api callback|sync]
//
// --api sync serves the same answer through gRPC's synchronous API (a Service method on gRPC's
// own thread pool) instead of the callback API fitledger-server uses: which stock API makes the
// cheaper hop (issue 49 item 2).
//
// The port file is written once serving: the port the kernel picked (0 for a Unix socket).
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "fitledger/v1/extender.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/service/message_pool.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "gRPC address: host:port or unix:///path");
ABSL_FLAG(std::string, port_file, "", "write the listening port here once serving");
ABSL_FLAG(std::string, api, "callback", "gRPC server API: callback (as fitledger-server) or sync");

namespace fitledger::bench {
namespace {

class EchoExtender final : public v1::Extender::CallbackService {
 public:
  EchoExtender() { SetMessageAllocatorFor_Filter(&messages_); }
  grpc::ServerUnaryReactor* Filter(grpc::CallbackServerContext* context,
                                   const v1::ExtenderArgs* args,
                                   v1::ExtenderFilterResult* result) override {
    result->mutable_node_names()->Reserve(args->node_names_size());
    for (const std::string& name : args->node_names()) result->add_node_names(name);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  MessagePool<v1::ExtenderArgs, v1::ExtenderFilterResult> messages_;
};

// The same answer through the synchronous API.
class SyncEchoExtender final : public v1::Extender::Service {
 public:
  grpc::Status Filter(grpc::ServerContext*, const v1::ExtenderArgs* args,
                      v1::ExtenderFilterResult* result) override {
    result->mutable_node_names()->Reserve(args->node_names_size());
    for (const std::string& name : args->node_names()) result->add_node_names(name);
    return grpc::Status::OK;
  }
};

int Run() {
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api != "callback" && api != "sync") {
    std::fprintf(stderr, "grpc_echo_server: --api is callback or sync\n");
    return 2;
  }
  EchoExtender callback_service;
  SyncEchoExtender sync_service;
  grpc::ServerBuilder builder;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  const bool unix_socket = listen.rfind("unix:", 0) == 0;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  if (api == "sync") {
    builder.RegisterService(&sync_service);
  } else {
    builder.RegisterService(&callback_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (port == 0 && !unix_socket)) {
    std::fprintf(stderr, "grpc_echo_server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  if (unix_socket) port = 0;  // no port to report, whatever gRPC set it to
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    // Written whole, then renamed: a reader never sees a partial port.
    std::ofstream(port_file + ".tmp") << port << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  } else {
    std::printf("%d\n", port);
    std::fflush(stdout);
  }
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace fitledger::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return fitledger::bench::Run();
}
