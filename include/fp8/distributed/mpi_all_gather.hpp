// The FP8 weight all-gather over MPI (host buffers), ZeRO-3 / FSDP style: each rank casts its shard
// of a weight to FP8 and the ranks gather the codes and their scales, half the bytes of BF16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../error.hpp"
#include "mpi_communicator.hpp"
#include "shard_layout.hpp"

namespace fp8::distributed {

// Usage (every rank, same shape; e.g. rows [r * 128, (r + 1) * 128) of W under 128x128 block scaling):
//   fp8::distributed::mpi_fp8_all_gather gather(MPI_COMM_WORLD, {shard_codes, shard_scales});
//   fp8::quantize(my_rows, 128, cols, q, codes, scale_inv);             // the owner casts its shard
//   gather.gather(codes, scale_inv, all_codes, all_scale_inv);          // ranks x shard, rank order
// The constructor makes its communicator and checks, with one small MPI_Iallgather, that every rank
// passes the same shard shape (a mismatch would otherwise corrupt or hang), both under the same
// deadline: a rank that never builds its gather is then an error on the others, not a hang.
// gather() is two MPI_Iallgather calls (codes as bytes, scales as floats) waited together, with the
// optional deadline of mpi_timeout; after a timeout the buffers of that call stay in MPI's use and
// the object refuses further calls.
class mpi_fp8_all_gather {
 public:
  mpi_fp8_all_gather(MPI_Comm comm, fp8_shard_shape shape, mpi_timeout timeout = {})
      : comm_(comm_for(comm, shape), timeout, who_),
        shape_(shape),
        timeout_(timeout),
        guard_(who_, "MPI_Iallgather (fp8 shard)") {
    ranks_ = comm_.size();
    check_shapes();
  }
  mpi_fp8_all_gather(const mpi_fp8_all_gather&) = delete;
  mpi_fp8_all_gather& operator=(const mpi_fp8_all_gather&) = delete;

  // codes: shape().elements bytes, scales: shape().scales floats (this rank's shard);
  // all_codes: ranks() * elements bytes, all_scales: ranks() * scales floats, filled in rank order.
  // Throws fp8::invalid_argument on a null pointer, fp8::error if MPI fails or the deadline passes.
  void gather(const std::uint8_t* codes, const float* scales, std::uint8_t* all_codes, float* all_scales) {
    guard_.require_usable(comm_.get());
    if (shape_.elements > 0 && (codes == nullptr || all_codes == nullptr))
      throw invalid_argument(std::string(who_) + ": " + (codes == nullptr ? "codes" : "all_codes") +
                             " is null");
    if (shape_.scales > 0 && (scales == nullptr || all_scales == nullptr))
      throw invalid_argument(std::string(who_) + ": " + (scales == nullptr ? "scales" : "all_scales") +
                             " is null");
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    const int elements = static_cast<int>(shape_.elements);
    const int scale_count = static_cast<int>(shape_.scales);
    if (elements > 0) {
      guard_.check_start(
          MPI_Iallgather(codes, elements, MPI_BYTE, all_codes, elements, MPI_BYTE, comm_.get(), &requests[0]),
          comm_.get());
    }
    if (scale_count > 0) {
      guard_.check_start(MPI_Iallgather(scales, scale_count, MPI_FLOAT, all_scales, scale_count, MPI_FLOAT,
                                        comm_.get(), &requests[1]),
                         comm_.get());
    }
    guard_.wait(requests, 2, comm_.get(), timeout_);
    bytes_sent_ += shape_.fp8_bytes();
  }

  int ranks() const noexcept { return ranks_; }
  const fp8_shard_shape& shape() const noexcept { return shape_; }
  // Bytes of this rank's shards handed to MPI so far (codes plus scales; BF16 would be shape().bf16_bytes()
  // per gather).
  std::size_t bytes_sent() const noexcept { return bytes_sent_; }

 private:
  static constexpr const char* who_ = "fp8::distributed::mpi_fp8_all_gather";

  // comm, once the shape fits one MPI call: checked before the communicator is made, since making
  // it is a collective, which no rank should enter for a gather it then refuses.
  static MPI_Comm comm_for(MPI_Comm comm, fp8_shard_shape shape) {
    const auto int_max = static_cast<std::size_t>(std::numeric_limits<int>::max());
    if (shape.elements > int_max || shape.scales > int_max)
      throw invalid_argument(std::string(who_) + ": a shard of " + std::to_string(shape.elements) +
                             " codes and " + std::to_string(shape.scales) +
                             " scales is more than one MPI call can carry (at most INT_MAX of each)");
    return comm;
  }

  // Gathers every rank's (elements, scales) with one MPI_Iallgather, waited with the deadline (a
  // rank that never builds its gather would otherwise hang this one), and throws
  // fp8::invalid_argument naming the first rank whose shape differs. A call given up on keeps its
  // buffers in MPI's use: they are kept until the program ends (kept_buffers.hpp).
  void check_shapes() {
    struct exchange {
      std::uint64_t mine[2];
      std::vector<std::uint64_t> all;
    };
    auto buffers = std::make_unique<exchange>(
        exchange{{shape_.elements, shape_.scales}, std::vector<std::uint64_t>(2 * std::size_t(ranks_))});
    detail::run_one_collective(who_, "MPI_Iallgather (shard shapes)", comm_.get(), timeout_, buffers,
                               [&](MPI_Request* request) {
                                 return MPI_Iallgather(buffers->mine, 2, MPI_UINT64_T, buffers->all.data(), 2,
                                                       MPI_UINT64_T, comm_.get(), request);
                               });
    detail::check_equal_shards(buffers->all.data(), ranks_, who_);
  }
  mpi_communicator comm_;
  fp8_shard_shape shape_;
  mpi_timeout timeout_;
  detail::mpi_collective_guard guard_;
  int ranks_ = 0;
  std::size_t bytes_sent_ = 0;
};

}  // namespace fp8::distributed
