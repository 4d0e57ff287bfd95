// Status propagation macros.
//
// Debian's Abseil 20220623 ships absl::Status / absl::StatusOr but not the RETURN_IF_ERROR /
// ASSIGN_OR_RETURN helpers that newer Abseil and most Google-style codebases use. These are the
// project's only definitions of them; every module returns absl::Status across its boundary.
#ifndef NEUPIMS_COMMON_STATUS_MACROS_H_
#define NEUPIMS_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define NEUPIMS_CONCAT_INNER_(a, b) a##b
#define NEUPIMS_CONCAT_(a, b) NEUPIMS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::absl::Status neupims_status_ = (expr);           \
    if (!neupims_status_.ok()) return neupims_status_; \
  } while (false)

// `ASSIGN_OR_RETURN(lhs, expr)`: evaluates `expr` (an absl::StatusOr<T>); on error returns the
// status, otherwise moves the value into `lhs` (which may be a declaration, e.g. `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr) \
  NEUPIMS_ASSIGN_OR_RETURN_IMPL_(NEUPIMS_CONCAT_(neupims_statusor_, __LINE__), lhs, expr)

#define NEUPIMS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // NEUPIMS_COMMON_STATUS_MACROS_H_
