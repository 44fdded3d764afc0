// The cuBLASLt wrapper's host-side machinery, run without a GPU: C and beta, strided batches, the
// backward epilogues, grouped products, version guards, attribute messages, the bounded plan cache,
// per-stream workspaces, algorithm fallback, tuning's ordering and the device/driver classification.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fp8/cublaslt.hpp>
#include <fp8/cuda/error.hpp>

namespace lt = fp8::cublaslt;

namespace {

const void* address(std::uintptr_t value) { return reinterpret_cast<const void*>(value); }
void* mutable_address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }
const float* float_address(std::uintptr_t value) { return reinterpret_cast<const float*>(value); }

constexpr std::size_t cublas_13_1 = 130100;
lt::device_info hopper() { return {1, 0, 9, 0, "NVIDIA H100 80GB HBM3", cublas_13_1, cublas_13_1}; }

// D[256, 128] (bf16) = A^T (e4m3) · B (e4m3), k = 512, tensorwise scales.
lt::gemm_problem valid_fp8() {
  lt::gemm_problem p{};
  p.m = 256;
  p.n = 128;
  p.k = 512;
  p.a = {address(0x10000), lt::data_type::e4m3, 512, lt::scale_mode::tensorwise, float_address(0x90000)};
  p.b = {address(0x20000), lt::data_type::e4m3, 512, lt::scale_mode::tensorwise, float_address(0x90010)};
  p.d = {mutable_address(0x30000), lt::data_type::bf16, 256, nullptr, nullptr};
  return p;
}

std::string cause_of(const lt::gemm_problem& p, const lt::device_info& device = hopper()) {
  const auto why = lt::find_rejection(p, device);
  REQUIRE_MESSAGE(why.has_value(), "expected a rejection for " << lt::describe(p));
  return why->cause;
}
bool passes(const lt::gemm_problem& p) {
  const auto why = lt::find_rejection(p, hopper());
  if (why) MESSAGE("rejected: " << why->cause);
  return !why.has_value();
}
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("C is passed only when beta != 0, and never as D's pointer under another layout") {
  lt::gemm_problem p = valid_fp8();
  CHECK_FALSE(lt::reads_c(p));  // beta = 0: no C at all
  CHECK(passes(p));

  p.c.data = address(0x50000);  // a C with beta = 0 would be ignored: refused, with the reason
  CHECK(contains(cause_of(p), "a C pointer was given but beta is 0"));

  p = valid_fp8();
  p.options.beta = 1.0f;  // accumulate: C needed
  CHECK(lt::reads_c(p));
  CHECK(contains(cause_of(p), "beta != 0 but C is null"));

  p.c.data = p.d.data;  // in place, same type and ld as D: fine
  CHECK(passes(p));

  // An FP8 output with beta = 1 in place: C would be bf16 at D's pointer, D e4m3: refused.
  p.d.type = lt::data_type::e4m3;
  CHECK(contains(cause_of(p), "C and D share one pointer with different layouts (C bf16"));
  p.c.data = address(0x50000);  // a separate bf16 C beside the FP8 D: what cuBLASLt accepts
  CHECK(passes(p));
  p.c.type = lt::data_type::fp32;
  CHECK(contains(cause_of(p), "a fp32 C does not go with a e4m3 output"));

  // FP32 weight-gradient accumulation: D and C fp32, in place.
  p = valid_fp8();
  p.d.type = lt::data_type::fp32;
  p.options.beta = 1.0f;
  p.c.data = p.d.data;
  CHECK(passes(p));
  CHECK(lt::c_type_of(p) == lt::data_type::fp32);

  // C's pointer and leading dimension follow the FP8 alignment rules when it is read.
  p.c.data = address(0x50008);
  CHECK(contains(cause_of(p), "misaligned pointers: C is at 0x50008"));
  p.c.data = address(0x50000);
  p.c.ld = 258;  // fp32: 1032 bytes
  CHECK(contains(cause_of(p), "ldc spans 1032 bytes"));
}

TEST_CASE("linear() carries C and its leading dimension into the cuBLASLt problem") {
  lt::linear_problem p{};
  p.m = 7;
  p.n = 64;
  p.k = 32;
  p.x = {address(0x10000), lt::data_type::e4m3};
  p.w = {address(0x20000), lt::data_type::e4m3};
  p.y = {mutable_address(0x30000), lt::data_type::fp32};
  p.options.beta = 1.0f;
  p.c = {p.y.data, {}, 0};
  const lt::gemm_problem g = lt::with_packed_leading_dimensions(lt::to_gemm(p));
  CHECK(g.c.data == p.y.data);
  CHECK(g.c.ld == 64);
  CHECK(g.d.ld == 64);
  CHECK(passes(g));
  CHECK(contains(lt::describe(g), "beta 1 (C = D, ld 64)"));
}

TEST_CASE("strided batches: strides default to packed, may not overlap, FP8 strides in 16 bytes") {
  lt::gemm_problem p = valid_fp8();
  p.batch.count = 4;
  const lt::gemm_problem packed = lt::with_packed_leading_dimensions(p);
  CHECK(packed.batch.stride_a == 512 * 256);
  CHECK(packed.batch.stride_b == 512 * 128);
  CHECK(packed.batch.stride_d == 256 * 128);
  CHECK(passes(p));
  CHECK(contains(lt::describe(p), "batch 4"));

  p.batch.stride_b = 512 * 127;
  CHECK(contains(cause_of(p), "stride_b = 65024 elements is smaller than one matrix (65536)"));

  p = valid_fp8();
  p.batch.count = 2;
  p.batch.stride_a = 512 * 256 + 8;  // FP8: 8 bytes past a 16-byte boundary
  CHECK(contains(cause_of(p), "must start 16-byte aligned"));

  p = valid_fp8();
  p.batch.count = 0;
  CHECK(contains(cause_of(p), "batch count must be >= 1"));
  p.batch.count = std::int64_t(1) << 32 | 1;  // would be 1 as cuBLASLt's int32 count
  CHECK(contains(cause_of(p), "batch count must be at most 2147483647"));

  p = valid_fp8();
  p.batch.count = 2;
  p.a.scaling = p.b.scaling = lt::scale_mode::row_wise;
  p.a.scale_inv = float_address(0x90000);
  p.b.scale_inv = float_address(0x91000);
  CHECK(contains(cause_of(p), "not batched by this wrapper"));
}

TEST_CASE("backward epilogues: bias gradients and the GELU aux matrix") {
  lt::gemm_problem p = valid_fp8();  // as a BF16 product with B transposed: BGRADB's only form
  p.a = {address(0x10000), lt::data_type::bf16, 512};
  p.b = {address(0x20000), lt::data_type::bf16, 128};
  p.op_b = lt::operation::transpose;
  p.options.epilogue_kind = lt::epilogue::bias_gradient_b;
  CHECK(lt::bias_length(p.options.epilogue_kind, p.m, p.n) == 128);  // one per column of D
  CHECK(contains(cause_of(p), "writes a bias gradient of 128 elements"));
  p.options.bias = address(0x40000);
  CHECK(passes(p));

  p = valid_fp8();
  p.options.epilogue_kind = lt::epilogue::gelu_aux_bias;
  p.options.bias = address(0x40000);
  CHECK(contains(cause_of(p), "needs the aux matrix"));
  p.options.aux = mutable_address(0x60000);
  CHECK(passes(p));        // aux_ld 0 = m
  p.options.aux_ld = 260;  // >= m but not a multiple of 8
  CHECK(contains(cause_of(p), "aux_ld = 260"));
  p.options.aux_ld = 128;  // < m
  CHECK(contains(cause_of(p), "aux_ld = 128"));
  p.options.aux_ld = 264;
  CHECK(passes(p));
  p.options.aux = mutable_address(0x60004);
  CHECK(contains(cause_of(p), "the aux matrix is at 0x60004"));

  p = valid_fp8();
  p.options.epilogue_kind = lt::epilogue::dgelu_bias_gradient;
  p.options.aux = mutable_address(0x60000);
  CHECK(contains(cause_of(p), "writes a bias gradient of 256 elements"));
  p.options.bias = address(0x40000);
  CHECK(passes(p));

  p = valid_fp8();
  p.options.epilogue_kind = lt::epilogue::dgelu;
  p.options.aux = mutable_address(0x60000);
  CHECK(passes(p));
  p.options.epilogue_kind = lt::epilogue::bias;
  p.options.bias = address(0x40000);
  CHECK(contains(cause_of(p), "an aux pointer was given but epilogue bias uses none"));

  // The aux matrix has the output's type (cuBLASLt's default); beside an FP8 output fp16 or E4M3.
  p = valid_fp8();
  p.options.epilogue_kind = lt::epilogue::gelu_aux;
  p.options.aux = mutable_address(0x60000);
  CHECK(lt::aux_type_of(p) == lt::data_type::bf16);
  CHECK(passes(p));
  p.d.type = lt::data_type::fp32;
  p.d.ld = 256;
  CHECK(lt::aux_type_of(p) == lt::data_type::fp32);  // not the bf16 bias type of FP8 into FP32
  CHECK(passes(p));
  p.options.aux_type = lt::data_type::bf16;
  CHECK(contains(cause_of(p), "a bf16 aux matrix does not go with a fp32 output"));
  p.options.aux_type.reset();
  p.d.type = lt::data_type::e4m3;
  CHECK(lt::aux_type_of(p) == lt::data_type::fp16);
  CHECK(lt::c_type_of(p) == lt::data_type::fp16);  // bias and C follow the aux beside an FP8 output
  CHECK(passes(p));
  p.options.epilogue_kind = lt::epilogue::gelu_aux_bias;
  p.options.bias = address(0x40000);
  CHECK(lt::bias_type_of(p) == lt::data_type::fp16);
  CHECK(passes(p));
  p.options.aux_type = lt::data_type::e4m3;
  CHECK(passes(p));
  p.options.aux_type = lt::data_type::bf16;
  CHECK(contains(cause_of(p), "a bf16 aux matrix does not go with a e4m3 output"));
  p.d.type = lt::data_type::e5m2;
  p.a.type = lt::data_type::e5m2;
  p.options.aux_type = lt::data_type::e4m3;
  CHECK(contains(cause_of(p), "a e4m3 aux matrix does not go with a e5m2 output"));

  CHECK(lt::uses_aux(lt::epilogue::gelu_aux));
  CHECK(lt::uses_aux(lt::epilogue::dgelu));
  CHECK_FALSE(lt::uses_aux(lt::epilogue::gelu_bias));
  CHECK(lt::writes_bias_gradient(lt::epilogue::dgelu_bias_gradient));
  CHECK_FALSE(lt::uses_bias(lt::epilogue::bias_gradient_b));
}

TEST_CASE("grouped products are checked whole, naming the first member that cannot run") {
  std::vector<lt::gemm_problem> group;
  for (const std::int64_t tokens : {16, 3, 200}) {  // experts with different token counts
    lt::linear_problem p{};
    p.m = tokens;
    p.n = 256;
    p.k = 512;
    p.x = {address(0x10000), lt::data_type::e4m3};
    p.w = {address(0x20000), lt::data_type::e4m3};
    p.y = {mutable_address(0x30000), lt::data_type::bf16};
    group.push_back(lt::to_gemm(p));
  }
  CHECK_FALSE(lt::find_group_rejection(group, hopper()).has_value());
  group[2].k = 500;
  group[2].a.ld = group[2].b.ld = 500;
  const auto found = lt::find_group_rejection(group, hopper());
  REQUIRE(found.has_value());
  CHECK(found->index == 2);
  try {
    lt::validate_group(group, hopper());
    FAIL("validate_group accepted a bad member");
  } catch (const fp8::cublas_error& e) {
    CHECK(contains(e.what(), "group member 2: k = 500 is not a multiple of 16"));
  }

  // FP8 outputs with amaxes: each member its own slot, or the group is refused (AMAX_D overwrites).
  group[2].k = 512;
  group[2].a.ld = group[2].b.ld = 512;
  for (std::size_t i = 0; i < group.size(); ++i) {
    group[i].d.type = lt::data_type::e4m3;
    group[i].d.amax = reinterpret_cast<float*>(0x90000 + 16 * i);
  }
  CHECK_FALSE(lt::find_group_rejection(group, hopper()).has_value());
  group[2].d.amax = group[0].d.amax;
  const auto shared = lt::find_group_rejection(group, hopper());
  REQUIRE(shared.has_value());
  CHECK(shared->index == 2);
  CHECK(contains(shared->why.cause, "members 0 and 2 share one amax slot"));
}

TEST_CASE("row-wise and block scale modes need cuBLAS 12.9 in the headers and in the loaded library") {
  lt::gemm_problem p = valid_fp8();
  p.a.scaling = p.b.scaling = lt::scale_mode::row_wise;
  p.a.scale_inv = float_address(0x90000);
  p.b.scale_inv = float_address(0x91000);
  CHECK_FALSE(lt::find_version_rejection(p, 120900, 120900).has_value());
  CHECK_FALSE(lt::find_version_rejection(p, 130100, 130000).has_value());

  auto why = lt::find_version_rejection(p, 120800, 130100);
  REQUIRE(why.has_value());
  CHECK(why->kind == lt::rejection_kind::not_supported);
  CHECK(contains(why->cause, "need cuBLAS 12.9.0 or newer"));
  CHECK(contains(why->cause, "compiled against cuBLAS headers 12.8.0"));

  why = lt::find_version_rejection(p, 130100, 120804);
  REQUIRE(why.has_value());
  CHECK(contains(why->cause, "the loaded libcublasLt is 12.8.4"));

  lt::device_info old_library = hopper();
  old_library.cublaslt_version = 120400;
  CHECK(contains(cause_of(p, old_library), "the loaded libcublasLt is 12.4.0"));
  // Tensorwise products need no version.
  CHECK_FALSE(lt::find_version_rejection(valid_fp8(), 0, 0).has_value());
  CHECK_FALSE(lt::find_rejection(valid_fp8(), old_library).has_value());

  CHECK(lt::version_text(130100) == "13.1.0");
  CHECK(lt::version_text(0) == "unknown");
  // The headers this test was built with have the modes.
  CHECK(FP8_CUBLASLT_HAS_SCALE_MODES == (CUBLAS_VERSION >= 120900 ? 1 : 0));
}

TEST_CASE("messages: a refused attribute is named with its value; INVALID_VALUE blames no scale layout") {
  const std::string cause = lt::attribute_refused_cause(
      lt::detail::attribute_name(CUBLASLT_MATMUL_DESC_EPILOGUE),
      lt::detail::attribute_value(std::uint32_t(CUBLASLT_EPILOGUE_BGRADB)), 120400);
  CHECK(contains(cause, "cuBLASLt 12.4.0 refused CUBLASLT_MATMUL_DESC_EPILOGUE = 512"));
  CHECK(std::string(lt::detail::attribute_name(CUBLASLT_MATMUL_DESC_A_SCALE_MODE)) ==
        "CUBLASLT_MATMUL_DESC_A_SCALE_MODE");
  CHECK(lt::detail::attribute_value(reinterpret_cast<const void*>(0x1234)) == "0x1234");

  const std::string invalid = lt::detail::likely_cause(CUBLAS_STATUS_INVALID_VALUE, hopper());
  CHECK_FALSE(contains(invalid, "scale"));
  CHECK(contains(invalid, "CUBLASLT_LOG_LEVEL=5"));

  // The epilogues map onto cuBLASLt's enumerators.
  CHECK(lt::detail::cuda_epilogue(lt::epilogue::bias_gradient_b) == CUBLASLT_EPILOGUE_BGRADB);
  CHECK(lt::detail::cuda_epilogue(lt::epilogue::gelu_aux) == CUBLASLT_EPILOGUE_GELU_AUX);
  CHECK(lt::detail::cuda_epilogue(lt::epilogue::gelu_aux_bias) == CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  CHECK(lt::detail::cuda_epilogue(lt::epilogue::dgelu) == CUBLASLT_EPILOGUE_DGELU);
  CHECK(lt::detail::cuda_epilogue(lt::epilogue::dgelu_bias_gradient) == CUBLASLT_EPILOGUE_DGELU_BGRAD);
}

TEST_CASE("plan keys: C, beta, batch, aux and workspace make different plans") {
  const lt::gemm_problem base = lt::with_packed_leading_dimensions(valid_fp8());
  const auto key = lt::detail::make_key(base, 1 << 20);
  const lt::detail::plan_key_hash hash;
  CHECK(key == lt::detail::make_key(base, 1 << 20));
  CHECK(hash(key) == hash(lt::detail::make_key(base, 1 << 20)));
  CHECK_FALSE(key == lt::detail::make_key(base, 1 << 21));

  lt::gemm_problem accumulate = base;
  accumulate.options.beta = 1.0f;
  accumulate.c.data = accumulate.d.data;
  CHECK_FALSE(key == lt::detail::make_key(accumulate, 1 << 20));
  lt::gemm_problem batched = base;
  batched.batch.count = 2;
  CHECK_FALSE(key == lt::detail::make_key(batched, 1 << 20));
  // Another address with the same alignment reuses the plan (pointers are set per call).
  lt::gemm_problem moved = base;
  moved.a.data = address(0x70000);
  CHECK(key == lt::detail::make_key(moved, 1 << 20));
}

TEST_CASE("a strided batch promises the heuristic no more alignment than its strides keep") {
  // A 256-byte-aligned FP8 A whose batch stride is 16 bytes past a multiple of 256: the second
  // matrix is only 16-byte aligned, so the plan (and the MIN_ALIGNMENT_A_BYTES preference) says 16.
  lt::gemm_problem p = valid_fp8();
  p.batch.count = 3;
  p.batch.stride_a = 512 * 256 + 16;  // elements = bytes for FP8; >= one matrix (lda 512 x m 256)
  p = lt::with_packed_leading_dimensions(p);
  CHECK(passes(p));
  const auto key = lt::detail::make_key(p, 1 << 20);
  CHECK(lt::detail::pointer_alignment(p.a.data) == 256);
  CHECK(key.align_a == 16);
  CHECK(key.align_b == 256);  // packed B: 512 x 128 bytes per matrix
  CHECK(key.align_d == 256);  // packed bf16 D: 256 x 128 x 2 bytes per matrix
  CHECK(lt::detail::operand_alignment(p.a.data, 1, p.batch.stride_a, p.a.type) == 256);  // no batch
  p.batch.stride_d = 256 * 128 + 8;  // bf16: 16 bytes past a multiple of 256
  CHECK(lt::detail::make_key(p, 1 << 20).align_d == 16);
}

TEST_CASE("the plan cache is bounded: least recently used out") {
  struct value {
    int built = 0;
  };
  lt::lru_cache<int, value> cache(3);
  for (int key = 0; key < 3; ++key) cache.insert(key).built = key + 100;
  CHECK(cache.size() == 3);
  REQUIRE(cache.find(0) != nullptr);  // 0 becomes the most recent; 1 is now the oldest
  cache.insert(3);
  CHECK(cache.size() == 3);
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.contains(0));
  CHECK(cache.find(0)->built == 100);
  CHECK(cache.contains(2));
  cache.erase(2);
  CHECK(cache.find(2) == nullptr);
  CHECK(cache.size() == 2);
  cache.set_capacity(1);  // shrinking evicts the oldest until it fits: 0 and 3 -> keep the newest (0)
  CHECK(cache.size() == 1);
  CHECK(cache.contains(0));
  lt::lru_cache<int, value> zero(0);  // a capacity of 0 is taken as 1
  CHECK(zero.capacity() == 1);
}

TEST_CASE("a caller's workspace: as large as the plans were chosen for, 256-byte aligned") {
  CHECK(lt::find_workspace_problem({reinterpret_cast<void*>(0x10000), 1 << 20}, 1 << 20).empty());
  CHECK(lt::find_workspace_problem({nullptr, 0}, 0).empty());  // no workspace for plans chosen without one
  CHECK(contains(lt::find_workspace_problem({reinterpret_cast<void*>(0x10000), 1000}, 1 << 20),
                 "the workspace has 1000 bytes, the handle's plans are chosen for 1048576"));
  CHECK(contains(lt::find_workspace_problem({reinterpret_cast<void*>(0x10010), 1 << 20}, 1 << 20),
                 "16 bytes past one): cuBLASLt's workspace must be 256-byte aligned"));
}

TEST_CASE("workspaces: one per stream, reused by that stream, freed on release") {
  struct counting_allocator {
    int* allocations;
    int* releases;
    std::uintptr_t next = 0x1000;
    void* allocate(std::size_t bytes) {
      ++*allocations;
      void* data = reinterpret_cast<void*>(next);
      next += bytes;
      return data;
    }
    bool release(void*) noexcept {
      ++*releases;
      return true;
    }
  };
  int allocations = 0, releases = 0;
  const std::uint64_t default_stream_id = lt::detail::stream_id_tag | 1;  // a special stream's key
  {
    lt::workspace_pool<counting_allocator> pool(256, counting_allocator{&allocations, &releases});
    const std::uint64_t stream_1 = 0x11, stream_2 = 0x22;
    const lt::workspace a = pool.for_stream(stream_1);
    const lt::workspace b = pool.for_stream(stream_2);
    const lt::workspace default_stream = pool.for_stream(default_stream_id);
    CHECK(a.bytes == 256);
    CHECK(a.data != b.data);  // two streams never share scratch
    CHECK(default_stream.data != a.data);
    CHECK(pool.for_stream(stream_1).data == a.data);  // the same stream reuses its buffer
    CHECK(allocations == 3);
    CHECK(pool.streams() == 3);
    pool.release(stream_2);
    CHECK(releases == 1);
    CHECK(pool.streams() == 2);
  }
  CHECK(releases == 3);  // the rest on destruction
  lt::workspace_pool<counting_allocator> none(0, counting_allocator{&allocations, &releases});
  CHECK(none.for_stream(default_stream_id).data == nullptr);  // a zero-byte workspace allocates nothing
  CHECK(allocations == 3);

  // A buffer the allocator cannot free (cudaFree refused during another stream's capture, say) stays
  // the stream's: the same buffer serves that stream, and the next release tries again.
  struct refusing_allocator {
    int* refusals_left;
    int* frees;
    void* allocate(std::size_t) { return reinterpret_cast<void*>(std::uintptr_t(0x2000)); }
    bool release(void*) noexcept {
      if (*refusals_left > 0) {
        --*refusals_left;
        return false;
      }
      ++*frees;
      return true;
    }
  };
  int refusals_left = 1, frees = 0;
  {
    lt::workspace_pool<refusing_allocator> pool(256, refusing_allocator{&refusals_left, &frees});
    const lt::workspace kept = pool.for_stream(0x33);
    pool.release(0x33);  // refused
    CHECK(frees == 0);
    CHECK(pool.streams() == 1);
    CHECK(pool.for_stream(0x33).data == kept.data);
    pool.release(0x33);  // freed
    CHECK(frees == 1);
    CHECK(pool.streams() == 0);
    pool.for_stream(0x44);
    refusals_left = 1;
  }
  CHECK(frees == 1);  // refused again at the pool's end: left, not freed twice or counted

  // The handle's keys: a created stream is its handle value, with no CUDA call (the special
  // streams ask CUDA for their id, which test_cublaslt_paths checks on a GPU).
  const auto created = reinterpret_cast<cudaStream_t>(std::uintptr_t(0x7f0012345600));
  CHECK(lt::detail::workspace_key(created, 0) == 0x7f0012345600u);
  std::uint64_t key = 0;
  CHECK(lt::detail::find_workspace_key(created, 0, key) == cudaSuccess);
  CHECK(key == 0x7f0012345600u);
  CHECK(lt::detail::is_special_stream(nullptr));
  CHECK(lt::detail::is_special_stream(cudaStreamLegacy));
  CHECK(lt::detail::is_special_stream(cudaStreamPerThread));
  CHECK_FALSE(lt::detail::is_special_stream(created));
}

TEST_CASE("algorithm fallback: the next candidate runs when one fails, and the one that worked stays") {
  std::vector<std::size_t> tried;
  const auto fail_first_two = [&](std::size_t i) {
    tried.push_back(i);
    return i < 2 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
  };
  const auto retry_all = [](cublasStatus_t) { return true; };
  auto result = lt::first_that_works(4, 0, CUBLAS_STATUS_SUCCESS, fail_first_two, retry_all);
  CHECK(result.succeeded(4));
  CHECK(result.index == 2);
  CHECK(tried == std::vector<std::size_t>{0, 1, 2});
  CHECK(result.statuses.size() == 3);

  tried.clear();
  result = lt::first_that_works(4, 2, CUBLAS_STATUS_SUCCESS, fail_first_two,
                                retry_all);  // the remembered one first
  CHECK(result.index == 2);
  CHECK(tried == std::vector<std::size_t>{2});

  result = lt::first_that_works(
      3, 0, CUBLAS_STATUS_SUCCESS, [](std::size_t) { return CUBLAS_STATUS_NOT_SUPPORTED; }, retry_all);
  CHECK_FALSE(result.succeeded(3));
  CHECK(result.statuses.size() == 3);

  // The handle's rule: only a refusal before anything ran is retried. An execution error may come
  // after a kernel wrote part of D (with beta = 1 also C), so it stops the search where it happened.
  CHECK(lt::detail::refused_before_running(CUBLAS_STATUS_NOT_SUPPORTED));
  CHECK(lt::detail::refused_before_running(CUBLAS_STATUS_INVALID_VALUE));
  CHECK(lt::detail::refused_before_running(CUBLAS_STATUS_ARCH_MISMATCH));
  CHECK_FALSE(lt::detail::refused_before_running(CUBLAS_STATUS_EXECUTION_FAILED));
  CHECK_FALSE(lt::detail::refused_before_running(CUBLAS_STATUS_ALLOC_FAILED));
  tried.clear();
  result = lt::first_that_works(
      4, 0, CUBLAS_STATUS_SUCCESS,
      [&](std::size_t i) {
        tried.push_back(i);
        return i == 0 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_EXECUTION_FAILED;
      },
      lt::detail::refused_before_running);
  CHECK_FALSE(result.succeeded(4));
  CHECK(tried == std::vector<std::size_t>{0, 1});
  CHECK(result.statuses.back() == CUBLAS_STATUS_EXECUTION_FAILED);

  // The error when none worked names every attempt's status, by the candidate's index.
  result = lt::first_that_works(
      4, 1, CUBLAS_STATUS_SUCCESS,
      [](std::size_t i) { return i == 1 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_INVALID_VALUE; },
      retry_all);
  CHECK_FALSE(result.succeeded(4));
  CHECK(lt::attempts_text(result, 1, cublasLtGetStatusName) ==
        "candidate 1: CUBLAS_STATUS_NOT_SUPPORTED, candidate 2: CUBLAS_STATUS_INVALID_VALUE, "
        "candidate 3: CUBLAS_STATUS_INVALID_VALUE");
}

TEST_CASE("a driver older than the toolkit is a failure, no driver at all is no device") {
  using fp8::detail::classify_device;
  using fp8::detail::device_presence;
  CHECK(classify_device(cudaSuccess, 1, 13000) == device_presence::present);
  CHECK(classify_device(cudaSuccess, 0, 13000) == device_presence::absent);
  CHECK(classify_device(cudaErrorNoDevice, 0, 13000) == device_presence::absent);
  CHECK(classify_device(cudaErrorInsufficientDriver, 0, 0) ==
        device_presence::absent);  // no driver installed
  CHECK(classify_device(cudaErrorInsufficientDriver, 0, 12040) == device_presence::driver_too_old);
  CHECK(classify_device(cudaErrorUnknown, 0, 13000) == device_presence::error);
  const std::string message = fp8::detail::driver_too_old_message(12040, 13000);
  CHECK(contains(message, "driver supports CUDA 12.4"));
  CHECK(contains(message, "built with CUDA 13.0"));
  CHECK(contains(message, "not a missing device"));
}

TEST_CASE("tuning: candidates timed in turns, ordered by median, ties kept in the heuristic's order") {
  lt::tuning_options options;
  options.rounds = 3;
  // Candidate 1 fails on its first call; 0 has one fast outlier (median 5); 2 and 3 tie at 3.
  const std::vector<std::vector<double>> samples = {{5, 1, 5}, {}, {3, 3, 9}, {3, 3, 3}};
  std::vector<std::size_t> probed, timed;
  std::vector<std::size_t> taken(samples.size(), 0);
  const auto probe = [&](std::size_t i) {
    probed.push_back(i);
    return i == 1 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
  };
  const auto time = [&](std::size_t i) {
    timed.push_back(i);
    return samples[i][taken[i]++];
  };
  const lt::tuning_result<cublasStatus_t> result =
      lt::time_candidates(samples.size(), options, CUBLAS_STATUS_SUCCESS, probe, time);
  CHECK(probed == std::vector<std::size_t>{0, 1, 2, 3});
  CHECK(timed == std::vector<std::size_t>{0, 2, 3, 0, 2, 3, 0, 2, 3});  // in turns, the failed one never
  CHECK(result.fastest_first == std::vector<std::size_t>{2, 3, 0});
  CHECK_FALSE(result.candidates[1].worked);
  CHECK(result.candidates[1].status == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(result.candidates[0].median_ms == 5.0);
  CHECK(result.candidates[2].ms == std::vector<double>{3, 3, 9});
  CHECK(result.gain() == doctest::Approx(5.0 / 3.0));

  SUBCASE("a candidate that fails while timed is dropped") {
    const auto fails_later = [](std::size_t i) {
      return i == 0 ? std::numeric_limits<double>::quiet_NaN() : 2.0 + double(i);
    };
    const auto all_run = [](std::size_t) { return CUBLAS_STATUS_SUCCESS; };
    const auto later =
        lt::time_candidates(std::size_t(3), options, CUBLAS_STATUS_SUCCESS, all_run, fails_later);
    CHECK(later.fastest_first == std::vector<std::size_t>{1, 2});
    CHECK_FALSE(later.candidates[0].worked);
    CHECK(later.candidates[0].failed_while_timed);
    CHECK_FALSE(later.candidates[1].failed_while_timed);
    CHECK(std::isnan(later.gain()));  // the heuristic's pick failed: no gain to state
  }
  SUBCASE("nothing runs") {
    const auto none_run = [](std::size_t) { return CUBLAS_STATUS_NOT_SUPPORTED; };
    const auto never = [](std::size_t) -> double {
      FAIL("a candidate that failed its first call was timed");
      return 0.0;
    };
    const auto nothing = lt::time_candidates(std::size_t(2), options, CUBLAS_STATUS_SUCCESS, none_run, never);
    CHECK_FALSE(nothing.any_worked());
    CHECK(std::isnan(nothing.gain()));
  }
}

TEST_CASE("tuning: the median, the options' bounds, and the scratch every written output goes to") {
  CHECK(lt::median_of({4.0, 1.0, 3.0}) == 3.0);
  CHECK(lt::median_of({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(std::isnan(lt::median_of({})));

  CHECK(lt::find_tuning_options_problem(lt::tuning_options{}).empty());
  lt::tuning_options options;
  options.candidates = 0;
  CHECK(contains(lt::find_tuning_options_problem(options), "candidates is 0: it must be 1 to 64"));
  options.candidates = 65;
  CHECK(contains(lt::find_tuning_options_problem(options), "candidates is 65"));
  options = {};
  options.rounds = 0;
  CHECK(contains(lt::find_tuning_options_problem(options), "rounds is 0"));
  options = {};
  options.calls_per_timing = -1;
  CHECK(contains(lt::find_tuning_options_problem(options), "calls_per_timing is -1"));

  lt::gemm_problem p = valid_fp8();  // D: 256 x 128 bf16, ld 256
  CHECK(lt::output_storage_bytes(p) == 256u * 128u * 2u);
  lt::tuning_scratch scratch = lt::tuning_scratch_for(p);
  CHECK(scratch.d == 0);
  CHECK(scratch.bytes == 256u * 128u * 2u);  // D only: no aux, bias gradient or amax written
  CHECK_FALSE(scratch.aux_written);
  CHECK_FALSE(scratch.bias_gradient_written);
  CHECK_FALSE(scratch.amax_written);

  p.batch.count = 3;
  p.batch.stride_d = 256 * 128 + 64;
  CHECK(lt::output_storage_bytes(p) == (2u * (256u * 128u + 64u) + 256u * 128u) * 2u);

  // An FP8 output with its amax, 100 x 7: D's 700 bytes rounded up to 256-byte parts, then the amax.
  p = valid_fp8();
  p.m = 100;
  p.n = 7;
  p.d = {mutable_address(0x30000), lt::data_type::e4m3, 112, nullptr, reinterpret_cast<float*>(0x40000)};
  scratch = lt::tuning_scratch_for(p);
  CHECK(scratch.amax_written);
  CHECK(scratch.amax == 1024);  // 112 x 7 = 784 bytes of D
  CHECK(scratch.bytes == 1024 + 256);

  // gelu_aux writes its aux (aux_ld x n in the output's type); bias_gradient_b a gradient of n.
  p = valid_fp8();
  p.d.type = lt::data_type::fp32;
  p.options.epilogue_kind = lt::epilogue::gelu_aux;
  p.options.aux_ld = 264;
  scratch = lt::tuning_scratch_for(p);
  CHECK(scratch.aux_written);
  CHECK(scratch.aux == 256u * 128u * 4u);
  CHECK(scratch.bytes == 256u * 128u * 4u + 264u * 128u * 4u);
  p.options.epilogue_kind = lt::epilogue::dgelu;  // reads the aux: nothing of it in scratch
  CHECK_FALSE(lt::tuning_scratch_for(p).aux_written);
  p.options.epilogue_kind = lt::epilogue::bias_gradient_b;
  scratch = lt::tuning_scratch_for(p);
  CHECK(scratch.bias_gradient_written);
  CHECK(scratch.bias_gradient == 256u * 128u * 4u);
  CHECK(scratch.bytes == 256u * 128u * 4u + 512u);  // 128 floats, rounded up to 256-byte parts
  CHECK(scratch.bias_gradient % lt::tuning_scratch_alignment == 0);
}
