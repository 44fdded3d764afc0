// The hook through which a distributed engine makes amaxes agree across ranks (an all-reduce with
// max) before scales are computed. A single process uses the identity.
#pragma once

#include <cstddef>

namespace fp8 {

// fp8/distributed/mpi.hpp implements it for MPI (fp8::distributed::mpi_amax_reducer), and
// fp8/distributed/nccl.hpp the device-side counterpart (fp8::cuda::device_amax_reducer) for NCCL.
// Amaxes are non-negative floats or NaN, whose bit patterns order like their values (NaN highest), so
// a max over the patterns as unsigned integers is exact and keeps NaN (a max over floats may drop it).
// One call reduces the current amaxes of all tensors of a state at once (one collective per step,
// not one per tensor). See docs/distributed.md.
class amax_reducer {
 public:
  virtual ~amax_reducer() = default;
  // Replaces each of amaxes[0..count) by its maximum over the group, in place. May throw; the caller
  // then leaves its state as it was.
  virtual void reduce_max(float* amaxes, std::size_t count) = 0;

 protected:
  amax_reducer() = default;
  amax_reducer(const amax_reducer&) = default;
  amax_reducer& operator=(const amax_reducer&) = default;
};

// One process, nothing to agree with.
class identity_amax_reducer final : public amax_reducer {
 public:
  void reduce_max(float*, std::size_t) override {}
};

}  // namespace fp8
