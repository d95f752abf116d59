// Reading a whole file: the one reader for certificates, keys, tokens and configuration.
#ifndef FITLEDGER_COMMON_FILE_H_
#define FITLEDGER_COMMON_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace fitledger {

// The contents of `path`. NotFound when it does not exist, PermissionDenied when it cannot be
// read, InvalidArgument for a directory; the message names the path and the reason.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Raises this process's soft limit on open files to its hard limit (as Go's runtime does), so
// maxConnections, not a default of 1024 descriptors, bounds the connections. Returns the limit.
int64_t RaiseOpenFileLimit();

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_FILE_H_
