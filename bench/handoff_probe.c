/* handoff_probe: how many SEND-shaped hand-offs per second two CPUs make
 * through shared memory with no verbs code at all: what the machine allows
 * the hand-off of an 8-byte `ib_send_bw`, for comparison with what
 * softverbs' post path reaches (docs/datapath.md, "Message rate of SEND",
 * session 48).
 *
 * The sender, pinned to CPU_A, per message: waits for a posted receive slot
 * (a word the receiver wrote), claims it with a CAS on the claimers' head,
 * writes 8 bytes of payload, reserves a completion slot with a CAS on the
 * ring's tail and writes the 64-byte completion, its sequence word last,
 * with release - the shape of softverbs' plain SEND (shm_plain_post.h). The
 * receiver, pinned to CPU_B, polls the next completion slot and posts a new
 * receive for each one it takes, keeping RECV_DEPTH posted - as perftest's
 * `ib_send_bw` server does. The rings have twice as many slots as are ever
 * in use, as softverbs' receive queue does. Two processes share the rings,
 * as `ib_send_bw`'s two do.
 *
 *   handoff_probe CPU_A CPU_B [MESSAGES]   ->   handoff_mpps 23.37
 *
 * MESSAGES (default 2,000,000) in each of 5 blocks; prints the median
 * block's rate. Exit 1 (and a message) when a process cannot be pinned.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCKS 5
#define RECV_DEPTH 512
#define SLOTS (2 * RECV_DEPTH)

struct Slot {            // a receive WQE's or a completion's line
  _Atomic uint32_t seq;  // index + 1 once written (release)
  uint32_t word;
  uint64_t body[7];
};

struct Shared {
  _Alignas(64) _Atomic uint64_t claimed;   // the receive ring's head (claimers' CAS)
  _Alignas(64) _Atomic uint64_t reserved;  // the completion ring's tail (producers' CAS)
  _Alignas(64) uint64_t payload;           // the receive buffer
  _Alignas(64) struct Slot recv[SLOTS];
  _Alignas(64) struct Slot done[SLOTS];
};

static struct Shared* ring;  // shared by the two processes
static long messages = 2000000;

static double NowSec(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set);
}

static void Post(uint64_t index) {
  struct Slot* s = &ring->recv[index % SLOTS];
  s->word = (uint32_t)index;
  atomic_store_explicit(&s->seq, (uint32_t)(index + 1), memory_order_release);
}

/* The receiver: every completion of BLOCKS * messages, a new receive each. */
static void Receive(int cpu) {
  if (Pin(cpu) != 0) {
    fprintf(stderr, "handoff_probe: cannot pin to CPU %d\n", cpu);
    _exit(1);
  }
  const uint64_t total = (uint64_t)BLOCKS * (uint64_t)messages;
  for (uint64_t taken = 0; taken < total; ++taken) {
    const struct Slot* c = &ring->done[taken % SLOTS];
    while (atomic_load_explicit(&c->seq, memory_order_acquire) != (uint32_t)(taken + 1)) {
    }
    Post(taken + RECV_DEPTH);
  }
  _exit(0);
}

static int CompareDouble(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: handoff_probe CPU_A CPU_B [MESSAGES]\n");
    return 2;
  }
  const int cpu_a = atoi(argv[1]);
  const int cpu_b = atoi(argv[2]);
  if (argc > 3) messages = atol(argv[3]);
  if (messages < 1) messages = 1;
  // Both CPUs are checked before the receiver starts: the sender would wait
  // forever for a receiver that could not pin itself.
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || cpu_a < 0 || cpu_b < 0 ||
      cpu_a >= CPU_SETSIZE || cpu_b >= CPU_SETSIZE || !CPU_ISSET(cpu_a, &allowed) ||
      !CPU_ISSET(cpu_b, &allowed)) {
    fprintf(stderr, "handoff_probe: cannot pin to CPUs %d and %d\n", cpu_a, cpu_b);
    return 1;
  }
  ring = mmap(NULL, sizeof *ring, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (ring == MAP_FAILED) {
    perror("handoff_probe: mmap");
    return 1;
  }
  for (uint64_t i = 0; i < RECV_DEPTH; ++i) Post(i);
  const pid_t receiver = fork();
  if (receiver < 0) {
    perror("handoff_probe: fork");
    return 1;
  }
  if (receiver == 0) Receive(cpu_b);
  if (Pin(cpu_a) != 0) {
    fprintf(stderr, "handoff_probe: cannot pin to CPU %d\n", cpu_a);
    kill(receiver, SIGKILL);
    return 1;
  }
  double rate[BLOCKS];
  uint64_t sent = 0;
  for (int b = 0; b < BLOCKS; ++b) {
    const double t0 = NowSec();
    const long n = messages;
    for (long m = 0; m < n; ++m, ++sent) {
      const struct Slot* r = &ring->recv[sent % SLOTS];
      while (atomic_load_explicit(&r->seq, memory_order_acquire) != (uint32_t)(sent + 1)) {
      }
      uint64_t expected = sent;
      atomic_compare_exchange_strong(&ring->claimed, &expected, sent + 1);
      ring->payload = sent;
      expected = sent;
      atomic_compare_exchange_strong(&ring->reserved, &expected, sent + 1);
      struct Slot* c = &ring->done[sent % SLOTS];
      c->word = r->word;
      for (int k = 0; k < 7; ++k) c->body[k] = sent + (uint64_t)k;
      atomic_store_explicit(&c->seq, (uint32_t)(sent + 1), memory_order_release);
    }
    rate[b] = messages / (NowSec() - t0) / 1e6;
  }
  int status = 0;
  if (waitpid(receiver, &status, 0) != receiver || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return 1;
  }
  qsort(rate, BLOCKS, sizeof rate[0], CompareDouble);
  printf("handoff_mpps %.2f\n", rate[BLOCKS / 2]);
  return 0;
}
