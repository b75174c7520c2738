// The checks and verbs helpers the data-path case programs (error_cases,
// coverage_cases, restate_cases, sqe_cases) share: they run as plain clients under `softverbs run`,
// without gtest, so a failed expectation is printed and counted in
// g_failures, and a failed setup step ends the program (exit 2).
#pragma once

#include <errno.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <type_traits>

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

#define EXPECT_TRUE(c) EXPECT_EQ(static_cast<bool>(c), true)
#define EXPECT_FALSE(c) EXPECT_EQ(static_cast<bool>(c), false)

inline void Die(const char* what) {
  fprintf(stderr, "setup failed: %s (%s)\n", what, strerror(errno));
  exit(2);
}

// The softverbs device, opened as any application opens its first device.
inline ibv_context* OpenFirstDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) Die("no device");
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!ctx) Die("ibv_open_device");
  return ctx;
}

// PollWithin's answer when no completion came: an error completion whose
// vendor_err no device completion carries (a status outside the enum would
// be undefined behaviour to load; the sanitizer build catches it).
inline constexpr uint32_t kNoCompletion = 0xffffffffu;
inline bool NoCompletion(const ibv_wc& wc) {
  return wc.vendor_err == kNoCompletion;
}

// Polls one completion within `ms` (NoCompletion if none came).
inline ibv_wc PollWithin(ibv_cq* cq, int ms) {
  ibv_wc wc{};
  timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (ibv_poll_cq(cq, 1, &wc) == 1) return wc;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > ms) {
      wc.status = IBV_WC_GENERAL_ERR;
      wc.vendor_err = kNoCompletion;
      return wc;
    }
    sched_yield();  // multi-process cases share two cores
  }
}

// Polls one completion; none within 5 s is a failure.
inline ibv_wc Poll(ibv_cq* cq) {
  ibv_wc wc = PollWithin(cq, 5000);
  if (NoCompletion(wc)) {
    fprintf(stderr, "no completion within 5 s\n");
    ++g_failures;
  }
  return wc;
}

// The QP's state as the device reports it.
inline ibv_qp_state State(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
  return a.qp_state;
}

// Runs one named case and prints PASS/FAIL for it.
template <typename Arg>
void Run(const char* name, void (*fn)(Arg), std::type_identity_t<Arg> arg) {
  int before = g_failures;
  fn(arg);
  printf("%s %s\n", g_failures == before ? "PASS" : "FAIL", name);
  fflush(stdout);
}
