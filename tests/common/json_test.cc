#include "common/json.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace fitledger {
namespace {

// The escaping rule, byte by byte: what AppendJsonString's word-at-a-time scan must equal.
std::string Reference(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Escaped(const std::string& s) {
  std::string out = "prefix:";
  AppendJsonString(s, &out);
  return out.substr(7);
}

TEST(AppendJsonString, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Escaped(""), R"("")");
  EXPECT_EQ(Escaped("node-4999"), R"("node-4999")");
  EXPECT_EQ(Escaped("a\"b\\c\nd\re\tf"), R"("a\"b\\c\nd\re\tf")");
  EXPECT_EQ(Escaped(std::string("\x00\x1f\x7f", 3)), "\"\\u0000\\u001f\x7f\"");
  EXPECT_EQ(Escaped("h\xc3\xa9llo w\xc3\xb6rld, no escapes here"),
            "\"h\xc3\xa9llo w\xc3\xb6rld, no escapes here\"");
  // A character to escape at every position of an eight-byte word, and past the last word.
  for (size_t at = 0; at < 19; ++at) {
    for (char special : {'"', '\\', '\x01', '\x1f', '\n'}) {
      std::string s(19, 'x');
      s[at] = special;
      EXPECT_EQ(Escaped(s), Reference(s)) << "at " << at << ", byte " << int{special};
    }
  }
}

TEST(AppendJsonString, MatchesTheByteRuleOnRandomBytes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(rng() % 40, '\0');
    const int mode = trial % 3;  // all bytes; mostly printable; printable with boundary bytes
    for (char& c : s) {
      const unsigned r = rng();
      if (mode == 0) {
        c = static_cast<char>(r & 0xff);
      } else if (mode == 1) {
        c = r % 16 == 0 ? static_cast<char>(r >> 8 & 0xff) : static_cast<char>('a' + r % 26);
      } else {
        static constexpr char kEdge[] = {' ',    '!',    '#',    '[', ']',  '\x1f', '\x20',
                                         '\x7f', '\x80', '\xff', '"', '\\', 'z'};
        c = kEdge[r % sizeof(kEdge)];
      }
    }
    ASSERT_EQ(Escaped(s), Reference(s)) << "trial " << trial;
  }
}

// JsonPlainPrefix stops at the first byte the byte rule escapes, wherever it is in a word.
TEST(JsonPlainPrefix, StopsAtTheFirstByteToEscape) {
  EXPECT_EQ(JsonPlainPrefix(""), 0u);
  EXPECT_EQ(JsonPlainPrefix("node-4999"), 9u);
  EXPECT_EQ(JsonPlainPrefix("node-4999\",\"node-5000"), 9u);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(rng() % 80, 'a');  // past several 16- and 8-byte steps
    for (char& c : s) {
      const unsigned r = rng();
      c = r % 8 == 0 ? static_cast<char>(r >> 8 & 0xff) : static_cast<char>('a' + r % 26);
    }
    size_t expected = 0;
    while (expected < s.size() && Reference(std::string(1, s[expected])).size() == 3) ++expected;
    ASSERT_EQ(JsonPlainPrefix(s), expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace fitledger
