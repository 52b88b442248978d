// Lesson 03 checks: the CPU cases test the step table, the helpers the launchers are built from and
// the premises of the checks; the "gpu" suite runs every step, and the template with max, min, mean
// and L2 norm, on fresh inputs with a poisoned output.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/03_block_tree/block_tree.cuh"

using lesson03::kSteps;

namespace {

// Sizes from the foundation's list; KL_SANITIZE=1 (compute-sanitizer runs) keeps only small ones.
bool sanitize() { return std::getenv("KL_SANITIZE") != nullptr; }

std::vector<std::size_t> test_sizes() {
  if (sanitize()) return {1, 2, 31, 33, 1000, 4097, 70001};
  return {1, 2, 31, 32, 33, 1000, 4097, 999983, std::size_t{1} << 24, std::size_t{1} << 28};
}

// Runs one launcher on x[0, n) into a poisoned output. A scratch passed in is reused (the
// single-pass counter must survive that); otherwise a fresh one is used.
float run(kl::SumLauncher launch, const float* x, std::size_t n, int poison = 0xFF, kl::Scratch* keep = nullptr) {
  kl::DeviceBuffer<float> out(1);
  kl::Scratch fresh;
  out.poison(poison);
  launch(x, n, out.data(), keep ? *keep : fresh, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return out.download(1)[0];
}

float run_step(const kl::SumStep& st, const kl::DeviceBuffer<float>& x, std::size_t n, int poison = 0xFF) {
  return run(st.launch, x.data(), n, poison);
}

// host at `offset` floats past the start of a fresh (256-byte aligned) allocation, with NaN on both
// sides: a step that reads before or after its input turns the result into NaN.
kl::DeviceBuffer<float> padded(const std::vector<float>& host, std::size_t offset) {
  std::vector<float> v(offset, NAN);
  v.insert(v.end(), host.begin(), host.end());
  v.insert(v.end(), 4, NAN);
  return kl::DeviceBuffer<float>(v);
}

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
  const char* ladder[] = {"interleaved_divergent", "interleaved_strided", "sequential", "first_add_on_load",
                          "unrolled_last_warp",    "unrolled",            "many_per_thread", "two_pass",
                          "single_pass",           "cub"};
  REQUIRE(std::size(kSteps) == std::size(ladder));
  std::set<std::string> names;
  int library = 0;
  for (std::size_t i = 0; i < std::size(kSteps); ++i) {
    CAPTURE(i);
    CHECK(std::string(kSteps[i].name) == ladder[i]);
    CHECK(names.insert(kSteps[i].name).second);
    CHECK((kSteps[i].launch != nullptr));
    CHECK(kSteps[i].deterministic);  // no float atomics anywhere in this lesson
    library += kSteps[i].library;
  }
  CHECK(library == 1);
  CHECK(kSteps[std::size(kSteps) - 1].library);
}

TEST_CASE("Split: head + float4 body + tail cover x exactly once, and the body is 16-byte aligned") {
  alignas(16) float buf[80] = {};
  for (std::size_t offset = 0; offset < 4; ++offset) {
    for (std::size_t n = 0; n <= 40; ++n) {
      CAPTURE(offset);
      CAPTURE(n);
      const float* x = buf + offset;
      const lesson03::Split sp(x, n);
      CHECK(sp.head + 4 * sp.n4 + sp.tail == n);
      CHECK(sp.head < 4);
      CHECK(sp.tail < 4);
      if (sp.n4 > 0) CHECK(reinterpret_cast<std::uintptr_t>(sp.body(x)) % 16 == 0);
      std::vector<int> covered(n, 0);
      for (std::size_t i = 0; i < 4 * sp.n4; ++i) ++covered[sp.head + i];
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
  CHECK(pass_grids(std::size_t{1} << 28, 512, kNoLimit) == V{1 << 19, 1024, 2, 1});  // steps 4-6
  CHECK(pass_grids(std::size_t{1} << 28, 1024, 1056) == V{1056, 2, 1});                // step 7, 1056 blocks at once
  CHECK(pass_grids(0, 256, kNoLimit) == V{1});  // n = 0: one block writes 0
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

TEST_CASE("premise of the exact checks: float sums of small whole numbers are exact in any order") {
  auto v = kl::integer_floats(1 << 20, -4, 4, kl::seed_for(1));
  float forward = 0, backward = 0;
  for (float x : v) forward += x;
  for (auto it = v.rbegin(); it != v.rend(); ++it) backward += *it;
  const double exact = kl::ref_sum(v.data(), v.size()).sum;
  CHECK(forward == exact);
  CHECK(backward == exact);
}

TEST_CASE("premise of the large-magnitude case: 2^28 times 1e30 stays below FLT_MAX") {
  // All terms are positive, so no partial sum exceeds the total: no order of summation overflows.
  const double total = double{1e30f} * (std::size_t{1} << 28);
  CHECK(total == doctest::Approx(2.684e38).epsilon(1e-3));
  CHECK(total < FLT_MAX);
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
  TEST_CASE("every step sums whole numbers exactly, at every size") {
    for (std::size_t n : test_sizes()) {
      const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(n));
      const double exact = kl::ref_sum(host.data(), n).sum;
      const kl::DeviceBuffer<float> x(host);
      for (const auto& st : kSteps) {
        CAPTURE(n);
        CAPTURE(st.name);
        CHECK(run_step(st, x, n) == exact);
      }
    }
  }

  TEST_CASE("every step matches the float64 sum of real-valued data within tolerance") {
    for (std::size_t n : test_sizes()) {
      if (n > (std::size_t{1} << 24)) continue;
      for (int dist = 0; dist < 2; ++dist) {
        const auto host = dist == 0 ? kl::uniform_floats(n, -1, 1, kl::seed_for(n + 7))
                                    : kl::normal_floats(n, 3.0, 1e30, kl::seed_for(n + 8));  // huge magnitudes
        const kl::SumRef ref = kl::ref_sum(host.data(), n);
        const kl::DeviceBuffer<float> x(host);
        for (const auto& st : kSteps) {
          CAPTURE(n);
          CAPTURE(dist);
          CAPTURE(st.name);
          CHECK(kl::sum_close(run_step(st, x, n), ref, n));
        }
      }
    }
  }

  TEST_CASE("every step reads an unaligned base pointer (x + 1, 2, 3): float4 steps need a scalar head") {
    std::vector<std::size_t> sizes = {1, 2, 3, 4, 5, 7, 31, 33, 1000, 4097, 70001};
    if (!sanitize()) sizes.push_back(999983);
    for (std::size_t n : sizes) {
      const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(n + 9));
      const double exact = kl::ref_sum(host.data(), n).sum;
      for (std::size_t offset = 1; offset <= 3; ++offset) {
        const kl::DeviceBuffer<float> x = padded(host, offset);
        for (const auto& st : kSteps) {
          CAPTURE(n);
          CAPTURE(offset);
          CAPTURE(st.name);
          CHECK(run(st.launch, x.data() + offset, n) == exact);
        }
      }
    }
  }

  TEST_CASE("n = 0 sums to 0 without a launch error") {
    const kl::DeviceBuffer<float> x(1);
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      CHECK(run_step(st, x, 0) == 0.0f);
    }
  }

  TEST_CASE("special values: NaN propagates, +inf stays +inf, +inf with -inf gives NaN, at the edges too") {
    const std::size_t n = 100005;  // at x + 1: a scalar head of 3 and a tail of 2 around the float4 body
    const auto base = kl::uniform_floats(n, -1, 1, kl::seed_for(3));
    struct Case { std::size_t at_a, at_b; float a, b; } cases[] = {
        {12345, n - 1, NAN, 0.f}, {12345, n - 1, INFINITY, 1.f}, {12345, n - 1, INFINITY, -INFINITY},
        {0, 1, NAN, 0.f}, {n - 1, 0, -INFINITY, 0.f}};
    for (const auto& c : cases) {
      auto host = base;
      host[c.at_a] = c.a;
      host[c.at_b] = c.b;
      const double ref = kl::ref_sum(host.data(), n).sum;
      const kl::DeviceBuffer<float> x = padded(host, 1);
      for (const auto& st : kSteps) {
        CAPTURE(st.name);
        CAPTURE(c.a);
        CAPTURE(c.at_a);
        const float got = run(st.launch, x.data() + 1, n, 0x7F);  // finite poison: an unwritten NaN result fails
        if (std::isnan(ref)) CHECK(std::isnan(got));
        else CHECK(got == ref);
      }
    }
  }

  TEST_CASE("large magnitudes: 2^28 values of 1e30 sum to 2.68e38, finite in every step") {
    if (sanitize()) return;
    const std::size_t n = std::size_t{1} << 28;
    const std::vector<float> host(n, 1e30f);
    const kl::SumRef ref = kl::ref_sum(host.data(), n);
    const kl::DeviceBuffer<float> x(host);
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      const float got = run_step(st, x, n);
      CHECK(std::isfinite(got));
      CHECK(kl::sum_close(got, ref, n));
    }
  }

  TEST_CASE("every step is deterministic: the same bits every run, fresh scratch or reused") {
    const std::size_t n = 999983;
    const auto host = kl::uniform_floats(n, -1, 1, kl::seed_for(4));
    const kl::DeviceBuffer<float> x(host);
    for (const auto& st : kSteps) {
      REQUIRE(st.deterministic);
      CAPTURE(st.name);
      const float first = run_step(st, x, n);
      kl::Scratch scratch;
      for (int r = 0; r < 5; ++r) CHECK(run(st.launch, x.data(), n, 0xFF, &scratch) == first);
    }
  }

  TEST_CASE("single pass: the counter resets itself across many launches on one scratch, any grid size") {
    REQUIRE(std::string(kSteps[8].name) == "single_pass");
    const std::size_t sizes[] = {std::size_t{1} << 22, 1000, 999983, 1, 4097 * 1024};
    std::vector<kl::DeviceBuffer<float>> xs;
    std::vector<float> first;
    for (std::size_t n : sizes) {
      xs.emplace_back(kl::uniform_floats(n, -1, 1, kl::seed_for(n + 5)));
      first.push_back(run(kSteps[8].launch, xs.back().data(), n));
    }
    kl::Scratch scratch;  // one scratch for every launch, as in the timed repetitions
    for (int r = 0; r < (sanitize() ? 4 : 40); ++r) {
      for (std::size_t k = 0; k < std::size(sizes); ++k) {
        CAPTURE(r);
        CAPTURE(sizes[k]);
        CHECK(run(kSteps[8].launch, xs[k].data(), sizes[k], 0xFF, &scratch) == first[k]);
      }
    }
  }

  TEST_CASE("every launcher can be captured in a CUDA graph and replayed") {
    const std::size_t n = 999983;
    const auto host = kl::integer_floats(n, -4, 4, kl::seed_for(6));
    const double exact = kl::ref_sum(host.data(), n).sum;
    const kl::DeviceBuffer<float> x(host);
    kl::DeviceBuffer<float> out(1);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      kl::Scratch scratch;
      st.launch(x.data(), n, out.data(), scratch, s);  // the first run allocates, outside the capture
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      st.launch(x.data(), n, out.data(), scratch, s);
      CUDA_CHECK(cudaStreamEndCapture(s, &graph));
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int r = 0; r < 3; ++r) {
        out.poison();
        CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        CHECK(out.download(1)[0] == exact);
      }
      CUDA_CHECK(cudaGraphExecDestroy(exec));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaStreamDestroy(s));
  }

  TEST_CASE("the same template computes max, min, L2 norm and mean, at every size and offset") {
    for (std::size_t n : test_sizes()) {
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
