// Status propagation helpers; Debian's Abseil (20220623) has no public ASSIGN_OR_RETURN.
#ifndef TEXTGEN_ENGINE_UTIL_STATUS_MACROS_H_
#define TEXTGEN_ENGINE_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TG_CONCAT_INNER_(a, b) a##b
#define TG_CONCAT_(a, b) TG_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define TG_RETURN_IF_ERROR(expr)              \
  do {                                        \
    const ::absl::Status tg_status_ = (expr); \
    if (!tg_status_.ok()) return tg_status_;  \
  } while (0)

// `TG_ASSIGN_OR_RETURN(auto x, F());` unwraps a StatusOr or returns its status.
#define TG_ASSIGN_OR_RETURN(lhs, rexpr) \
  TG_ASSIGN_OR_RETURN_IMPL_(TG_CONCAT_(tg_statusor_, __LINE__), lhs, rexpr)
#define TG_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr)    \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // TEXTGEN_ENGINE_UTIL_STATUS_MACROS_H_
