// The device kernels' launchers reject bad arguments before touching the GPU, with messages that
// name the function and the argument; this runs on machines without a device.
#include <cuda_runtime.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fp8/cuda.cuh>

namespace {

using fp8::fp8_format;

// Fake device addresses: the checks run before anything reads them.
float* fake_floats() { return reinterpret_cast<float*>(std::uintptr_t(0x100000)); }
std::uint8_t* fake_codes() { return reinterpret_cast<std::uint8_t*>(std::uintptr_t(0x200000)); }

template <class Function>
std::string rejection(Function&& call) {
  try {
    call();
  } catch (const fp8::invalid_argument& e) { return e.what(); }
  return "no exception";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("per-tensor launchers reject null pointers and unknown formats") {
  const std::string null_in = rejection([] {
    fp8::cuda::quantize(static_cast<const float*>(nullptr), 10, fp8_format::e4m3, {}, fake_codes());
  });
  CHECK(contains(null_in, "fp8::cuda::quantize: in is null but 10 elements were requested"));
  const std::string null_out =
      rejection([] { fp8::cuda::quantize(fake_floats(), 10, fp8_format::e5m2, {}, nullptr); });
  CHECK(contains(null_out, "out is null"));
  const std::string format =
      rejection([] { fp8::cuda::quantize(fake_floats(), 10, fp8_format(7), {}, fake_codes()); });
  CHECK(contains(format, "unknown fp8_format value"));
  const std::string amax = rejection([] { fp8::cuda::compute_amax(fake_floats(), 10, nullptr); });
  CHECK(contains(amax, "fp8::cuda::compute_amax: amax is null"));
  const std::string dequantize = rejection([] {
    fp8::cuda::dequantize(static_cast<const std::uint8_t*>(nullptr), 4, fp8_format::e4m3, nullptr,
                          fake_floats());
  });
  CHECK(contains(dequantize, "fp8::cuda::dequantize: in is null"));
  const std::string transpose = rejection([] {
    fp8::cuda::quantize_transpose(fake_floats(), 4, 4, fp8_format::e4m3, {}, fake_codes(), nullptr);
  });
  CHECK(contains(transpose, "out_t is null"));
}

TEST_CASE("transpose_codes rejects null matrices and a size that overflows") {
  CHECK(contains(
      rejection([] { fp8::cuda::transpose_codes(nullptr, 2, 3, fake_codes(), nullptr, nullptr, nullptr); }),
      "fp8::cuda::transpose_codes: codes and out_t must be set for a non-empty matrix"));
  CHECK(contains(
      rejection([] { fp8::cuda::transpose_codes(fake_codes(), 2, 3, nullptr, nullptr, nullptr, nullptr); }),
      "codes and out_t must be set"));
  CHECK(contains(rejection([] {
                   fp8::cuda::transpose_codes(fake_codes(), std::size_t(1) << 40, std::size_t(1) << 40,
                                              fake_codes(), nullptr, nullptr, nullptr);
                 }),
                 "overflows size_t"));
}

TEST_CASE("current-scaling launchers reject bad recipes and missing buffers") {
  const fp8::quantization mx{fp8_format::e4m3, fp8::granularity::mx_1x32, 0, true};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, mx, fake_codes(), fake_floats(), fake_floats());
                 }),
                 "fp8::cuda::quantize (current scaling): mx_1x32 scales are E8M0 codes; pass a std::uint8_t* "
                 "scale buffer (the MX overload) instead of float*"));
  const fp8::quantization negative_margin{fp8_format::e4m3, fp8::granularity::per_row, -1, false};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, negative_margin, fake_codes(), fake_floats(),
                                       fake_floats());
                 }),
                 "margin must be >= 0"));
  const fp8::quantization tiles{fp8_format::e4m3, fp8::granularity::tile_1x128, 0, false};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, tiles, fake_codes(),
                                       static_cast<float*>(nullptr), fake_floats());
                 }),
                 "scale_inv is null"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, tiles, fake_codes(), fake_floats(), nullptr);
                 }),
                 "amax is null"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_transpose(fake_floats(), 4, 64, tiles, fake_codes(), fake_floats(),
                                                 fake_codes(), static_cast<float*>(nullptr), fake_floats());
                 }),
                 "scale_inv_t is null"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), std::size_t(1) << 40, std::size_t(1) << 40, tiles,
                                       fake_codes(), fake_floats(), fake_floats());
                 }),
                 "overflows size_t"));
}

// A given amax (the producer's) serves per-tensor scaling only, and must be there.
TEST_CASE("the given-amax launchers take per_tensor only, and name a missing amax or buffer") {
  const fp8::quantization tiles{fp8_format::e4m3, fp8::granularity::tile_1x128, 0, false};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_from_amax(fake_floats(), 4, 128, tiles, fake_floats(), fake_codes(),
                                                 fake_floats());
                 }),
                 "fp8::cuda::quantize_from_amax: a given amax serves per_tensor scaling, not tile_1x128 (its "
                 "blocks' amaxes come from the cast's one read: call quantize())"));
  const fp8::quantization tensor{fp8_format::e5m2, fp8::granularity::per_tensor, 0, false};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_from_amax(fake_floats(), 4, 128, tensor, nullptr, fake_codes(),
                                                 fake_floats());
                 }),
                 "fp8::cuda::quantize_from_amax: amax is null (one device float holding max |in| of the "
                 "whole tensor)"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_transpose_from_amax(fake_floats(), 4, 128, tensor, fake_floats(),
                                                           fake_codes(), fake_floats(), fake_codes(),
                                                           nullptr);
                 }),
                 "fp8::cuda::quantize_transpose_from_amax: scale_inv_t is null"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_transpose_from_amax(fake_floats(), 4, 128, tensor, fake_floats(),
                                                           fake_codes(), fake_floats(), nullptr,
                                                           fake_floats());
                 }),
                 "out_t is null"));
  const fp8::quantization mx{fp8_format::e4m3, fp8::granularity::mx_1x32, 0, true};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_from_amax(fake_floats(), 4, 64, mx, fake_floats(), fake_codes(),
                                                 fake_floats());
                 }),
                 "mx_1x32 scales are E8M0 codes"));
}

// The MX overloads (E8M0 scale buffers) take mx_1x32 with margin 0 only, and name their own buffers.
TEST_CASE("the MX launchers reject other granularities, a margin and missing E8M0 buffers") {
  const fp8::quantization mx{fp8_format::e4m3, fp8::granularity::mx_1x32, 0, true};
  const fp8::quantization tiles{fp8_format::e4m3, fp8::granularity::tile_1x128, 0, false};
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, tiles, fake_codes(), fake_codes(),
                                       fake_floats());
                 }),
                 "fp8::cuda::quantize (MX): an E8M0 (std::uint8_t*) scale buffer is only for mx_1x32; "
                 "tile_1x128 takes float* scale_inv"));
  fp8::quantization margin = mx;
  margin.margin = 2;
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, margin, fake_codes(), fake_codes(),
                                       fake_floats());
                 }),
                 "mx_1x32 follows the OCP MX rule, which has no margin; got margin 2"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), 4, 64, mx, fake_codes(),
                                       static_cast<std::uint8_t*>(nullptr), fake_floats());
                 }),
                 "fp8::cuda::quantize (MX): scale_e8m0 is null"));
  CHECK(contains(
      rejection([&] { fp8::cuda::quantize(fake_floats(), 4, 64, mx, fake_codes(), fake_codes(), nullptr); }),
      "amax is null"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_transpose(fake_floats(), 4, 64, mx, fake_codes(), fake_codes(),
                                                 static_cast<std::uint8_t*>(nullptr), fake_codes(),
                                                 fake_floats());
                 }),
                 "fp8::cuda::quantize_transpose (MX): out_t is null but 256 elements were requested"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize_transpose(fake_floats(), 4, 64, mx, fake_codes(), fake_codes(),
                                                 fake_codes(), static_cast<std::uint8_t*>(nullptr),
                                                 fake_floats());
                 }),
                 "scale_e8m0_t is null"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::dequantize(fake_codes(), 4, 64, mx, static_cast<const std::uint8_t*>(nullptr),
                                         fake_floats());
                 }),
                 "fp8::cuda::dequantize (MX): scale_e8m0 is null"));
  CHECK(contains(
      rejection([&] { fp8::cuda::dequantize(fake_codes(), 4, 64, tiles, fake_codes(), fake_floats()); }),
      "fp8::cuda::dequantize (MX): an E8M0 (std::uint8_t*) scale buffer is only for mx_1x32"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::quantize(fake_floats(), std::size_t(1) << 40, std::size_t(1) << 40, mx,
                                       fake_codes(), fake_codes(), fake_floats());
                 }),
                 "overflows size_t"));
}

// The matrix dequantize reads codes (`in`) and writes values (`out`): a null pointer is reported
// under the caller's name for it, not the other one.
TEST_CASE("the matrix dequantize names the null pointer the caller passed") {
  const fp8::quantization rows{fp8_format::e4m3, fp8::granularity::per_row, 0, false};
  const std::string null_codes = rejection([&] {
    fp8::cuda::dequantize(static_cast<const std::uint8_t*>(nullptr), 4, 64, rows, fake_floats(),
                          fake_floats());
  });
  CHECK(contains(null_codes, "fp8::cuda::dequantize (blocks): in is null but 256 elements were requested"));
  const std::string null_values = rejection(
      [&] { fp8::cuda::dequantize(fake_codes(), 4, 64, rows, fake_floats(), static_cast<float*>(nullptr)); });
  CHECK(contains(null_values, "fp8::cuda::dequantize (blocks): out is null but 256 elements were requested"));
  CHECK(contains(rejection([&] {
                   fp8::cuda::dequantize(fake_codes(), 4, 64, rows, static_cast<const float*>(nullptr),
                                         fake_floats());
                 }),
                 "scale_inv is null"));
}

TEST_CASE("the device delayed-scaling state checks its configuration and formats first") {
  fp8::delayed_scaling config{};
  config.history_length = 0;
  CHECK_THROWS_AS(fp8::cuda::delayed_scaling_device_state(config, {fp8_format::e4m3}), fp8::invalid_argument);
  config.history_length = 16;
  CHECK(contains(rejection([&] { fp8::cuda::delayed_scaling_device_state(config, {fp8_format(9)}); }),
                 "unknown fp8_format value"));
}

// Whether a warp's shared-memory access is free of bank conflicts: the 32 words `word(lane)` lie
// on 32 different banks.
template <class Word>
bool conflict_free(const Word& word) {
  std::vector<int> banks(32, 0);
  for (int lane = 0; lane < 32; ++lane) ++banks[std::size_t(word(lane) % 32)];
  return std::all_of(banks.begin(), banks.end(), [](int count) { return count == 1; });
}

// The 128x128 kernel's transposed copy, checked on the host: the 4 x 4 byte transpose, the
// assignment of micro-tiles to threads (each exactly once), and the shared tile's padding, which
// must keep the row writes and the micro-tile reads of a warp on 32 different banks.
TEST_CASE("128x128 transposed copy: 4x4 byte transpose, micro-tile coverage, no bank conflicts") {
  using namespace fp8::cuda::detail;
  std::uint32_t state = 12345;
  const auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 1000; ++trial) {
    const std::uint32_t rows[4] = {next(), next(), next(), next()};
    std::uint32_t columns[4];
    transpose_4x4_bytes(rows[0], rows[1], rows[2], rows[3], columns);
    for (int c = 0; c < 4; ++c) {
      for (int r = 0; r < 4; ++r) {
        CHECK(((columns[c] >> (8 * r)) & 0xFFu) == ((rows[r] >> (8 * c)) & 0xFFu));
      }
    }
  }

  constexpr int warps = block_threads_2d / 32;
  std::vector<int> covered(32 * 32, 0);
  for (int warp = 0; warp < warps; ++warp) {
    for (int g = 0; g < 4; ++g) {
      for (int lane = 0; lane < 32; ++lane) {
        const micro_tile tile = transpose_micro_tile(warp, lane, g);
        ++covered[std::size_t(tile.row_group * 32 + tile.column_word)];
      }
      for (int j = 0; j < 4; ++j) {  // the j-th row word each lane reads in this step
        CHECK(conflict_free([&](int lane) {
          const micro_tile tile = transpose_micro_tile(warp, lane, g);
          return (4 * tile.row_group + j) * block_tile_words + tile.column_word;
        }));
      }
    }
    for (int pass = 0; pass < block_passes_2d; ++pass) {  // the row writes of the cast
      CHECK(conflict_free([&](int lane) { return (warp + pass * warps) * block_tile_words + lane; }));
    }
  }
  for (int count : covered) CHECK(count == 1);
}

// The per-tensor cast + transpose's 64 x 64 tile, checked on the host as the 128x128 one above:
// the cast's rows (each once over the passes) and the micro-tiles (each once), with every word
// store of the cast and every word read of the transpose of a warp on 32 different banks.
TEST_CASE("64x64 cast + transpose: row and micro-tile coverage, no bank conflicts") {
  using namespace fp8::cuda::detail;
  std::vector<int> rows_cast(transpose_tile, 0);
  std::vector<int> covered(16 * 16, 0);
  for (int warp = 0; warp < transpose_threads / 32; ++warp) {
    for (int pass = 0; pass < transpose_passes; ++pass) {
      const auto row_of = [&](int lane) {
        return transpose_tile_row((32 * warp + lane) / transpose_lanes, pass);
      };
      for (int lane = 0; lane < 32; lane += transpose_lanes) {
        REQUIRE(row_of(lane) >= 0);
        REQUIRE(row_of(lane) < transpose_tile);
        ++rows_cast[std::size_t(row_of(lane))];
      }
      CHECK(conflict_free(
          [&](int lane) { return row_of(lane) * transpose_tile_words + lane % transpose_lanes; }));
    }
    for (int lane = 0; lane < 32; ++lane) {
      const micro_tile tile = cast_transpose_micro_tile(32 * warp + lane);
      REQUIRE(tile.row_group < 16);
      REQUIRE(tile.column_word < 16);
      ++covered[std::size_t(tile.row_group * 16 + tile.column_word)];
    }
    for (int j = 0; j < 4; ++j) {  // the j-th row word each lane reads
      CHECK(conflict_free([&](int lane) {
        const micro_tile tile = cast_transpose_micro_tile(32 * warp + lane);
        return (4 * tile.row_group + j) * transpose_tile_words + tile.column_word;
      }));
    }
  }
  for (int count : rows_cast) CHECK(count == 1);
  for (int count : covered) CHECK(count == 1);
}

TEST_CASE("row positions stepped by addition equal the item number divided by the items per row") {
  // The tile quantize and the dequantize kernels step (row, column) instead of dividing each item's
  // number: over every start and step a grid can give, each position must be the division's.
  using fp8::cuda::detail::row_position;
  for (const std::size_t per_row : {std::size_t(1), std::size_t(3), std::size_t(8), std::size_t(56),
                                    std::size_t(57), std::size_t(1000)}) {
    for (const std::size_t step : {std::size_t(1), std::size_t(2), per_row - 1 + (per_row == 1), per_row,
                                   per_row + 1, 2 * per_row + 5, std::size_t(8448)}) {
      for (const std::size_t start : {std::size_t(0), std::size_t(1), per_row - 1, 3 * per_row + 2}) {
        CAPTURE(per_row);
        CAPTURE(step);
        CAPTURE(start);
        row_position at = row_position::of(std::uint32_t(start), per_row);
        const row_position by = row_position::of(std::uint32_t(step), per_row);
        std::size_t wrong = 0;
        for (std::size_t t = start; t < start + 200 * step; t += step) {
          if (at.row != t / per_row || at.column != t % per_row) ++wrong;
          at.advance(by, per_row);
        }
        CHECK(wrong == 0);
      }
    }
  }
}

// A launch that fails reports the kernel, what it was given and the grid; a fault of device code,
// which the next CUDA call reports whichever it is, says so and how to find the kernel.
TEST_CASE("launch failures name the kernel, the shape and the grid") {
  using namespace fp8::cuda::detail;
  CHECK(launch_description("fp8::cuda::detail::quantize_kernel", elements_text(1000003), 489, 256) ==
        "launching fp8::cuda::detail::quantize_kernel on 1000003 elements (grid 489 x 256 threads)");
  CHECK(
      launch_description("fp8::cuda::detail::tile_quantize_kernel", matrix_text(4096, 8192), 1056, 256) ==
      "launching fp8::cuda::detail::tile_quantize_kernel on a 4096 x 8192 matrix (grid 1056 x 256 threads)");
  const std::string fault =
      fp8::cuda_error::format(cudaErrorIllegalAddress, launch_description("k", matrix_text(3, 300), 1, 256),
                              {}, fp8::detail::cuda_hint(cudaErrorIllegalAddress));
  CHECK(contains(fault,
                 "launching k on a 3 x 300 matrix (grid 1 x 256 threads) failed: cudaErrorIllegalAddress"));
  CHECK(contains(fault, "compute-sanitizer"));
  CHECK(fp8::detail::cuda_hint(cudaErrorInvalidConfiguration).empty());
}
