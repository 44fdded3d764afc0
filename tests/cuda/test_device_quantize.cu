// The device quantize kernels against the CPU quantize layer (fp8/quantize.hpp, fp8/scaling.hpp),
// bit for bit: codes, scale_inv buffers (padding included), E8M0 scales and amaxes, for float /
// bfloat16 / half inputs, both formats, every granularity (MX 1x32 included), odd shapes, unaligned
// pointers, NaN / Inf / zero blocks; and the device delayed-scaling state against
// fp8::delayed_scaling_state over many steps.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fp8/cuda.cuh>
#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include "device_buffer.hpp"
#include "gpu_skip.hpp"

// A named namespace: nvcc's generated kernel stubs cannot refer to types of an anonymous one.
namespace quantize_test {

using fp8::fp8_format;
using fp8::granularity;
using fp8::detail::bit_cast;

// A device buffer (from a host vector, or of `count` elements) whose bytes hold garbage (0xCD), not
// zeros, before a kernel writes them, starting `offset` elements into its allocation: an unaligned
// pointer for offsets that are not multiples of 4.
template <class T>
struct dirty_buffer : fp8_test::device_buffer<T> {
  explicit dirty_buffer(std::size_t count, std::size_t offset = 0)
      : fp8_test::device_buffer<T>(count, {offset, 0xCD}) {}
  explicit dirty_buffer(const std::vector<T>& host, std::size_t offset = 0)
      : fp8_test::device_buffer<T>(host, {offset, 0xCD}) {}
};

float device_float(const float* p) {
  float value = 0.0f;
  FP8_CUDA_CHECK(cudaDeviceSynchronize());
  FP8_CUDA_CHECK(cudaMemcpy(&value, p, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

std::uint32_t bits(float x) { return bit_cast<std::uint32_t>(x); }

// Inputs with the shapes that matter: a spread of magnitudes (so blocks get different scales), zeros,
// denormals, values past the FP8 range, and optionally NaN and Inf at a few places.
std::vector<float> make_input(std::size_t count, std::uint32_t seed, bool specials) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    const int e = exponent(generator) + int((i / 97) % 7) * 2;  // neighbourhoods of larger values
    values[i] = std::ldexp(mantissa(generator), e);
  }
  if (specials && count > 64) {
    values[3] = std::numeric_limits<float>::quiet_NaN();
    values[count / 2] = -std::numeric_limits<float>::infinity();
    values[count / 3] = 1e30f;
    values[count / 5] = -0.0f;
    values[count / 7] = 1e-40f;                         // float denormal
    values[count - 1] = -bit_cast<float>(0x7FC01234u);  // a NaN with a payload and a sign
  }
  return values;
}

// The same values in type T (rounded to nearest even by the host type), as raw element arrays: the
// host quantize reads fp8::bfloat16 / fp8::float16, the device the CUDA types with the same bits.
template <class Host>
std::vector<Host> as_host(const std::vector<float>& values) {
  std::vector<Host> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = Host(values[i]);
  return out;
}
template <>
std::vector<float> as_host<float>(const std::vector<float>& values) {
  return values;
}

template <class Host>
struct device_type_of {
  using type = Host;
};
template <>
struct device_type_of<fp8::bfloat16> {
  using type = __nv_bfloat16;
};
template <>
struct device_type_of<fp8::float16> {
  using type = __half;
};

template <class Host>
std::vector<typename device_type_of<Host>::type> as_device_elements(const std::vector<Host>& host) {
  using Device = typename device_type_of<Host>::type;
  std::vector<Device> out(host.size());
  static_assert(sizeof(Device) == sizeof(Host), "same layout");
  if (!host.empty()) std::memcpy(static_cast<void*>(out.data()), host.data(), host.size() * sizeof(Host));
  return out;
}

template <class A, class B>
void check_same_bytes(const std::vector<A>& got, const std::vector<B>& expected, const std::string& what) {
  static_assert(sizeof(A) == sizeof(B), "same element size");
  REQUIRE(got.size() == expected.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &expected[i], sizeof(A)) == 0) continue;
    if (wrong++ == 0) {
      std::uint32_t g = 0, e = 0;
      std::memcpy(&g, &got[i], sizeof(A));
      std::memcpy(&e, &expected[i], sizeof(B));
      CAPTURE(what);
      CAPTURE(i);
      CAPTURE(g);
      CAPTURE(e);
      FAIL_CHECK("device and CPU results differ (first difference shown)");
    }
  }
  CAPTURE(what);
  CHECK(wrong == 0);
}

struct shape {
  std::size_t rows;
  std::size_t cols;
};
// {3, 2051}: rows longer than one block step of the row kernel (4 x 256 elements), ragged 1x128
// tiles, 128x128 blocks and 32-column groups of the transposed copy; {132, 36}: rows a multiple of 4
// with a partial tile, block and chunk below the full ones; {256, 130}: whole 128x128 blocks of a
// matrix whose rows cannot be read 4 columns at a time (cols % 4 != 0) while its transposed copy is
// still stored 4 codes at a time (rows % 4 == 0).
// {1, 300} and {300, 1}: a single row (one tile row, one partial 128-row block) and a single column,
// whose transposed copy is the single row.
const shape shapes[] = {{1, 1}, {3, 300}, {129, 257}, {256, 1024}, {1000, 130}, {64, 64}, {130, 128},
                        {7, 0}, {0, 5},   {3, 2051},  {132, 36},   {256, 130},  {1, 300}, {300, 1}};

const char* format_label(fp8_format format) { return fp8::format_name(format); }

// --- Per-tensor, given scale ------------------------------------------------------------------

template <class Host>
void check_per_tensor(std::size_t count, std::size_t offset, fp8_format format, float scale,
                      std::uint32_t seed) {
  using Device = typename device_type_of<Host>::type;
  const std::vector<Host> host_in = as_host<Host>(make_input(count, seed, true));
  std::vector<std::uint8_t> expected(count);
  const float expected_amax = fp8::quantize(host_in.data(), count, format, scale, expected.data());

  const dirty_buffer<Device> in(as_device_elements(host_in), offset);
  const dirty_buffer<std::uint8_t> out(count, offset);
  const dirty_buffer<float> scalars(std::vector<float>{scale, 0.0f, 0.0f});  // scale, scale_inv, amax
  fp8::cuda::quantize(in.data(), count, format, {scalars.data(), scalars.data() + 1, scalars.data() + 2},
                      out.data());
  const std::string what = std::string("per-tensor quantize ") + format_label(format) +
                           " n=" + std::to_string(count) + " offset=" + std::to_string(offset) +
                           " scale=" + std::to_string(scale);
  check_same_bytes(out.download(), expected, what);
  const auto results = scalars.download();
  CAPTURE(what);
  CHECK(bits(results[1]) == bits(1.0f / scale));
  CHECK(bits(results[2]) == bits(expected_amax));

  // The cast alone, and the amax alone.
  const dirty_buffer<std::uint8_t> cast_only(count, offset);
  fp8::cuda::quantize(in.data(), count, format, {scalars.data(), nullptr, nullptr}, cast_only.data());
  check_same_bytes(cast_only.download(), expected, what + " (cast only)");
  const dirty_buffer<float> amax(std::vector<float>{0.0f});
  fp8::cuda::compute_amax(in.data(), count, amax.data());
  CHECK(bits(device_float(amax.data())) == bits(fp8::compute_amax(host_in.data(), count)));
}

TEST_CASE_TEMPLATE("per-tensor quantize with a given scale = fp8::quantize", Host, float, fp8::bfloat16,
                   fp8::float16) {
  std::uint32_t seed = 1;
  for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    for (const std::size_t count :
         {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(4096), std::size_t(1000003)}) {
      for (const std::size_t offset : {std::size_t(0), std::size_t(1)}) {
        for (const float scale : {1.0f, 0.37f, 1.0f / 1024.0f, 3000.0f}) {
          check_per_tensor<Host>(count, offset, format, scale, seed++);
        }
      }
    }
  }
}

TEST_CASE("the amax accumulates into the existing value, NaN on top") {
  const std::vector<float> host_in = {1.0f, -2.0f, 3.0f};
  const dirty_buffer<float> in(host_in);
  const dirty_buffer<std::uint8_t> out(3);
  const dirty_buffer<float> amax(std::vector<float>{5.0f});
  fp8::cuda::quantize(in.data(), 3, fp8_format::e4m3, {nullptr, nullptr, amax.data()}, out.data());
  CHECK(device_float(amax.data()) == 5.0f);  // max(5, 3)
  const dirty_buffer<float> nan_in(std::vector<float>{-std::numeric_limits<float>::quiet_NaN()});
  fp8::cuda::compute_amax(nan_in.data(), 1, amax.data());
  CHECK(bits(device_float(amax.data())) == 0x7FC00000u);  // the canonical NaN, as the CPU reports it
}

// fp8::cuda::amax_tracker in a producer kernel: its recorded amax is compute_amax's, bit for bit,
// over values with Inf and NaN (canonical NaN on top) and over blocks that add nothing, by block
// (record) and by warp (record_warp), max-accumulated into a value already there.
template <class T, bool ByWarp>
__global__ void __launch_bounds__(128) produce_tracked(const T* in, std::size_t count, T* out, float* amax) {
  fp8::cuda::amax_tracker tracker;
  for (std::size_t i = blockIdx.x * std::size_t(128) + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * 128) {
    out[i] = in[i];
    tracker.add(out[i]);
  }
  if constexpr (ByWarp) {
    tracker.record_warp(amax);
  } else {
    tracker.record<128>(amax);
  }
}

template <class Host, bool ByWarp>
void check_tracker(const std::vector<float>& values, float start, const std::string& what) {
  using Device = typename device_type_of<Host>::type;
  const std::vector<Host> host = as_host<Host>(values);
  const dirty_buffer<Device> in(as_device_elements(host)), out(host.size());
  const dirty_buffer<float> tracked(std::vector<float>{start}), computed(std::vector<float>{start});
  produce_tracked<Device, ByWarp><<<5, 128>>>(in.data(), host.size(), out.data(), tracked.data());
  FP8_CUDA_CHECK(cudaGetLastError());
  fp8::cuda::compute_amax(in.data(), host.size(), computed.data());
  CAPTURE(what);
  CAPTURE(ByWarp);
  CAPTURE(start);
  CHECK(bits(device_float(tracked.data())) == bits(device_float(computed.data())));
  // And the CPU's amax (compute_amax is checked against it above; this does not lean on that).
  const float host_amax = host.empty() ? 0.0f : fp8::compute_amax(host.data(), host.size());
  const float expected = std::isnan(host_amax) ? host_amax : std::max(start, host_amax);
  CHECK(bits(device_float(tracked.data())) == bits(expected));
  check_same_bytes(out.download(), host, what + ": the producer's output");
}

TEST_CASE_TEMPLATE("amax_tracker records compute_amax's amax, Inf and NaN included", Host, float,
                   fp8::bfloat16, fp8::float16) {
  std::vector<float> spread = make_input(1000, 77, false);  // |x| up to 2^24
  if constexpr (std::is_same_v<Host, fp8::float16>) {
    for (float& v : spread) v = std::ldexp(v, -10);  // within half's range, so "finite" stays finite
  }
  std::vector<float> with_inf = spread;
  with_inf[500] = -std::numeric_limits<float>::infinity();
  std::vector<float> with_nan = with_inf;
  with_nan[999] = -std::numeric_limits<float>::quiet_NaN();
  // Starts below the data's amax (the tracker must raise them), and above it (it must keep them).
  for (const float start : {0.0f, 1e-3f, 1e30f}) {
    check_tracker<Host, false>(spread, start, "finite");
    check_tracker<Host, true>(spread, start, "finite");
    check_tracker<Host, false>(with_inf, start, "-Inf");
    check_tracker<Host, true>(with_inf, start, "-Inf");
    check_tracker<Host, false>(with_nan, start, "NaN");
    check_tracker<Host, true>(with_nan, start, "NaN");
    check_tracker<Host, false>({}, start, "nothing added");
  }
}

// Every code, 40 times over in different orders, then a few more so that the count is not a
// multiple of 4 (the vector path's tail).
std::vector<std::uint8_t> every_code() {
  std::vector<std::uint8_t> codes;
  for (int repeat = 0; repeat < 40; ++repeat) {
    for (int code = 0; code < 256; ++code) codes.push_back(std::uint8_t(code * 7 + repeat));
  }
  codes.push_back(0x7F);
  codes.push_back(0xFF);
  codes.push_back(0x01);
  return codes;
}

template <class Host>
void check_dequantize(const std::vector<std::uint8_t>& codes, fp8_format format, float scale_inv,
                      std::size_t offset) {
  using Device = typename device_type_of<Host>::type;
  std::vector<Host> expected(codes.size());
  fp8::dequantize(codes.data(), codes.size(), format, scale_inv, expected.data());
  const dirty_buffer<std::uint8_t> in(codes, offset);
  const dirty_buffer<Device> out(codes.size(), offset);
  const dirty_buffer<float> s(std::vector<float>{scale_inv});
  fp8::cuda::dequantize(in.data(), codes.size(), format, s.data(), out.data());
  check_same_bytes(out.download(), expected,
                   std::string("dequantize ") + format_label(format) +
                       " scale_inv=" + std::to_string(scale_inv) + " offset=" + std::to_string(offset));
}

TEST_CASE_TEMPLATE("per-tensor dequantize = fp8::dequantize, every code", Host, float, fp8::bfloat16,
                   fp8::float16) {
  const std::vector<std::uint8_t> codes = every_code();
  for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    for (const float scale_inv : {1.0f, 0.25f, 3.3e-5f, 1e30f}) {
      for (const std::size_t offset : {std::size_t(0), std::size_t(3)}) {
        check_dequantize<Host>(codes, format, scale_inv, offset);
      }
    }
  }
}

// The fused cast + transpose with a scale in device memory, recording the amax.
template <class Host>
void check_quantize_transpose(const shape s, std::uint32_t seed) {
  using Device = typename device_type_of<Host>::type;
  for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    const std::size_t n = s.rows * s.cols;
    const std::vector<Host> host_in = as_host<Host>(make_input(n, seed, true));
    std::vector<std::uint8_t> expected(n), expected_t(n);
    const float scale = 0.75f;
    const float expected_amax = fp8::quantize_transpose(host_in.data(), s.rows, s.cols, format, scale,
                                                        expected.data(), expected_t.data());
    const dirty_buffer<Device> in(as_device_elements(host_in));
    const dirty_buffer<std::uint8_t> out(n), out_t(n);
    const dirty_buffer<float> scalars(std::vector<float>{scale, 0.0f, 0.0f});
    fp8::cuda::quantize_transpose(in.data(), s.rows, s.cols, format,
                                  {scalars.data(), scalars.data() + 1, scalars.data() + 2}, out.data(),
                                  out_t.data());
    const std::string what = "quantize_transpose " + std::string(format_label(format)) + " " +
                             std::to_string(s.rows) + "x" + std::to_string(s.cols);
    check_same_bytes(out.download(), expected, what);
    check_same_bytes(out_t.download(), expected_t, what + " (transposed)");
    const auto results = scalars.download();
    CAPTURE(what);
    CHECK(bits(results[1]) == bits(1.0f / scale));
    CHECK(bits(results[2]) == bits(expected_amax));
  }
}

TEST_CASE_TEMPLATE("quantize with a transpose (given scale) = fp8::quantize_transpose", Host, float,
                   fp8::bfloat16) {
  std::uint32_t seed = 100;
  for (const shape s : shapes) check_quantize_transpose<Host>(s, seed++);
}

// The transpose of codes that already exist (transpose_codes, for the codes a producer wrote): byte
// for byte the transposed copy of the CPU's cast + transpose of the same values, and both inverse
// scales 1 / scale. Offset 1 misaligns the codes and the copy (byte loads and stores).
void check_transpose_codes(const shape s, std::uint32_t seed, std::size_t offset, std::size_t offset_t) {
  const std::size_t n = s.rows * s.cols;
  const std::vector<float> values = make_input(n, seed, true);
  const float scale = 0.5f;
  std::vector<std::uint8_t> codes(n), expected_t(n);
  fp8::quantize_transpose(values.data(), s.rows, s.cols, fp8_format::e4m3, scale, codes.data(),
                          expected_t.data());
  const dirty_buffer<std::uint8_t> in(codes, offset), out_t(n, offset_t);
  const dirty_buffer<float> scalars(std::vector<float>{scale, 0.0f, 0.0f});  // scale, both inverses
  fp8::cuda::transpose_codes(in.data(), s.rows, s.cols, out_t.data(), scalars.data(), scalars.data() + 1,
                             scalars.data() + 2);
  const std::string what = "transpose_codes " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                           " offsets " + std::to_string(offset) + ", " + std::to_string(offset_t);
  check_same_bytes(out_t.download(), expected_t, what);
  check_same_bytes(in.download(), codes, what + " (its input untouched)");
  const auto results = scalars.download();
  CAPTURE(what);
  CHECK(bits(results[1]) == bits(1.0f / scale));
  CHECK(bits(results[2]) == bits(1.0f / scale));
}

TEST_CASE("transpose_codes = the transposed copy of the CPU's cast + transpose, with both inverse scales") {
  std::uint32_t seed = 150;
  // The codes and out_t each aligned or not (4-byte loads, packed stores), in every combination.
  for (const shape s : shapes) {
    for (const std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      for (const std::size_t offset_t : {std::size_t(0), std::size_t(1)})
        check_transpose_codes(s, seed++, offset, offset_t);
    }
  }
  // Several blocks per thread block: the tile's reuse across the grid-stride loop.
  for (const std::size_t blocks : {std::size_t(1), std::size_t(3)}) {
    const fp8::cuda::detail::scoped_grid_cap_for_testing cap(blocks);
    CAPTURE(blocks);
    for (const shape s : {shape{257, 385}, shape{512, 512}, shape{200, 600}})
      check_transpose_codes(s, seed++, 0, 0);
  }
  // No scale: 1, as a cast without one.
  const dirty_buffer<std::uint8_t> codes(std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}), out_t(6);
  const dirty_buffer<float> inverses(std::vector<float>{0.0f, 0.0f});
  fp8::cuda::transpose_codes(codes.data(), 2, 3, out_t.data(), nullptr, inverses.data(), inverses.data() + 1);
  CHECK(out_t.download() == std::vector<std::uint8_t>{1, 4, 2, 5, 3, 6});
  CHECK(inverses.download() == std::vector<float>{1.0f, 1.0f});
  // A non-empty matrix without its buffers is refused before anything runs; an empty one is not.
  CHECK_THROWS_WITH_AS(fp8::cuda::transpose_codes(nullptr, 2, 3, out_t.data(), nullptr, nullptr, nullptr),
                       doctest::Contains("codes and out_t must be set"), fp8::invalid_argument);
  CHECK_NOTHROW(fp8::cuda::transpose_codes(nullptr, 0, 3, nullptr, nullptr, nullptr, nullptr));
}

TEST_CASE("large case: transpose_codes at 2048 x 4096, more tiles than the grid holds") {
  // Blocks loop without a cap, as at a linear layer's real sizes (left out under the sanitizers,
  // with the other large cases).
  check_transpose_codes({2048, 4096}, 170, 0, 0);
}

// --- Current scaling at every granularity -------------------------------------------------------

std::vector<fp8::quantization> current_recipes() {
  std::vector<fp8::quantization> recipes;
  for (const granularity g :
       {granularity::per_tensor, granularity::per_row, granularity::tile_1x128, granularity::block_128x128}) {
    for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
      recipes.push_back({format, g, 0, false});
    }
    recipes.push_back({fp8_format::e4m3, g, 2, true});  // margin and power-of-two scales
  }
  return recipes;
}

std::vector<fp8::quantization> mx_recipes() {
  return {{fp8_format::e4m3, granularity::mx_1x32, 0, true},
          {fp8_format::e5m2, granularity::mx_1x32, 0, true}};
}

// Some blocks all zero and some holding NaN or Inf, so that the fallback scale (1) is exercised.
std::vector<float> current_input(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::vector<float> values = make_input(rows * cols, seed, false);
  if (rows >= 2 && cols >= 200) {
    for (std::size_t c = 0; c < 128; ++c) values[1 * cols + c] = 0.0f;  // a zero tile
    values[130] = std::numeric_limits<float>::infinity();
    values[cols + 140] = std::numeric_limits<float>::quiet_NaN();
  }
  return values;
}

// How many elements into its allocation each buffer starts: `in` (the input, and dequantize's
// output), `out` (the codes) and `out_t` (the transposed codes). 0 keeps a buffer aligned (the vector
// paths); others misalign it, which must send the kernels down their scalar paths for that buffer.
struct buffer_offsets {
  buffer_offsets(std::size_t all = 0)
      : in(all), out(all), out_t(all) {}  // implicit: the same for every buffer
  buffer_offsets(std::size_t in_, std::size_t out_, std::size_t out_t_) : in(in_), out(out_), out_t(out_t_) {}
  std::size_t in, out, out_t;
};

// Every cast of `q` on the device against fp8::quantize, its buffers at `offset`. Scale is float (1 /
// scale per block) or std::uint8_t (E8M0 codes, q mx_1x32): the host and device overloads are chosen
// by the scale buffers' type, and everything else is the same check.
template <class Host, class Scale = float>
void check_current(const shape s, const fp8::quantization& q, std::uint32_t seed,
                   buffer_offsets offset = {}) {
  using Device = typename device_type_of<Host>::type;
  const std::size_t n = s.rows * s.cols;
  const std::vector<Host> host_in = as_host<Host>(current_input(s.rows, s.cols, seed));
  const std::size_t scales = fp8::scale_count(q.granularity, s.rows, s.cols);
  const std::size_t scales_t = fp8::scale_count(q.granularity, s.cols, s.rows);
  std::vector<std::uint8_t> expected(n), expected_t(n);
  std::vector<Scale> expected_scale_inv(scales), expected_scale_inv_t(scales_t);
  const float expected_amax =
      fp8::quantize(host_in.data(), s.rows, s.cols, q, expected.data(), expected_scale_inv.data());
  // The transposed copy's contract: what quantize() gives for the transposed matrix.
  std::vector<Host> transposed(n);
  for (std::size_t r = 0; r < s.rows; ++r) {
    for (std::size_t c = 0; c < s.cols; ++c) transposed[c * s.rows + r] = host_in[r * s.cols + c];
  }
  fp8::quantize(transposed.data(), s.cols, s.rows, q, expected_t.data(), expected_scale_inv_t.data());

  const std::string what = std::string(fp8::granularity_name(q.granularity)) + " " + format_label(q.format) +
                           " margin " + std::to_string(q.margin) + (q.power_of_two_scales ? " pow2 " : " ") +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols) + " offsets " +
                           std::to_string(offset.in) + "," + std::to_string(offset.out) + "," +
                           std::to_string(offset.out_t);
  const dirty_buffer<Device> in(as_device_elements(host_in), offset.in);
  {
    const dirty_buffer<std::uint8_t> out(n, offset.out);
    const dirty_buffer<Scale> scale_inv(scales);
    const dirty_buffer<float> amax(1);
    fp8::cuda::quantize(in.data(), s.rows, s.cols, q, out.data(), scale_inv.data(), amax.data());
    check_same_bytes(out.download(), expected, what + ": codes");
    check_same_bytes(scale_inv.download(), expected_scale_inv, what + ": scale_inv");
    CAPTURE(what);
    CHECK(bits(device_float(amax.data())) == bits(expected_amax));
  }
  {
    const dirty_buffer<std::uint8_t> out(n, offset.out), out_t(n, offset.out_t);
    const dirty_buffer<Scale> scale_inv(scales), scale_inv_t(scales_t);
    const dirty_buffer<float> amax(1);
    fp8::cuda::quantize_transpose(in.data(), s.rows, s.cols, q, out.data(), scale_inv.data(), out_t.data(),
                                  scale_inv_t.data(), amax.data());
    check_same_bytes(out.download(), expected, what + ": codes (with transpose)");
    check_same_bytes(out_t.download(), expected_t, what + ": transposed codes");
    check_same_bytes(scale_inv.download(), expected_scale_inv, what + ": scale_inv (with transpose)");
    check_same_bytes(scale_inv_t.download(), expected_scale_inv_t, what + ": transposed scale_inv");
    CAPTURE(what);
    CHECK(bits(device_float(amax.data())) == bits(expected_amax));
  }
  // MX (E8M0 scales) has no per_tensor form.
  if constexpr (std::is_same_v<Scale, float>) {
    if (q.granularity == granularity::per_tensor) {
      // The same casts from the amax a producer recorded (the CPU's amax, given): the cast alone, the
      // same bytes, and the given amax left as it was.
      const dirty_buffer<float> given(std::vector<float>{expected_amax});
      const dirty_buffer<std::uint8_t> out(n, offset.out), out_t(n, offset.out_t);
      const dirty_buffer<float> scale_inv(1), scale_inv_t(1);
      fp8::cuda::quantize_from_amax(in.data(), s.rows, s.cols, q, given.data(), out.data(), scale_inv.data());
      check_same_bytes(out.download(), expected, what + ": codes (given amax)");
      check_same_bytes(scale_inv.download(), expected_scale_inv, what + ": scale_inv (given amax)");
      // Fresh buffers: the first call's correct bytes must not stand in for the second's.
      const dirty_buffer<std::uint8_t> out2(n, offset.out);
      const dirty_buffer<float> scale_inv2(1);
      fp8::cuda::quantize_transpose_from_amax(in.data(), s.rows, s.cols, q, given.data(), out2.data(),
                                              scale_inv2.data(), out_t.data(), scale_inv_t.data());
      check_same_bytes(out2.download(), expected, what + ": codes (given amax, with transpose)");
      check_same_bytes(scale_inv2.download(), expected_scale_inv,
                       what + ": scale_inv (given amax, with transpose)");
      check_same_bytes(out_t.download(), expected_t, what + ": transposed codes (given amax)");
      check_same_bytes(scale_inv_t.download(), expected_scale_inv_t,
                       what + ": transposed scale_inv (given amax)");
      CAPTURE(what);
      CHECK(bits(device_float(given.data())) == bits(expected_amax));
    }
  }
  {
    // Dequantize of the CPU's codes and scales.
    std::vector<Host> expected_values(n);
    if (n > 0)
      fp8::dequantize(expected.data(), s.rows, s.cols, q, expected_scale_inv.data(), expected_values.data());
    const dirty_buffer<std::uint8_t> codes(expected, offset.out);
    const dirty_buffer<Scale> scale_inv(expected_scale_inv);
    const dirty_buffer<Device> values(n, offset.in);
    fp8::cuda::dequantize(codes.data(), s.rows, s.cols, q, scale_inv.data(), values.data());
    check_same_bytes(values.download(), expected_values, what + ": dequantize");
  }
}

TEST_CASE_TEMPLATE("current scaling per tensor, row, 1x128 tile and 128x128 block = fp8::quantize", Host,
                   float, fp8::bfloat16, fp8::float16) {
  std::uint32_t seed = 1000;
  for (const fp8::quantization& q : current_recipes()) {
    for (const shape s : shapes) check_current<Host>(s, q, seed++);
  }
}

// MX: the E8M0 codes of every 32 elements of a row (and, in the transposed copy, of 32 rows of a
// column: shapes with a partial 128-row chunk and a partial last block, {129, 257} and {1000, 130}).
TEST_CASE_TEMPLATE("MX 1x32 blocks with E8M0 scales = fp8::quantize", Host, float, fp8::bfloat16,
                   fp8::float16) {
  std::uint32_t seed = 2000;
  for (const fp8::quantization& q : mx_recipes()) {
    for (const shape s : shapes) check_current<Host, std::uint8_t>(s, q, seed++);
    for (const std::size_t offset : {std::size_t(1), std::size_t(4)}) {
      check_current<Host, std::uint8_t>({132, 36}, q, seed++, offset);
      check_current<Host, std::uint8_t>({256, 384}, q, seed++, offset);
    }
  }
}

// Shapes whose rows are multiples of 4 with pointers that are not: offset 1 misaligns everything;
// offset 4 aligns float inputs to 16 bytes and the codes to 4 bytes but not to 8 (the per-tensor
// cast's vector store), so each kernel's choice between vector and scalar access is tested per pointer.
// Then one buffer misaligned at a time, the others aligned: a kernel that decided for all its
// buffers by looking at one of them (the input, say) would take a vector path on the misaligned one.
TEST_CASE_TEMPLATE("current scaling with misaligned pointers = fp8::quantize", Host, float, fp8::bfloat16,
                   fp8::float16) {
  std::uint32_t seed = 3000;
  for (const fp8::quantization& q : current_recipes()) {
    for (const shape s : {shape{256, 384}, shape{132, 36}}) {
      for (const buffer_offsets offset :
           {buffer_offsets{1}, buffer_offsets{4}, buffer_offsets{1, 0, 0}, buffer_offsets{0, 1, 0},
            buffer_offsets{0, 0, 1}, buffer_offsets{0, 4, 1}})
        check_current<Host>(s, q, seed++, offset);
    }
  }
}

// The grid-stride paths: with the grid capped at a few blocks, every block loops over many rows,
// tiles and blocks (the tile kernel's second tile per step, the transpose tile's reuse of shared
// memory, the cast kernel's two loads in flight), which test shapes never reach under SMs x 8.
using grid_cap = fp8::cuda::detail::scoped_grid_cap_for_testing;

TEST_CASE("grid-stride paths: every kernel with the grid capped at 1, 2 and 3 blocks") {
  // {200, 600}: 5 tiles of 128 per row (the last one partial), a count that divides none of the
  // capped grids' tiles per step (8, 16, 24), so the tile kernel's stepped position carries into the
  // next row under every cap (3 tiles would not under a cap of 3 blocks: 24 is 8 whole rows).
  const shape capped_shapes[] = {{1000, 130}, {300, 1024}, {257, 385}, {512, 512}, {200, 600}};
  std::uint32_t seed = 5000;
  for (const std::size_t blocks : {std::size_t(1), std::size_t(2), std::size_t(3)}) {
    const grid_cap cap(blocks);
    CAPTURE(blocks);
    for (const fp8::quantization& q : current_recipes()) {
      for (const shape s : capped_shapes) check_current<float>(s, q, seed++);
      // 16-bit inputs take the tile and block kernels' other loads (8 bytes per lane) and their
      // shared memory across blocks, with and without the transposed copy.
      if (q.granularity == granularity::tile_1x128 || q.granularity == granularity::block_128x128) {
        for (const shape s : {shape{300, 1024}, shape{200, 600}}) check_current<fp8::bfloat16>(s, q, seed++);
      }
    }
    for (const fp8::quantization& q : mx_recipes()) {
      for (const shape s : capped_shapes) check_current<float, std::uint8_t>(s, q, seed++);
    }
    check_per_tensor<fp8::bfloat16>(1000003, 0, fp8_format::e4m3, 0.37f, seed++);
    check_per_tensor<float>(100003, 1, fp8_format::e5m2, 3.0f, seed++);
    // The fused cast + transpose recording the amax over several tiles per block, and dequantize.
    check_quantize_transpose<float>({257, 385}, seed++);
    check_quantize_transpose<fp8::bfloat16>({512, 512}, seed++);
    for (const std::size_t offset : {std::size_t(0), std::size_t(3)}) {
      check_dequantize<fp8::bfloat16>(every_code(), fp8_format::e4m3, 0.25f, offset);
      check_dequantize<float>(every_code(), fp8_format::e5m2, 3.3e-5f, offset);
    }

    // The history update: one block walks over every tensor (a grid-stride loop over tensors).
    fp8::delayed_scaling config{};
    config.history_length = 300;
    const std::vector<fp8_format> formats(7, fp8_format::e4m3);
    fp8::delayed_scaling_state host(config);
    for (const fp8_format format : formats) host.add_tensor(format);
    fp8::cuda::delayed_scaling_device_state device(config, formats);
    for (int step = 0; step < 3; ++step) {
      for (std::size_t t = 0; t < formats.size(); ++t) {
        const float amax = std::ldexp(1.0f, int(t) - step);
        const dirty_buffer<float> x(std::vector<float>{amax, -amax / 2});
        const dirty_buffer<std::uint8_t> codes(2);
        fp8::cuda::quantize(x.data(), 2, device.format(t), {device.scale(t), nullptr, device.amax(t)},
                            codes.data());
        host.record(t, amax);
      }
      host.update();
      device.update();
      const fp8::delayed_scaling_state mirrored = device.download();
      for (std::size_t t = 0; t < formats.size(); ++t) {
        CAPTURE(t);
        CHECK(mirrored.history(t) == host.history(t));
        CHECK(bits(mirrored.scale(t)) == bits(host.scale(t)));
      }
    }
  }
}

// Grids are sized from each device's SM count, which the launchers remember after asking once: the
// remembered count must be every device's own, asked again, and grid_for's cap must follow from it.
TEST_CASE("the remembered SM count is each device's, and grid_for caps at SMs x blocks_per_sm") {
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  int current = 0;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  for (int pass = 0; pass < 2; ++pass) {  // the first pass asks, the second reads what was kept
    for (int device = 0; device < devices; ++device) {
      CAPTURE(pass);
      CAPTURE(device);
      REQUIRE(cudaSetDevice(device) == cudaSuccess);
      int asked = 0;
      REQUIRE(cudaDeviceGetAttribute(&asked, cudaDevAttrMultiProcessorCount, device) == cudaSuccess);
      CHECK(fp8::cuda::detail::multiprocessor_count() == asked);
      const std::size_t cap = std::size_t(asked) * fp8::cuda::detail::blocks_per_sm;
      CHECK(fp8::cuda::detail::grid_for(cap * 256 * 4) == cap);
      CHECK(fp8::cuda::detail::grid_for(256 * 3 + 1) == 4u);
    }
  }
  REQUIRE(cudaSetDevice(current) == cudaSuccess);
}

// A large matrix at the sizes real layers have (4096 x 8192 BF16): the grid cap SMs x 8 is reached,
// so each kernel runs its grid-stride loop for real. Compared with the CPU bit for bit.
TEST_CASE("large case: 4096 x 8192 bf16 at every granularity (MX included), with the transposed copy") {
  std::uint32_t seed = 9000;
  for (const fp8::quantization& q :
       {fp8::quantization{fp8_format::e4m3, granularity::per_tensor, 0, false},
        fp8::quantization{fp8_format::e4m3, granularity::per_row, 0, false},
        fp8::quantization{fp8_format::e4m3, granularity::tile_1x128, 0, false},
        fp8::quantization{fp8_format::e4m3, granularity::block_128x128, 0, false}}) {
    check_current<fp8::bfloat16>({4096, 8192}, q, seed++);
  }
  check_current<fp8::bfloat16, std::uint8_t>({4096, 8192}, mx_recipes().front(), seed++);
  check_per_tensor<fp8::bfloat16>(std::size_t(4096) * 8192, 0, fp8_format::e4m3, 0.37f, seed++);
}

// --- Scales and delayed scaling -----------------------------------------------------------------

__global__ void scales_from_amaxes(const float* amaxes, std::size_t count, fp8::cuda::scale_rule rule,
                                   float fallback, float* out) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = fp8::cuda::scale_from_amax(amaxes[i], rule, fallback);
}

TEST_CASE("the device scale formula = fp8::scale_from_amax") {
  std::vector<float> amaxes = {0.0f,
                               -0.0f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               FLT_MIN,
                               1e-40f,
                               1e-45f,
                               FLT_MAX,
                               3.5f,
                               3.0f,
                               448.0f,
                               57344.0f,
                               1e-30f};
  std::mt19937 generator(7);
  while (amaxes.size() < 100000) amaxes.push_back(bit_cast<float>(std::uint32_t(generator() & 0x7FFFFFFFu)));
  const dirty_buffer<float> in(amaxes);
  const dirty_buffer<float> out(amaxes.size());
  for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    for (const int margin : {0, 1, 3, 126, 130}) {
      for (const bool power_of_two : {false, true}) {
        const fp8::cuda::scale_rule rule = fp8::cuda::make_scale_rule(format, margin, power_of_two);
        scales_from_amaxes<<<int((amaxes.size() + 255) / 256), 256>>>(in.data(), amaxes.size(), rule, 0.5f,
                                                                      out.data());
        FP8_CUDA_CHECK(cudaGetLastError());
        std::vector<float> expected(amaxes.size());
        for (std::size_t i = 0; i < amaxes.size(); ++i) {
          expected[i] = fp8::scale_from_amax(amaxes[i], format, margin, power_of_two, 0.5f);
        }
        check_same_bytes(
            out.download(), expected,
            std::string("scale_from_amax ") + format_label(format) + " margin " + std::to_string(margin));
      }
    }
  }
}

TEST_CASE("the device delayed-scaling state = fp8::delayed_scaling_state, step by step") {
  const std::vector<fp8_format> formats = {fp8_format::e4m3, fp8_format::e5m2, fp8_format::e4m3,
                                           fp8_format::e5m2, fp8_format::e4m3};
  for (const std::size_t length : {std::size_t(1), std::size_t(5), std::size_t(300)}) {
    for (const fp8::amax_algorithm algorithm : {fp8::amax_algorithm::max, fp8::amax_algorithm::most_recent}) {
      for (const int margin : {0, 1}) {
        fp8::delayed_scaling config{};
        config.history_length = length;
        config.algorithm = algorithm;
        config.margin = margin;
        config.power_of_two_scales = margin == 1;
        fp8::delayed_scaling_state host(config);
        for (const fp8_format format : formats) host.add_tensor(format);
        fp8::cuda::delayed_scaling_device_state device(config, formats);

        std::mt19937 generator(std::uint32_t(length * 10 + margin));
        std::uniform_real_distribution<float> magnitude(0.0f, 1.0f);
        const std::size_t n = 1000;
        for (int step = 0; step < 40; ++step) {
          for (std::size_t t = 0; t < formats.size(); ++t) {
            // A tensor per step, cast on the device with the current scale (recording its amax), and
            // its amax recorded on the host; now and then a zero, Inf or NaN tensor.
            std::vector<float> x(n);
            const float size = std::ldexp(1.0f, int(generator() % 30) - 15);
            for (float& v : x) v = (magnitude(generator) - 0.5f) * size;
            if (step % 13 == 5 && t == 1) x.assign(n, 0.0f);
            if (step % 11 == 3 && t == 2) x[7] = std::numeric_limits<float>::infinity();
            if (step == 17 && t == 0) x[9] = std::numeric_limits<float>::quiet_NaN();
            const dirty_buffer<float> dx(x);
            const dirty_buffer<std::uint8_t> codes(n);
            fp8::cuda::quantize(dx.data(), n, device.format(t), {device.scale(t), nullptr, device.amax(t)},
                                codes.data());
            std::vector<std::uint8_t> expected(n);
            host.record(t, fp8::quantize(x.data(), n, host.format(t), host.scale(t), expected.data()));
            check_same_bytes(codes.download(), expected, "delayed cast, step " + std::to_string(step));
          }
          host.update();
          device.update();
          const fp8::delayed_scaling_state mirrored = device.download();
          for (std::size_t t = 0; t < formats.size(); ++t) {
            CAPTURE(length);
            CAPTURE(step);
            CAPTURE(t);
            CHECK(mirrored.history(t) == host.history(t));
            CHECK(bits(mirrored.scale(t)) == bits(host.scale(t)));
            CHECK(bits(mirrored.scale_inv(t)) == bits(host.scale_inv(t)));
            // Each inverse scale can go to a cuBLASLt product as it is (16-byte aligned).
            CHECK(reinterpret_cast<std::uintptr_t>(device.scale_inv(t)) % 16 == 0);
          }
        }
        // A state uploaded from the host continues identically.
        fp8::cuda::delayed_scaling_device_state copy(host);
        copy.update();
        host.update();
        const fp8::delayed_scaling_state continued = copy.download();
        for (std::size_t t = 0; t < formats.size(); ++t) {
          CHECK(continued.history(t) == host.history(t));
          CHECK(bits(continued.scale(t)) == bits(host.scale(t)));
        }
      }
    }
  }
}

TEST_CASE("the device state's download and upload are ordered on the caller's non-blocking stream") {
  fp8::delayed_scaling config{};
  config.history_length = 4;
  const std::vector<fp8_format> formats = {fp8_format::e4m3, fp8_format::e5m2};
  fp8::cuda::delayed_scaling_device_state device(config, formats);
  fp8::delayed_scaling_state host(config);
  for (const fp8_format format : formats) host.add_tensor(format);

  cudaStream_t stream = nullptr;
  FP8_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::size_t n = std::size_t(1) << 22;  // long enough that an unordered copy would overtake it
  std::vector<float> x(n, 0.5f);
  x[n - 1] = 3.0f;
  const dirty_buffer<float> dx(x);
  const dirty_buffer<std::uint8_t> codes(n);
  for (std::size_t t = 0; t < formats.size(); ++t) {
    fp8::cuda::quantize(dx.data(), n, device.format(t), {device.scale(t), nullptr, device.amax(t)},
                        codes.data(), stream);
    host.record(t, 3.0f);
  }
  device.update(stream);
  host.update();
  const fp8::delayed_scaling_state mirrored = device.download(stream);  // no device-wide synchronisation
  for (std::size_t t = 0; t < formats.size(); ++t) {
    CAPTURE(t);
    CHECK(mirrored.history(t) == host.history(t));
    CHECK(bits(mirrored.scale(t)) == bits(host.scale(t)));
  }
  device.upload(host, stream);
  device.update(stream);
  host.update();
  const fp8::delayed_scaling_state again = device.download(stream);
  for (std::size_t t = 0; t < formats.size(); ++t) CHECK(bits(again.scale(t)) == bits(host.scale(t)));
  FP8_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace quantize_test
