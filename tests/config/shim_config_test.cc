#include "config/shim_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/status_matchers.h"

namespace fitledger::config {
namespace {

using ::fitledger::testing::IsOk;
using ::fitledger::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ShimConfigTest, EmptyFileGivesTheDefaults) {
  absl::StatusOr<ShimConfig> c = ParseShimConfig("", "shim.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->webhook.listen, "127.0.0.1:8888");
  EXPECT_EQ(c->webhook.prefix, "/");
  EXPECT_EQ(c->server, "unix:///run/fitledger/server.sock");
  EXPECT_EQ(c->server_timeout, absl::Seconds(4));
  EXPECT_EQ(c->webhook.max_body_bytes, 16 << 20);
  EXPECT_EQ(c->webhook.io_threads, 0);
  EXPECT_EQ(c->webhook.max_connections, 1024);
  EXPECT_EQ(c->webhook.handshake_timeout, absl::Seconds(5));
  EXPECT_EQ(c->webhook.read_timeout, absl::Seconds(5));
  EXPECT_EQ(c->webhook.write_timeout, absl::Seconds(5));
  EXPECT_EQ(c->webhook.idle_timeout, absl::Seconds(10));
  EXPECT_EQ(c->webhook.keep_alive_max_requests, 10000);
  EXPECT_TRUE(c->webhook.tls.cert_file.empty());
  EXPECT_TRUE(c->monitor_listen.empty());
  EXPECT_EQ(c->log_level, "info");
  EXPECT_THAT(ValidateShimConfig(*c), IsOk());
}

TEST(ShimConfigTest, ReadsEveryKey) {
  absl::StatusOr<ShimConfig> c = ParseShimConfig(R"(
listen: "[::1]:0"
prefix: /fitledger/
server: 127.0.0.1:9090
serverTimeout: 1500ms
maxBodyBytes: 1048576
ioThreads: 3
maxConnections: 99
tlsHandshakeTimeout: 2s
readTimeout: 2s
writeTimeout: 3s
idleTimeout: 1m
keepAliveMaxRequests: 50
tls:
  certFile: /tls/tls.crt
  keyFile: /tls/tls.key
  clientCAFile: /tls/ca.crt
monitor:
  listen: 0.0.0.0:8082
log:
  level: debug
)",
                                                 "shim.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->webhook.listen, "[::1]:0");
  EXPECT_EQ(c->webhook.prefix, "/fitledger");
  EXPECT_EQ(c->server, "127.0.0.1:9090");
  EXPECT_EQ(c->server_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(c->webhook.max_body_bytes, 1048576);
  EXPECT_EQ(c->webhook.io_threads, 3);
  EXPECT_EQ(c->webhook.max_connections, 99);
  EXPECT_EQ(c->webhook.handshake_timeout, absl::Seconds(2));
  EXPECT_EQ(c->webhook.read_timeout, absl::Seconds(2));
  EXPECT_EQ(c->webhook.write_timeout, absl::Seconds(3));
  EXPECT_EQ(c->webhook.idle_timeout, absl::Minutes(1));
  EXPECT_EQ(c->webhook.keep_alive_max_requests, 50);
  EXPECT_EQ(c->webhook.tls.cert_file, "/tls/tls.crt");
  EXPECT_EQ(c->webhook.tls.key_file, "/tls/tls.key");
  EXPECT_EQ(c->webhook.tls.client_ca_file, "/tls/ca.crt");
  EXPECT_EQ(c->monitor_listen, "0.0.0.0:8082");
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_THAT(ValidateShimConfig(*c), IsOk());
}

TEST(ShimConfigTest, TheExampleFileLoads) {
  absl::StatusOr<ShimConfig> c = LoadShimConfig(FITLEDGER_SOURCE_DIR "/config/shim.yaml");
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->webhook.listen, "127.0.0.1:8888");
  EXPECT_EQ(c->server_timeout, absl::Seconds(4));
}

TEST(ShimConfigTest, ErrorsNameTheKeyAndLine) {
  struct Case {
    const char* name;
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"unknown key", "listen: 127.0.0.1:1\nlisten_port: 5\n",
       "shim.yaml:2: unknown key listen_port"},
      {"unknown nested key", "tls:\n  certFile: a\n  keyFile: b\n  caFile: c\n",
       "shim.yaml:4: unknown key tls.caFile"},
      {"wrong type", "\nioThreads: many\n", "shim.yaml:2: key ioThreads: must be an integer"},
      {"out of range", "maxConnections: 0\n",
       "shim.yaml:1: key maxConnections: must be between 1 and"},
      {"removed key", "threads: 64\n", "shim.yaml:1: key threads: was removed"},
      {"a URL as server", "server: http://127.0.0.1:1\n",
       "shim.yaml:1: key server: \"http://127.0.0.1:1\" is a URL, not a gRPC target"},
      {"a file as server", "server: some.sock\n",
       "shim.yaml:1: key server: \"some.sock\" has no port"},
      {"bad duration", "log:\n  level: info\nserverTimeout: 4 seconds\n",
       "shim.yaml:3: key serverTimeout: \"4 seconds\" is not a duration"},
      {"zero timeout", "readTimeout: 0\n", "shim.yaml:1: key readTimeout: must be > 0"},
      {"bad listen", "listen: localhost\n",
       "shim.yaml:1: key listen: \"localhost\" is not HOST:PORT"},
      {"bad port", "listen: 127.0.0.1:70000\n", "key listen: \"127.0.0.1:70000\" is not HOST:PORT"},
      {"bad prefix", "prefix: fitledger\n",
       "shim.yaml:1: key prefix: must be a URL path starting with /"},
      {"tls half", "tls:\n  certFile: a\n", "shim.yaml:2: key tls.keyFile: certFile and keyFile"},
      {"bad level", "log:\n  level: loud\n", "shim.yaml:2: key log.level: \"loud\" must be one of"},
      {"monitor not a map", "monitor: 8082\n", "shim.yaml:1: key monitor: must be a mapping"},
      {"bad monitor", "monitor:\n  listen: x\n", "shim.yaml:2: key monitor.listen:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_THAT(ParseShimConfig(c.yaml, "shim.yaml"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

TEST(ShimConfigTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadShimConfig("/nonexistent/shim.yaml"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/shim.yaml")));
}

TEST(ShimConfigTest, ValidateChecksOverrides) {
  ShimConfig c;
  c.webhook.listen = "nohost";
  EXPECT_THAT(ValidateShimConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key listen: \"nohost\"")));
  c = ShimConfig();
  c.webhook.prefix = "x";
  EXPECT_THAT(ValidateShimConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key prefix")));
  c = ShimConfig();
  c.server = "http://127.0.0.1:1";
  EXPECT_THAT(ValidateShimConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key server")));
  c = ShimConfig();
  c.monitor_listen = "0.0.0.0";
  EXPECT_THAT(ValidateShimConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key monitor.listen")));
}

TEST(ShimConfigTest, ParsesHostPort) {
  absl::StatusOr<HostPort> hp = ParseHostPort("[::1]:8888");
  ASSERT_THAT(hp, IsOk());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port, 8888);
  hp = ParseHostPort("0.0.0.0:0");
  ASSERT_THAT(hp, IsOk());
  EXPECT_EQ(hp->port, 0);
  EXPECT_THAT(ParseHostPort("::1:80"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs brackets")));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
}

}  // namespace
}  // namespace fitledger::config
