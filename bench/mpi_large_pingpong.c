/* mpi_large_pingpong: two-rank MPI ping-pong bandwidth for large messages (issue 16).
 *
 * Rank 0 sends SIZE bytes to rank 1, which sends them back; after WARMUP
 * untimed round trips, ITERS timed ones. The same buffers every time, as an
 * application's: with UCX's default rendezvous protocol each message
 * registers the user buffer, so this measures what registration (and its
 * cache) costs a real MPI job. Bandwidth is one way: SIZE / (round trip / 2),
 * in MiB/s, as osu_latency-style ping-pong reports it.
 *
 *   mpirun -np 2 mpi_large_pingpong [-n ITERS] [-w WARMUP] SIZE...   (K/M suffixes)
 * rank 0 prints one line per size:  pingpong <size> <iters> <rtt_us> <bw_mib_s>
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t ParseSize(const char* s) {
  char* end;
  size_t v = strtoull(s, &end, 0);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  return v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != 2) {
    if (rank == 0) fprintf(stderr, "mpi_large_pingpong needs exactly 2 ranks, got %d\n", ranks);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int iters = 200, warmup = 20, opt;
  while ((opt = getopt(argc, argv, "n:w:")) != -1) {
    if (opt == 'n') iters = atoi(optarg);
    else if (opt == 'w') warmup = atoi(optarg);
  }
  if (iters < 1) iters = 1;
  if (warmup < 0) warmup = 0;
  for (int i = optind; i < argc; ++i) {
    const size_t size = ParseSize(argv[i]);
    char* buf = malloc(size ? size : 1);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, rank + 1, size);
    const int peer = 1 - rank;
    double start = 0;
    for (int n = 0; n < warmup + iters; ++n) {
      if (n == warmup) {
        MPI_Barrier(MPI_COMM_WORLD);
        start = MPI_Wtime();
      }
      if (rank == 0) {
        MPI_Send(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)size, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
      }
    }
    const double elapsed = MPI_Wtime() - start;
    if (rank == 0) {
      const double rtt_us = elapsed / iters * 1e6;
      printf("pingpong %zu %d %.2f %.2f\n", size, iters, rtt_us,
             size / (rtt_us / 2 * 1e-6) / (1 << 20));
      fflush(stdout);
    }
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
