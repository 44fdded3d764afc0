// A data-parallel step loop in which rank 1 dies (SIGKILL) in the middle of step 2, while rank 0 waits
// in the amax reduction with a 20 s deadline. Run by check_rank_death.cmake under mpirun, which checks
// that the job ends, with a message naming what happened, long before anything could hang.
#include <csignal>
#include <cstdio>
#include <vector>

#include <fp8/distributed/mpi.hpp>
#include <fp8/scaling.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rank = fp8::distributed::mpi_rank(MPI_COMM_WORLD);
  try {
    fp8::distributed::mpi_amax_reducer reducer(MPI_COMM_WORLD, {20.0});
    fp8::delayed_scaling_state state;
    const std::size_t x = state.add_tensor(fp8::gemm_operand::fprop_input);
    for (int step = 0; step < 4; ++step) {
      state.record(x, 1.0f + float(step + rank));
      if (rank == 1 && step == 2) {
        std::printf("rank 1: dying in step %d\n", step);
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      state.update(reducer);
      std::printf("rank %d: step %d done, scale %g\n", rank, step, double(state.scale(x)));
      std::fflush(stdout);
    }
  } catch (const fp8::error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
