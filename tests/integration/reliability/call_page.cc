// The call page (protocol/call_page.h) under the conditions its waits and
// locks exist for (reliability.call_page):
// 1. it carries the calls: 1,000 ibv_reg_mr/ibv_dereg_mr pairs of a
//    registered range are served through the page, not the socket (the
//    daemon's `status` counts both); 50 first registrations, whose memfd
//    goes over the socket (as it converts, or made ahead), are answered
//    through the page; a caller pinned
//    to the daemon's CPU: the daemon moves to another of its CPUs (the two
//    only took turns there; daemon/cpu_sharing.h);
// 2. a daemon that answers late (SIGSTOPped for 200 ms): the call sleeps,
//    and returns the daemon's answer once it runs again;
// 3. processes that share the context (forked children) killed inside
//    their calls, 20 times: the parent's calls go on succeeding (the call
//    lock is robust; a dead child's half-written or unanswered request is
//    skipped);
// 4. the daemon killed while a call waits for it: the call fails with ENODEV
//    (the device is gone) instead of waiting for ever.
// Run under `softverbs run` with a private runtime directory.
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "../datapath/case_checks.h"
#include "common/runtime_dir.h"
#include "raw_daemon_channel.h"

namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// The daemon's request counters, from its `status`.
struct Counts {
  long by_socket = -1;
  long by_page = -1;
  long socket_answered_by_page = -1;
  long moves = -1;       // off a caller's CPU
  long offered = -1;     // memfds sent ahead of their registrations
  long read_early = -1;  // of them, read ahead of a registration that overtook its offer
};

long Field(const std::string& json, const char* name) {
  const std::string key = std::string("\"") + name + "\":";
  const size_t at = json.find(key);
  return at == std::string::npos ? -1 : atol(json.c_str() + at + key.size());
}

Counts DaemonCounts() {
  const char* dir = getenv("SOFTVERBS_RUNTIME_DIR");
  if (!dir) Die("SOFTVERBS_RUNTIME_DIR is not set");
  softverbs::test::Channel cli(softverbs::DaemonSocketPath(dir));
  softverbs::test::GreetAsCli(cli);
  softverbs::test::Answer a =
      cli.Call(static_cast<uint16_t>(softverbs::protocol::Op::kStatus), nullptr, 0);
  const std::string json(a.body.begin(), a.body.end());
  return {Field(json, "requests_by_socket"),
          Field(json, "requests_by_call_page"),
          Field(json, "socket_requests_answered_through_call_page"),
          Field(json, "moves_off_a_callers_cpu"),
          Field(json, "backing_memfds_offered"),
          Field(json, "backing_offers_read_early")};
}

// The CPU process `pid` last ran on (/proc/<pid>/stat, field 39), or -1.
int LastCpu(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  char line[2048];
  const bool read = fgets(line, sizeof(line), f) != nullptr;
  fclose(f);
  const char* p = read ? strrchr(line, ')') : nullptr;  // past the command's name
  if (!p) return -1;
  int field = 3;  // the state, after ") "
  for (p += 2; *p && field < 39; ++p) {
    if (*p == ' ') ++field;
  }
  return field == 39 ? atoi(p) : -1;
}

pid_t DaemonPid(ibv_context* ctx) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(ctx->cmd_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) Die("SO_PEERCRED");
  return cred.pid;
}

// An ibv_alloc_pd on another thread while the daemon is stopped for ms.
// Returns the PD (nullptr: errno in *err) and how long the call took.
ibv_pd* AllocPdWhileStopped(ibv_context* ctx, pid_t daemon, int ms, int end_signal, double* call_ms,
                            int* err) {
  if (kill(daemon, SIGSTOP) != 0) Die("SIGSTOP the daemon");
  std::atomic<bool> returned{false};
  ibv_pd* pd = nullptr;
  double t0 = NowMs(), t1 = 0;
  std::thread caller([&] {
    pd = ibv_alloc_pd(ctx);
    *err = pd ? 0 : errno;
    t1 = NowMs();
    returned = true;
  });
  usleep(ms * 1000);
  EXPECT_FALSE(returned.load());  // the daemon cannot have answered
  const double t_signal = NowMs();
  kill(daemon, end_signal);
  if (end_signal != SIGCONT) kill(daemon, SIGCONT);  // a stopped process dies once continued
  while (!returned.load() && NowMs() - t_signal < 5000) usleep(1000);
  EXPECT_TRUE(returned.load());
  if (!returned.load()) Die("the call did not return within 5 s of the daemon running again");
  caller.join();
  *call_ms = t1 - t_signal;
  (void)t0;
  return pd;
}

}  // namespace

int main() {
  ibv_context* ctx = OpenFirstDevice();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) Die("ibv_alloc_pd");
  auto* buf = static_cast<char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  memset(buf, 1, 4096);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* first = ibv_reg_mr(pd, buf, 4096, access);
  if (!first) Die("ibv_reg_mr");

  // 1. The page carries the calls.
  const Counts before = DaemonCounts();
  constexpr int kPairs = 1000;
  int pairs_ok = 0;
  for (int i = 0; i < kPairs; ++i) {
    ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, access);
    if (mr && ibv_dereg_mr(mr) == 0) ++pairs_ok;
  }
  const Counts after = DaemonCounts();
  printf("%d reg/dereg pairs: %ld requests through the call page, %ld over the socket\n", pairs_ok,
         after.by_page - before.by_page, after.by_socket - before.by_socket);
  EXPECT_EQ(pairs_ok, kPairs);
  EXPECT_TRUE(after.by_page - before.by_page >= 2 * kPairs);
  // The CLI's own hello and status only (the library's doorbells are not
  // requests).
  EXPECT_TRUE(after.by_socket - before.by_socket <= 4);

  // 1b. A first registration's memfd goes ahead over the socket (offered,
  // no reply), the registration naming it through the page.
  const Counts before_first = DaemonCounts();
  constexpr int kFirsts = 50;
  int firsts_ok = 0;
  for (int i = 0; i < kFirsts; ++i) {
    auto* fresh = static_cast<char*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    memset(fresh, 2, 4096);
    ibv_mr* mr = ibv_reg_mr(pd, fresh, 4096, access);
    if (mr && ibv_dereg_mr(mr) == 0) ++firsts_ok;
    munmap(fresh, 4096);
  }
  const Counts after_first = DaemonCounts();
  const long offered = after_first.offered - before_first.offered;
  const long by_page = after_first.by_page - before_first.by_page;
  const long by_socket = after_first.by_socket - before_first.by_socket;
  const long read_early = after_first.read_early - before_first.read_early;
  printf(
      "%d first registrations: %ld memfds offered (%ld read ahead of the registration that "
      "overtook them), %ld requests through the call page, %ld over the socket\n",
      firsts_ok, offered, read_early, by_page, by_socket);
  EXPECT_EQ(firsts_ok, kFirsts);
  // One memfd each: offered as it converts, or made ahead and offered in a
  // batch (abi/ibverbs/ready_backings.h) - up to a full stock before this
  // loop, and up to a full stock more after it.
  EXPECT_TRUE(offered >= kFirsts - 16 && offered <= kFirsts + 16);
  // Each registration and dereg through the page, none over the socket
  // besides the status calls: a registration that overtook its offer (the
  // daemon saw the page before the socket) has the daemon read the offer
  // first. Until session 33 it was told ESTALE and passed the memfd over
  // the socket again: a few of 50 here, 31 under the sanitized build's
  // slower daemon.
  EXPECT_TRUE(by_page >= 2 * kFirsts);
  EXPECT_TRUE(by_socket <= 4);
  EXPECT_TRUE(read_early >= 0 && read_early <= kFirsts);

  const pid_t daemon = DaemonPid(ctx);

  // 1c. A caller that shares the daemon's CPU: the daemon moves to another
  // of its CPUs - and does not move while its affinity allows it only the
  // one.
  cpu_set_t ours, theirs;
  if (sched_getaffinity(0, sizeof(ours), &ours) != 0 ||
      sched_getaffinity(daemon, sizeof(theirs), &theirs) != 0) {
    Die("sched_getaffinity");
  }
  cpu_set_t both;
  CPU_AND(&both, &ours, &theirs);
  int shared_cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && shared_cpu < 0; ++c) {
    if (CPU_ISSET(c, &both)) shared_cpu = c;
  }
  if (CPU_COUNT(&theirs) < 2 || shared_cpu < 0) {
    printf("SKIP (1c): the daemon may run on %d CPU(s), %d of them ours: nowhere to move to\n",
           CPU_COUNT(&theirs), CPU_COUNT(&both));
  } else {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(shared_cpu, &one);
    auto pairs = [&](int n) {
      int ok = 0;
      for (int i = 0; i < n; ++i) {
        ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, access);
        if (mr && ibv_dereg_mr(mr) == 0) ++ok;
      }
      return ok;
    };
    // Both on one CPU, the daemon allowed no other.
    if (sched_setaffinity(daemon, sizeof(one), &one) != 0 ||
        sched_setaffinity(0, sizeof(one), &one) != 0) {
      Die("pin the daemon and this thread to one CPU");
    }
    const Counts pinned_before = DaemonCounts();
    const int pinned_ok = pairs(100);
    const Counts pinned_after = DaemonCounts();
    const int pinned_cpu = LastCpu(daemon);
    // The daemon allowed its CPUs again: it leaves this one. A move is tried
    // at most once every 2 ms (CpuSharing::kMinInterval), and the pinned
    // daemon's tries (which found nowhere to go) count: each round starts
    // after that. Up to 10 rounds - one is enough unless the scheduler keeps
    // waking the daemon apart from the calls (ctest -j2 beside other tests).
    if (sched_setaffinity(daemon, sizeof(theirs), &theirs) != 0) Die("unpin the daemon");
    constexpr int kPairs = 200;
    int shared_ok = 0;
    int rounds = 0;
    int moved_to = -1;
    Counts shared_after{};
    while (rounds < 10) {
      usleep(3000);
      shared_ok += pairs(kPairs);
      ++rounds;
      moved_to = LastCpu(daemon);  // before the status call wakes it here again
      shared_after = DaemonCounts();
      if (shared_after.moves > pinned_after.moves || moved_to != shared_cpu) break;
    }
    if (sched_setaffinity(0, sizeof(ours), &ours) != 0) Die("unpin");
    printf(
        "reg/dereg pairs on the daemon's CPU %d: pinned there %ld move(s) (on CPU %d), "
        "allowed its CPUs %ld move(s) in %d round(s) (last on CPU %d)\n",
        shared_cpu, pinned_after.moves - pinned_before.moves, pinned_cpu,
        shared_after.moves - pinned_after.moves, rounds, moved_to);
    EXPECT_EQ(pinned_ok + shared_ok, 100 + rounds * kPairs);
    EXPECT_TRUE(pinned_before.moves >= 0);
    EXPECT_EQ(pinned_after.moves - pinned_before.moves, 0);
    EXPECT_EQ(pinned_cpu, shared_cpu);
    // The daemon moved off the shared CPU, or the scheduler had put it
    // elsewhere first (tests/unit/daemon/cpu_sharing_test.cc tests the move
    // itself). Where it is at the end is the scheduler's: with the other
    // CPU busy (ctest -j2 in CI) it may bring the daemon back - which then
    // moves again, so only a daemon that never moved and stayed fails.
    EXPECT_TRUE(moved_to >= 0);
    EXPECT_TRUE(shared_after.moves > pinned_after.moves || moved_to != shared_cpu);
  }

  // 2. A daemon that answers late.
  double ms = 0;
  int err = 0;
  ibv_pd* late = AllocPdWhileStopped(ctx, daemon, 200, SIGCONT, &ms, &err);
  printf("a call made while the daemon was stopped returned %.1f ms after it continued (%s)\n", ms,
         late ? "a PD" : strerror(err));
  EXPECT_TRUE(late != nullptr);
  if (late) EXPECT_EQ(ibv_dealloc_pd(late), 0);

  // 3. Children sharing the context killed inside their calls.
  int rounds_ok = 0;
  for (int round = 0; round < 20; ++round) {
    const pid_t child = fork();
    if (child < 0) Die("fork");
    if (child == 0) {
      for (;;) {
        ibv_pd* p = ibv_alloc_pd(ctx);
        if (p) ibv_dealloc_pd(p);
      }
    }
    usleep(2000 + 997 * round % 5000);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    int ok = 0;
    for (int i = 0; i < 50; ++i) {
      ibv_mr* mr = ibv_reg_mr(pd, buf, 4096, access);
      if (mr && ibv_dereg_mr(mr) == 0) ++ok;
    }
    if (ok == 50) ++rounds_ok;
  }
  printf("children killed inside calls: the parent's 50 calls succeeded after %d of 20\n",
         rounds_ok);
  EXPECT_EQ(rounds_ok, 20);

  // 4. The daemon killed while a call waits for it.
  ibv_pd* orphan = AllocPdWhileStopped(ctx, daemon, 100, SIGKILL, &ms, &err);
  printf("a call waiting when the daemon was killed returned %.1f ms later: %s\n", ms,
         orphan ? "a PD" : strerror(err));
  EXPECT_TRUE(orphan == nullptr);
  EXPECT_EQ(err, ENODEV);

  printf("%s call_page (%d failures)\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
