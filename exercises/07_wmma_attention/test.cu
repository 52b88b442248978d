// Grades exercises 07.1 and 07.2, built twice: exercise07_test grades the files of
// exercises/07_wmma_attention (or a student's copy), solution07_test the solutions and the wrong
// techniques kept beside them, which must fail. Both are checked on fresh f16 inputs, output
// poisoned, against the float64 reference of every row.
//   07.1 (step 2's tile kernel with the graded softmax): 1 ... 4097 tiles, scores scaled by 1e3 (the
//   row max must be subtracted), equal scores; timed on 2^18 tiles (Q, K, V: 384 MiB, well above any
//   L2 cache: the kernel is bound by memory and latency).
//   07.2 (step 5's flash kernel with the graded rescale): S = 1 ... 1000, tails that are not a
//   multiple of the 64-key tiles, causal and not, D = 64 and 128 (where the GPU has the shared
//   memory), scores scaled by 1e3, and scores that grow along the keys (the max moves on every tile);
//   rescale_row alone is checked on the CPU first. Timed at B x H x S x D = 4 x 8 x 2048 x 64 (8 MiB
//   a tensor: attention is bound by its multiply-adds, not by memory, so the L2 cache does not matter).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.cuh"
#include "common/device.cuh"
#include "common/grade.cuh"
#include "common/random.hpp"
#include "lessons/07_wmma_attention/attention.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <online_rescale.cuh>
#include <softmax_two_rows.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/07_wmma_attention/online_rescale.cuh"
#include "solutions/07_wmma_attention/softmax_two_rows.cuh"
}  // namespace solution
#endif
namespace half_warp {
#include "solutions/07_wmma_attention/wrong/half_warp.cuh"
}
namespace sum_only {
#include "solutions/07_wmma_attention/wrong/sum_only.cuh"
}
namespace inverse_factor {
#include "solutions/07_wmma_attention/wrong/inverse_factor.cuh"
}

namespace {

using lesson07::Problem;
using Launch = void (*)(const Problem&, cudaStream_t);
using TileKernel = void (*)(Problem);

// One check's inputs (already rounded to f16, so the reference sees what the GPU reads), what it is
// called in a failure, and the float64 reference of every row.
struct Case {
  std::string name;
  Problem p;
  lesson07::HostQkv in;
  std::vector<double> ref;
};

// Q, K and V uniform in [-sqrt 3, sqrt 3) (variance 1), as the lesson's tests draw them.
Case random_case(std::string name, Problem p, std::uint64_t seed) {
  return Case{std::move(name), p, lesson07::test_inputs(p, seed)};
}

Case with_reference(Case c) {
  c.ref = lesson07::reference(c.in.q, c.in.k, c.in.v, c.p);
  return c;
}

// The first row of the output off the reference by more than the tolerance, described ("" when every
// row is right): a row of the tile part is (tile, row), of the flash part (head of B·H, query).
kl::grade::Failure first_wrong_row(const Case& c, const std::vector<__half>& o) {
  const int d = c.p.dim;
  for (std::int64_t row = 0; row < c.p.rows(); ++row) {
    const double worst = lesson07::row_error(o, row, c.ref, static_cast<std::size_t>(row), d);
    if (worst > lesson07::kRel)
      return c.name + (c.p.dim == lesson07::kT ? ", tile " : ", head ") + std::to_string(row / c.p.seq) + " row " +
             std::to_string(row % c.p.seq) + ": error " + kl::grade::num(worst) + " (relative to |expected| + " +
             kl::grade::num(lesson07::kFloor) + "), expected <= " + kl::grade::num(lesson07::kRel);
  }
  return {};
}

// Runs `launch` on one case with the output poisoned (NaN) and checks every row.
kl::grade::Failure run_case(Launch launch, const Case& c) {
  lesson07::DeviceQkvo d(c.in);
  d.o.poison();
  launch(d.on(c.p), nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return first_wrong_row(c, d.o.download());
}

// Times `mine` against the solution on p, its Q, K, V drawn on the GPU from the seeds of `salt`
// (DeviceQkvo::fill), then checks its O there against the solution's.
kl::grade::Speed race(Problem p, std::uint64_t salt, Launch mine, Launch solution) {
  if (kl::grade::sanitized()) return {};
  lesson07::DeviceQkvo d(p);
  d.fill(salt);
  p = d.on(p);
  const auto with = [&](Launch l) { return [&, l](cudaStream_t s) { l(p, s); }; };
  return kl::grade::race(with(mine), with(solution), [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(with(mine), with(solution), d.o, 2e-2, 2e-3);
    return f.empty() ? f : "O's " + f;
  });
}

kl::grade::Failure run_cases(Launch launch, const std::vector<Case>& cases) {
  for (const Case& c : cases)
    if (auto f = run_case(launch, c); !f.empty()) return f;
  return {};
}

// ---- 07.1: step 2's tile kernel ------------------------------------------------------------------

// Launched as step 2 is: one warp per tile.
template <TileKernel K>
void launch_tiles(const Problem& p, cudaStream_t s) {
  K<<<static_cast<unsigned>(p.batch), 32, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

std::string tiles_text(std::int64_t b) { return "B = " + std::to_string(b) + (b == 1 ? " tile" : " tiles"); }

// The cases and their references are built once and shared by the exercise, the solution and the
// wrong variants.
const std::vector<Case>& tile_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> cs;
    const bool small = kl::grade::sanitized();
    for (std::int64_t b : small ? std::vector<std::int64_t>{1, 3, 17} : std::vector<std::int64_t>{1, 33, 1000, 4097})
      cs.push_back(with_reference(random_case(tiles_text(b), lesson07::tile_problem(b), kl::seed_for(7100 + b))));
    Problem big = lesson07::tile_problem(small ? 9 : 100);
    big.scale *= 1000.f;  // e^(scores) overflows unless the row max is subtracted first
    cs.push_back(
        with_reference(random_case(tiles_text(big.batch) + ", scores scaled by 1e3", big, kl::seed_for(7101))));
    Case ties = random_case(tiles_text(7) + ", Q = 0 (all 16 scores of a row equal)", lesson07::tile_problem(7),
                            kl::seed_for(7102));
    std::fill(ties.in.q.begin(), ties.in.q.end(), 0.f);
    cs.push_back(with_reference(std::move(ties)));
    return cs;
  }();
  return cases;
}

template <TileKernel K>
kl::grade::Failure check_tiles() {
  return run_cases(launch_tiles<K>, tile_cases());
}

// Times `mine` against the solution on 2^18 tiles, then checks its O there against the solution's.
kl::grade::Speed race_tiles(Launch mine, Launch solution) {
  return race(lesson07::tile_problem(std::int64_t{1} << 18), 7110, mine, solution);
}

// ---- 07.2: step 5's flash kernel -----------------------------------------------------------------

// Launched as step 5 is: a block of 4 warps per 64 queries, its shared memory allowed on first use.
template <auto K64, auto K128>
void launch_flash(const Problem& p, cudaStream_t s) {
  if (p.dim == 64) lesson07::launch_with_smem<K64>(lesson07::flash_wmma_smem<64>(), lesson07::kFlashWarps, p, s);
  else lesson07::launch_with_smem<K128>(lesson07::flash_wmma_smem<128>(), lesson07::kFlashWarps, p, s);
}

std::string flash_text(const Problem& p) {
  return "B x H x S x D = " + std::to_string(p.batch) + " x " + std::to_string(p.heads) + " x " +
         std::to_string(p.seq) + " x " + std::to_string(p.dim) + (p.causal ? ", causal" : ", not causal");
}

// Scores that grow along the keys: Q all ones, K's row j all j / S, so the score of key j is
// sqrt(D) · j / S and every tile raises every row's max (the last key weighs the most).
Case growing_case(Problem p, std::uint64_t seed) {
  Case c = random_case(flash_text(p) + ", scores growing along the keys", p, seed);
  std::fill(c.in.q.begin(), c.in.q.end(), 1.f);
  for (std::int64_t row = 0; row < p.rows(); ++row)
    for (int j = 0; j < p.dim; ++j) c.in.k[row * p.dim + j] = static_cast<float>(row % p.seq) / p.seq;
  c.in.k = lesson07::f16_rounded(std::move(c.in.k));
  return c;
}

const std::vector<Case>& flash_cases() {
  static const std::vector<Case> cases = [] {
    const bool small = kl::grade::sanitized();
    std::vector<int> dims = {64};  // D = 128 needs 88 KiB of shared memory per block (sm_75 has 64)
    if (kl::device_info().smem_per_block_optin >= lesson07::flash_wmma_smem<128>()) dims.push_back(128);
    std::vector<Case> cs;
    for (bool causal : {false, true}) {
      for (int d : dims) {
        std::vector<Problem> shapes = {
            lesson07::flash_problem(1, 1, 1, d, causal), lesson07::flash_problem(1, 2, 17, d, causal),
            lesson07::flash_problem(2, 1, 64, d, causal), lesson07::flash_problem(1, 3, 129, d, causal)};
        if (!small) {
          shapes.push_back(lesson07::flash_problem(2, 2, 100, d, causal));
          shapes.push_back(lesson07::flash_problem(1, 2, 1000, d, causal));
        }
        for (const Problem& p : shapes)
          cs.push_back(with_reference(random_case(flash_text(p), p, kl::seed_for(7200 + p.seq + d + causal))));
      }
    }
    for (bool causal : {false, true}) {
      for (int d : dims) {
        Problem p = lesson07::flash_problem(1, 2, small ? 70 : 333, d, causal);
        p.scale *= 1000.f;  // e^(scores) overflows unless the max is subtracted; a stale max is far off
        cs.push_back(with_reference(random_case(flash_text(p) + ", scores scaled by 1e3", p, kl::seed_for(7210 + d))));
      }
      cs.push_back(with_reference(
          growing_case(lesson07::flash_problem(1, 1, small ? 130 : 300, 64, causal), kl::seed_for(7220 + causal))));
    }
    return cs;
  }();
  return cases;
}

template <auto K64, auto K128>
kl::grade::Failure check_flash() {
  return run_cases(launch_flash<K64, K128>, flash_cases());
}

// Times `mine` against the solution at B x H x S x D = 4 x 8 x 2048 x 64, not causal, then checks its O
// there against the solution's.
kl::grade::Speed race_flash(Launch mine, Launch solution) {
  return race(lesson07::flash_problem(4, 8, 2048, 64, false), 7230, mine, solution);
}

}  // namespace

// The rescale alone, on the host: cases whose answers are known.
TEST_CASE("exercise 07.2 [cpu]: rescale_row multiplies the sum and the output by e^(m_old - m_new)") {
  {
    INFO("the max grows from 1 to 3: l = 2 and o = {1, -2, 4, 0} must be multiplied by e^(1 - 3)");
    const double a = std::exp(-2.0);
    float l = 2.f, o[4] = {1.f, -2.f, 4.f, 0.f};
    graded::rescale_row(l, o, 1.f, 3.f);
    CHECK(l == doctest::Approx(2 * a).epsilon(1e-5));
    CHECK(o[0] == doctest::Approx(a).epsilon(1e-5));
    CHECK(o[1] == doctest::Approx(-2 * a).epsilon(1e-5));
    CHECK(o[2] == doctest::Approx(4 * a).epsilon(1e-5));
    CHECK(o[3] == 0.f);
  }
  {
    INFO("the max stays 7: l = 3 and o = {0.5, -1.5} must not change");
    float l = 3.f, o[2] = {0.5f, -1.5f};
    graded::rescale_row(l, o, 7.f, 7.f);
    CHECK(l == doctest::Approx(3.0).epsilon(1e-6));
    CHECK(o[0] == doctest::Approx(0.5).epsilon(1e-6));
    CHECK(o[1] == doctest::Approx(-1.5).epsilon(1e-6));
  }
  {
    INFO("the first tile, m_old = -inf: l = 0 and o = {0, 0} must stay 0 (not NaN)");
    float l = 0.f, o[2] = {0.f, 0.f};
    graded::rescale_row(l, o, -INFINITY, 0.5f);
    CHECK(l == 0.f);
    CHECK(o[0] == 0.f);
    CHECK(o[1] == 0.f);
  }
  {
    INFO("the max jumps from -1000 to 1000: l = 5 and o = {5} must become 0");
    float l = 5.f, o[1] = {5.f};
    graded::rescale_row(l, o, -1000.f, 1000.f);
    CHECK(l == 0.f);
    CHECK(o[0] == 0.f);
  }
}

TEST_SUITE("gpu") {
  TEST_CASE("exercise 07.1: the softmax micro-kernel on all 32 lanes, two rows a pass") {
    kl::grade::verdict("07.1", check_tiles<graded::tile_all_lanes>(),
                       race_tiles(launch_tiles<graded::tile_all_lanes>, launch_tiles<solution::tile_all_lanes>));
  }

  TEST_CASE("exercise 07.2: the online-softmax rescale of the flash loop") {
    kl::grade::verdict("07.2", check_flash<graded::flash_wmma<64>, graded::flash_wmma<128>>(),
                       race_flash(launch_flash<graded::flash_wmma<64>, graded::flash_wmma<128>>,
                                  launch_flash<solution::flash_wmma<64>, solution::flash_wmma<128>>));
  }

  TEST_CASE("wrong 07.1: one row per pass on half the warp (step 1) is too slow") {
    kl::grade::wrong_variant(
        "07.1", "half_warp", kl::grade::Fails::speed, check_tiles<half_warp::tile_all_lanes>(),
        race_tiles(launch_tiles<half_warp::tile_all_lanes>, launch_tiles<solution::tile_all_lanes>));
  }

  TEST_CASE("wrong 07.2: rescaling the sum but not the output is wrong once the max grows") {
    kl::grade::wrong_variant("07.2", "sum_only", kl::grade::Fails::check,
                             check_flash<sum_only::flash_wmma<64>, sum_only::flash_wmma<128>>(),
                             race_flash(launch_flash<sum_only::flash_wmma<64>, sum_only::flash_wmma<128>>,
                                        launch_flash<solution::flash_wmma<64>, solution::flash_wmma<128>>));
  }

  TEST_CASE("wrong 07.2: rescaling by e^(m_new - m_old) is wrong") {
    kl::grade::wrong_variant("07.2", "inverse_factor", kl::grade::Fails::check,
                             check_flash<inverse_factor::flash_wmma<64>, inverse_factor::flash_wmma<128>>(),
                             race_flash(launch_flash<inverse_factor::flash_wmma<64>, inverse_factor::flash_wmma<128>>,
                                        launch_flash<solution::flash_wmma<64>, solution::flash_wmma<128>>));
  }
}
