// The vendored nvcc consumer: the shared checks run on the host and in a kernel, and fp8's codes are
// compared with CUDA's own __nv_fp8 conversions. Without a device the kernel compiles but cannot run.
#include <cuda_fp8.h>  // first: it makes fp8's interop with __nv_fp8_e4m3, __half and bf16 available

#include <cstdio>

#include "consumer_checks.hpp"

namespace {

constexpr int block_size = 32;
constexpr int required_major = 9;  // the program is compiled for sm_90 only

// fp8's default conversion (nearest even, saturate) gives CUDA's codes, from float and from __half,
// and the interop conversions keep the bits.
__host__ __device__ int count_disagreements_with_cuda() {
  const float inputs[] = {0.1f,     1.0f / 3.0f, 300.0f,   448.0f,   464.0f, 465.0f,     500.0f, 1e-3f,
                          0x1p-10f, -0.0f,       57344.0f, 61440.0f, 1e6f,   -HUGE_VALF, NAN};
  int wrong = 0;
  for (const float x : inputs) {
    const __nv_fp8_e4m3 cuda_e4m3(x);
    const __nv_fp8_e5m2 cuda_e5m2(x);
    wrong += consumer::check_code("fp8_e4m3(float) vs __nv_fp8_e4m3(float)", fp8::fp8_e4m3(x).bits(),
                                  cuda_e4m3.__x);
    wrong += consumer::check_code("fp8_e5m2(float) vs __nv_fp8_e5m2(float)", fp8::fp8_e5m2(x).bits(),
                                  cuda_e5m2.__x);
    const __half half_x = __float2half_rn(x);
    wrong += consumer::check_code("fp8_e4m3(__half) vs __nv_fp8_e4m3(__half)", fp8::fp8_e4m3(half_x).bits(),
                                  __nv_fp8_e4m3(half_x).__x);
    const fp8::fp8_e4m3 from_cuda = cuda_e4m3;
    const __nv_fp8_e4m3 back_to_cuda = from_cuda;
    wrong +=
        consumer::check_code("__nv_fp8_e4m3 -> fp8_e4m3 -> __nv_fp8_e4m3", back_to_cuda.__x, cuda_e4m3.__x);
  }
  return wrong;
}

// One block: every thread converts through a __shared__ array (which needs the trivial default
// constructor), then thread 0 runs the checks.
__global__ void check_on_device(int* wrong) {
  __shared__ fp8::fp8_e4m3 tile[block_size];
  const int lane = int(threadIdx.x);
  tile[lane] = fp8::fp8_e4m3(lane);
  __syncthreads();
  if (lane != 0) return;
  int count = consumer::count_wrong_conversions() + count_disagreements_with_cuda();
  for (int i = 0; i < block_size; ++i) {
    count += consumer::check_value("small integer through __shared__", static_cast<float>(tile[i]),
                                   static_cast<float>(fp8::fp8_e4m3(i)));
  }
  *wrong = count;
}

// Runs the kernel where a device can run sm_90 code; returns the number of wrong results (a failed
// CUDA call counts as one), or 0 after saying why the device part did not run.
int count_wrong_on_device() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): device checks compiled, not run\n", cudaGetErrorString(status));
    return 0;
  }
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major < required_major) {
    std::printf("device 0 is sm_%dx, which cannot run this sm_90 program: device checks not run\n", major);
    return 0;
  }
  int* wrong = nullptr;
  if (cudaMallocManaged(&wrong, sizeof(int)) != cudaSuccess) {
    std::printf("wrong: cudaMallocManaged failed\n");
    return 1;
  }
  *wrong = -1;
  check_on_device<<<1, block_size>>>(wrong);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t finished = cudaDeviceSynchronize();
  int count = *wrong;
  if (launched != cudaSuccess || finished != cudaSuccess || count < 0) {
    std::printf("wrong: the check kernel failed (%s, %s)\n", cudaGetErrorString(launched),
                cudaGetErrorString(finished));
    count = 1;
  }
  cudaFree(wrong);
  std::printf("device: %d wrong\n", count);
  return count;
}

}  // namespace

int main() {
  const int host_wrong = consumer::count_wrong_conversions() + count_disagreements_with_cuda();
  std::printf("fp8 %d.%d.%d under nvcc, host: %d wrong\n", FP8_VERSION_MAJOR, FP8_VERSION_MINOR,
              FP8_VERSION_PATCH, host_wrong);
  const int device_wrong = count_wrong_on_device();
  return host_wrong == 0 && device_wrong == 0 ? 0 : 1;
}
