// Shared by the libFuzzer targets: a property check that fails the run loudly.
//
// Parsing without crashing is the least a target checks; each also states what an accepted input
// promises (a kept dataset row fits the context, an accepted request fits the model, ...) and
// what a refusal promises (an error message that names the input), so a checker that accepts
// what it should refuse fails the fuzzer too.
#ifndef NEUPIMS_TESTS_FUZZ_FUZZ_UTIL_H_
#define NEUPIMS_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

#define FUZZ_CHECK(cond, what)                                                               \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: property violated: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                               \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace neupims::fuzz {

// The fuzz input as text.
inline absl::string_view AsText(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

// A refusal must be InvalidArgument (bad input, never an internal error) and name the input.
inline void CheckRefusal(const absl::Status& status, absl::string_view source) {
  FUZZ_CHECK(absl::IsInvalidArgument(status), status.ToString());
  FUZZ_CHECK(absl::StrContains(status.message(), source), status.ToString());
}

}  // namespace neupims::fuzz

#endif  // NEUPIMS_TESTS_FUZZ_FUZZ_UTIL_H_
