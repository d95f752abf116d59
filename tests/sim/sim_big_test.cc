// The benchmark-size cluster: 5,000 nodes x 30 Running pods, listed in pages of 500.
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sim/sim_process.h"

namespace fitledger::testing {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

// VmRSS of `pid` in KiB (0 if unknown).
int64_t RssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      return absl::SimpleAtoi(digits, &kib) ? kib : 0;
    }
  }
  return 0;
}

TEST(SimBigClusterTest, ListsOneHundredFiftyThousandPodsInPagesOf500) {
  auto sim =
      SimProcess::Start("generate: {nodes: 5000, podsPerNode: 30}\nkubelet: {enabled: true}\n");
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto client = (*sim)->Client();
  client->set_read_timeout(60, 0);
  int64_t items = 0;
  int pages = 0;
  size_t bytes = 0;
  std::string token;
  std::string rv;
  const absl::Time start = absl::Now();
  while (true) {
    std::string path = "/api/v1/pods?limit=500";
    if (!token.empty()) absl::StrAppend(&path, "&continue=", token);
    auto res = client->Get(path);
    ASSERT_TRUE(res) << "page " << pages;
    ASSERT_EQ(res->status, 200) << res->body.substr(0, 300);
    ++pages;
    bytes += res->body.size();
    // The list metadata comes first; read it without parsing the 500 items.
    const std::string& body = res->body;
    const std::string head = body.substr(0, body.find("\"items\":"));
    auto field = [&](const std::string& key) -> std::string {
      size_t pos = head.find("\"" + key + "\":\"");
      if (pos == std::string::npos) return "";
      pos += key.size() + 4;
      return head.substr(pos, head.find('"', pos) - pos);
    };
    if (rv.empty()) rv = field("resourceVersion");
    EXPECT_EQ(field("resourceVersion"), rv);
    size_t count = 0;
    for (size_t pos = 0;
         (pos = body.find("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"", pos)) != std::string::npos;
         ++pos) {
      ++count;
    }
    items += static_cast<int64_t>(count);
    token = field("continue");
    if (token.empty()) break;
  }
  const absl::Duration elapsed = absl::Now() - start;
  const int64_t rss_kib = RssKib((*sim)->process().pid());
  std::cout << "LIST of " << items << " pods in " << pages << " pages (" << bytes / 1000000
            << " MB, " << bytes / items << " bytes/pod): " << absl::FormatDuration(elapsed)
            << "; sim RSS " << rss_kib / 1024 << " MiB" << std::endl;
  RecordProperty("list_ms", static_cast<int>(absl::ToInt64Milliseconds(elapsed)));
  RecordProperty("rss_mib", static_cast<int>(rss_kib / 1024));
  EXPECT_EQ(items, 150000);
  EXPECT_EQ(pages, 300);
  // Under 1 GiB; AddressSanitizer's shadow memory and redzones roughly double that.
  EXPECT_LT(rss_kib, (kAsan ? 3 : 1) * 1024 * 1024);
  // Well under 2 s in a release build; the bound is loose for sanitizer builds.
  EXPECT_LT(elapsed, absl::Seconds(20));
}

}  // namespace
}  // namespace fitledger::testing
