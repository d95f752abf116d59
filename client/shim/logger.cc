#include "client/shim/logger.h"

#include <string>

namespace fitledger::shim {

void Logger::Log(LogLevel level, absl::string_view msg, Fields fields) const {
  if (!Enabled(level)) return;
  std::string line = FormatLogLine(level, msg, {fields.begin(), fields.size()});
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace fitledger::shim
