// Lesson 03 checks: the CPU cases test the step table, the helpers the launchers are built from and
// the premises of the checks; the "gpu" suite runs every step, and the template with max, min, mean
// and L2 norm, on fresh inputs with a poisoned output.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "common/sum_checks.hpp"
#include "lessons/03_block_tree/block_tree.cuh"

using lesson03::kSteps;

namespace {

using kl::sanitizing;
using kl::sum_checks::padded;
using kl::sum_checks::run;
using kl::sum_checks::sizes;

double ref_min(const std::vector<float>& v) {
  std::vector<float> neg(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) neg[i] = -v[i];
  return -kl::ref_max(neg.data(), neg.size());
}

// The template's four operations, one launcher family (two_pass or single_pass) at a time.
struct Family {
  const char* name;
  kl::SumLauncher max, min, l2, mean;
};
const Family kFamilies[] = {
    {"two_pass", lesson03::launch_two_pass<kl::MaxOp, lesson03::Identity>,
     lesson03::launch_two_pass<kl::MinOp, lesson03::Identity>,
     lesson03::launch_two_pass<kl::SumOp, lesson03::SquareThenSqrt>,
     lesson03::launch_two_pass<kl::SumOp, lesson03::DivideByCount>},
    {"single_pass", lesson03::launch_single_pass<kl::MaxOp, lesson03::Identity>,
     lesson03::launch_single_pass<kl::MinOp, lesson03::Identity>,
     lesson03::launch_single_pass<kl::SumOp, lesson03::SquareThenSqrt>,
     lesson03::launch_single_pass<kl::SumOp, lesson03::DivideByCount>},
};

// max, min, L2 norm and mean of host (uploaded at an offset of `offset` floats) against the references.
void check_operations(const Family& f, const std::vector<float>& host, std::size_t offset) {
  const kl::DeviceBuffer<float> x = padded(host, offset);
  const std::size_t n = host.size();
  CAPTURE(f.name);
  CAPTURE(n);
  CAPTURE(offset);
  for (const lesson03::OpCase& c : lesson03::op_cases(host, f.max, f.l2, f.mean)) {
    CAPTURE(c.name);
    const float got = run(c.launch, x.data() + offset, n, 0x7F);  // finite poison: NaN results must be written
    CHECK(lesson03::op_close(got, c.ref, c.tol));
  }
  const float got_min = run(f.min, x.data() + offset, n, 0x7F);
  CHECK(lesson03::op_close(got_min, ref_min(host), 0.0));
}

}  // namespace

TEST_CASE("the step table: the ladder's names in climbing order, deterministic, one library baseline last") {
  const char* ladder[] = {"interleaved_divergent",
                          "interleaved_strided",
                          "sequential",
                          "first_add_on_load",
                          "unrolled_last_warp",
                          "unrolled",
                          "many_per_thread",
                          "two_pass",
                          "single_pass",
                          "cub"};
  kl::sum_checks::step_table(kSteps);
  REQUIRE(std::size(kSteps) == std::size(ladder));
  for (std::size_t i = 0; i < std::size(kSteps); ++i) {
    CAPTURE(i);
    CHECK(std::string(kSteps[i].name) == ladder[i]);
    CHECK(kSteps[i].launch.deterministic);  // no float atomics anywhere in this lesson
  }
}

TEST_CASE("the float4 split (kl::PackSplit): head + body + tail cover x exactly once, the body 16-byte aligned") {
  alignas(16) float buf[80] = {};
  for (std::size_t offset = 0; offset < 4; ++offset) {
    for (std::size_t n = 0; n <= 40; ++n) {
      CAPTURE(offset);
      CAPTURE(n);
      const float* x = buf + offset;
      const lesson03::Float4Split sp(x, n);
      CHECK(sp.head + 4 * sp.packs + sp.tail == n);
      CHECK(sp.head < 4);
      CHECK(sp.tail < 4);
      const auto* body = reinterpret_cast<const float4*>(sp.body(x));  // as the steps read it
      if (sp.packs > 0) CHECK(reinterpret_cast<std::uintptr_t>(body) % 16 == 0);
      CHECK(reinterpret_cast<const float*>(body) == x + sp.head);
      std::vector<int> covered(n, 0);
      for (std::size_t i = 0; i < 4 * sp.packs; ++i) ++covered[sp.head + i];
      for (std::size_t i = 0; i < sp.head + sp.tail; ++i) ++covered[sp.edge(i)];
      for (std::size_t i = 0; i < n; ++i) CHECK(covered[i] == 1);
    }
  }
}

TEST_CASE("pass_grids: steps 1-7 repeat the kernel on the partials until one block is left") {
  using lesson03::kNoLimit;
  using lesson03::pass_grids;
  using V = std::vector<std::size_t>;
  CHECK(pass_grids(std::size_t{1} << 28, 256, kNoLimit) == V{1 << 20, 4096, 16, 1});  // steps 1-3
  CHECK(pass_grids(std::size_t{1} << 28, 512, kNoLimit) == V{1 << 19, 1024, 2, 1});   // steps 4-6
  CHECK(pass_grids(std::size_t{1} << 28, 1024, 1056) == V{1056, 2, 1});               // step 7, 1056 blocks at once
  CHECK(pass_grids(0, 256, kNoLimit) == V{1});                                        // n = 0: one block writes 0
  CHECK(pass_grids(256, 256, kNoLimit) == V{1});
  CHECK(pass_grids(257, 256, kNoLimit) == V{2, 1});
}

TEST_CASE("the template's pre and post: identity, square then sqrt, divide by n") {
  using namespace lesson03;
  CHECK(Identity::pre(-3.f) == -3.f);
  CHECK(Identity::post(7.f, 10) == 7.f);
  CHECK(SquareThenSqrt::pre(-3.f) == 9.f);
  CHECK(SquareThenSqrt::post(25.f, 10) == 5.f);
  CHECK(DivideByCount::post(10.f, 4) == 2.5f);
  CHECK(std::isnan(DivideByCount::post(0.f, 0)));  // the mean of nothing, as kl::ref_mean says
}

TEST_CASE("premise of the operation checks: a float computation passes op_close, a wrong one fails") {
  const std::size_t n = 4097;
  auto v = kl::uniform_floats(n, -1, 1, kl::seed_for(2));
  std::size_t big = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::fabs(v[i]) > std::fabs(v[big])) big = i;
  float sum = 0, squares = 0, vmax = -INFINITY;
  for (float x : v) {
    sum += x;
    squares += x * x;
    vmax = std::max(vmax, x);
  }
  const auto cases = lesson03::op_cases(v, nullptr, nullptr, nullptr);
  const float good[] = {vmax, std::sqrt(squares), sum / n};
  const float wrong[] = {std::nextafter(vmax, 0.f),  // max must be exact: one ulp off fails
                         std::sqrt(squares - v[big] * v[big]), (sum - v[big]) / n};
  for (int i = 0; i < 3; ++i) {
    CAPTURE(cases[i].name);
    CHECK(lesson03::op_close(good[i], cases[i].ref, cases[i].tol));
    CHECK_FALSE(lesson03::op_close(wrong[i], cases[i].ref, cases[i].tol));
  }
}

TEST_SUITE("gpu") {
  TEST_CASE("the reduction checks every lesson runs (common/sum_checks.hpp)") { kl::sum_checks::all(kSteps); }

  TEST_CASE("single pass: the counter resets itself across many launches on one scratch, any grid size") {
    REQUIRE(std::string(kSteps[8].name) == "single_pass");
    const std::size_t sizes[] = {std::size_t{1} << 22, 1000, 999983, 1, 4097 * 1024};
    std::vector<kl::DeviceBuffer<float>> xs;
    std::vector<float> first;
    for (std::size_t n : sizes) {
      xs.emplace_back(kl::uniform_floats(n, -1, 1, kl::seed_for(n + 5)));
      first.push_back(run(kSteps[8].launch.fn, xs.back().data(), n));
    }
    kl::Scratch scratch;  // one scratch for every launch, as in the timed repetitions
    for (int r = 0; r < (sanitizing() ? 4 : 40); ++r) {
      for (std::size_t k = 0; k < std::size(sizes); ++k) {
        CAPTURE(r);
        CAPTURE(sizes[k]);
        CHECK(run(kSteps[8].launch.fn, xs[k].data(), sizes[k], 0xFF, &scratch) == first[k]);
      }
    }
  }

  TEST_CASE("the same template computes max, min, L2 norm and mean, at every size and offset") {
    for (std::size_t n : sizes()) {
      if (n > (std::size_t{1} << 24)) continue;
      const auto host = kl::uniform_floats(n, -1, 1, kl::seed_for(n + 10));
      for (const Family& f : kFamilies)
        for (int offset : {0, 1, 3}) check_operations(f, host, offset);
    }
  }

  TEST_CASE("the template's operations with NaN, infinities and n = 0") {
    const std::size_t n = 70001;
    const auto base = kl::uniform_floats(n, -1, 1, kl::seed_for(11));
    for (const Family& f : kFamilies) {
      for (float special : {NAN, INFINITY, -INFINITY}) {
        for (std::size_t at : {std::size_t{0}, std::size_t{777}, n - 1}) {
          CAPTURE(special);
          CAPTURE(at);
          auto host = base;
          host[at] = special;
          check_operations(f, host, 1);
        }
      }
      check_operations(f, {}, 0);  // max -inf, min +inf, L2 norm 0, mean NaN
    }
  }
}
