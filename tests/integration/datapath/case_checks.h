// The checks the data-path case programs (error_cases, coverage_cases,
// restate_cases) share: they run as plain clients under `softverbs run`,
// without gtest, so a failed expectation is printed and counted in
// g_failures, and a failed setup step ends the program (exit 2).
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

inline int g_failures = 0;

#define EXPECT_EQ(a, b)                                                                           \
  do {                                                                                            \
    long long va = (long long)(a), vb = (long long)(b);                                           \
    if (va != vb) {                                                                               \
      fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, va, #b, \
              vb);                                                                                \
      ++g_failures;                                                                               \
    }                                                                                             \
  } while (0)

inline void Die(const char* what) {
  fprintf(stderr, "setup failed: %s (%s)\n", what, strerror(errno));
  exit(2);
}
