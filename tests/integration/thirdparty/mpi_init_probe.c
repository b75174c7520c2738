/* Reaches MPI_Init and MPI_Finalize and says so: the Open MPI openib test
 * (issue 9) runs two ranks of it with --mca btl openib,self on softverbs. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank = -1, size = 0;
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("rank %d of %d passed MPI_Init\n", rank, size);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
