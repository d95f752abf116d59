// One-line logfmt events on a stdio stream: `level=info msg="..." verb=filter pod=ns/name`.
#ifndef FITLEDGER_CLIENT_SHIM_LOGFMT_H_
#define FITLEDGER_CLIENT_SHIM_LOGFMT_H_

#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fitledger::shim {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// "debug" | "info" | "warn" | "error"; InvalidArgument otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);

// Writes each event with one fwrite, so concurrent lines do not interleave. Never logs request
// bodies or key material. Thread-safe: immutable after construction.
class Logger {
 public:
  using Fields = std::initializer_list<std::pair<absl::string_view, absl::string_view>>;

  explicit Logger(LogLevel min_level, std::FILE* out = stderr) : min_level_(min_level), out_(out) {}

  bool Enabled(LogLevel level) const { return level >= min_level_; }
  // Logs `msg` and `fields` (values quoted when they need it) if `level` is enabled.
  void Log(LogLevel level, absl::string_view msg, Fields fields = {}) const;

 private:
  // Constant after construction.
  const LogLevel min_level_;
  std::FILE* const out_;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_LOGFMT_H_
