#include "common/flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace fitledger {
namespace {

// --help: the usage and this binary's own flags, spelled with dashes, with their defaults.
// (Abseil's own --help names the source file each flag is defined in, as a build path.)
void PrintHelp(absl::string_view usage, absl::string_view main_file) {
  std::vector<const absl::CommandLineFlag*> own;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), main_file)) own.push_back(flag);
  }
  std::sort(own.begin(), own.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string out(usage);
  out += "\n\nFlags (--flag-name and --flag_name are the same flag; --helpfull lists all):\n";
  for (const absl::CommandLineFlag* flag : own) {
    std::string name(flag->Name());
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string def = flag->DefaultValue();
    out += "  --" + name + "\n      " + flag->Help();
    if (!def.empty() && def != "false") out += " (default: " + def + ")";
    out += "\n";
  }
  std::fputs(out.c_str(), stdout);
}

}  // namespace

std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage,
                              absl::string_view main_file) {
  absl::SetProgramUsageMessage(usage);
  static std::string* file = new std::string(main_file);  // read by the usage callbacks
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view f) { return absl::EndsWith(f, *file); };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-help" || a == "-h" || a == "--helpshort") {
      PrintHelp(usage, main_file);
      std::exit(0);
    }
  }
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
