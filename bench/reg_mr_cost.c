/* reg_mr_cost: what memory registration costs an application (issue 16).
 *
 * For each size, on fresh page-aligned memory the program has already
 * touched (as an MPI library's or a storage stack's I/O buffer is), repeated
 * REPS times, the median of:
 *   reg_first   ibv_reg_mr of a range never registered before
 *   reg_again   ibv_reg_mr of the same range while the first MR still exists
 *   dereg       ibv_dereg_mr of that second MR (the range stays registered)
 *   dereg_last  ibv_dereg_mr of the first MR (the range is registered no more)
 *   reg_before  ibv_reg_mr of the range after both were deregistered
 *   dereg_again ibv_dereg_mr of that MR
 * Each repetition maps a fresh anonymous buffer (and unmaps it at its end):
 * reg_first is always memory never registered, even when the kernel hands
 * out the same addresses again. The same six again with malloc'ed buffers
 * (names prefixed malloc_), as an application registers: not page-aligned
 * (partial first and last pages are never converted), and the allocator may
 * hand out the same, already converted, pages again.
 * Also: first_touch, the time to write one byte into every page of a fresh
 * 64 MiB anonymous mapping (page faults), the yardstick of the 64 MiB target;
 * and, for a registered 4 KiB page after the program slept 1 ms (as calls
 * come in a program that does other work between them, not in a loop):
 *   idle_dereg      ibv_dereg_mr of its MR, the first call after the sleep
 *   idle_reg_again  ibv_reg_mr of the page right after it
 *
 *   reg_mr_cost [-d DEVICE] [-r REPS] [SIZE...]   (sizes in bytes, K/M suffix)
 * prints one line per measurement:  <name> <size> <median_us> <min_us> <max_us>
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPS 101

static double NowUs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int CompareDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void Report(const char* name, size_t size, double* v, int n) {
  qsort(v, n, sizeof(double), CompareDouble);
  printf("%s %zu %.2f %.2f %.2f\n", name, size, v[n / 2], v[0], v[n - 1]);
}

static size_t ParseSize(const char* s) {
  char* end;
  size_t v = strtoull(s, &end, 0);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

static struct ibv_mr* Reg(struct ibv_pd* pd, void* buf, size_t size, double* us) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  double t0 = NowUs();
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, size, access);
  *us = NowUs() - t0;
  if (!mr) {
    perror("ibv_reg_mr");
    exit(1);
  }
  return mr;
}

static double Dereg(struct ibv_mr* mr) {
  double t0 = NowUs();
  if (ibv_dereg_mr(mr)) {
    perror("ibv_dereg_mr");
    exit(1);
  }
  return NowUs() - t0;
}

static void FirstTouch(int reps) {
  const size_t size = 64u << 20;
  const long page = sysconf(_SC_PAGESIZE);
  double v[MAX_REPS];
  for (int r = 0; r < reps; ++r) {
    char* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      perror("mmap");
      exit(1);
    }
    double t0 = NowUs();
    for (size_t i = 0; i < size; i += page) p[i] = 1;
    v[r] = NowUs() - t0;
    munmap(p, size);
  }
  Report("first_touch", size, v, reps);
}

/* One size, REPS times: fresh anonymous memory (mapped anew each time), or
 * malloc'ed memory (use_malloc: what the allocator gives, not page-aligned;
 * its whole pages may be the same as the last repetition's). */
static int Measure(struct ibv_pd* pd, size_t size, int reps, int use_malloc) {
  double first[MAX_REPS], again[MAX_REPS], dereg[MAX_REPS], dereg_last[MAX_REPS], before[MAX_REPS],
      dereg_again[MAX_REPS];
  for (int r = 0; r < reps; ++r) {
    void* buf = use_malloc
                    ? malloc(size)
                    : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!buf || buf == MAP_FAILED) {
      perror("buffer");
      return 1;
    }
    memset(buf, r + 1, size);
    struct ibv_mr* a = Reg(pd, buf, size, &first[r]);
    struct ibv_mr* b = Reg(pd, buf, size, &again[r]);
    dereg[r] = Dereg(b);
    dereg_last[r] = Dereg(a);
    struct ibv_mr* c = Reg(pd, buf, size, &before[r]);
    dereg_again[r] = Dereg(c);
    /* The bytes survived registration. */
    if (((unsigned char*)buf)[size - 1] != (unsigned char)(r + 1)) {
      fprintf(stderr, "buffer contents changed by registration\n");
      return 1;
    }
    if (use_malloc)
      free(buf);
    else
      munmap(buf, size);
  }
  const char* p = use_malloc ? "malloc_" : "";
  char name[64];
  snprintf(name, sizeof(name), "%sreg_first", p);
  Report(name, size, first, reps);
  snprintf(name, sizeof(name), "%sreg_again", p);
  Report(name, size, again, reps);
  snprintf(name, sizeof(name), "%sdereg", p);
  Report(name, size, dereg, reps);
  snprintf(name, sizeof(name), "%sdereg_last", p);
  Report(name, size, dereg_last, reps);
  snprintf(name, sizeof(name), "%sreg_before", p);
  Report(name, size, before, reps);
  snprintf(name, sizeof(name), "%sdereg_again", p);
  Report(name, size, dereg_again, reps);
  return 0;
}

/* Control calls after the program was idle: the daemon sleeps then, and
 * the first call wakes it. MAX_REPS rounds (0.1 s): the wake-ups vary with
 * where the scheduler puts the two processes. */
static void AfterIdle(struct ibv_pd* pd) {
  const int reps = MAX_REPS;
  const size_t size = 4096;
  double dereg[MAX_REPS], again[MAX_REPS];
  void* buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  memset(buf, 1, size);
  double ignored;
  struct ibv_mr* mr = Reg(pd, buf, size, &ignored);
  for (int r = 0; r < reps; ++r) {
    usleep(1000);
    dereg[r] = Dereg(mr);
    mr = Reg(pd, buf, size, &again[r]);
  }
  Dereg(mr);
  munmap(buf, size);
  Report("idle_dereg", size, dereg, reps);
  Report("idle_reg_again", size, again, reps);
}

int main(int argc, char** argv) {
  const char* device = "softverbs0";
  int reps = 11;
  int opt;
  while ((opt = getopt(argc, argv, "d:r:")) != -1) {
    if (opt == 'd')
      device = optarg;
    else if (opt == 'r')
      reps = atoi(optarg);
    else {
      fprintf(stderr, "usage: %s [-d DEVICE] [-r REPS] [SIZE...]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > MAX_REPS) reps = 11;
  size_t sizes[32];
  int nsizes = 0;
  for (int i = optind; i < argc && nsizes < 32; ++i) sizes[nsizes++] = ParseSize(argv[i]);
  if (nsizes == 0) {
    const size_t defaults[] = {4096, 65536, 1 << 20, 4 << 20, 64 << 20};
    for (int i = 0; i < 5; ++i) sizes[nsizes++] = defaults[i];
  }

  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = NULL;
  for (int i = 0; list && i < n && !ctx; ++i) {
    if (strcmp(ibv_get_device_name(list[i]), device) == 0) ctx = ibv_open_device(list[i]);
  }
  if (!ctx) {
    fprintf(stderr, "cannot open device %s\n", device);
    return 1;
  }
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) {
    perror("ibv_alloc_pd");
    return 1;
  }
  FirstTouch(reps < 5 ? reps : 5);
  for (int s = 0; s < nsizes; ++s) {
    if (Measure(pd, sizes[s], reps, 0)) return 1;
    if (Measure(pd, sizes[s], reps, 1)) return 1;
  }
  /* Last: the sleeps change where the scheduler puts the program and the
   * daemon for what follows. */
  AfterIdle(pd);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
