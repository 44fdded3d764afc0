// The NCCL amax reducer, the device delayed-scaling hook and the FP8 all-gather, one rank per visible
// GPU (ncclCommInitAll; one thread per device). With one GPU the group has one rank: the reduction
// must then keep every amax (NaN included) bit for bit. Without a GPU: "no CUDA device: skipped".
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <fp8/cuda/delayed_scaling.cuh>
#include <fp8/cuda/linear/scaling.cuh>
#include <fp8/distributed/nccl.hpp>
#include <fp8/scaling.hpp>

#include "../cuda/gpu_skip.hpp"

namespace {

std::uint32_t bits(float value) {
  std::uint32_t b = 0;
  std::memcpy(&b, &value, sizeof b);
  return b;
}

void cuda_ok(cudaError_t rc) { REQUIRE_MESSAGE(rc == cudaSuccess, cudaGetErrorString(rc)); }

// One communicator and stream per visible device.
struct devices {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;

  devices() {
    int count = 0;
    cuda_ok(cudaGetDeviceCount(&count));
    comms.resize(static_cast<std::size_t>(count));
    fp8::distributed::nccl_check(ncclCommInitAll(comms.data(), count, nullptr), "ncclCommInitAll", nullptr);
    for (int d = 0; d < count; ++d) {
      cuda_ok(cudaSetDevice(d));
      cudaStream_t stream = nullptr;
      cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      streams.push_back(stream);
    }
    MESSAGE(count, " device(s), one NCCL rank each");
  }
  ~devices() {
    for (std::size_t d = 0; d < comms.size(); ++d) {
      (void)cudaSetDevice(int(d));
      (void)cudaStreamDestroy(streams[d]);
      (void)ncclCommDestroy(comms[d]);
    }
  }
  int size() const { return int(comms.size()); }

  // Runs body(d) on one thread per device (NCCL's blocking calls from one thread per rank); returns
  // each thread's error message, empty where it succeeded.
  std::vector<std::string> on_each(const std::function<void(int)>& body) const {
    std::vector<std::string> errors(comms.size());
    std::vector<std::thread> threads;
    for (int d = 0; d < size(); ++d) {
      threads.emplace_back([&, d] {
        try {
          if (cudaSetDevice(d) != cudaSuccess) throw fp8::error("cudaSetDevice failed");
          body(d);
        } catch (const std::exception& e) { errors[std::size_t(d)] = e.what(); }
      });
    }
    for (auto& t : threads) t.join();
    return errors;
  }
};

// Keeps its stream busy for about `nanoseconds` of wall time (the GPU's global timer).
__global__ void busy_for(unsigned long long nanoseconds) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < nanoseconds);
}

// The amaxes device d records: they differ by device; device 0 has an outlier, the last device a NaN.
std::vector<float> amaxes_of(int d, int devices) {
  std::vector<float> a = {1.0f + float(d), 2.0f, d == 0 ? 1000.0f : 3.0f, std::nextafter(1.0f, float(d + 1)),
                          0.0f};
  if (d == devices - 1) a[1] = std::numeric_limits<float>::quiet_NaN();
  return a;
}

// The NaN-dominant maximum over devices, as bit patterns (what the reduction must give).
std::vector<std::uint32_t> expected_bits(int devices) {
  std::vector<std::uint32_t> max(amaxes_of(0, devices).size(), 0u);
  for (int d = 0; d < devices; ++d) {
    const std::vector<float> a = amaxes_of(d, devices);
    for (std::size_t i = 0; i < a.size(); ++i) max[i] = std::max(max[i], bits(a[i]));
  }
  return max;
}

}  // namespace

TEST_CASE("nccl_amax_reducer: one ncclAllReduce gives every device the NaN-dominant maximum, bit for bit") {
  devices group;
  const int n = group.size();
  std::vector<std::vector<float>> results(static_cast<std::size_t>(n));
  std::vector<std::size_t> calls(static_cast<std::size_t>(n));
  const auto errors = group.on_each([&](int d) {
    const std::vector<float> mine = amaxes_of(d, n);
    float* device = nullptr;
    fp8::distributed::detail::cuda_check(cudaMalloc(&device, mine.size() * sizeof(float)), "cudaMalloc",
                                         nullptr);
    fp8::distributed::nccl_amax_reducer reducer(group.comms[std::size_t(d)]);
    cudaStream_t stream = group.streams[std::size_t(d)];
    cudaMemcpyAsync(device, mine.data(), mine.size() * sizeof(float), cudaMemcpyHostToDevice, stream);
    reducer.reduce_max(device, mine.size(), stream);
    results[std::size_t(d)].resize(mine.size());
    cudaMemcpyAsync(results[std::size_t(d)].data(), device, mine.size() * sizeof(float),
                    cudaMemcpyDeviceToHost, stream);
    fp8::distributed::nccl_wait(group.comms[std::size_t(d)], stream, 60.0, "amax reduction");
    calls[std::size_t(d)] = reducer.calls();
    cudaFree(device);
  });
  const std::vector<std::uint32_t> expected = expected_bits(n);
  for (int d = 0; d < n; ++d) {
    CAPTURE(d);
    CHECK(errors[std::size_t(d)] == "");
    CHECK(calls[std::size_t(d)] == 1u);
    REQUIRE(results[std::size_t(d)].size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(bits(results[std::size_t(d)][i]) == expected[i]);
    CHECK(std::isnan(results[std::size_t(d)][1]));
  }
}

// ncclCommInitAll above makes its communicators within one process; a data-parallel trainer makes
// each rank's from a unique id it broadcasts (ncclGetUniqueId, then ncclCommInitRank), which goes
// through NCCL's socket bootstrap. One rank shows that path works on this machine. The reduction is
// out of place: with one rank NCCL then copies (in place it would do nothing at all).
TEST_CASE("a communicator made from a unique id (as a trainer's rank makes it) reduces and is waited for") {
  cuda_ok(cudaSetDevice(0));
  ncclUniqueId id{};
  fp8::distributed::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
  ncclComm_t comm = nullptr;
  fp8::distributed::nccl_check(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank", nullptr);
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::vector<float> sent = {1.5f, -2.0f, 1e-30f, 3e38f};
  std::vector<float> received(sent.size(), 0.0f);
  float* device = nullptr;
  cuda_ok(cudaMalloc(&device, 2 * sent.size() * sizeof(float)));
  cuda_ok(cudaMemcpyAsync(device, sent.data(), sent.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
  cuda_ok(cudaMemsetAsync(device + sent.size(), 0, sent.size() * sizeof(float), stream));
  fp8::distributed::nccl_check(
      ncclAllReduce(device, device + sent.size(), sent.size(), ncclFloat32, ncclSum, comm, stream),
      "ncclAllReduce", comm);
  cuda_ok(cudaMemcpyAsync(received.data(), device + sent.size(), sent.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, stream));
  fp8::distributed::nccl_wait(comm, stream, 60.0, "the one-rank sum");
  for (std::size_t i = 0; i < sent.size(); ++i) CHECK(bits(received[i]) == bits(sent[i]));
  int ranks = 0;
  fp8::distributed::nccl_check(ncclCommCount(comm, &ranks), "ncclCommCount", comm);
  CHECK(ranks == 1);
  cuda_ok(cudaFree(device));
  cuda_ok(cudaStreamDestroy(stream));
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}

TEST_CASE("delayed_scaling_device_state::update(reducer): every device gets the scales of one process") {
  devices group;
  const int n = group.size();
  fp8::delayed_scaling config;
  config.history_length = 4;
  const std::vector<fp8::fp8_format> formats = {fp8::fp8_format::e4m3, fp8::fp8_format::e4m3,
                                                fp8::fp8_format::e5m2, fp8::fp8_format::e4m3,
                                                fp8::fp8_format::e5m2};
  // One process seeing every device's amaxes: the reference.
  fp8::delayed_scaling_state single(config);
  for (fp8::fp8_format f : formats) single.add_tensor(f);
  const std::vector<std::uint32_t> max_bits = expected_bits(n);
  for (std::size_t i = 0; i < formats.size(); ++i) {
    float amax = 0.0f;
    std::memcpy(&amax, &max_bits[i], sizeof amax);
    single.record(i, amax);
  }
  single.update();

  std::vector<fp8::delayed_scaling_state> downloaded(static_cast<std::size_t>(n),
                                                     fp8::delayed_scaling_state(config));
  const auto errors = group.on_each([&](int d) {
    cudaStream_t stream = group.streams[std::size_t(d)];
    fp8::cuda::delayed_scaling_device_state state(config, formats);
    const std::vector<float> mine = amaxes_of(d, n);
    cudaMemcpyAsync(state.current_amaxes(), mine.data(), mine.size() * sizeof(float), cudaMemcpyHostToDevice,
                    stream);
    fp8::distributed::nccl_amax_reducer reducer(group.comms[std::size_t(d)]);
    state.update(reducer, stream);
    downloaded[std::size_t(d)] = state.download(stream);
  });
  for (int d = 0; d < n; ++d) {
    CAPTURE(d);
    CHECK(errors[std::size_t(d)] == "");
    for (std::size_t i = 0; i < formats.size(); ++i) {
      CAPTURE(i);
      CHECK(bits(downloaded[std::size_t(d)].scale(i)) == bits(single.scale(i)));
      CHECK(bits(downloaded[std::size_t(d)].history(i).at(1)) == bits(single.history(i).at(1)));
    }
  }
}

TEST_CASE("linear_scaling with an NCCL reducer: end_step reduces on the stream, then updates") {
  devices group;
  const int n = group.size();
  const fp8::gemm_recipe recipe;  // delayed scaling for all six operands of a layer
  auto amaxes_of_slot = [&](int d) {
    std::vector<float> a(fp8::gemm_operand_count);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i + 1) * (d == n - 1 ? 64.0f : 1.0f) + float(d);
    return a;
  };
  std::vector<fp8::delayed_scaling_state> downloaded(static_cast<std::size_t>(n),
                                                     fp8::delayed_scaling_state(recipe.delayed()));
  std::vector<std::vector<fp8::fp8_format>> formats(static_cast<std::size_t>(n));
  const auto errors = group.on_each([&](int d) {
    cudaStream_t stream = group.streams[std::size_t(d)];
    fp8::distributed::nccl_amax_reducer reducer(group.comms[std::size_t(d)]);
    fp8::cuda::linear_scaling scaling(recipe, 1, reducer);
    const std::vector<float> mine = amaxes_of_slot(d);
    cudaMemcpyAsync(scaling.state().current_amaxes(), mine.data(), mine.size() * sizeof(float),
                    cudaMemcpyHostToDevice, stream);
    scaling.end_step(stream);
    downloaded[std::size_t(d)] = scaling.state().download(stream);
    for (std::size_t i = 0; i < mine.size(); ++i)
      formats[std::size_t(d)].push_back(scaling.state().format(i));
    if (reducer.calls() != 1u) throw fp8::error("expected one reduction per end_step");
  });
  for (int d = 0; d < n; ++d) {
    CAPTURE(d);
    REQUIRE(errors[std::size_t(d)] == "");
    fp8::delayed_scaling_state single(recipe.delayed());
    for (std::size_t i = 0; i < formats[std::size_t(d)].size(); ++i) {
      single.add_tensor(formats[std::size_t(d)][i]);
      float amax = 0.0f;
      for (int r = 0; r < n; ++r) amax = std::max(amax, amaxes_of_slot(r)[i]);
      single.record(i, amax);
    }
    single.update();
    for (std::size_t i = 0; i < single.size(); ++i)
      CHECK(bits(downloaded[std::size_t(d)].scale(i)) == bits(single.scale(i)));
  }
}

TEST_CASE("nccl_fp8_all_gather: every device receives each shard's codes and scales; 1 byte per element") {
  devices group;
  const int n = group.size();
  const fp8::distributed::fp8_shard_shape shape{4096, 2};
  auto gathers = fp8::distributed::nccl_fp8_all_gather::for_devices(group.comms, shape, group.streams);
  auto code_of = [](int d, std::size_t i) { return std::uint8_t((std::size_t(d) * 37u + i * 11u) & 0xFFu); };
  auto scale_of = [](int d, std::size_t j) { return 0.5f * float(d + 1) + float(j); };

  struct buffers {
    std::uint8_t* codes;
    float* scales;
    std::uint8_t* all_codes;
    float* all_scales;
  };
  std::vector<buffers> b(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) {
    cuda_ok(cudaSetDevice(d));
    buffers& x = b[std::size_t(d)];
    cuda_ok(cudaMalloc(&x.codes, shape.elements));
    cuda_ok(cudaMalloc(&x.scales, shape.scales * sizeof(float)));
    cuda_ok(cudaMalloc(&x.all_codes, static_cast<std::size_t>(n) * shape.elements));
    cuda_ok(cudaMalloc(&x.all_scales, static_cast<std::size_t>(n) * shape.scales * sizeof(float)));
    std::vector<std::uint8_t> codes(shape.elements);
    std::vector<float> scales(shape.scales);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = code_of(d, i);
    for (std::size_t j = 0; j < scales.size(); ++j) scales[j] = scale_of(d, j);
    cuda_ok(cudaMemcpy(x.codes, codes.data(), codes.size(), cudaMemcpyHostToDevice));
    cuda_ok(cudaMemcpy(x.scales, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy may return before its copy lands, and it runs on the legacy stream, which
    // the non-blocking streams of the gather do not wait for.
    cuda_ok(cudaDeviceSynchronize());
  }
  fp8::distributed::nccl_check(ncclGroupStart(), "ncclGroupStart", nullptr);
  for (int d = 0; d < n; ++d) {
    const buffers& x = b[std::size_t(d)];
    gathers[std::size_t(d)].gather(x.codes, x.scales, x.all_codes, x.all_scales,
                                   group.streams[std::size_t(d)]);
  }
  fp8::distributed::nccl_check(ncclGroupEnd(), "ncclGroupEnd", nullptr);
  for (int d = 0; d < n; ++d) {
    CAPTURE(d);
    cuda_ok(cudaSetDevice(d));
    cuda_ok(cudaStreamSynchronize(group.streams[std::size_t(d)]));
    std::vector<std::uint8_t> all_codes(static_cast<std::size_t>(n) * shape.elements);
    std::vector<float> all_scales(static_cast<std::size_t>(n) * shape.scales);
    cuda_ok(
        cudaMemcpy(all_codes.data(), b[std::size_t(d)].all_codes, all_codes.size(), cudaMemcpyDeviceToHost));
    cuda_ok(cudaMemcpy(all_scales.data(), b[std::size_t(d)].all_scales, all_scales.size() * sizeof(float),
                       cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < shape.elements; ++i)
        wrong += all_codes[std::size_t(r) * shape.elements + i] != code_of(r, i);
      for (std::size_t j = 0; j < shape.scales; ++j)
        CHECK(all_scales[std::size_t(r) * shape.scales + j] == scale_of(r, j));
    }
    CHECK(wrong == 0u);
    CHECK(gathers[std::size_t(d)].ranks() == n);
    CHECK(gathers[std::size_t(d)].bytes_sent() == shape.elements + shape.scales * sizeof(float));
    CHECK(2 * (gathers[std::size_t(d)].bytes_sent() - shape.scales * sizeof(float)) == shape.bf16_bytes());
    for (void* p :
         {static_cast<void*>(b[std::size_t(d)].codes), static_cast<void*>(b[std::size_t(d)].scales),
          static_cast<void*>(b[std::size_t(d)].all_codes), static_cast<void*>(b[std::size_t(d)].all_scales)})
      cuda_ok(cudaFree(p));
  }
}

TEST_CASE("bad inputs: null or host pointers and null communicators are refused before any NCCL call") {
  devices group;
  cuda_ok(cudaSetDevice(0));
  fp8::distributed::nccl_amax_reducer reducer(group.comms[0]);
  std::vector<float> host(3, 1.0f);
  CHECK_THROWS_WITH_AS(reducer.reduce_max(host.data(), host.size(), group.streams[0]),
                       doctest::Contains("amaxes is not device memory"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(reducer.reduce_max(nullptr, 3, group.streams[0]), doctest::Contains("amaxes is null"),
                       fp8::invalid_argument);
  CHECK(reducer.calls() == 0u);
  CHECK_THROWS_AS(fp8::distributed::nccl_amax_reducer(nullptr), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::distributed::nccl_check(ncclInvalidArgument, "ncclSomething", group.comms[0]),
                       doctest::Contains("ncclSomething failed on rank 0: "), fp8::error);
  CHECK_THROWS_AS(fp8::distributed::nccl_wait(group.comms[0], group.streams[0], -1.0, "x"),
                  fp8::invalid_argument);
  // Finite, but its deadline would wrap past steady_clock's range: refused, not an abort at once.
  CHECK_THROWS_WITH_AS(fp8::distributed::nccl_wait(group.comms[0], group.streams[0], 1e12, "x"),
                       doctest::Contains("<= 1e9"), fp8::invalid_argument);
  CHECK_NOTHROW(reducer.reduce_max(nullptr, 0, group.streams[0]));  // nothing to reduce: no call
  CHECK(reducer.calls() == 0u);

  // Over every device's communicator: the shape check is a collective, which a group of several
  // GPUs would wait for forever if only device 0 took part. With a deadline it completes as before.
  auto gathers =
      fp8::distributed::nccl_fp8_all_gather::for_devices(group.comms, {16, 1}, group.streams, 60.0);
  CHECK(gathers[0].ranks() == group.size());
  CHECK_THROWS_WITH_AS(
      fp8::distributed::nccl_fp8_all_gather::for_devices(group.comms, {16, 1}, group.streams, -1.0),
      doctest::Contains("the timeout must be a finite number of seconds"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::distributed::nccl_fp8_all_gather(group.comms[0], {16, 1}, group.streams[0], 1e12),
                       doctest::Contains("<= 1e9"), fp8::invalid_argument);
  std::vector<std::uint8_t> codes(16);
  CHECK_THROWS_WITH_AS(gathers[0].gather(codes.data(), nullptr, nullptr, nullptr, group.streams[0]),
                       doctest::Contains("codes is not device memory"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::distributed::nccl_fp8_all_gather::for_devices({group.comms[0]}, {16, 1}, {}),
                       doctest::Contains("1 communicators but 0 streams"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::distributed::nccl_fp8_all_gather::for_devices({}, {16, 1}, {}),
                       doctest::Contains("no communicators"), fp8::invalid_argument);
  CHECK(gathers[0].bytes_sent() == 0u);
}

TEST_CASE(
    "nccl_wait: past its deadline it aborts the communicator and nulls the handle, so a later "
    "ncclCommDestroy does not free it twice") {
  cuda_ok(cudaSetDevice(0));
  ncclComm_t comm = nullptr;  // a communicator of its own (one rank on device 0), since it is aborted
  fp8::distributed::nccl_check(ncclCommInitAll(&comm, 1, nullptr), "ncclCommInitAll", nullptr);
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  busy_for<<<1, 1, 0, stream>>>(1500ull * 1000 * 1000);  // 1.5 s: the stream outlasts the deadline
  cuda_ok(cudaGetLastError());
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(fp8::distributed::nccl_wait(comm, stream, 0.2, "the busy step"),
                       doctest::Contains("the busy step timed out on rank 0 after 0.2 s"), fp8::error);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(waited >= 0.2);
  CHECK(comm == nullptr);                       // ncclCommAbort freed it
  CHECK(ncclCommDestroy(comm) == ncclSuccess);  // what an owner's destructor does next: a no-op
  cuda_ok(cudaStreamSynchronize(stream));
  cuda_ok(cudaStreamDestroy(stream));
}

// A host reducer as MPI's is one: it reads and writes host memory (here: records what it was given
// and replaces every amax by the larger amax of a pretend second rank).
struct host_max_reducer final : fp8::amax_reducer {
  std::vector<float> seen;
  void reduce_max(float* amaxes, std::size_t count) override {
    seen.assign(amaxes, amaxes + count);  // faults if amaxes is device memory
    for (std::size_t i = 0; i < count; ++i) amaxes[i] = std::max(amaxes[i], 100.0f * float(i + 1));
  }
};

TEST_CASE("linear_scaling with a host (MPI-style) reducer: end_step hands it host memory, then uploads") {
  cuda_ok(cudaSetDevice(0));
  const fp8::gemm_recipe recipe;  // delayed scaling for all six operands of a layer
  host_max_reducer reducer;
  fp8::cuda::linear_scaling scaling(recipe, 1, &reducer);
  std::vector<float> mine(fp8::gemm_operand_count);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = i % 2 == 0 ? 1000.0f * float(i + 1) : 0.5f;
  cuda_ok(cudaMemcpy(scaling.state().current_amaxes(), mine.data(), mine.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  scaling.end_step(nullptr);
  const fp8::delayed_scaling_state after = scaling.state().download(nullptr);
  REQUIRE(reducer.seen.size() == mine.size());
  fp8::delayed_scaling_state single(recipe.delayed());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    CAPTURE(i);
    CHECK(bits(reducer.seen[i]) == bits(mine[i]));
    single.add_tensor(scaling.state().format(i));
    single.record(i, std::max(mine[i], 100.0f * float(i + 1)));
  }
  single.update();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    CAPTURE(i);
    CHECK(bits(after.history(i).at(1)) == bits(single.history(i).at(1)));
    CHECK(bits(after.scale(i)) == bits(single.scale(i)));
  }
}
