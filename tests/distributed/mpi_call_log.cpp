// Definitions of MPI_Iallreduce and MPI_Iallgather that record each call, then forward to PMPI_ (the
// MPI standard's profiling interface: a program's own definition takes the place of the library's).
#include "mpi_call_log.hpp"

#include <fp8/distributed/mpi_communicator.hpp>

namespace mpi_call_log {

calls& counts() {
  static calls log;
  return log;
}

}  // namespace mpi_call_log

extern "C" int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  ++mpi_call_log::counts().iallreduce;
  mpi_call_log::counts().iallreduce_count = static_cast<std::size_t>(count);
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

extern "C" int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  int type_size = 0;
  PMPI_Type_size(sendtype, &type_size);
  ++mpi_call_log::counts().iallgather;
  mpi_call_log::counts().iallgather_bytes +=
      static_cast<std::size_t>(sendcount) * static_cast<std::size_t>(type_size);
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}
