/* mpi_pingpong: a two-rank ping-pong for Open MPI over UCX on softverbs0
 * (docs/kernel_view.md has the command). Rank 0 sends, rank 1 echoes; each
 * message is checked byte for byte. Prints the half round-trip latency of
 * 8-byte messages and the bandwidth of 1 MiB ones; exits 1 on a wrong
 * payload or a wrong rank count.
 *
 *   mpi_pingpong [LAT_ITERATIONS] [BW_ITERATIONS]   (default 1000, 100) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int Exchange(int rank, char* buf, char* want, int size, int iterations) {
  for (int i = 0; i < iterations; ++i) {
    if (rank == 0) {
      memset(want, (char)(i * 7 + size), size);
      memcpy(buf, want, size);
      MPI_Send(buf, size, MPI_CHAR, 1, i, MPI_COMM_WORLD);
      memset(buf, 0, size);
      MPI_Recv(buf, size, MPI_CHAR, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (memcmp(buf, want, size) != 0) {
        fprintf(stderr, "mpi_pingpong: iteration %d of %d bytes came back wrong\n", i, size);
        return 1;
      }
    } else {
      MPI_Recv(buf, size, MPI_CHAR, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, size, MPI_CHAR, 0, i, MPI_COMM_WORLD);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, got %d\n", ranks);
    MPI_Finalize();
    return 1;
  }
  int lat_iterations = argc > 1 ? atoi(argv[1]) : 1000;
  int bw_iterations = argc > 2 ? atoi(argv[2]) : 100;
  const int big = 1 << 20;
  char* buf = malloc(big);
  char* want = malloc(big);
  int bad = Exchange(rank, buf, want, 8, 10);  // warm-up: connections made
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  bad |= Exchange(rank, buf, want, 8, lat_iterations);
  double t1 = MPI_Wtime();
  bad |= Exchange(rank, buf, want, big, bw_iterations);
  double t2 = MPI_Wtime();
  if (rank == 0 && !bad) {
    printf("mpi_pingpong: latency %.2f us (8 B, half round trip, %d iterations)\n",
           (t1 - t0) * 1e6 / (2.0 * lat_iterations), lat_iterations);
    printf("mpi_pingpong: bandwidth %.1f MiB/s (1 MiB, both directions, %d iterations)\n",
           2.0 * bw_iterations * big / (t2 - t1) / (1 << 20), bw_iterations);
  }
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  free(buf);
  free(want);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
