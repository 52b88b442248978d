// Lesson 02 checks: the CPU cases test the step table, the grid size and the float4 split of an
// arbitrary pointer; the "gpu" suite runs every step of the table on fresh inputs with a poisoned
// output, from unaligned pointers, on special values, and captured in a CUDA graph.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/sum_checks.hpp"
#include "lessons/02_warp_shuffle/reduce.cuh"

using lesson02::kSteps;

TEST_CASE("the step table: unique names, lesson 01's best first, one library baseline last") {
  kl::sum_checks::step_table(kSteps);
  CHECK((kSteps[0].launch.fn == lesson01::launch_block_atomic));  // reused, not copied
}

TEST_CASE("only the library is deterministic: every other step ends in float atomics") {
  for (const auto& st : kSteps) {
    CAPTURE(st.name);
    CHECK(st.launch.deterministic == st.library);
  }
}

TEST_CASE("blocks_for: fills the GPU, never more blocks than the data needs, at least one") {
  const int sms = 132;
  const std::size_t full = sms * lesson02::kBlocksPerSm;
  for (std::size_t per_thread : {1, 4, 16}) {
    const std::size_t per_block = lesson02::kBlock * per_thread;
    CAPTURE(per_thread);
    CHECK(lesson02::blocks_for(0, per_thread, sms) == 1);
    CHECK(lesson02::blocks_for(1, per_thread, sms) == 1);
    CHECK(lesson02::blocks_for(per_block, per_thread, sms) == 1);
    CHECK(lesson02::blocks_for(per_block + 1, per_thread, sms) == 2);
    CHECK(lesson02::blocks_for(10 * per_block, per_thread, sms) == 10);
    CHECK(lesson02::blocks_for(std::size_t{1} << 28, per_thread, sms) == full);
    // steps 5 and 6 fill each SM with kUnrolledBlocksPerSm blocks instead
    CHECK(lesson02::blocks_for(std::size_t{1} << 28, per_thread, sms, lesson02::kUnrolledBlocksPerSm) ==
          sms * static_cast<std::size_t>(lesson02::kUnrolledBlocksPerSm));
    CHECK(lesson02::blocks_for(10 * per_block, per_thread, sms, lesson02::kUnrolledBlocksPerSm) == 10);
  }
}

TEST_CASE("the float4 split (kl::PackSplit) of any float pointer: head + aligned float4 middle + tail") {
  alignas(16) static float buf[64];
  for (std::size_t offset = 0; offset < 4; ++offset) {
    for (std::size_t n = 0; n <= 40; ++n) {
      CAPTURE(offset);
      CAPTURE(n);
      const lesson02::Float4Split sp(buf + offset, n);
      CHECK(sp.head + 4 * sp.packs + sp.tail == n);
      CHECK(sp.head == std::min<std::size_t>(n, (4 - offset) % 4));
      CHECK(sp.tail < 4);
      const auto* vec = reinterpret_cast<const float4*>(sp.body(buf + offset));  // as the steps read it
      if (sp.packs > 0) CHECK(reinterpret_cast<std::uintptr_t>(vec) % 16 == 0);  // else never read
      CHECK(reinterpret_cast<const float*>(vec) == buf + offset + sp.head);
    }
  }
}

TEST_SUITE("gpu") {
  TEST_CASE("the reduction checks every lesson runs (common/sum_checks.hpp)") { kl::sum_checks::all(kSteps); }
}
