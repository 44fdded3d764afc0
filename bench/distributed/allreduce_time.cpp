// The time of the data-parallel trainer's gradient all-reduce on its own: MPI_Allreduce (sum, FP32)
// of a buffer of COUNT floats, timed over REPEATS calls after a barrier each; rank 0 prints the median
// and the fastest in milliseconds. Built and run by trainer_data_parallel.py:
//   mpicxx -O2 allreduce_time.cpp -o allreduce_time && mpirun -np 2 ./allreduce_time COUNT [REPEATS]
#define OMPI_SKIP_MPICXX 1  // MPI's C interface only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long count = argc > 1 ? std::atol(argv[1]) : 0;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 30;
  if (count <= 0 || count > 1L << 30 || repeats <= 0) {
    if (rank == 0) std::fprintf(stderr, "usage: allreduce_time COUNT [REPEATS] (COUNT floats, 1 to 2^30)\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<float> buffer(static_cast<std::size_t>(count), 1.0f);
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    seconds.push_back(MPI_Wtime() - start);
  }
  std::sort(seconds.begin(), seconds.end());
  if (rank == 0) std::printf("%.3f %.3f\n", seconds[seconds.size() / 2] * 1e3, seconds.front() * 1e3);
  MPI_Finalize();
  return 0;
}
