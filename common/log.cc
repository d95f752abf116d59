#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/json.h"

namespace fitledger {
namespace {

std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};

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

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("log level \"", name, "\" must be one of debug, info, warn, error"));
}

bool SetLogLevel(absl::string_view level) {
  absl::StatusOr<LogLevel> l = ParseLogLevel(level);
  if (!l.ok()) return false;
  min_level = static_cast<int>(*l);
  return true;
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= min_level.load(); }

std::string FormatLogLine(
    LogLevel level, absl::string_view msg,
    absl::Span<const std::pair<absl::string_view, absl::string_view>> fields) {
  std::string line = "{\"ts\":";
  AppendJsonString(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
                   &line);
  absl::StrAppend(&line, ",\"level\":\"", LevelName(level), "\",\"msg\":");
  AppendJsonString(msg, &line);
  for (const auto& [key, value] : fields) {
    line.push_back(',');
    AppendJsonString(key, &line);
    line.push_back(':');
    AppendJsonString(value, &line);
  }
  line.append("}\n");
  return line;
}

void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  std::vector<std::pair<absl::string_view, absl::string_view>> views;
  views.reserve(fields.size());
  for (const auto& [key, value] : fields) views.emplace_back(key, value);
  std::string line = FormatLogLine(level, msg, views);
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace fitledger
