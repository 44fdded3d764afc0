// The main() of every MPI test program: MPI_Init, doctest's test cases on every rank (in the same
// order, so that their collectives match), then one exit status for all ranks (any rank's failure
// fails every rank) and MPI_Finalize. Needs at least 2 ranks: ctest runs them under mpirun -np 2.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <fp8/distributed/mpi_communicator.hpp>

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init failed\n");
    return 1;
  }
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int result = 1;
  if (size < 2) {
    std::fprintf(stderr, "%s: needs at least 2 MPI ranks (run it under mpirun -np 2), got %d\n", argv[0],
                 size);
  } else {
    doctest::Context context(argc, argv);
    result = context.run();
  }
  MPI_Allreduce(MPI_IN_PLACE, &result, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return result;
}
