// Helpers for the fault, restart and soak tests: compare fitledger-server's view with the API's
// truth, read the server's metrics, and (re)start a server process on a given socket while the
// rest of an E2eCluster keeps running.
#ifndef FITLEDGER_TESTS_E2E_VIEW_CHECK_H_
#define FITLEDGER_TESTS_E2E_VIEW_CHECK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/resources.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/harness.h"

namespace fitledger::testing {

// Per node, the summed requests (PodRequests, spec and status) of the pods the API shows bound
// to it and not Succeeded / Failed: what the node really holds.
absl::StatusOr<std::map<std::string, Resources>> RecountFromApi(E2eCluster& cluster);

// "" when, for every node, the server's confirmed + assumed cpu, memory and pod count equal the
// API recount and free = allocatable - recount; otherwise what differs. With
// `require_no_assumed`, any assumed pod left is a difference too.
std::string DiffViewWithApi(E2eCluster& cluster, bool require_no_assumed);

// Waits (polling) up to `timeout` for DiffViewWithApi to be "". Returns the last difference
// ("" on success).
std::string WaitForViewToMatchApi(E2eCluster& cluster, absl::Duration timeout,
                                  bool require_no_assumed = true);

// The sum of the sim kubelet's OutOf* rejections (GET /sim/stats), or -1 if unreadable.
int64_t KubeletRejections(E2eCluster& cluster);

// A sample of the server's /metrics, e.g. Metric(port, "fitledger_watch_total{kind=\"lists\"}");
// -1 if absent.
double Metric(int monitor_port, const std::string& series);

// GET http://127.0.0.1:port/path: the status (0 if unreachable).
int HttpGetStatus(int port, const std::string& path);

// The server's grpc.health.v1 status for "" (SERVING = 1, NOT_SERVING = 2), or -1 if the call
// failed.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel);

// Starts a fitledger-server process for `cluster`'s sim listening on `socket` (unix:///...) and
// 127.0.0.1:0 (and, in Layout::kInServer, serving the webhook on the cluster's webhook port), with
// config `server_yaml`, and waits for its ready file only (not for SERVING).
// Replaces cluster.extender()'s server process, ports, channel and stubs, so the cluster's
// helpers talk to the new server; a shim already dialing `socket` reconnects by itself.
absl::Status SpawnServer(E2eCluster& cluster, const std::string& socket,
                         const std::string& server_yaml, const std::string& tag);

}  // namespace fitledger::testing

#endif  // FITLEDGER_TESTS_E2E_VIEW_CHECK_H_
