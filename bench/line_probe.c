/* line_probe: how long one cache line takes to go from one CPU to another,
 * right now.
 *
 * The 2-vCPU VMs these benchmarks run on change mode while they run: for
 * seconds to minutes their two vCPUs share a cache (a line moves in about
 * 50 ns) or they do not (about 260 ns), and every shared-memory figure -
 * softverbs' and UCX's alike - moves with it (docs/benchmarks.md, "How
 * noisy"). bench/run.py runs this before and after each measurement it
 * makes in rounds, so that the report can say in which mode each ran.
 *
 * Two threads, pinned to CPU_A and CPU_B, pass a counter back and forth in
 * one cache line, ROUND_TRIPS times in each of 5 blocks; prints the one-way
 * time (half a round trip) of the median block:
 *
 *   line_probe CPU_A CPU_B [ROUND_TRIPS]   ->   line_one_way_ns 51.3
 *
 * Exit 1 (and a message) when a thread cannot be pinned.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BLOCKS 5

struct Shared {
  _Alignas(64) _Atomic uint64_t ping;  // written by the first thread
  _Alignas(64) _Atomic uint64_t pong;  // written by the second
};

static struct Shared line;
static long round_trips = 10000;
static int cpu_b;

static double NowNs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void* Answer(void* arg) {
  (void)arg;
  if (Pin(cpu_b) != 0) {
    fprintf(stderr, "line_probe: cannot pin a thread to CPU %d\n", cpu_b);
    exit(1);
  }
  for (uint64_t i = 1; i <= (uint64_t)round_trips * BLOCKS; i++) {
    while (atomic_load_explicit(&line.ping, memory_order_acquire) != i) {
    }
    atomic_store_explicit(&line.pong, i, memory_order_release);
  }
  return NULL;
}

static int CompareDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s CPU_A CPU_B [ROUND_TRIPS]\n", argv[0]);
    return 2;
  }
  const int cpu_a = atoi(argv[1]);
  cpu_b = atoi(argv[2]);
  if (argc > 3) round_trips = atol(argv[3]);
  if (round_trips < 1) round_trips = 1;
  if (Pin(cpu_a) != 0) {
    fprintf(stderr, "line_probe: cannot pin a thread to CPU %d\n", cpu_a);
    return 1;
  }
  pthread_t answerer;
  if (pthread_create(&answerer, NULL, Answer, NULL) != 0) {
    perror("line_probe: pthread_create");
    return 1;
  }
  double one_way[BLOCKS];
  uint64_t i = 0;
  for (int b = 0; b < BLOCKS; b++) {
    const double t0 = NowNs();
    for (long n = 0; n < round_trips; n++) {
      ++i;
      atomic_store_explicit(&line.ping, i, memory_order_release);
      while (atomic_load_explicit(&line.pong, memory_order_acquire) != i) {
      }
    }
    one_way[b] = (NowNs() - t0) / round_trips / 2;
  }
  pthread_join(answerer, NULL);
  qsort(one_way, BLOCKS, sizeof one_way[0], CompareDouble);
  printf("line_one_way_ns %.1f\n", one_way[BLOCKS / 2]);
  return 0;
}
