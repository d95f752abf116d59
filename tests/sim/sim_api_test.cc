// Process-level tests: the real fitledger-sim binary, driven over HTTP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sim/sim_process.h"

namespace fitledger::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kProtobufAccept[] = "application/vnd.kubernetes.protobuf, application/json";

constexpr char kPair[] = R"(
nodes:
  - name: worker-1
    allocatable: {cpu: "4", memory: 8Gi, pods: 110}
  - name: worker-2
    allocatable: {cpu: "2", memory: 4Gi, pods: 110}
watchLag: 0s
bookmarkInterval: 200ms
kubelet: {enabled: true}
)";

std::string PodBody(const std::string& name, const std::string& cpu = "100m") {
  return json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"labels", {{"app", "web"}}}}},
              {"spec",
               {{"containers", json::array({{{"name", "c"},
                                             {"image", "nginx"},
                                             {"resources", {{"requests", {{"cpu", cpu}}}}}}})}}}}
      .dump();
}

std::string BindingBody(const std::string& name, const std::string& node,
                        const std::string& uid = "") {
  json b = {{"apiVersion", "v1"},
            {"kind", "Binding"},
            {"metadata", {{"name", name}, {"namespace", "default"}}},
            {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!uid.empty()) b["metadata"]["uid"] = uid;
  return b.dump();
}

void ExpectStatus(const HttpResult& r, int code, const std::string& reason) {
  EXPECT_EQ(r.status, code) << r.raw;
  EXPECT_EQ(r.body.value("kind", ""), "Status") << r.raw;
  EXPECT_EQ(r.body.value("apiVersion", ""), "v1") << r.raw;
  EXPECT_EQ(r.body.value("status", ""), "Failure") << r.raw;
  EXPECT_EQ(r.body.value("reason", ""), reason) << r.raw;
  EXPECT_EQ(r.body.value("code", 0), code) << r.raw;
}

class SimApiTest : public ::testing::Test {
 protected:
  void SetUp() override { StartSim(kPair); }
  void StartSim(const std::string& config, const std::vector<std::string>& args = {}) {
    auto sim = SimProcess::Start(config, args);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = *std::move(sim);
    client_ = sim_->Client();
  }
  HttpResult Create(const std::string& name, const std::string& cpu = "100m") {
    return Call(*client_, "POST", "/api/v1/namespaces/default/pods", PodBody(name, cpu));
  }
  HttpResult Bind(const std::string& name, const std::string& node, const std::string& uid = "") {
    return Call(*client_, "POST",
                absl::StrCat("/api/v1/namespaces/default/pods/", name, "/binding"),
                BindingBody(name, node, uid));
  }
  HttpResult GetPod(const std::string& name) {
    return Call(*client_, "GET", "/api/v1/namespaces/default/pods/" + name);
  }
  std::string Rv() {
    return Call(*client_, "GET", "/api/v1/pods")
        .body["metadata"]["resourceVersion"]
        .get<std::string>();
  }
  HttpResult Admin(const std::string& path, const std::string& body = "{}") {
    return Call(*client_, "POST", path, body);
  }

  std::unique_ptr<SimProcess> sim_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(SimApiTest, CreateAssignsServerFieldsAndGetReturnsThePod) {
  HttpResult created = Create("p1");
  ASSERT_EQ(created.status, 201) << created.raw;
  const json& meta = created.body["metadata"];
  EXPECT_EQ(meta["namespace"], "default");
  EXPECT_EQ(meta["uid"].get<std::string>().size(), 36u);
  EXPECT_FALSE(meta["resourceVersion"].get<std::string>().empty());
  EXPECT_FALSE(meta["creationTimestamp"].get<std::string>().empty());
  EXPECT_EQ(created.body["status"]["phase"], "Pending");
  EXPECT_EQ(created.body["spec"]["schedulerName"], "default-scheduler");
  HttpResult got = GetPod("p1");
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, created.body);
}

TEST_F(SimApiTest, BadRequestsGetStatusObjects) {
  ASSERT_EQ(Create("p1").status, 201);
  ExpectStatus(Create("p1"), 409, "AlreadyExists");
  EXPECT_EQ(Create("p1").body["message"], "pods \"p1\" already exists");
  ExpectStatus(Create(""), 422, "Invalid");
  ExpectStatus(Create("bad", "lots"), 422, "Invalid");
  ExpectStatus(Call(*client_, "POST", "/api/v1/namespaces/default/pods", "{\"metadata\": ["), 400,
               "BadRequest");
  ExpectStatus(Call(*client_, "POST", "/api/v1/namespaces/default/pods", "[1,2]"), 400,
               "BadRequest");
  ExpectStatus(GetPod("missing"), 404, "NotFound");
  EXPECT_EQ(GetPod("missing").body["message"], "pods \"missing\" not found");
  ExpectStatus(Call(*client_, "GET", "/api/v2/whatever"), 404, "NotFound");
  ExpectStatus(Call(*client_, "GET", "/api/v1/pods?fieldSelector=spec.foo%3Dbar"), 400,
               "BadRequest");
  ExpectStatus(Call(*client_, "PUT", "/api/v1/namespaces/default/pods", "{}"), 405,
               "MethodNotAllowed");
  // A PUT without the pod's containers changes its spec (ValidatePodUpdate).
  ExpectStatus(Call(*client_, "PUT", "/api/v1/namespaces/default/pods/p1", "{}"), 422, "Invalid");
  ExpectStatus(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/missing"), 404,
               "NotFound");
  ExpectStatus(
      Call(*client_, "POST", "/api/v1/namespaces/default/pods", std::string(4 * 1024 * 1024, 'x')),
      413, "RequestEntityTooLarge");
  // Still serving after all that.
  EXPECT_EQ(GetPod("p1").status, 200);
}

TEST_F(SimApiTest, PagedListKeepsOneResourceVersion) {
  for (int i = 0; i < 25; ++i) ASSERT_EQ(Create(absl::StrCat("p", 10 + i)).status, 201);
  HttpResult page1 = Call(*client_, "GET", "/api/v1/namespaces/default/pods?limit=10");
  ASSERT_EQ(page1.status, 200);
  EXPECT_EQ(page1.body["kind"], "PodList");
  EXPECT_EQ(page1.body["items"].size(), 10u);
  EXPECT_EQ(page1.body["metadata"]["remainingItemCount"], 15);
  const std::string rv = page1.body["metadata"]["resourceVersion"];
  ASSERT_EQ(Create("p00").status, 201);  // not in the snapshot
  std::vector<std::string> names;
  json page = page1.body;
  while (true) {
    for (const json& item : page["items"]) names.push_back(item["metadata"]["name"]);
    EXPECT_EQ(page["metadata"]["resourceVersion"], rv);
    if (!page["metadata"].contains("continue")) break;
    HttpResult next = Call(*client_, "GET",
                           "/api/v1/namespaces/default/pods?limit=10&continue=" +
                               page["metadata"]["continue"].get<std::string>());
    ASSERT_EQ(next.status, 200) << next.raw;
    page = next.body;
  }
  ASSERT_EQ(names.size(), 25u);
  EXPECT_EQ(names.front(), "p10");
  EXPECT_EQ(names.back(), "p34");
  // A token that does not decode is a bad request (etcd3/store.go GetList); one whose version
  // the history no longer has is 410 Expired, with a token that continues at the latest version.
  HttpResult bogus = Call(*client_, "GET", "/api/v1/pods?limit=10&continue=bogus");
  ExpectStatus(bogus, 400, "BadRequest");
  EXPECT_THAT(bogus.body["message"].get<std::string>(), StartsWith("invalid continue token: "));
  ASSERT_EQ(Admin("/sim/faults/expire").status, 200);
  HttpResult gone = Call(*client_, "GET",
                         "/api/v1/namespaces/default/pods?limit=10&continue=" +
                             page1.body["metadata"]["continue"].get<std::string>());
  ExpectStatus(gone, 410, "Expired");
  EXPECT_THAT(gone.body["message"].get<std::string>(),
              StartsWith("The provided continue parameter is too old to display a consistent list "
                         "result. You can start a new list without the continue parameter, or use "
                         "the continue token in this response"));
  HttpResult rest = Call(*client_, "GET",
                         "/api/v1/namespaces/default/pods?limit=100&continue=" +
                             gone.body["metadata"]["continue"].get<std::string>());
  ASSERT_EQ(rest.status, 200) << rest.raw;
  EXPECT_EQ(rest.body["items"].size(), 15u);  // p20..p34, after the last key of page 1
  EXPECT_EQ(rest.body["metadata"]["resourceVersion"], Rv());
  ExpectStatus(Call(*client_, "GET",
                    "/api/v1/pods?limit=10&resourceVersion=5&continue=" +
                        page1.body["metadata"]["continue"].get<std::string>()),
               400, "BadRequest");
}

// The resourceVersion semantics of LIST (kubernetes.io "Semantics for get and list"; apiserver
// storage/cacher/delegator.go shouldDelegateList, cacher.go, etcd3/store.go GetList).
TEST_F(SimApiTest, ListResourceVersionSemantics) {
  ASSERT_EQ(Create("a").status, 201);
  const std::string first = Rv();
  ASSERT_EQ(Create("b").status, 201);
  ASSERT_EQ(Create("c").status, 201);
  const std::string latest = Rv();
  auto list = [&](const std::string& query) {
    return Call(*client_, "GET", "/api/v1/namespaces/default/pods?" + query);
  };
  auto names = [](const HttpResult& r) {
    std::vector<std::string> out;
    for (const json& item : r.body["items"]) out.push_back(item["metadata"]["name"]);
    return out;
  };
  // "0": any version, from the watch cache, which ignores limit.
  HttpResult any = list("resourceVersion=0&limit=1");
  ASSERT_EQ(any.status, 200) << any.raw;
  EXPECT_EQ(names(any).size(), 3u);
  EXPECT_FALSE(any.body["metadata"].contains("continue"));
  // "": the latest, paged.
  HttpResult consistent = list("limit=1");
  EXPECT_EQ(names(consistent).size(), 1u);
  EXPECT_TRUE(consistent.body["metadata"].contains("continue"));
  // N with Exact, or N with a limit and no match (the legacy exact read): as it was at N.
  for (const std::string& query : {"resourceVersion=" + first + "&resourceVersionMatch=Exact",
                                   "resourceVersion=" + first + "&limit=10"}) {
    HttpResult exact = list(query);
    ASSERT_EQ(exact.status, 200) << query << exact.raw;
    EXPECT_EQ(names(exact), std::vector<std::string>{"a"}) << query;
    EXPECT_EQ(exact.body["metadata"]["resourceVersion"], first) << query;
  }
  // N with NotOlderThan, or N without a limit: the latest.
  for (const std::string& query :
       {"resourceVersion=" + first + "&resourceVersionMatch=NotOlderThan",
        "resourceVersion=" + first}) {
    HttpResult newer = list(query);
    ASSERT_EQ(newer.status, 200) << query << newer.raw;
    EXPECT_EQ(names(newer).size(), 3u) << query;
    EXPECT_EQ(newer.body["metadata"]["resourceVersion"], latest) << query;
  }
  // Invalid options: 422 from ValidateListOptions.
  HttpResult no_rv = list("resourceVersionMatch=NotOlderThan");
  ExpectStatus(no_rv, 422, "Invalid");
  EXPECT_EQ(no_rv.body["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
            "resourceVersionMatch is forbidden unless resourceVersion is provided");
  EXPECT_EQ(no_rv.body["details"]["causes"][0]["field"], "resourceVersionMatch");
  ExpectStatus(list("resourceVersion=0&resourceVersionMatch=Exact"), 422, "Invalid");
  ExpectStatus(list("resourceVersion=1&resourceVersionMatch=Newest"), 422, "Invalid");
  ExpectStatus(list("sendInitialEvents=true"), 422, "Invalid");
  // An exact version the history no longer has: 410.
  ASSERT_EQ(Admin("/sim/faults/expire").status, 200);
  HttpResult expired = list("resourceVersion=" + first + "&resourceVersionMatch=Exact");
  ExpectStatus(expired, 410, "Expired");
  EXPECT_EQ(expired.body["message"], "The resourceVersion for the provided list is too old.");
  // A version from the future: the watch cache waits 3 s, then 504 with cause
  // ResourceVersionTooLarge (storage.NewTooLargeResourceVersionError).
  const std::string future = std::to_string(std::stoull(latest) + 1000);
  const absl::Time asked = absl::Now();
  HttpResult too_large = list("resourceVersion=" + future);
  EXPECT_GE(absl::Now() - asked, absl::Seconds(3));
  ExpectStatus(too_large, 504, "Timeout");
  EXPECT_EQ(too_large.body["message"],
            absl::StrCat("Timeout: Too large resource version: ", future, ", current: ", latest));
  EXPECT_EQ(too_large.body["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
}

// WatchList (KEP-3157; client-go reflector.go watchList): the state as ADDED events, then a
// BOOKMARK annotated k8s.io/initial-events-end at the state's resourceVersion, then changes.
TEST_F(SimApiTest, WatchListStreamsTheStateThenTheEndBookmarkThenChanges) {
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Create("b").status, 201);
  const std::string rv = Rv();
  WatchStream watch(sim_->port(),
                    "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&"
                    "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10");
  ASSERT_TRUE(watch.WaitForLines(3, absl::Seconds(10)));
  ASSERT_EQ(Create("c").status, 201);
  ASSERT_TRUE(watch.WaitForLines(4, absl::Seconds(10)));
  std::vector<WatchStream::Line> lines = watch.lines();
  EXPECT_EQ(lines[0].event["type"], "ADDED");
  EXPECT_EQ(lines[0].event["object"]["metadata"]["name"], "a");
  EXPECT_EQ(lines[1].event["type"], "ADDED");
  EXPECT_EQ(lines[2].event,
            json::parse(absl::StrCat(
                R"({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{)",
                R"("resourceVersion":")", rv,
                R"(","annotations":{"k8s.io/initial-events-end":"true"}}}})")));
  EXPECT_EQ(lines[3].event["type"], "ADDED");
  EXPECT_EQ(lines[3].event["object"]["metadata"]["name"], "c");
  // Without allowWatchBookmarks there is no end marker.
  WatchStream quiet(sim_->port(),
                    "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&"
                    "resourceVersionMatch=NotOlderThan&timeoutSeconds=1");
  ASSERT_TRUE(quiet.WaitForEnd(absl::Seconds(10)));
  EXPECT_EQ(quiet.lines().size(), 3u);
  for (const WatchStream::Line& line : quiet.lines()) EXPECT_EQ(line.event["type"], "ADDED");
  // sendInitialEvents needs resourceVersionMatch=NotOlderThan.
  ExpectStatus(Call(*client_, "GET", "/api/v1/pods?watch=true&sendInitialEvents=true"), 422,
               "Invalid");
}

// A whole HTTP/1.1 response read off a raw socket (Connection: close): the head, lower-cased,
// and the body with its chunked framing removed. Raw so that nothing decodes a Content-Encoding.
struct RawResponse {
  std::string head;
  std::string body;
};

RawResponse RawGet(int port, const std::string& path, const std::string& accept_encoding) {
  RawResponse out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    ADD_FAILURE() << "connect: " << strerror(errno);
    return out;
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                   accept_encoding.empty() ? "" : "Accept-Encoding: ", accept_encoding,
                   accept_encoding.empty() ? "" : "\r\n", "Connection: close\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) raw.append(buf, n);
  close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) {
    ADD_FAILURE() << "no HTTP head in: " << raw.substr(0, 200);
    return out;
  }
  out.head = absl::AsciiStrToLower(raw.substr(0, end));
  for (size_t at = end + 4; at < raw.size();) {  // chunks: "hex\r\n" data "\r\n"
    const size_t eol = raw.find("\r\n", at);
    size_t size = 0;
    if (eol == std::string::npos || !absl::SimpleHexAtoi(raw.substr(at, eol - at), &size) ||
        size == 0) {
      break;
    }
    out.body.append(raw, eol + 2, size);
    at = eol + 2 + size + 2;
  }
  return out;
}

// The gzip members of `body`, each decoded; fails the test on damaged data.
std::vector<std::string> GzipMembers(const std::string& body) {
  std::vector<std::string> members;
  size_t at = 0;
  while (at < body.size()) {
    z_stream z{};
    EXPECT_EQ(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data() + at));
    z.avail_in = static_cast<uInt>(body.size() - at);
    std::string member;
    int rc = Z_OK;
    while (rc == Z_OK) {
      char out[16384];
      z.next_out = reinterpret_cast<Bytef*>(out);
      z.avail_out = sizeof(out);
      rc = inflate(&z, Z_NO_FLUSH);
      member.append(out, sizeof(out) - z.avail_out);
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
      ADD_FAILURE() << "a damaged gzip member at byte " << at << ": " << rc;
      break;
    }
    at = body.size() - z.avail_in;
    members.push_back(std::move(member));
  }
  return members;
}

// watchListCompression (kube-apiserver 1.37's WatchListCompression): a WatchList whose
// Accept-Encoding names gzip comes as gzip members, the state's first; a plain watch, a
// WatchList that does not ask, or one whose token is "gzip;q=1", comes uncompressed
// (responsewriters/compression.go ContentEncodingSupported).
TEST_F(SimApiTest, WatchListCompressionAnswersGzipMembersToClientsThatAskForGzip) {
  StartSim(absl::StrCat(kPair, "watchListCompression: true\nbookmarkInterval: 200ms\n"));
  ASSERT_EQ(Create("a").status, 201);
  const std::string watch_list =
      "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
  // The state, its end bookmark, then the periodic bookmarks until the timeout: each write
  // after the state is a member of its own.
  RawResponse gz = RawGet(sim_->port(), watch_list, "deflate, gzip");
  EXPECT_THAT(gz.head, ::testing::HasSubstr("\r\ncontent-encoding: gzip"));
  std::vector<std::string> members = GzipMembers(gz.body);
  ASSERT_GE(members.size(), 2u);
  std::vector<json> events;
  for (const std::string& member : members) {
    for (absl::string_view line : absl::StrSplit(member, '\n', absl::SkipEmpty())) {
      events.push_back(json::parse(line));
    }
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(events[1]["type"], "BOOKMARK");
  EXPECT_EQ(events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  for (size_t i = 2; i < events.size(); ++i) EXPECT_EQ(events[i]["type"], "BOOKMARK");
  for (const std::string& accept : {std::string(), std::string("gzip;q=1")}) {
    RawResponse plain = RawGet(sim_->port(), watch_list, accept);
    EXPECT_THAT(plain.head, ::testing::Not(::testing::HasSubstr("content-encoding")));
    EXPECT_TRUE(absl::StartsWith(plain.body, "{\"type\":\"ADDED\"")) << plain.body;
  }
  RawResponse watch = RawGet(
      sim_->port(), "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1&resourceVersion=0",
      "gzip");
  EXPECT_THAT(watch.head, ::testing::Not(::testing::HasSubstr("content-encoding")));
  EXPECT_TRUE(absl::StartsWith(watch.body, "{\"type\":\"ADDED\"")) << watch.body;
}

// One event of a protobuf watch stream: a metav1.WatchEvent's type and its object's raw bytes.
struct ProtobufEvent {
  std::string type;
  std::string raw;
};

// Reads a protobuf varint at `*at` of `bytes`; false past the end.
bool ReadVarint(const std::string& bytes, size_t* at, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(bytes[(*at)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// The length-delimited fields of a message, by field number (the last of each number).
std::map<uint64_t, std::string> BytesFields(const std::string& message) {
  std::map<uint64_t, std::string> fields;
  size_t at = 0;
  while (at < message.size()) {
    uint64_t tag = 0;
    uint64_t n = 0;
    if (!ReadVarint(message, &at, &tag) || (tag & 7) != 2 || !ReadVarint(message, &at, &n) ||
        at + n > message.size()) {
      ADD_FAILURE() << "not a message of length-delimited fields";
      return {};
    }
    fields[tag >> 3] = message.substr(at, n);
    at += n;
  }
  return fields;
}

// Splits a watch body into its frames (4-byte big-endian length, then a WatchEvent).
std::vector<ProtobufEvent> ProtobufEvents(const std::string& body) {
  std::vector<ProtobufEvent> events;
  size_t at = 0;
  while (at + 4 <= body.size()) {
    const uint32_t length = (static_cast<uint32_t>(static_cast<uint8_t>(body[at])) << 24) |
                            (static_cast<uint32_t>(static_cast<uint8_t>(body[at + 1])) << 16) |
                            (static_cast<uint32_t>(static_cast<uint8_t>(body[at + 2])) << 8) |
                            static_cast<uint32_t>(static_cast<uint8_t>(body[at + 3]));
    at += 4;
    if (at + length > body.size()) break;
    std::map<uint64_t, std::string> event = BytesFields(body.substr(at, length));
    events.push_back({event[1], BytesFields(event[2])[1]});
    at += length;
  }
  EXPECT_EQ(at, body.size()) << "a partial frame at the end";
  return events;
}

TEST_F(SimApiTest, ProtobufWatchListWhenTheClientPrefersIt) {
  ASSERT_EQ(Create("proto-pod-a").status, 201);
  ASSERT_EQ(Create("proto-pod-b").status, 201);
  const std::string rv = Rv();
  const std::string query =
      "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
  // client-go's informers with ContentType protobuf (kube-scheduler's default).
  auto res = client_->Get(query, httplib::Headers{{"Accept",
                                                   "application/vnd.kubernetes.protobuf, "
                                                   "application/json"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"),
            "application/vnd.kubernetes.protobuf;stream=watch");
  std::vector<ProtobufEvent> events = ProtobufEvents(res->body);
  ASSERT_GE(events.size(), 3u);
  for (size_t i = 3; i < events.size(); ++i) EXPECT_EQ(events[i].type, "BOOKMARK");  // 200ms
  const std::string magic("k8s\0", 4);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i].type, "ADDED");
    EXPECT_THAT(events[i].raw, StartsWith(magic));
    EXPECT_THAT(events[i].raw, HasSubstr(i == 0 ? "proto-pod-a" : "proto-pod-b"));
  }
  EXPECT_EQ(events[2].type, "BOOKMARK");
  ASSERT_THAT(events[2].raw, StartsWith(magic));
  // runtime.Unknown {typeMeta {apiVersion, kind}, raw: Pod {metadata {resourceVersion (6),
  // annotations (12) {"k8s.io/initial-events-end": "true"}}}}.
  std::map<uint64_t, std::string> unknown = BytesFields(events[2].raw.substr(4));
  std::map<uint64_t, std::string> type_meta = BytesFields(unknown[1]);
  EXPECT_EQ(type_meta[1], "v1");
  EXPECT_EQ(type_meta[2], "Pod");
  std::map<uint64_t, std::string> metadata = BytesFields(BytesFields(unknown[2])[1]);
  EXPECT_EQ(metadata[6], rv);
  std::map<uint64_t, std::string> annotation = BytesFields(metadata[12]);
  EXPECT_EQ(annotation[1], "k8s.io/initial-events-end");
  EXPECT_EQ(annotation[2], "true");

  // JSON first, JSON only, a Table, other kinds and LISTs: JSON as before.
  for (const std::string accept :
       {"application/json, application/vnd.kubernetes.protobuf", "application/json", "*/*",
        "application/vnd.kubernetes.protobuf;q=0.5, application/json"}) {
    SCOPED_TRACE(accept);
    auto plain = client_->Get(query, httplib::Headers{{"Accept", accept}});
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->get_header_value("Content-Type"), "application/json; charset=utf-8");
    std::vector<std::string> lines = absl::StrSplit(plain->body, '\n', absl::SkipEmpty());
    ASSERT_GE(lines.size(), 3u) << plain->body;
    EXPECT_EQ(json::parse(lines[0])["object"]["metadata"]["name"], "proto-pod-a");
    EXPECT_EQ(json::parse(lines[2])["type"], "BOOKMARK");
  }
  auto table =
      client_->Get(query, httplib::Headers{{"Accept",
                                            "application/json;as=Table;v=v1;g=meta.k8s.io, "
                                            "application/vnd.kubernetes.protobuf"}});
  ASSERT_TRUE(table);
  EXPECT_EQ(table->get_header_value("Content-Type"), "application/json; charset=utf-8");
  auto list = client_->Get("/api/v1/pods", httplib::Headers{{"Accept", kProtobufAccept}});
  ASSERT_TRUE(list);
  EXPECT_EQ(json::parse(list->body)["kind"], "PodList");
  auto kube_events = client_->Get("/api/v1/events?watch=true&timeoutSeconds=1",
                                  httplib::Headers{{"Accept", kProtobufAccept}});
  ASSERT_TRUE(kube_events);
  EXPECT_EQ(kube_events->get_header_value("Content-Type"), "application/json; charset=utf-8");
}

TEST_F(SimApiTest, ProtobufWatchOfNodesStartsWithTheNodes) {
  auto res = client_->Get("/api/v1/nodes?watch=true&timeoutSeconds=1",
                          httplib::Headers{{"Accept", kProtobufAccept}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"),
            "application/vnd.kubernetes.protobuf;stream=watch");
  std::vector<ProtobufEvent> events = ProtobufEvents(res->body);
  ASSERT_EQ(events.size(), 2u);  // a watch from "" starts with the current objects
  for (const ProtobufEvent& e : events) {
    EXPECT_EQ(e.type, "ADDED");
    std::map<uint64_t, std::string> type_meta = BytesFields(BytesFields(e.raw.substr(4))[1]);
    EXPECT_EQ(type_meta[2], "Node");
  }
  EXPECT_THAT(events[0].raw, HasSubstr("worker-1"));
}

TEST_F(SimApiTest, WatchListSwitchedOffIsRefusedAsWithTheFeatureGateOff) {
  ASSERT_EQ(Admin("/sim/features/watch-list", R"({"on":false})").status, 200);
  HttpResult refused = Call(*client_, "GET",
                            "/api/v1/pods?watch=true&sendInitialEvents=true&"
                            "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  ExpectStatus(refused, 422, "Invalid");
  EXPECT_EQ(refused.body["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: "
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is "
            "enabled");
  // Asked as kube-scheduler's informers ask, the refusal comes in protobuf, the negotiated
  // encoding (apiserver responsewriters/writers.go ErrorNegotiated): a Status {3 message, 6 code}.
  auto pb = client_->Get(
      "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
      "allowWatchBookmarks=true",
      httplib::Headers{{"Accept", kProtobufAccept}});
  ASSERT_TRUE(pb);
  EXPECT_EQ(pb->status, 422);
  EXPECT_EQ(pb->get_header_value("Content-Type"), "application/vnd.kubernetes.protobuf");
  ASSERT_THAT(pb->body, StartsWith(std::string("k8s\0", 4)));
  std::map<uint64_t, std::string> unknown = BytesFields(pb->body.substr(4));
  EXPECT_EQ(BytesFields(unknown[1])[2], "Status");
  EXPECT_THAT(unknown[2], HasSubstr("sendInitialEvents is forbidden for watch unless the "
                                    "WatchList feature gate is enabled"));
  EXPECT_THAT(unknown[2], HasSubstr(std::string("\x30\xa6\x03", 3)));  // 6: code 422
  // Plain watches still work.
  WatchStream watch(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=1");
  ASSERT_TRUE(watch.WaitForEnd(absl::Seconds(10)));
  EXPECT_EQ(watch.status(), 200);
}

TEST_F(SimApiTest, RequestsAndResponseBytesAreCountedByKind) {
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Call(*client_, "DELETE", "/sim/requests").status, 200);
  HttpResult list = Call(*client_, "GET", "/api/v1/pods?fieldSelector=status.phase%3DFailed");
  ASSERT_EQ(list.status, 200);
  HttpResult cached = Call(*client_, "GET", "/api/v1/pods?resourceVersion=0&limit=500");
  ASSERT_EQ(cached.status, 200);
  ASSERT_EQ(GetPod("a").status, 200);
  {
    WatchStream watch(sim_->port(), "/api/v1/nodes?watch=true&timeoutSeconds=1");
    ASSERT_TRUE(watch.WaitForEnd(absl::Seconds(10)));
  }
  HttpResult counts = Call(*client_, "GET", "/sim/requests");
  ASSERT_EQ(counts.status, 200);
  const json& by = counts.body["byRequest"];
  EXPECT_EQ(by["LIST pods fieldSelector=status.phase=Failed resourceVersion=\"\""]["requests"], 1)
      << counts.raw;
  EXPECT_EQ(by["LIST pods fieldSelector=status.phase=Failed resourceVersion=\"\""]["bytes"],
            list.raw.size());
  EXPECT_EQ(by["LIST pods resourceVersion=0"]["bytes"], cached.raw.size());
  EXPECT_EQ(by["GET pods"]["requests"], 1);
  EXPECT_EQ(by["WATCH nodes"]["requests"], 1);
  EXPECT_GT(by["WATCH nodes"]["bytes"], 0);  // the two nodes as ADDED events
  EXPECT_EQ(counts.body["requests"], 4);
}

TEST_F(SimApiTest, WatchDeliversEventsAndResumesFromAResourceVersion) {
  ASSERT_EQ(Create("before").status, 201);
  const std::string rv = Rv();
  ASSERT_EQ(Create("after").status, 201);
  WatchStream watch(
      sim_->port(),
      "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=10&resourceVersion=" + rv);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  ASSERT_EQ(Bind("after", "worker-1").status, 201);
  ASSERT_EQ(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/after").status, 200);
  // ADDED, MODIFIED (bound), MODIFIED (Running), then the graceful deletion: MODIFIED
  // (deletionTimestamp), MODIFIED (the kubelet stopped it: Succeeded), DELETED.
  ASSERT_TRUE(watch.WaitForLines(6, absl::Seconds(10)));
  auto lines = watch.lines();
  EXPECT_EQ(lines[0].event["type"], "ADDED");
  EXPECT_EQ(lines[0].event["object"]["metadata"]["name"], "after");
  EXPECT_EQ(lines[1].event["type"], "MODIFIED");
  EXPECT_EQ(lines[1].event["object"]["spec"]["nodeName"], "worker-1");
  EXPECT_EQ(lines[2].event["type"], "MODIFIED");
  EXPECT_EQ(lines[2].event["object"]["status"]["phase"], "Running");
  EXPECT_EQ(lines[3].event["type"], "MODIFIED");
  EXPECT_TRUE(lines[3].event["object"]["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(lines[4].event["type"], "MODIFIED");
  EXPECT_EQ(lines[4].event["object"]["status"]["phase"], "Succeeded");
  EXPECT_EQ(lines[5].event["type"], "DELETED");
  EXPECT_GT(
      std::stoull(lines[5].event["object"]["metadata"]["resourceVersion"].get<std::string>()),
      std::stoull(lines[4].event["object"]["metadata"]["resourceVersion"].get<std::string>()));
}

TEST_F(SimApiTest, WatchFromZeroStartsWithTheCurrentObjects) {
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Create("b").status, 201);
  WatchStream watch(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=0");
  ASSERT_TRUE(watch.WaitForLines(2, absl::Seconds(10)));
  EXPECT_EQ(watch.lines()[0].event["type"], "ADDED");
  EXPECT_EQ(watch.lines()[1].event["object"]["metadata"]["name"], "b");
}

TEST_F(SimApiTest, TimeoutSecondsEndsTheWatch) {
  WatchStream watch(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=1");
  EXPECT_TRUE(watch.WaitForEnd(absl::Seconds(10)));
  EXPECT_EQ(watch.status(), 200);
}

TEST_F(SimApiTest, FieldSelectedWatchSeesFinishedPodsAsDeleted) {
  ASSERT_EQ(Create("job").status, 201);
  ASSERT_EQ(Bind("job", "worker-1").status, 201);
  WatchStream watch(sim_->port(),
                    "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" + Rv() +
                        "&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed");
  HttpResult done = Admin("/sim/pods/default/job/phase", R"({"phase":"Succeeded"})");
  ASSERT_EQ(done.status, 200);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  // As the API server's watch cache sends it (cacher/cache_watcher.go, convertToWatchEvent): the
  // previous content, the new resourceVersion.
  EXPECT_EQ(watch.lines()[0].event["type"], "DELETED");
  EXPECT_EQ(watch.lines()[0].event["object"]["status"]["phase"], "Running");
  EXPECT_EQ(watch.lines()[0].event["object"]["metadata"]["resourceVersion"],
            done.body["metadata"]["resourceVersion"]);
}

TEST_F(SimApiTest, KubeletRejectionIsDeletedForTheSchedulersWatchAndAddedForFailedPods) {
  ASSERT_EQ(Create("big", "3800m").status, 201);
  ASSERT_EQ(Create("small", "400m").status, 201);
  ASSERT_EQ(Bind("big", "worker-1").status, 201);
  const std::string rv = Rv();
  WatchStream running(sim_->port(),
                      "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" + rv +
                          "&fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed");
  WatchStream failed(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" +
                                       rv + "&fieldSelector=status.phase%3DFailed");
  ASSERT_EQ(Bind("small", "worker-1").status, 201);
  HttpResult small = GetPod("small");
  ASSERT_EQ(small.body["status"]["phase"], "Failed");
  const std::string rejected_rv = small.body["metadata"]["resourceVersion"];
  ASSERT_TRUE(running.WaitForLines(2, absl::Seconds(10)));
  std::vector<WatchStream::Line> lines = running.lines();
  EXPECT_EQ(lines[0].event["type"], "MODIFIED");  // the binding
  EXPECT_EQ(lines[1].event["type"], "DELETED");   // the rejection
  EXPECT_EQ(lines[1].event["object"]["status"]["phase"], "Pending");
  EXPECT_FALSE(lines[1].event["object"]["status"].contains("reason"));
  EXPECT_EQ(lines[1].event["object"]["metadata"]["resourceVersion"], rejected_rv);
  ASSERT_TRUE(failed.WaitForLines(1, absl::Seconds(10)));
  EXPECT_EQ(failed.lines()[0].event["type"], "ADDED");
  EXPECT_EQ(failed.lines()[0].event["object"], small.body);
}

TEST_F(SimApiTest, BookmarksCarryTheResourceVersion) {
  const std::string rv = Rv();
  WatchStream watch(
      sim_->port(),
      "/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=10&resourceVersion=" + rv);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  const json e = watch.lines()[0].event;
  EXPECT_EQ(e["type"], "BOOKMARK");
  EXPECT_EQ(e["object"]["metadata"]["resourceVersion"], rv);
  EXPECT_EQ(e["object"]["kind"], "Pod");
}

TEST_F(SimApiTest, ExpiredResourceVersionGets410AsAnErrorEvent) {
  const std::string rv = Rv();
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Admin("/sim/faults/expire").status, 200);
  const std::string now = Rv();
  WatchStream watch(sim_->port(),
                    "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" + rv);
  ASSERT_TRUE(watch.WaitForEnd(absl::Seconds(10)));
  ASSERT_EQ(watch.lines().size(), 1u);
  EXPECT_EQ(watch.lines()[0].event,
            json::parse(absl::StrCat(
                R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},)",
                R"("status":"Failure","message":"too old resource version: )", rv, " (", now,
                R"x()","reason":"Expired","code":410}})x")));
  // A watch from now still works.
  WatchStream fresh(sim_->port(),
                    "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" + now);
  ASSERT_EQ(Create("b").status, 201);
  ASSERT_TRUE(fresh.WaitForLines(1, absl::Seconds(10)));
  EXPECT_EQ(fresh.lines()[0].event["type"], "ADDED");
}

TEST_F(SimApiTest, ExpiredResourceVersionGetsAProtobufErrorEventInAProtobufWatch) {
  const std::string rv = Rv();
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Admin("/sim/faults/expire").status, 200);
  auto res = client_->Get("/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" + rv,
                          httplib::Headers{{"Accept", kProtobufAccept}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"),
            "application/vnd.kubernetes.protobuf;stream=watch");
  std::vector<ProtobufEvent> events = ProtobufEvents(res->body);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "ERROR");
  ASSERT_THAT(events[0].raw, StartsWith(std::string("k8s\0", 4)));
  // runtime.Unknown {typeMeta {v1, Status}, raw: Status {2 status, 3 message, 4 reason, 6 code}}.
  std::map<uint64_t, std::string> unknown = BytesFields(events[0].raw.substr(4));
  std::map<uint64_t, std::string> type_meta = BytesFields(unknown[1]);
  EXPECT_EQ(type_meta[1], "v1");
  EXPECT_EQ(type_meta[2], "Status");
  EXPECT_THAT(unknown[2], HasSubstr("Failure"));
  EXPECT_THAT(unknown[2], HasSubstr("too old resource version: " + rv));
  EXPECT_THAT(unknown[2], HasSubstr("Expired"));
  EXPECT_THAT(unknown[2], HasSubstr(std::string("\x30\x9a\x03", 3)));  // 6: code 410
}

TEST_F(SimApiTest, BindingCreatedConflictsAndPreconditions) {
  HttpResult pod = Create("p");
  ASSERT_EQ(pod.status, 201);
  const std::string uid = pod.body["metadata"]["uid"];
  HttpResult wrong = Bind("p", "worker-1", "00000000-0000-0000-0000-000000000000");
  ExpectStatus(wrong, 409, "Conflict");
  EXPECT_THAT(wrong.body["message"].get<std::string>(),
              HasSubstr("Precondition failed: UID in precondition: "
                        "00000000-0000-0000-0000-000000000000, UID in object meta: " +
                        uid));
  HttpResult ok = Bind("p", "worker-1", uid);
  ASSERT_EQ(ok.status, 201);
  EXPECT_EQ(
      ok.body,
      json::parse(
          R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201})"));
  HttpResult again = Bind("p", "worker-2");
  ExpectStatus(again, 409, "Conflict");
  EXPECT_EQ(again.body["message"],
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to "
            "node \"worker-1\"");
  ExpectStatus(Bind("missing", "worker-1"), 404, "NotFound");
  // A node that does not exist is accepted; nobody runs the pod.
  ASSERT_EQ(Create("ghost").status, 201);
  ASSERT_EQ(Bind("ghost", "no-such-node").status, 201);
  EXPECT_EQ(GetPod("ghost").body["spec"]["nodeName"], "no-such-node");
  EXPECT_EQ(GetPod("ghost").body["status"]["phase"], "Pending");
}

// Pods are ReturnDeletedObject (pkg/registry/core/pod/storage/storage.go): DELETE answers 200 with
// the object, the deleted one for an unbound pod, the one with its deletion pending for a bound
// one (graceful deletion, which the simulated kubelet then finishes).
TEST_F(SimApiTest, DeleteAnswersTheObjectAndBoundPodsEndGracefully) {
  ASSERT_EQ(Create("unbound").status, 201);
  HttpResult gone = Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/unbound");
  ASSERT_EQ(gone.status, 200) << gone.raw;
  EXPECT_EQ(gone.body["kind"], "Pod");
  EXPECT_FALSE(gone.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(GetPod("unbound").status, 404);

  ASSERT_EQ(Create("web").status, 201);
  ASSERT_EQ(Bind("web", "worker-1").status, 201);
  const std::string rv = Rv();
  WatchStream watch(sim_->port(),
                    "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=10&"
                    "resourceVersion=" +
                        rv);
  HttpResult deleting = Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/web");
  ASSERT_EQ(deleting.status, 200) << deleting.raw;
  EXPECT_EQ(deleting.body["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(deleting.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(deleting.body["status"]["phase"], "Running");
  // The kubelet stops it (Succeeded) and deletes it with grace period 0.
  ASSERT_TRUE(watch.WaitForLines(3, absl::Seconds(10)));
  std::vector<WatchStream::Line> lines = watch.lines();
  EXPECT_EQ(lines[0].event["type"], "MODIFIED");
  EXPECT_TRUE(lines[0].event["object"]["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(lines[1].event["type"], "MODIFIED");
  EXPECT_EQ(lines[1].event["object"]["status"]["phase"], "Succeeded");
  EXPECT_EQ(lines[2].event["type"], "DELETED");
  EXPECT_EQ(GetPod("web").status, 404);
  // Preconditions are checked.
  ASSERT_EQ(Create("p").status, 201);
  ExpectStatus(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/p",
                    R"({"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}})"),
               409, "Conflict");
  ExpectStatus(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/p",
                    R"({"preconditions":{"resourceVersion":"1"}})"),
               409, "Conflict");
  // "" is a value like any other; null is none; a number is a bad request.
  ExpectStatus(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/p",
                    R"({"preconditions":{"uid":""}})"),
               409, "Conflict");
  ExpectStatus(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/p",
                    R"({"preconditions":{"uid":5}})"),
               400, "BadRequest");
  EXPECT_EQ(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/p",
                 R"({"preconditions":{"uid":null,"resourceVersion":null},"gracePeriodSeconds":0})")
                .status,
            200);
}

// The binding subresource's checks before the pod (storage.go BindingREST.Create and
// validation.ValidatePodBinding, whose error list is no Status: 500 with reason "").
TEST_F(SimApiTest, BindingRequestChecksAsTheApiServer) {
  ASSERT_EQ(Create("p").status, 201);
  auto post = [&](const json& binding) {
    return Call(*client_, "POST", "/api/v1/namespaces/default/pods/p/binding", binding.dump());
  };
  json unnamed = {{"target", {{"kind", "Node"}, {"name", "worker-1"}}}};
  HttpResult r = post(unnamed);
  ExpectStatus(r, 400, "BadRequest");
  EXPECT_EQ(r.body["message"], "name in URL does not match name in Binding object");
  r = post(
      {{"metadata", {{"name", "p"}, {"namespace", "other"}}}, {"target", {{"name", "worker-1"}}}});
  ExpectStatus(r, 400, "BadRequest");
  r = post({{"metadata", {{"name", "p"}}}, {"target", {{"kind", "Pod"}}}});
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_EQ(r.body["message"],
            "[target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\", "
            "target.name: Required value]");
  EXPECT_FALSE(r.body.contains("reason"));
  EXPECT_EQ(GetPod("p").body["spec"].value("nodeName", ""), "");
  r = post({{"metadata", {{"name", "p"}, {"annotations", {{"example.com/by", "test"}}}}},
            {"target", {{"name", "worker-1"}}}});
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_EQ(GetPod("p").body["metadata"]["annotations"]["example.com/by"], "test");
}

// The binding's write (BindingREST setPodNodeAndMetadata): the nomination cleared, PodScheduled
// set True where it stands, the other conditions kept, whatever their members hold (a client's
// status is stored as written); to a node the kubelet does not run, so the pod stays Pending.
TEST_F(SimApiTest, BindingKeepsOtherConditionsAndClearsTheNomination) {
  ASSERT_EQ(Create("q").status, 201);
  json pod = GetPod("q").body;
  pod["status"]["nominatedNodeName"] = "elsewhere";
  pod["status"]["conditions"] =
      json::array({{{"type", 1}, {"status", true}},
                   {{"type", "example.com/Checked"}, {"status", "True"}},
                   {{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}}});
  HttpResult put = Call(*client_, "PUT", "/api/v1/namespaces/default/pods/q/status", pod.dump());
  ASSERT_EQ(put.status, 200) << put.raw;
  ASSERT_EQ(Bind("q", "no-kubelet-here").status, 201);
  json status = GetPod("q").body["status"];
  EXPECT_FALSE(status.contains("nominatedNodeName")) << status;
  ASSERT_EQ(status["conditions"].size(), 3u) << status;
  EXPECT_EQ(status["conditions"][0]["type"], 1);
  EXPECT_EQ(status["conditions"][1]["type"], "example.com/Checked");
  EXPECT_EQ(status["conditions"][2]["type"], "PodScheduled");
  EXPECT_EQ(status["conditions"][2]["status"], "True");
  EXPECT_FALSE(status["conditions"][2].contains("reason"));
  EXPECT_EQ(status["phase"], "Pending");
}

TEST_F(SimApiTest, FieldSelectorsOnEverySupportedPodFieldAndA400ForOthers) {
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Bind("a", "worker-1").status, 201);
  const std::string ip = GetPod("a").body["status"]["podIP"];
  HttpResult by_ip = Call(*client_, "GET", "/api/v1/pods?fieldSelector=status.podIP%3D" + ip);
  ASSERT_EQ(by_ip.status, 200) << by_ip.raw;
  ASSERT_EQ(by_ip.body["items"].size(), 1u);
  EXPECT_EQ(by_ip.body["items"][0]["status"]["podIPs"][0]["ip"], ip);
  HttpResult restart = Call(*client_, "GET",
                            "/api/v1/pods?fieldSelector=spec.restartPolicy%3DAlways%2C"
                            "spec.serviceAccountName%3Ddefault%2Cspec.hostNetwork%3Dfalse");
  EXPECT_EQ(restart.body["items"].size(), 1u) << restart.raw;
  HttpResult bad = Call(*client_, "GET", "/api/v1/pods?fieldSelector=status.hostIP%3D10.0.0.1");
  ExpectStatus(bad, 400, "BadRequest");
  EXPECT_EQ(bad.body["message"], "field label not supported: status.hostIP");
  HttpResult nodes =
      Call(*client_, "GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse");
  EXPECT_EQ(nodes.body["items"].size(), 2u) << nodes.raw;
}

TEST_F(SimApiTest, KubeletRejectsWhatDoesNotFitWithTheExactMessage) {
  ASSERT_EQ(Create("big", "3800m").status, 201);
  ASSERT_EQ(Create("small", "400m").status, 201);
  ASSERT_EQ(Bind("big", "worker-1").status, 201);
  ASSERT_EQ(Bind("small", "worker-1").status, 201);
  EXPECT_EQ(GetPod("big").body["status"]["phase"], "Running");
  json status = GetPod("small").body["status"];
  EXPECT_EQ(status["phase"], "Failed");
  EXPECT_EQ(status["reason"], "OutOfcpu");
  EXPECT_EQ(status["message"],
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 400, used: 3800, "
            "capacity: 4000");
  // kubelet.go rejectPod keeps the QoS class; the status manager keeps the conditions the kubelet
  // does not own (PodScheduled) and sets startTime.
  EXPECT_EQ(status["qosClass"], "Burstable");
  EXPECT_EQ(status["conditions"][0]["type"], "PodScheduled");
  EXPECT_TRUE(status.contains("startTime"));
  EXPECT_FALSE(status.contains("podIP"));
  HttpResult stats = Call(*client_, "GET", "/sim/stats");
  EXPECT_EQ(stats.body["rejections"]["OutOfcpu"], 1);
  EXPECT_EQ(stats.body["bindings"], 2);
  EXPECT_EQ(stats.body["pods"]["Running"], 1);
  EXPECT_EQ(stats.body["pods"]["Failed"], 1);
  // Deleting the running pod releases its capacity.
  ASSERT_EQ(Call(*client_, "DELETE", "/api/v1/namespaces/default/pods/big").status, 200);
  ASSERT_EQ(Create("next", "4").status, 201);
  ASSERT_EQ(Bind("next", "worker-1").status, 201);
  EXPECT_EQ(GetPod("next").body["status"]["phase"], "Running");
}

TEST_F(SimApiTest, BindingFaults) {
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_EQ(Create("b").status, 201);
  ASSERT_EQ(
      Admin("/sim/faults/binding", R"({"names":["default/a"],"mode":"error","code":500})").status,
      200);
  ExpectStatus(Bind("a", "worker-1"), 500, "InternalError");
  EXPECT_EQ(GetPod("a").body["spec"].value("nodeName", ""), "");
  ASSERT_EQ(Bind("b", "worker-1").status, 201);
  ASSERT_EQ(Call(*client_, "DELETE", "/sim/faults/binding").status, 200);
  ASSERT_EQ(Bind("a", "worker-1").status, 201);

  // A hang that then binds: the client times out, the pod is bound anyway.
  ASSERT_EQ(Create("slow").status, 201);
  ASSERT_EQ(
      Admin("/sim/faults/binding", R"({"all":true,"mode":"hang","seconds":1.5,"thenBind":true})")
          .status,
      200);
  auto impatient = sim_->Client();
  impatient->set_read_timeout(0, 300000);
  absl::Time start = absl::Now();
  EXPECT_FALSE(impatient->Post("/api/v1/namespaces/default/pods/slow/binding",
                               BindingBody("slow", "worker-2"), "application/json"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1.4));
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (GetPod("slow").body["spec"].value("nodeName", "") != "worker-2" &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(GetPod("slow").body["spec"]["nodeName"], "worker-2");
  ASSERT_EQ(Call(*client_, "DELETE", "/sim/faults/binding").status, 200);

  // A hang without binding answers 504 and leaves the pod unbound.
  ASSERT_EQ(Create("lost").status, 201);
  ASSERT_EQ(
      Admin("/sim/faults/binding", R"({"names":["default/lost"],"mode":"hang","seconds":0.2})")
          .status,
      200);
  ExpectStatus(Bind("lost", "worker-1"), 504, "Timeout");
  EXPECT_EQ(GetPod("lost").body["spec"].value("nodeName", ""), "");
  ExpectStatus(Admin("/sim/faults/binding", R"({"mode":"explode","all":true})"), 400, "BadRequest");
}

TEST_F(SimApiTest, DropWatchesAndRestart) {
  WatchStream watch(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=30");
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  ASSERT_EQ(Admin("/sim/faults/drop-watches").status, 200);
  EXPECT_TRUE(watch.WaitForEnd(absl::Seconds(5)));

  const std::string rv = Rv();
  WatchStream second(sim_->port(),
                     "/api/v1/pods?watch=true&timeoutSeconds=30&resourceVersion=" + rv);
  ASSERT_EQ(Create("b").status, 201);
  ASSERT_TRUE(second.WaitForLines(1, absl::Seconds(10)));
  ASSERT_EQ(Admin("/sim/restart").status, 200);
  EXPECT_TRUE(second.WaitForEnd(absl::Seconds(5)));
  // The store survives; the old resourceVersion does not.
  EXPECT_EQ(GetPod("b").status, 200);
  WatchStream resumed(sim_->port(),
                      "/api/v1/pods?watch=true&timeoutSeconds=10&resourceVersion=" + rv);
  ASSERT_TRUE(resumed.WaitForEnd(absl::Seconds(10)));
  ASSERT_EQ(resumed.lines().size(), 1u);
  EXPECT_EQ(resumed.lines()[0].event["object"]["code"], 410);
  EXPECT_GT(std::stoull(Rv()), std::stoull(rv));
}

TEST_F(SimApiTest, BookmarksOnlyHoldsEventsBackUntilSwitchedOff) {
  const std::string rv = Rv();
  ASSERT_EQ(Admin("/sim/faults/bookmarks-only", R"({"on":true})").status, 200);
  WatchStream watch(
      sim_->port(),
      "/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=20&resourceVersion=" + rv);
  ASSERT_EQ(Create("held").status, 201);
  ASSERT_TRUE(watch.WaitForLines(2, absl::Seconds(10)));
  for (const auto& line : watch.lines()) {
    EXPECT_EQ(line.event["type"], "BOOKMARK");
    EXPECT_EQ(line.event["object"]["metadata"]["resourceVersion"], rv);
  }
  ASSERT_EQ(Admin("/sim/faults/bookmarks-only", R"({"on":false})").status, 200);
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool added = false;
  while (!added && absl::Now() < deadline) {
    for (const auto& line : watch.lines()) added |= line.event["type"] == "ADDED";
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(added);
}

TEST_F(SimApiTest, DownAnswers503AndClosesWatches) {
  WatchStream watch(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=30");
  // The watch must be registered before the API goes down, or it would arrive after.
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Call(*client_, "GET", "/sim/stats").body.value("watchesOpen", 0) < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GE(Call(*client_, "GET", "/sim/stats").body.value("watchesOpen", 0), 1);
  ASSERT_EQ(Admin("/sim/faults/down", R"({"on":true})").status, 200);
  EXPECT_TRUE(watch.WaitForEnd(absl::Seconds(5)));
  ExpectStatus(Call(*client_, "GET", "/api/v1/pods"), 503, "ServiceUnavailable");
  EXPECT_EQ(Call(*client_, "GET", "/sim/stats").status, 200);
  ASSERT_EQ(Admin("/sim/faults/down", R"({"on":false})").status, 200);
  EXPECT_EQ(Call(*client_, "GET", "/api/v1/pods").status, 200);
  ASSERT_EQ(Admin("/sim/faults/down", R"({"seconds":0.3})").status, 200);
  EXPECT_EQ(Call(*client_, "GET", "/api/v1/pods").status, 503);
  absl::SleepFor(absl::Milliseconds(400));  // the fault's own duration, not an effect wait
  EXPECT_EQ(Call(*client_, "GET", "/api/v1/pods").status, 200);
}

TEST_F(SimApiTest, SigtermExitsCleanly) {
  WatchStream watch(sim_->port(), "/api/v1/pods?watch=true&timeoutSeconds=30");
  ASSERT_EQ(Create("a").status, 201);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  sim_->process().Signal(SIGTERM);
  auto code = sim_->process().Wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << sim_->output();
}

TEST(SimWatchLagTest, EventsArriveNoSoonerThanTheLag) {
  auto sim = SimProcess::Start("nodes: [{name: n, allocatable: {cpu: 1, pods: 10}}]\n",
                               {"--watch-lag", "1s"});
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto client = (*sim)->Client();
  const std::string rv = Call(*client, "GET", "/api/v1/pods").body["metadata"]["resourceVersion"];
  WatchStream watch((*sim)->port(),
                    "/api/v1/pods?watch=true&timeoutSeconds=20&resourceVersion=" + rv);
  absl::Time mutated = absl::Now();
  HttpResult created = Call(*client, "POST", "/api/v1/namespaces/default/pods", PodBody("lagged"));
  ASSERT_EQ(created.status, 201);
  // LIST and GET are not delayed.
  EXPECT_EQ(Call(*client, "GET", "/api/v1/namespaces/default/pods/lagged").status, 200);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  EXPECT_GE(watch.lines()[0].arrived - mutated, absl::Milliseconds(900));
  EXPECT_EQ(watch.lines()[0].event["object"]["metadata"]["name"], "lagged");
}

TEST(SimAuthTest, TokenIsRequiredOnApiPaths) {
  auto sim = SimProcess::Start("token: s3cret\nnodes: [{name: n, allocatable: {cpu: 1}}]\n");
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto client = (*sim)->Client();
  ExpectStatus(Call(*client, "GET", "/api/v1/nodes"), 401, "Unauthorized");
  client->set_bearer_token_auth("s3cret");
  EXPECT_EQ(Call(*client, "GET", "/api/v1/nodes").status, 200);
  EXPECT_THAT(ReadFileOrEmpty((*sim)->kubeconfig_path()), HasSubstr("token: \"s3cret\""));
}

TEST(SimFlagsTest, RefusesNonLoopbackAndListsFlagsInHelp) {
  auto refused = RunCommand({FITLEDGER_SIM_PATH, "--listen", "0.0.0.0:0"}, {}, absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_NE(refused->exit_code, 0);
  EXPECT_THAT(refused->output, HasSubstr("non-loopback"));
  auto help = RunCommand({FITLEDGER_SIM_PATH, "--help"}, {}, absl::Seconds(10));
  ASSERT_TRUE(help.ok()) << help.status();
  for (const char* flag :
       {"--config", "--listen", "--kubeconfig-out", "--watch-lag", "--allow-non-loopback"}) {
    EXPECT_THAT(help->output, HasSubstr(flag));
  }
  auto bad =
      RunCommand({FITLEDGER_SIM_PATH, "--config", "/nonexistent.yaml"}, {}, absl::Seconds(10));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 1);
}

// The API server listens with the kernel's backlog (Go's net.Listen: net.core.somaxconn), so a
// client opening many connections at once (one per concurrent bind) is not made to wait for a
// retransmission of its handshake. With the sim stopped nothing is accepted, and a connection
// the backlog has no room for stays unanswered (with httplib's own backlog of 5, 6 of 64 were
// answered).
TEST_F(SimApiTest, ABurstOfConnectionsFitsTheListenBacklog) {
  constexpr int kConnections = 64;
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  ASSERT_TRUE(somaxconn == 0 || somaxconn >= kConnections)
      << "net.core.somaxconn is " << somaxconn << ", below this test's " << kConnections;
  const pid_t pid = sim_->process().pid();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{pid};
  std::vector<int> fds;
  struct Closer {
    std::vector<int>* fds;
    ~Closer() {
      for (int fd : *fds) close(fd);
    }
  } closer{&fds};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(sim_->port()));
  for (int i = 0; i < kConnections; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << strerror(errno);
  }
  // A connect completes (its socket becomes writable) when the kernel answers the handshake;
  // one it dropped is retried after 1 s, 3 s, 7 s, and dropped again while the queue is full.
  std::vector<bool> connected(fds.size(), false);
  int count = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (count < kConnections && absl::Now() < deadline) {
    std::vector<pollfd> pending;
    std::vector<size_t> index;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (connected[i]) continue;
      pending.push_back(pollfd{fds[i], POLLOUT, 0});
      index.push_back(i);
    }
    ASSERT_GE(poll(pending.data(), pending.size(), 100), 0) << strerror(errno);
    for (size_t k = 0; k < pending.size(); ++k) {
      if (pending[k].revents == 0) continue;
      int error = 0;
      socklen_t length = sizeof(error);
      getsockopt(pending[k].fd, SOL_SOCKET, SO_ERROR, &error, &length);
      ASSERT_EQ(error, 0) << strerror(error);
      connected[index[k]] = true;
      ++count;
    }
  }
  EXPECT_EQ(count, kConnections) << "connections the stopped sim's kernel answered in 10 s";
}

}  // namespace
}  // namespace fitledger::testing
