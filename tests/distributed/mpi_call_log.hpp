// What the library actually hands to MPI, seen through MPI's profiling interface: the test programs
// define the collectives fp8 uses, count each call and its bytes, and forward to the PMPI_ versions.
#pragma once

#include <cstddef>

namespace mpi_call_log {

struct calls {
  std::size_t iallreduce = 0;        // MPI_Iallreduce calls
  std::size_t iallreduce_count = 0;  // elements of the last one
  std::size_t iallgather = 0;        // MPI_Iallgather calls
  std::size_t iallgather_bytes = 0;  // bytes sent by this rank through MPI_Iallgather, all calls
};

// The counts so far on this rank.
calls& counts();

}  // namespace mpi_call_log
