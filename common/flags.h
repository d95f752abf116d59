// Command-line parsing shared by the binaries.
#ifndef FITLEDGER_COMMON_FLAGS_H_
#define FITLEDGER_COMMON_FLAGS_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace fitledger {

// Sets the usage message; --help (or -h) prints it and the flags defined in `main_file` (a path
// suffix such as "server/main.cc"), dashed, with their defaults, and exits 0; --helpfull adds
// Abseil's own flags (--flagfile, --fromenv, ...) the same way and exits 0; accepts dashed
// flag names (--grpc-listen) as well as Abseil's underscores (only the name before '=' is
// rewritten, never values or positional arguments), and parses. Returns the positional
// arguments, argv[0] first. Exits as Abseil does on --help or a bad flag.
std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage,
                              absl::string_view main_file);

// What --help (all: --helpfull) prints, to standard output; after ParseFlags.
void PrintHelp(bool all);

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_FLAGS_H_
