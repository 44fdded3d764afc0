// Scale layouts: the sizes and positions cuBLASLt's scale modes and Transformer Engine's GEMM-ready
// tensors use (1x128: ceil(K/128) x round_up(M, 4), M fastest; 128x128: ceil(M/128) x
// round_up(ceil(K/128), 4), row-major), and that every element maps to exactly one in-range scale.
#include <doctest/doctest.h>

#include <fp8/scaling.hpp>

#include <set>
#include <vector>

using fp8::granularity;

TEST_CASE("scale counts") {
  CHECK(fp8::scale_count(granularity::per_tensor, 1000, 1000) == 1);
  CHECK(fp8::scale_count(granularity::per_row, 1000, 7) == 1000);
  CHECK(fp8::scale_count(granularity::tile_1x128, 3, 300) == 3 * 4);  // 3 tiles, ld round_up(3, 4)
  CHECK(fp8::scale_count(granularity::tile_1x128, 512, 1024) == 8 * 512);
  CHECK(fp8::scale_count(granularity::block_128x128, 512, 1024) == 4 * 8);
  CHECK(fp8::scale_count(granularity::block_128x128, 300, 200) == 3 * 4);  // 3 x 2 blocks, ld 4
  CHECK(fp8::scale_count(granularity::mx_1x32, 5, 65) == 5 * 3);
}

TEST_CASE("positions: 1x128 is outer-dimension major, 128x128 row-major with 16-byte rows") {
  const fp8::scale_layout tiles = fp8::make_scale_layout(granularity::tile_1x128, 3, 300);
  CHECK(tiles.index(2, 1) == 6);
  CHECK(tiles.index_of_element(2, 130) == 6);
  CHECK(tiles.leading == 4);
  const fp8::scale_layout blocks = fp8::make_scale_layout(granularity::block_128x128, 300, 200);
  CHECK(blocks.index(2, 1) == 9);
  CHECK(blocks.index_of_element(299, 199) == 9);
  const fp8::scale_layout mx = fp8::make_scale_layout(granularity::mx_1x32, 5, 65);
  CHECK(mx.index_of_element(4, 64) == 14);
  CHECK(fp8::make_scale_layout(granularity::per_row, 9, 9).index_of_element(8, 3) == 8);
}

TEST_CASE("every block has its own in-range slot; padding slots belong to no block") {
  for (const granularity g : {granularity::per_tensor, granularity::per_row, granularity::tile_1x128,
                              granularity::block_128x128, granularity::mx_1x32}) {
    for (const auto& [rows, cols] :
         {std::pair<std::size_t, std::size_t>{1, 1}, {5, 129}, {130, 257}, {256, 256}}) {
      const fp8::scale_layout layout = fp8::make_scale_layout(g, rows, cols);
      std::set<std::size_t> used;
      for (std::size_t i = 0; i < layout.grid_rows; ++i) {
        for (std::size_t j = 0; j < layout.grid_cols; ++j) {
          CHECK(layout.index(i, j) < layout.count);
          CHECK(used.insert(layout.index(i, j)).second);
        }
      }
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
          REQUIRE(used.count(layout.index_of_element(r, c)) == 1);
          // The element's block by the layout's own block sizes (index_of_element uses constants).
          REQUIRE(layout.index_of_element(r, c) ==
                  layout.index(r / layout.block_rows, c / layout.block_cols));
        }
      }
      const std::size_t padding = layout.count - used.size();
      CAPTURE(fp8::granularity_name(g));
      CHECK(padding < fp8::scale_alignment * (layout.grid_rows + layout.grid_cols));
    }
  }
}
