// Command-line spelling: Abseil flags are named with underscores; fitledger documents dashes
// (--grpc-listen). This rewrites "--grpc-listen=x" / "--grpc-listen x" to the underscore form in
// place, touching only the flag name, never its value or positional arguments.
#ifndef FITLEDGER_COMMON_FLAGS_H_
#define FITLEDGER_COMMON_FLAGS_H_

namespace fitledger {

inline void AcceptDashedFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (arg[0] != '-' || arg[1] != '-') continue;
    if (arg[2] == '\0') break;  // "--": the rest are positional
    for (char* p = arg + 2; *p != '\0' && *p != '='; ++p) {
      if (*p == '-') *p = '_';
    }
  }
}

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_FLAGS_H_
