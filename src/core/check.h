// Always-on invariant checks (not for user input: that gets a Status).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace ocular::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond,
                                     const char* msg) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s %s\n", file, line, cond, msg ? msg : "");
  std::abort();
}
}  // namespace ocular::internal

// OCULAR_CHECK(n > 0) or OCULAR_CHECK(n > 0, "HINT: ...").
#define OCULAR_CHECK(cond, ...)                                                              \
  do {                                                                                       \
    if (!(cond)) ::ocular::internal::CheckFailed(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
  } while (0)
