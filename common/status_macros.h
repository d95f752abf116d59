// Small local versions of the status macros that Abseil 20220623 does not ship.
#ifndef FITLEDGER_COMMON_STATUS_MACROS_H_
#define FITLEDGER_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FITLEDGER_CONCAT_INNER_(a, b) a##b
#define FITLEDGER_CONCAT_(a, b) FITLEDGER_CONCAT_INNER_(a, b)

// Returns from the current function with `expr`'s status when it is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status fitledger_status_ = (expr);             \
    if (!fitledger_status_.ok()) return fitledger_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F())`: assigns the value of a StatusOr or returns its status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(FITLEDGER_CONCAT_(fitledger_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // FITLEDGER_COMMON_STATUS_MACROS_H_
