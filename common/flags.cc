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

// The usage and main_file of the last ParseFlags call, for PrintHelp and the usage callbacks
// (never destroyed: read until exit).
std::string& StoredUsage() {
  static std::string* usage = new std::string();
  return *usage;
}
std::string& StoredMainFile() {
  static std::string* main_file = new std::string();
  return *main_file;
}

void AppendFlags(const std::vector<const absl::CommandLineFlag*>& flags, std::string* out) {
  for (const absl::CommandLineFlag* flag : flags) {
    std::string name(flag->Name());
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string def = flag->DefaultValue();
    *out += "  --" + name + "\n      " + flag->Help();
    if (!def.empty() && def != "false") *out += " (default: " + def + ")";
    *out += "\n";
  }
}

}  // namespace

void PrintHelp(bool all) {
  const absl::string_view main_file = StoredMainFile();
  std::vector<const absl::CommandLineFlag*> own;
  std::vector<const absl::CommandLineFlag*> others;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    (absl::EndsWith(flag->Filename(), main_file) ? own : others).push_back(flag);
  }
  auto by_name = [](const auto* a, const auto* b) { return a->Name() < b->Name(); };
  std::sort(own.begin(), own.end(), by_name);
  std::sort(others.begin(), others.end(), by_name);
  std::string out = StoredUsage();
  out += "\n\nFlags (--flag-name and --flag_name are the same flag; --helpfull adds Abseil's):\n";
  AppendFlags(own, &out);
  if (all) {
    out += "\nAbseil's flags:\n";
    AppendFlags(others, &out);
  }
  std::fputs(out.c_str(), stdout);
}

std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage,
                              absl::string_view main_file) {
  absl::SetProgramUsageMessage(usage);
  StoredUsage() = std::string(usage);
  StoredMainFile() = std::string(main_file);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view f) {
    return absl::EndsWith(f, StoredMainFile());
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--help" || a == "-help" || a == "-h" || a == "--helpshort") {
      PrintHelp(/*all=*/false);
      std::exit(0);
    }
    if (a == "--helpfull" || a == "-helpfull") {
      PrintHelp(/*all=*/true);
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
