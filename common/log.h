// Structured logs: one JSON object per line on stderr, e.g.
//   {"ts":"2026-11-30T12:00:00.123Z","level":"info","msg":"bound","pod":"ns/p","node":"w1"}
// Thread-safe: each line is written with a single write(2). Never pass secrets as fields.
#ifndef FITLEDGER_COMMON_LOG_H_
#define FITLEDGER_COMMON_LOG_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fitledger {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using LogField = std::pair<absl::string_view, std::string>;

// "debug" | "info" | "warn" (or "warning") | "error"; InvalidArgument otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
// Sets the minimum level written (default info); false for an unknown name.
bool SetLogLevel(absl::string_view level);

// One log line (with the trailing newline), as Log writes it.
std::string FormatLogLine(LogLevel level, absl::string_view msg,
                          absl::Span<const std::pair<absl::string_view, absl::string_view>> fields);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, absl::string_view msg, std::initializer_list<LogField> fields = {});

inline void LogDebug(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  if (LogEnabled(LogLevel::kDebug)) Log(LogLevel::kDebug, msg, fields);
}
inline void LogInfo(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kInfo, msg, fields);
}
inline void LogWarn(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kWarn, msg, fields);
}
inline void LogError(absl::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kError, msg, fields);
}

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_LOG_H_
