// What the CUDA benchmarks share: a device allocation, random normal inputs, a warm-up that lets the
// clocks settle, and the median of CUDA-event timings.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <fp8/cuda/error.hpp>

namespace fp8_bench {

// An owning, zero-filled device allocation (at least one byte, so a zero-size buffer has an address).
class device_memory {
 public:
  explicit device_memory(std::size_t bytes) {
    const std::size_t allocated = bytes == 0 ? 1 : bytes;
    FP8_CUDA_CHECK(cudaMalloc(&data_, allocated));
    FP8_CUDA_CHECK(cudaMemset(data_, 0, allocated));
  }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() { cudaFree(data_); }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

// `count` random normal values (mean 0, deviation `sigma`) as T, from a 4 Mi-value pool repeated: a
// constant input would make every amax and scale alike and flatter the tensor cores.
template <class T>
void fill_normal(T* device, std::size_t count, float sigma = 1.0f, std::uint32_t seed = 42) {
  constexpr std::size_t pool_size = std::size_t(1) << 22;
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<T> pool(std::min(count, pool_size));
  for (T& value : pool) value = T(normal(generator));
  FP8_CUDA_CHECK(cudaMemcpy(device, pool.data(), pool.size() * sizeof(T), cudaMemcpyHostToDevice));
  for (std::size_t done = pool.size(); done < count;) {
    const std::size_t chunk = std::min(done, count - done);
    FP8_CUDA_CHECK(cudaMemcpy(device + done, device, chunk * sizeof(T), cudaMemcpyDeviceToDevice));
    done += chunk;
  }
}

// Calls `call` for about `seconds`, `calls_per_sync` at a time (clocks settle before timing).
inline void warm_up(const std::function<void()>& call, double seconds, int calls_per_sync = 1) {
  const auto begin = std::chrono::steady_clock::now();
  do {
    for (int i = 0; i < calls_per_sync; ++i) call();
    FP8_CUDA_CHECK(cudaDeviceSynchronize());
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() < seconds);
}

// Median time in ms of one call, over `repetitions` event-timed runs of `iterations` calls each.
inline double median_ms(const std::function<void()>& call, int repetitions, int iterations = 1) {
  cudaEvent_t start, stop;
  FP8_CUDA_CHECK(cudaEventCreate(&start));
  FP8_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int r = 0; r < repetitions; ++r) {
    FP8_CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < iterations; ++i) call();
    FP8_CUDA_CHECK(cudaEventRecord(stop));
    FP8_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    FP8_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(double(ms) / iterations);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace fp8_bench
