/* path_workload: a path-heavy loop on ordinary files, to measure what the
 * kernel view's interposer (LD_PRELOAD libsoftverbs-kernel-view.so) costs a
 * program that never touches /sys/class/infiniband or /dev/infiniband
 * (docs/kernel_view.md, "Cost"). Each iteration: stat, lstat, access,
 * open+close, fopen+fclose, opendir+readdir+closedir and realpath of paths
 * outside the view: the work of a program that never looks at RDMA paths.
 *
 *   path_workload [ITERATIONS]   (default 200000) prints ns per iteration */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 200000;
  struct timespec t0, t1;
  struct stat st;
  char buf[PATH_MAX];
  long seen = 0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < iterations; ++i) {
    seen += stat("/etc/passwd", &st) == 0;
    seen += lstat("/usr/bin/env", &st) == 0;
    seen += access("/etc/hostname", R_OK) == 0;
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd), ++seen;
    FILE* f = fopen("/etc/hostname", "r");
    if (f) fclose(f), ++seen;
    DIR* d = opendir("/etc/ssl");
    if (d) {
      while (readdir(d)) ++seen;
      closedir(d);
    }
    seen += realpath("/usr/lib/../bin", buf) != NULL;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)iterations;
  printf("%ld iterations, %.1f ns per iteration (%ld successful calls)\n", iterations, ns, seen);
  return 0;
}
