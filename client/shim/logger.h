// The shim's logger: the project's JSON-lines format (common/log.h) on a chosen stream, with its
// own minimum level, so tests can capture it.
#ifndef FITLEDGER_CLIENT_SHIM_LOGGER_H_
#define FITLEDGER_CLIENT_SHIM_LOGGER_H_

#include <cstdio>
#include <initializer_list>
#include <utility>

#include "absl/strings/string_view.h"
#include "common/log.h"

namespace fitledger::shim {

using ::fitledger::LogLevel;
using ::fitledger::ParseLogLevel;

// Writes each event with one fwrite, so concurrent lines do not interleave. Never logs request
// bodies or key material. Thread-safe: immutable after construction.
class Logger {
 public:
  using Fields = std::initializer_list<std::pair<absl::string_view, absl::string_view>>;

  explicit Logger(LogLevel min_level, std::FILE* out = stderr) : min_level_(min_level), out_(out) {}

  bool Enabled(LogLevel level) const { return level >= min_level_; }
  // Logs `msg` and `fields` as one JSON object if `level` is enabled.
  void Log(LogLevel level, absl::string_view msg, Fields fields = {}) const;

 private:
  // Constant after construction.
  const LogLevel min_level_;
  std::FILE* const out_;
};

}  // namespace fitledger::shim

#endif  // FITLEDGER_CLIENT_SHIM_LOGGER_H_
