// Reading a whole file (the one reader for certificates, keys, tokens and configuration) and
// writing one atomically (ready files, port files, kubeconfigs).
#ifndef FITLEDGER_COMMON_FILE_H_
#define FITLEDGER_COMMON_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fitledger {

// The contents of `path`. NotFound when it does not exist, PermissionDenied when it cannot be
// read, InvalidArgument for a directory; the message names the path and the reason.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to `path` through a temporary file beside it and a rename, so a reader sees
// the old file or the whole new one, never a partial one. Internal error naming the file.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// A duration as Kubernetes configs write them (Go's time.ParseDuration units: "500ms", "2s",
// "1m30s"; a bare "0"). InvalidArgument for anything else, negative or infinite.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// Raises this process's soft limit on open files to its hard limit (as Go's runtime does), so
// maxConnections, not a default of 1024 descriptors, bounds the connections. Returns the limit.
int64_t RaiseOpenFileLimit();

}  // namespace fitledger

#endif  // FITLEDGER_COMMON_FILE_H_
