#include "common/log.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fitledger {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

bool SetLogLevel(absl::string_view level) {
  LogLevel l;
  if (level == "debug") {
    l = LogLevel::kDebug;
  } else if (level == "info") {
    l = LogLevel::kInfo;
  } else if (level == "warn") {
    l = LogLevel::kWarn;
  } else if (level == "error") {
    l = LogLevel::kError;
  } else {
    return false;
  }
  min_level = static_cast<int>(l);
  return true;
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= min_level.load(); }

void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  std::string line = "{\"ts\":";
  AppendJsonString(&line,
                   absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()));
  absl::StrAppend(&line, ",\"level\":\"", LevelName(level), "\",\"msg\":");
  AppendJsonString(&line, msg);
  for (const auto& [key, value] : fields) {
    line.push_back(',');
    AppendJsonString(&line, key);
    line.push_back(':');
    AppendJsonString(&line, value);
  }
  line.append("}\n");
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace fitledger
