#include "tests/sim/sim_process.h"

#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace fitledger::testing {

absl::StatusOr<std::unique_ptr<SimProcess>> SimProcess::Start(
    const std::string& config_yaml, const std::vector<std::string>& extra_args) {
  // A client writing to a connection the sim closed (e.g. a refused TLS handshake) must see
  // EPIPE, not die.
  signal(SIGPIPE, SIG_IGN);
  auto sim = std::unique_ptr<SimProcess>(new SimProcess());
  sim->dir_ = TempDir("sim");
  const std::string config = sim->dir_.File("config.yaml");
  if (absl::Status s = WriteFile(config, config_yaml); !s.ok()) return s;
  std::vector<std::string> argv = {
      FITLEDGER_SIM_PATH,    "--config", config, "--listen", "127.0.0.1:0", "--kubeconfig-out",
      sim->kubeconfig_path()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  auto child = ChildProcess::Start(argv, sim->dir_.File("output"));
  if (!child.ok()) return child.status();
  sim->process_ = *std::move(child);
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!WaitForFile(sim->kubeconfig_path(), absl::Milliseconds(50)).ok()) {
    if (sim->process_->Exited()) {
      return absl::InternalError(
          absl::StrCat("fitledger-sim exited before serving; output: ", sim->output()));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(sim->kubeconfig_path(), " did not appear; sim output: ", sim->output()));
    }
  }
  const std::string marker = "listening on ";
  std::string out = sim->output();
  size_t pos = out.find(marker);
  size_t colon = pos == std::string::npos ? pos : out.find(':', out.find("//", pos));
  size_t end = colon == std::string::npos ? colon : out.find('\n', colon);
  if (end == std::string::npos ||
      !absl::SimpleAtoi(out.substr(colon + 1, end - colon - 1), &sim->port_)) {
    return absl::InternalError(absl::StrCat("no listening line in sim output: ", out));
  }
  return sim;
}

std::unique_ptr<httplib::Client> SimProcess::Client() const {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port_);
  client->set_tcp_nodelay(true);
  client->set_keep_alive(true);
  client->set_read_timeout(10, 0);
  return client;
}

WatchStream::WatchStream(int port, std::string path_and_query, httplib::Headers headers)
    : client_("127.0.0.1", port) {
  client_.set_read_timeout(30, 0);
  client_.set_tcp_nodelay(true);
  thread_ = std::thread([this, path = std::move(path_and_query), headers = std::move(headers)] {
    auto result = client_.Get(
        path, headers,
        [this](const httplib::Response& res) {
          status_ = res.status;
          return true;
        },
        [this](const char* data, size_t n) {
          const absl::Time now = absl::Now();
          MutexLock lock(&mu_);
          partial_.append(data, n);
          size_t nl;
          while ((nl = partial_.find('\n')) != std::string::npos) {
            std::string line = partial_.substr(0, nl);
            partial_.erase(0, nl + 1);
            if (!line.empty()) {
              lines_.push_back(Line{now, nlohmann::json::parse(line, nullptr, false)});
            }
          }
          return !stopping_.load();
        });
    if (result && status_ == 0) status_ = result->status;
    ended_ = true;
  });
}

WatchStream::~WatchStream() {
  stopping_ = true;
  client_.stop();
  if (thread_.joinable()) thread_.join();
}

bool WatchStream::WaitForLines(size_t n, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    {
      MutexLock lock(&mu_);
      if (lines_.size() >= n) return true;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  MutexLock lock(&mu_);
  return lines_.size() >= n;
}

bool WatchStream::WaitForEnd(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ended_.load()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

std::vector<WatchStream::Line> WatchStream::lines() const {
  MutexLock lock(&mu_);
  return lines_;
}

HttpResult Call(httplib::Client& client, const std::string& method, const std::string& path,
                const std::string& body) {
  auto send = [&]() -> httplib::Result {
    if (method == "POST") return client.Post(path, body, "application/json");
    if (method == "DELETE") return client.Delete(path, body, "application/json");
    if (method == "PUT") return client.Put(path, body, "application/json");
    return client.Get(path);
  };
  httplib::Result r = send();
  HttpResult out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.body = nlohmann::json::parse(r->body, nullptr, false);
  return out;
}

}  // namespace fitledger::testing
