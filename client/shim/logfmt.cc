#include "client/shim/logfmt.h"

#include "absl/strings/str_cat.h"

namespace fitledger::shim {
namespace {

void AppendValue(absl::string_view value, std::string* out) {
  bool quote = value.empty();
  for (char c : value) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\') {
      quote = true;
      break;
    }
  }
  if (!quote) {
    out->append(value.data(), value.size());
    return;
  }
  out->push_back('"');
  for (char c : value) {
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
        out->push_back(c);
    }
  }
  out->push_back('"');
}

absl::string_view LevelName(LogLevel level) {
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
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("log level \"", name, "\" must be one of debug, info, warn, error"));
}

void Logger::Log(LogLevel level, absl::string_view msg, Fields fields) const {
  if (!Enabled(level)) return;
  std::string line = absl::StrCat("level=", LevelName(level), " msg=");
  AppendValue(msg, &line);
  for (const auto& [key, value] : fields) {
    line.push_back(' ');
    line.append(key.data(), key.size());
    line.push_back('=');
    AppendValue(value, &line);
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace fitledger::shim
