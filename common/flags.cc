#include "common/flags.h"

#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace fitledger {

std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage,
                              absl::string_view main_file) {
  absl::SetProgramUsageMessage(usage);
  static std::string* file = new std::string(main_file);  // read by the usage callbacks
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view f) { return absl::EndsWith(f, *file); };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (arg[0] != '-' || arg[1] != '-') continue;
    if (arg[2] == '\0') break;  // "--": the rest are positional
    for (char* p = arg + 2; *p != '\0' && *p != '='; ++p) {
      if (*p == '-') *p = '_';
    }
  }
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace fitledger
