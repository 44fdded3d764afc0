// Weight quantization with saved scales, per-token activation scaling, the GEMM epilogue, and the
// FP8 KV cache.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <fp8/inference.hpp>

namespace fi = fp8::inference;

namespace {
// E4M3 keeps 3 mantissa bits: a normal value is within half an ulp, 2^-4 of its magnitude.
constexpr float e4m3_relative = 1.0f / 16.0f;
}  // namespace

TEST_CASE("per-tensor and per-channel weights keep their scales and dequantize within E4M3 precision") {
  // Three output channels of very different magnitudes, as trained projections often have.
  const std::vector<float> w{0.5f,    -1.0f,   0.25f,     0.125f,    // row amax 1
                             0.0001f, 0.0002f, -0.00005f, 0.00015f,  // row amax 0.0002
                             -4.0f,   2.0f,    1.0f,      3.0f};     // row amax 4
  const auto per_tensor = fi::quantize_weight(w.data(), 3, 4, fi::weight_granularity::per_tensor);
  const auto per_channel = fi::quantize_weight(w.data(), 3, 4, fi::weight_granularity::per_channel);
  REQUIRE(per_tensor.scale_inv.size() == 1);
  REQUIRE(per_channel.scale_inv.size() == 3);
  CHECK(per_tensor.scale_inv[0] == 1.0f / (448.0f / 4.0f));
  CHECK(per_channel.scale_inv[0] == 1.0f / 448.0f);
  CHECK(per_channel.scale_inv[1] == 1.0f / (448.0f / 0.0002f));
  CHECK(per_channel.scale_inv[2] == 1.0f / (448.0f / 4.0f));
  CHECK(per_tensor.bytes() == 12 + 4);
  CHECK(per_channel.bytes() == 12 + 12);
  // Each row's largest element maps to the largest E4M3 code (0x7E / 0xFE) under per-channel scales.
  CHECK((per_channel.codes[1] & 0x7F) == 0x7E);
  CHECK((per_channel.codes[5] & 0x7F) == 0x7E);
  std::vector<float> back_t(w.size()), back_c(w.size());
  per_tensor.dequantize(back_t.data());
  per_channel.dequantize(back_c.data());
  double error_t = 0.0, error_c = 0.0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(std::fabs(back_c[i] - w[i]) <= e4m3_relative * std::fabs(w[i]));  // all normal per channel
    if (i / 4 == 1) {
      error_t += std::fabs(back_t[i] - w[i]);
      error_c += std::fabs(back_c[i] - w[i]);
    }
  }
  // The small row falls to E4M3's subnormals under the tensor's scale (0.0002 * 112 = 0.0224 < 2^-6 x 2):
  // per channel keeps it normal and is far more accurate there.
  CHECK(error_c * 2 < error_t);
  // decode_unscaled * row scale = dequantize (the GEMM epilogue's factorisation).
  std::vector<float> raw(w.size());
  per_channel.decode_unscaled(raw.data());
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(raw[i] * per_channel.row_scale_inv(i / 4) == back_c[i]);
  // Saved parts are checked when reassembled.
  fi::quantized_weight broken = per_channel;
  broken.scale_inv.pop_back();
  CHECK_THROWS_AS(broken.validate(), fp8::invalid_argument);
  broken = per_channel;
  broken.scale_inv[0] = 0.0f;
  CHECK_THROWS_AS(broken.validate(), fp8::invalid_argument);
  CHECK_NOTHROW(per_channel.validate());
  const std::vector<float> nan_weight{1.0f, std::nanf("")};
  CHECK_THROWS_AS(fi::quantize_weight(nan_weight.data(), 1, 2, fi::weight_granularity::per_tensor),
                  fp8::invalid_argument);
}

TEST_CASE(
    "dynamic per-token scaling gives each row its own scale; static scaling saturates beyond its clip") {
  const std::vector<float> x{1.0f, -2.0f, 0.5f,   // token amax 2
                             0.1f, 0.05f, 0.0f};  // token amax 0.1
  std::vector<std::uint8_t> codes(6);
  std::vector<float> scale_inv(2);
  CHECK(fi::quantize_per_token(x.data(), 2, 3, codes.data(), scale_inv.data()) == 2.0f);
  CHECK(scale_inv[0] == 1.0f / 224.0f);  // 448 / 2
  CHECK(scale_inv[1] == 1.0f / (448.0f / 0.1f));
  CHECK(codes[1] == 0xFE);  // -2 -> -448
  CHECK(codes[3] == 0x7E);  // 0.1 -> 448
  // Static: scale 224 (a clip of 2); 3.0 would need 672 and saturates to 448.
  const std::vector<float> y{1.0f, 3.0f};
  std::vector<std::uint8_t> y_codes(2);
  CHECK(fi::quantize_static(y.data(), 1, 2, 224.0f, y_codes.data()) == 3.0f);
  CHECK(y_codes[1] == 0x7E);
  CHECK(fp8::decode<float, fp8::e4m3_format>(y_codes[0]) == 224.0f);
}

TEST_CASE("apply_scales multiplies rows and columns by their inverse scales") {
  std::vector<float> y{1.0f, 1.0f, 1.0f, 1.0f};
  const float a[] = {2.0f, 3.0f}, b[] = {5.0f, 7.0f};
  fi::apply_scales(y.data(), 2, 2, a, 2, b, 2);
  CHECK(y == std::vector<float>{10.0f, 14.0f, 15.0f, 21.0f});
  std::vector<float> z{1.0f, 2.0f};
  const float one[] = {0.5f};
  fi::apply_scales(z.data(), 1, 2, one, 1, one, 1);
  CHECK(z == std::vector<float>{0.25f, 0.5f});
  CHECK_THROWS_AS(fi::apply_scales(y.data(), 2, 2, a, 3, b, 2), fp8::invalid_argument);
}

TEST_CASE("the FP8 KV cache appends without touching stored tokens and reads back within E4M3 precision") {
  const int layers = 2, heads = 2, dim = 4, capacity = 3;
  // Per head: keys up to 8 in head 0, up to 1 in head 1.
  std::vector<float> k_scales{448.0f / 8.0f, 448.0f, 448.0f / 8.0f, 448.0f};
  std::vector<float> v_scales{448.0f, 448.0f, 448.0f, 448.0f};
  fi::fp8_kv_cache cache(layers, heads, dim, capacity, fi::kv_scale_granularity::per_head, k_scales,
                         v_scales);
  CHECK(cache.bytes() ==
        std::size_t(2 * layers * heads * capacity * dim) + 8 * sizeof(float));  // 4 key and 4 value scales
  const std::vector<float> k0{8.0f, -4.0f, 2.0f, 1.0f, 1.0f, 0.5f, -0.25f, 0.3f};
  const std::vector<float> v0{0.9f, 0.1f, -0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
  cache.append(0, k0.data(), v0.data());
  std::vector<std::uint8_t> before(cache.key_codes(0, 0, 0), cache.key_codes(0, 0, 0) + dim);
  const std::vector<float> k1{-8.0f, 7.0f, 6.0f, 5.0f, 0.9f, 0.8f, 0.7f, 0.6f};
  cache.append(0, k1.data(), v0.data());
  CHECK(std::memcmp(before.data(), cache.key_codes(0, 0, 0), std::size_t(dim)) == 0);  // untouched
  CHECK(cache.length(0) == 2);
  CHECK(cache.length(1) == 0);
  std::vector<float> keys(2 * std::size_t(dim)), values(keys.size());
  cache.read(0, 1, keys.data(), values.data());  // head 1: tokens 0 and 1
  for (int d = 0; d < dim; ++d) {
    CHECK(std::fabs(keys[std::size_t(d)] - k0[std::size_t(4 + d)]) <=
          e4m3_relative * std::fabs(k0[std::size_t(4 + d)]));
    CHECK(std::fabs(keys[std::size_t(4 + d)] - k1[std::size_t(4 + d)]) <=
          e4m3_relative * std::fabs(k1[std::size_t(4 + d)]));
  }
  CHECK(cache.saturated_appends() == 0);
  const std::vector<float> too_large{20.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  cache.append(0, too_large.data(), v0.data());  // 20 > 8: beyond head 0's calibrated range
  CHECK(cache.saturated_appends() == 1);
  keys.resize(3 * std::size_t(dim));
  values.resize(keys.size());
  cache.read(0, 0, keys.data(), values.data());
  CHECK(keys[8] == 8.0f);  // saturated at 448 / scale, the calibrated amax
  CHECK_THROWS_AS(cache.append(0, k0.data(), v0.data()), fp8::invalid_argument);  // full
  cache.clear();
  CHECK(cache.length(0) == 0);
  CHECK_THROWS_AS(fi::fp8_kv_cache(layers, heads, dim, capacity, fi::kv_scale_granularity::per_tensor,
                                   k_scales, v_scales),
                  fp8::invalid_argument);  // per tensor wants one scale per layer
  CHECK_NOTHROW(fi::fp8_kv_cache(layers, heads, dim, capacity, fi::kv_scale_granularity::per_tensor,
                                 {1.0f, 2.0f}, {1.0f, 2.0f}));
  CHECK_THROWS_AS(fi::fp8_kv_cache(layers, heads, dim, capacity, fi::kv_scale_granularity::per_tensor,
                                   {1.0f, 0.0f}, {1.0f, 2.0f}),
                  fp8::invalid_argument);
}
