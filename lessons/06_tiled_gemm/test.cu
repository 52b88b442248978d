// Lesson 06 checks. CPU cases: the step table, the float64 reference and its error metric (which
// must catch a dropped product), the tolerance, argument validation, the dispatcher's plans and
// split-K slices, the activations, the shapes and options the executable accepts, the sweep. The
// "gpu" suite runs every step on fresh inputs over many shapes (tails in M, N and K, tiny to 4097^3,
// skinny), every epilogue on each of the dispatcher's three paths, alpha = 0, C = nullptr, C aliasing
// D, leading dimensions larger than the width and unaligned pointers, a NaN in A reaching exactly its
// row of D, and M, N or K = 0; outputs poisoned before each run. A step that cannot run here (steps 6-7
// below sm_80, or compiled out of this build) is skipped with its reason; the public API, which then
// falls back to step 5, is checked with the steps.
#include <doctest/doctest.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/timing.cuh"
#include "lessons/06_tiled_gemm/gemm.cuh"
#include "lessons/06_tiled_gemm/problem.cuh"

using lesson06::Act;
using lesson06::Bias;
using lesson06::GemmStep;
using lesson06::kSteps;
using lesson06::Path;
using lesson06::Problem;

namespace {

constexpr int kH100Sms = 132;
const double kEps = 1.1920928955078125e-07;

using kl::sanitizing;

// One check: the shape, the epilogue and how the operands are laid out.
struct Case {
  int m, n, k;
  float alpha = 1.f, beta = 0.f;
  Bias bias = Bias::none;
  Act act = Act::none;
  int pad_a = 0, pad_b = 0, pad_d = 0;  // leading dimension - width
  int offset = 0;                       // floats added to every pointer (0: 16-byte aligned)
  bool in_place = false;                // C is D (beta != 0)
};

std::string describe(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " alpha " +
         std::to_string(c.alpha) + " beta " + std::to_string(c.beta) + " bias " + lesson06::bias_name(c.bias) + " " +
         lesson06::act_name(c.act) + " pads " + std::to_string(c.pad_a) + "/" + std::to_string(c.pad_b) + "/" +
         std::to_string(c.pad_d) + " offset " + std::to_string(c.offset) + (c.in_place ? " in place" : "");
}

// One case's operands: host A, B, C and bias (C and bias empty when unused) and their device copies,
// shifted by c.offset floats, with D's buffer; p describes them.
struct Operands {
  std::vector<float> a, b;
  lesson06::HostInputs host;
  kl::DeviceBuffer<float> da, db, dc, dbias, dd;
  Problem p;
};

void make_operands(Operands& o, const Case& c, std::uint64_t salt) {
  const int lda = c.k + c.pad_a, ldb = c.n + c.pad_b, ldd = c.n + c.pad_d;
  const std::uint64_t seed = kl::seed_for(salt + std::uint64_t(c.m) * 1000003 + c.n * 1009 + c.k);
  o.a = kl::normal_floats(std::size_t(c.m) * lda, 0, 1, seed);
  o.b = kl::normal_floats(std::size_t(c.k) * ldb, 0, 1, seed + 1);
  if (c.beta != 0.f) o.host.c = kl::normal_floats(std::size_t(c.m) * ldd, 0, 1, seed + 2);
  const std::size_t nbias = c.bias == Bias::m ? c.m : c.bias == Bias::n ? c.n : std::size_t(c.m) * c.n;
  if (c.bias != Bias::none) o.host.bias = kl::normal_floats(nbias, 0, 1, seed + 3);
  const auto shifted = [&](const std::vector<float>& v) {
    std::vector<float> s(v.size() + c.offset, 0.f);
    std::copy(v.begin(), v.end(), s.begin() + c.offset);
    return s;
  };
  o.da.upload(shifted(o.a));
  o.db.upload(shifted(o.b));
  o.dc.upload(shifted(o.host.c.empty() ? std::vector<float>{0.f} : o.host.c));
  o.dbias.upload(shifted(o.host.bias.empty() ? std::vector<float>{0.f} : o.host.bias));
  o.dd.resize(std::size_t(c.m) * ldd + c.offset);
  o.p = Problem{o.da.data() + c.offset,
                o.db.data() + c.offset,
                nullptr,
                o.dd.data() + c.offset,
                nullptr,
                c.m,
                c.n,
                c.k,
                lda,
                ldb,
                ldd,
                ldd};
  o.p.alpha = c.alpha;
  o.p.beta = c.beta;
  o.p.bias_kind = c.bias;
  o.p.act = c.act;
  o.p.slope = 0.05f;
  if (c.beta != 0.f) o.p.c = c.in_place ? o.p.d : o.dc.data() + c.offset;
  if (c.bias != Bias::none) o.p.bias = o.dbias.data() + c.offset;
}

// The public API as a step: what the dispatcher runs, step 5's kernel where steps 6-7 cannot run.
const GemmStep kApi{"gemm()", "the public API", {lesson06::gemm, true}};

// Runs step st; false, with its reason as a message, where it is n/a here (steps 6-7 below sm_80, or
// compiled out of this build): skipped, neither failed nor passed.
bool run_or_skip(const GemmStep& st, const Problem& p, lesson06::Workspace& ws) {
  try {
    lesson06::run_step(st, p, ws, nullptr);
  } catch (const kl::NotSupported& e) {
    MESSAGE("step " << st.name << " n/a: " << e.what());
    return false;
  }
  return true;
}

// Runs the steps `which` selects (and the public API, with `api`) on fresh inputs for one case and
// checks each: its error against the float64 reference (the full epilogue or the GEMM part, as the
// step computes), and D's padding columns untouched.
template <class Which>
void check_case(const Case& c, Which&& which, std::uint64_t salt = 0, bool api = false) {
  CAPTURE(describe(c));
  Operands o;
  make_operands(o, c, salt);
  const Problem& p = o.p;
  lesson06::Workspace ws;
  const lesson06::Reference ref = lesson06::reference(o.a.data(), p.lda, o.b.data(), p.ldb, c.m, c.n, c.k, ws);
  std::vector<const GemmStep*> steps;
  for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i)
    if (which(i)) steps.push_back(&kSteps[i]);
  if (api) steps.push_back(&kApi);
  for (const GemmStep* step : steps) {
    const GemmStep& st = *step;
    CAPTURE(st.name);
    o.dd.poison();
    if (c.in_place)
      CUDA_CHECK(cudaMemcpy(p.d, o.host.c.data(), o.host.c.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (!run_or_skip(st, p, ws)) continue;
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = o.dd.download();
    const std::vector<float> d(got.begin() + c.offset, got.end());
    const Problem checked = st.launch.epilogue ? p : lesson06::plain(p);
    CHECK(lesson06::max_error(d, checked, ref, o.host) <= lesson06::tolerance(c.k));
    if (c.pad_d > 0 && !c.in_place) {
      bool pad_untouched = true;
      for (int r = 0; r < c.m; ++r)
        for (int j = c.n; j < p.ldd; ++j) pad_untouched &= std::isnan(d[std::size_t(r) * p.ldd + j]);
      CHECK(pad_untouched);
    }
  }
}

bool all_steps(int) { return true; }
bool epilogue_steps(int i) { return kSteps[i].launch.epilogue; }

std::vector<Case> test_shapes() {
  if (sanitizing()) return {{1, 1, 1}, {3, 5, 7}, {31, 33, 17}, {128, 128, 8}, {129, 127, 300}, {200, 64, 1100}};
  return {{1, 1, 1},         {1, 7, 3},          {5, 1, 9},          {31, 33, 17},       {64, 64, 64},
          {100, 1, 300},     {127, 129, 65},     {128, 128, 8},      {257, 255, 1000},   {513, 1025, 33},
          {1000, 3000, 777}, {1024, 1024, 1024}, {2048, 2048, 2048}, {4097, 4097, 4097}, {8192, 64, 8192}};
}

}  // namespace

TEST_CASE("the step table: unique names, steps 1-7 then two library rows; only 7 and cublas+epilogue fuse") {
  std::set<std::string> names;
  for (const auto& st : kSteps) {
    CHECK(names.insert(st.name).second);
    CHECK((st.launch.run != nullptr));
    CHECK(st.part == nullptr);
  }
  REQUIRE(std::size(kSteps) == 9);
  for (int i = 0; i < 7; ++i) CHECK_FALSE(kSteps[i].library);
  CHECK(kSteps[7].library);
  CHECK(kSteps[8].library);
  CHECK(std::string(kSteps[lesson06::kFusedStep - 1].name) == "fused_epilogue");
  for (int i = 0; i < 9; ++i) CHECK(kSteps[i].launch.epilogue == (i == 6 || i == 8));
  for (int i = 0; i < 9; ++i) CHECK(kSteps[i].needs_sm == (i == 5 || i == 6 ? 80 : 0));  // cp.async
  CHECK(kl::step_label(kSteps, 0) == "1");
  CHECK(kl::step_label(kSteps, 6) == "7");
  CHECK(kl::step_label(kSteps, 8) == "lib");
}

TEST_CASE("reference: A B and |A||B| in float64, with leading dimensions") {
  // A = [[1, -2, 3], [4, 5, -6]] (lda 4), B = [[1, 2], [3, -4], [-5, 6]] (ldb 3)
  const std::vector<float> a = {1, -2, 3, 99, 4, 5, -6, 99};
  const std::vector<float> b = {1, 2, 99, 3, -4, 99, -5, 6, 99};
  const lesson06::Reference r = lesson06::reference_cpu(a.data(), 4, b.data(), 3, 2, 2, 3);
  CHECK(r.ab == std::vector<double>{1 - 6 - 15, 2 + 8 + 18, 4 + 15 + 30, 8 - 20 - 36});
  CHECK(r.abs_ab == std::vector<double>{1 + 6 + 15, 2 + 8 + 18, 4 + 15 + 30, 8 + 20 + 36});
}

TEST_CASE("max_error: a float32 dot product passes; one dropped product, or a wrong epilogue, fails") {
  const int m = 12, n = 10, k = 4097;
  const auto a = kl::normal_floats(m * k, 0, 1, kl::seed_for(601));
  const auto b = kl::normal_floats(k * n, 0, 1, kl::seed_for(602));
  const lesson06::Reference ref = lesson06::reference_cpu(a.data(), k, b.data(), n, m, n, k);
  std::vector<float> full(m * n), dropped(m * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0.f;
      for (int kk = 0; kk < k; ++kk) acc = std::fmaf(a[i * k + kk], b[kk * n + j], acc);
      full[i * n + j] = acc;
      dropped[i * n + j] = acc - a[i * k + k - 1] * b[(k - 1) * n + j];  // the K tail forgotten
    }
  Problem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ldd = n;
  lesson06::HostInputs none;
  const double tol = lesson06::tolerance(k);
  CHECK(lesson06::max_error(full, p, ref, none) <= tol);
  CHECK(lesson06::max_error(dropped, p, ref, none) > tol);
  // the same sums through relu against a reference with relu: passes; without: fails
  p.act = Act::relu;
  std::vector<float> relu = full;
  for (auto& v : relu) v = v < 0.f ? 0.f : v;
  CHECK(lesson06::max_error(relu, p, ref, none) <= tol);
  p.act = Act::none;
  CHECK(lesson06::max_error(relu, p, ref, none) > tol);
  // an unwritten (NaN) element fails
  full[17] = NAN;
  CHECK(std::isinf(lesson06::max_error(full, p, ref, none)));
}

TEST_CASE("tolerance: K eps for short sums, 16 sqrt(K) eps for long ones, plus 8 eps") {
  CHECK(lesson06::tolerance(1) == doctest::Approx(9 * kEps));
  CHECK(lesson06::tolerance(64) == doctest::Approx(72 * kEps));
  CHECK(lesson06::tolerance(4096) == doctest::Approx((1024 + 8) * kEps));
}

TEST_CASE("validate: leading dimensions, null pointers, in-place layout; zero sizes are allowed") {
  float x = 0;
  const auto problem = [&](int m, int n, int k) {
    const int ldb = std::max(n, 1);
    return Problem{&x, &x, nullptr, &x, nullptr, m, n, k, std::max(k, 1), ldb, ldb, ldb};
  };
  CHECK_NOTHROW(lesson06::validate(problem(4, 5, 6)));
  CHECK_NOTHROW(lesson06::validate(Problem{nullptr, nullptr, nullptr, nullptr, nullptr, 0, 5, 6, 6, 5, 5, 5}));
  CHECK_NOTHROW(lesson06::validate(problem(4, 5, 0)));
  Problem p = problem(4, 5, 6);
  p.lda = 5;
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);
  p = problem(4, 5, 6);
  p.ldb = 4;
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);
  p = problem(4, 5, 6);
  p.ldd = 4;
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);
  p = problem(4, 5, 6);
  p.beta = 1.f;  // C is needed
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);
  p.c = &x;
  CHECK_NOTHROW(lesson06::validate(p));  // C == D, same ld: in place
  p.ldd = 6;
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);  // in place with ldc != ldd
  p = problem(4, 5, 6);
  p.bias_kind = Bias::n;
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);
  p.bias = &x;
  CHECK_NOTHROW(lesson06::validate(p));
  CHECK_THROWS_AS(lesson06::validate(problem(-1, 5, 6)), kl::UsageError);
  CHECK_THROWS_AS(lesson06::validate(problem(lesson06::kMaxRows + 1, 5, 6)), kl::UsageError);
  CHECK_NOTHROW(lesson06::validate(problem(1, lesson06::kMaxNK, lesson06::kMaxNK)));
  CHECK_THROWS_AS(lesson06::validate(problem(1, lesson06::kMaxNK + 1, 6)), kl::UsageError);
  CHECK_THROWS_AS(lesson06::validate(problem(1, 5, lesson06::kMaxNK + 1)), kl::UsageError);
  p = problem(4, 5, 6);
  p.a = nullptr;
  CHECK_THROWS_AS(lesson06::validate(p), kl::UsageError);
}

TEST_CASE("the dispatcher: naive when tiny, the tuned tiles with ~a tile per SM, else smaller tiles, split in K") {
  using lesson06::plan;
  CHECK(plan(64, 64, 64, kH100Sms).path == Path::naive);
  CHECK(plan(8, 8, 4096, kH100Sms).path == Path::naive);
  CHECK(plan(256, 256, 256, kH100Sms).path == Path::naive);  // 2^24: the naive kernel beats 8 tiles (NOTES.md)
  CHECK(plan(256, 256, 512, kH100Sms).path == Path::naive);  // 2^25, the last naive size
  CHECK(plan(4096, 4096, 4096, kH100Sms).path == Path::tiled);
  CHECK(plan(2048, 2048, 2048, kH100Sms).path == Path::tiled);  // 128 tiles: 97% of the SMs
  CHECK(plan(4097, 4097, 4097, kH100Sms).path == Path::tiled);
  CHECK(plan(4097, 4097, 4097, kH100Sms, false).path == Path::unaligned);  // rows of A and B not 16-byte aligned
  CHECK(plan(4096, 4096, 4096, kH100Sms, false).path == Path::unaligned);
  CHECK(plan(2816, 1408, 16, kH100Sms).path == Path::tiled);  // 22 x 6 = 132 tiles of 128x256
  CHECK(plan(2176, 1792, 16, kH100Sms).path == Path::tiled);  // 119 tiles, the least that counts
  CHECK(plan(2048, 1792, 16, kH100Sms).path == Path::small_tiles);
  CHECK(plan(1000, 3000, 777, kH100Sms).path == Path::small_tiles);  // 96 tiles; 376 of 128x64, K too short
  CHECK(plan(1000, 3000, 777, kH100Sms, false).path == Path::small_tiles);
  const lesson06::Plan skinny = plan(8192, 64, 8192, kH100Sms);
  CHECK(skinny.path == Path::split_k);
  CHECK(skinny.slices == 4);  // 64 tiles of 128 x 64: two blocks an SM
  const lesson06::Plan small = plan(1024, 1024, 1024, kH100Sms);
  CHECK(small.path == Path::split_k);
  CHECK(small.slices == 2);
  CHECK(plan(512, 512, 512, kH100Sms).slices == 2);  // slices at least 256 deep
  CHECK(plan(512, 512, 256, kH100Sms).path == Path::small_tiles);
  CHECK(plan(300, 64, 2048, kH100Sms).slices == 8);
  // without step 6's kernel (below sm_80): step 5's kernel for all but the naive kernel's problems
  CHECK(plan(256, 256, 512, kH100Sms, true, false).path == Path::naive);
  for (auto [m, n, k] : {std::array<int, 3>{4096, 4096, 4096}, {1000, 3000, 777}, {8192, 64, 8192}, {300, 64, 2048}})
    for (bool aligned : {true, false}) {
      const lesson06::Plan pl = plan(m, n, k, kH100Sms, aligned, false);
      CHECK(pl.path == Path::double_buffer);
      CHECK(pl.slices == 1);
    }
  for (int k : {1, 7, 256, 777, 8192}) {
    for (int slices : {1, 2, 3, 9, 16}) {
      const int depth = lesson06::slice_depth(k, slices, 8);
      CHECK(depth % 8 == 0);
      CHECK(std::int64_t{depth} * slices >= k);
    }
  }
}

TEST_CASE("activations on the host: the float forms agree with the float64 reference") {
  for (float x : {-6.f, -2.5f, -1.f, -0.1f, 0.f, 0.3f, 1.f, 4.f}) {
    CAPTURE(x);
    CHECK(lesson06::activate<Act::relu>(x, 0.1f) == doctest::Approx(lesson06::activate_ref(Act::relu, x, 0.1)));
    CHECK(lesson06::activate<Act::leaky>(x, 0.1f) == doctest::Approx(lesson06::activate_ref(Act::leaky, x, 0.1)));
    CHECK(lesson06::activate<Act::gelu_tanh>(x, 0.f) ==
          doctest::Approx(lesson06::activate_ref(Act::gelu_tanh, x, 0)).epsilon(1e-5));
    CHECK(lesson06::activate<Act::gelu_erf>(x, 0.f) ==
          doctest::Approx(lesson06::activate_ref(Act::gelu_erf, x, 0)).epsilon(1e-5));
  }
  CHECK(lesson06::activate_ref(Act::leaky, -2, 0.1) == doctest::Approx(-0.2));
  CHECK(lesson06::activate_ref(Act::gelu_erf, 1, 0) == doctest::Approx(0.8413447460685429));
  CHECK(std::isnan(lesson06::activate<Act::relu>(NAN, 0.f)));
}

TEST_CASE("--sweep shapes, the default shape, and the option parsers") {
  const auto shapes = lesson06::sweep_shapes();
  CHECK(shapes.size() == 9);
  CHECK(shapes.front().m == 256);
  CHECK(shapes[5].k == 8192);
  CHECK(shapes.back().n == 64);
  CHECK(lesson06::kDefaultShape.m == 4096);
  CHECK(lesson06::parse_bias("full") == Bias::full);
  CHECK(lesson06::parse_act("gelu_erf") == Act::gelu_erf);
  CHECK_THROWS_AS(lesson06::parse_bias("row"), kl::UsageError);
  CHECK_THROWS_AS(lesson06::parse_act("gelu"), kl::UsageError);
  CHECK(kl::Cli::parse_float("--alpha", "-1.5") == -1.5f);
  for (const char* bad : {"", "x1", "1x", "inf", "nan", "1e39"})
    CHECK_THROWS_AS(kl::Cli::parse_float("--alpha", bad), kl::UsageError);
  CHECK(lesson06::shape_text({1000, 3000, 777}) == "MxNxK=1000x3000x777");
}

TEST_CASE("the executable's shapes: defaults, --size, --m/--n/--k, the sweep; refused, never clamped") {
  const auto shape_of = [](kl::Args a) {
    const auto v = lesson06::shapes(a);
    REQUIRE(v.size() == 1);
    return v[0];
  };
  kl::Args a;
  CHECK(shape_of(a).m == 4096);
  CHECK(shape_of(a).k == 4096);
  a.sizes["size"] = 1;  // 2^0
  CHECK(shape_of(a).n == 1);
  a.sizes["m"] = 32;
  CHECK_THROWS_AS(lesson06::shapes(a), kl::UsageError);  // --size and --m
  a.sizes.erase("size");
  a.sizes["k"] = 7;
  const lesson06::Shape sh = shape_of(a);
  CHECK((sh.m == 32 && sh.n == 4096 && sh.k == 7));
  a.sizes["m"] = lesson06::kMaxRows + 1;
  CHECK_THROWS_AS(lesson06::shapes(a), kl::UsageError);
  a.sizes["m"] = 8;
  a.sizes["n"] = std::int64_t{1} << 31;  // does not fit an int
  CHECK_THROWS_AS(lesson06::shapes(a), kl::UsageError);
  a.sizes["n"] = lesson06::kMaxNK;
  a.sizes["k"] = lesson06::kMaxNK;
  CHECK_NOTHROW(lesson06::shapes(a));
  a.sizes["n"] = lesson06::kMaxNK + 1;  // a 256-wide tile past N would wrap an int index
  CHECK_THROWS_AS(lesson06::shapes(a), kl::UsageError);
  a.sizes["n"] = 8;
  a.sizes["k"] = lesson06::kMaxNK + 1;
  CHECK_THROWS_AS(lesson06::shapes(a), kl::UsageError);
  kl::Args sweep;
  sweep.sweep = true;
  CHECK(lesson06::shapes(sweep).size() == 9);
  sweep.texts["bias"] = "row";  // the epilogue options are checked with the shapes, before any GPU work
  CHECK_THROWS_AS(lesson06::shapes(sweep), kl::UsageError);
}

TEST_CASE("the inputs' seed: 64-bit, the committed results' values for every shape that did not overflow") {
  CHECK(lesson06::input_seed({4096, 4096, 4096}) == 4096u * 7919 + 4096u * 131 + 4096);
  CHECK(lesson06::input_seed({1000, 3000, 777}) == 1000u * 7919 + 3000u * 131 + 777);
  const int big = lesson06::kMaxNK;  // N * 131 overflowed an int
  CHECK(lesson06::input_seed({1, big, big}) == 7919 + std::uint64_t{131} * big + big);
}

TEST_CASE("the epilogue options: bias n and gelu_tanh by default, alpha, beta, slope") {
  const lesson06::Epilogue d = lesson06::epilogue(kl::Args{});
  CHECK((d.alpha == 1.f && d.beta == 0.f && d.slope == 0.01f && d.bias == Bias::n && d.act == Act::gelu_tanh));
  kl::Args a;
  a.texts = {{"alpha", "2"}, {"beta", "0.5"}, {"slope", "0.2"}, {"bias", "full"}, {"act", "none"}};
  const lesson06::Epilogue e = lesson06::epilogue(a);
  CHECK((e.alpha == 2.f && e.beta == 0.5f && e.slope == 0.2f && e.bias == Bias::full && e.act == Act::none));
  a.texts["beta"] = "x";
  CHECK_THROWS_AS(lesson06::epilogue(a), kl::UsageError);
}

TEST_SUITE("gpu") {
  TEST_CASE("every step matches the float64 reference on every shape (beta C, bias n, gelu_tanh)") {
    for (Case c : test_shapes()) {
      c.beta = 0.5f;
      c.alpha = 1.5f;
      c.bias = Bias::n;
      c.act = Act::gelu_tanh;
      check_case(c, all_steps);
    }
  }

  TEST_CASE("every epilogue on each path: tuned tiles (templates), small tiles, split-K and naive (run-time)") {
    // tuned tiles (K = 16 under the sanitizer, else 44), small tiles, split-K, naive
    const int k_tuned = sanitizing() ? 16 : 44;
    const std::vector<Case> shapes{{2816, 1408, k_tuned}, {1000, 300, 128}, {200, 130, 1600}, {20, 30, 40}};
    for (Case c : shapes) {
      const Path path = lesson06::plan(c.m, c.n, c.k, kl::sm_count()).path;
      CAPTURE(static_cast<int>(path));
      for (Bias bias : {Bias::none, Bias::m, Bias::n, Bias::full})
        for (Act act : {Act::none, Act::relu, Act::leaky, Act::gelu_tanh, Act::gelu_erf})
          for (float beta : {0.f, -0.75f}) {
            c.bias = bias;
            c.act = act;
            c.beta = beta;
            check_case(c, epilogue_steps, 0, true);
          }
    }
    if (kl::sm_count() == kH100Sms) {
      CHECK(lesson06::plan(2816, 1408, 44, kH100Sms).path == Path::tiled);
      CHECK(lesson06::plan(1000, 300, 128, kH100Sms).path == Path::small_tiles);
      CHECK(lesson06::plan(200, 130, 1600, kH100Sms).path == Path::split_k);
    }
  }

  TEST_CASE("alpha = 0: D = beta C + bias; beta = 0 reads no C (nullptr)") {
    for (Case c : {Case{100, 90, 80}, Case{2816, 1408, 16}}) {
      c.alpha = 0.f;
      c.beta = 2.f;
      c.bias = Bias::m;
      check_case(c, all_steps);
      c.alpha = -1.f;
      c.beta = 0.f;  // check_case passes C = nullptr
      check_case(c, all_steps);
    }
  }

  TEST_CASE("C aliasing D: in place, every step") {
    for (Case c : {Case{77, 65, 300}, Case{2816, 1408, 24}, Case{1000, 300, 128}, Case{300, 64, 2000}}) {
      c.beta = 1.25f;
      c.in_place = true;
      c.bias = Bias::n;
      c.act = Act::relu;
      check_case(c, all_steps);
    }
  }

  TEST_CASE("leading dimensions larger than the width, aligned or not, and unaligned pointers") {
    const std::vector<Case> shapes = sanitizing() ? std::vector<Case>{{33, 70, 45}, {300, 130, 1000}}
                                                  : std::vector<Case>{{33, 70, 45}, {2816, 1408, 40}, {130, 260, 1000}};
    for (Case c : shapes) {
      c.beta = 1.f;
      c.bias = Bias::full;
      c.act = Act::leaky;
      for (auto [pa, pb, pd, off] : {std::array<int, 4>{4, 8, 12, 0}, {3, 5, 1, 0}, {0, 0, 0, 1}, {1, 2, 3, 3}}) {
        c.pad_a = pa;
        c.pad_b = pb;
        c.pad_d = pd;
        c.offset = off;
        check_case(c, all_steps);
      }
    }
  }

  TEST_CASE("a NaN in A makes its row of D NaN, and only its row, on every step and every path") {
    // naive, tuned tiles, unaligned (K = 33), small tiles, split-K
    for (Case c :
         {Case{40, 50, 60}, Case{2816, 1408, 64}, Case{2817, 1409, 33}, Case{1000, 300, 128}, Case{300, 64, 2000}}) {
      CAPTURE(describe(c));
      auto a = kl::normal_floats(std::size_t(c.m) * c.k, 0, 1, kl::seed_for(621));
      const auto b = kl::normal_floats(std::size_t(c.k) * c.n, 0, 1, kl::seed_for(622));
      const int r1 = c.m / 3, r2 = c.m - 1;      // a row inside, the last row (the M tail)
      a[std::size_t(r1) * c.k + c.k - 1] = NAN;  // in the K tail
      a[std::size_t(r2) * c.k + c.k / 2] = NAN;
      const kl::DeviceBuffer<float> da(a), db(b), dbias(kl::normal_floats(c.n, 0, 1, kl::seed_for(623)));
      kl::DeviceBuffer<float> dd(std::size_t(c.m) * c.n);
      lesson06::Workspace ws;
      Problem p{da.data(), db.data(), nullptr, dd.data(), dbias.data(), c.m, c.n, c.k, c.k, c.n, c.n, c.n};
      p.bias_kind = Bias::n;
      p.act = Act::gelu_tanh;
      std::vector<const GemmStep*> steps;
      for (const auto& st : kSteps) steps.push_back(&st);
      steps.push_back(&kApi);
      for (const GemmStep* step : steps) {
        const GemmStep& st = *step;
        CAPTURE(st.name);
        dd.poison(0x3C);  // finite: an unwritten element of the NaN rows fails
        if (!run_or_skip(st, p, ws)) continue;
        CUDA_CHECK(cudaDeviceSynchronize());
        const auto d = dd.download();
        int wrong = 0;
        for (int r = 0; r < c.m; ++r)
          for (int j = 0; j < c.n; ++j) wrong += std::isnan(d[std::size_t(r) * c.n + j]) != (r == r1 || r == r2);
        CHECK(wrong == 0);
      }
    }
  }

  TEST_CASE("steps 6-7 are n/a where step 6's kernel cannot run (below sm_80, or compiled out); gemm() is not") {
    Operands o;
    make_operands(o, Case{512, 512, 512}, 0);
    lesson06::Workspace ws;
    const std::string why = lesson06::warp_tiled_missing();
    int dev = 0, major = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8) CHECK_FALSE(why.empty());
    if (!why.empty()) MESSAGE("steps 6-7 n/a: " << why);
    for (int i : {5, 6}) {
      CAPTURE(kSteps[i].name);
      if (why.empty()) CHECK_NOTHROW(lesson06::run_step(kSteps[i], o.p, ws, nullptr));
      else CHECK_THROWS_AS(lesson06::run_step(kSteps[i], o.p, ws, nullptr), kl::NotSupported);
    }
    CHECK_NOTHROW(lesson06::gemm(o.p, ws));
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
  }

  TEST_CASE("M, N or K = 0 is a no-op: nothing launched, D untouched") {
    kl::DeviceBuffer<float> x(64), d(64);
    d.poison(0x3C);
    lesson06::Workspace ws;
    for (const auto& st : kSteps) {
      CAPTURE(st.name);
      for (auto [m, n, k] : {std::array<int, 3>{0, 8, 8}, {8, 0, 8}, {8, 8, 0}}) {
        Problem p{x.data(), x.data(), nullptr, d.data(), nullptr, m, n, k, 8, 8, 8, 8};
        lesson06::run_step(st, p, ws, nullptr);
      }
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    const auto got = d.download();
    std::vector<float> poison(64);
    std::memset(poison.data(), 0x3C, poison.size() * sizeof(float));
    CHECK(std::memcmp(got.data(), poison.data(), poison.size() * sizeof(float)) == 0);
    Problem bad{x.data(), x.data(), nullptr, d.data(), nullptr, 8, 8, 8, 4, 8, 8, 8};  // lda < K
    CHECK_THROWS_AS(lesson06::gemm(bad, ws), kl::UsageError);
  }

  TEST_CASE("the public API, and a repeated call captured in a CUDA graph") {
    for (Case c : {Case{1000, 3000, 777}, Case{8192, 64, 1024}, Case{40, 50, 60}}) {
      c.bias = Bias::n;
      c.act = Act::gelu_erf;
      if (sanitizing()) c.m = std::min(c.m, 512);
      check_case(
          c, [](int i) { return i == lesson06::kFusedStep - 1; }, 7, true);
    }
    const int m = 300, n = 64, k = 2048;  // split-K: the workspace grows on the first call
    const auto a = kl::normal_floats(m * k, 0, 1, kl::seed_for(611));
    const auto b = kl::normal_floats(k * n, 0, 1, kl::seed_for(612));
    const kl::DeviceBuffer<float> da(a), db(b);
    kl::DeviceBuffer<float> dd(m * n);
    lesson06::Workspace ws;
    const Problem p{da.data(), db.data(), nullptr, dd.data(), nullptr, m, n, k, k, n, n, n};
    REQUIRE(lesson06::plan(m, n, k, kl::sm_count()).path == Path::split_k);  // step 5's kernel below sm_80
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    lesson06::gemm(p, ws, s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    dd.poison();
    kl::replay_once(s, [&](cudaStream_t stream) { lesson06::gemm(p, ws, stream); });
    CUDA_CHECK(cudaStreamDestroy(s));
    const lesson06::Reference ref = lesson06::reference_cpu(a.data(), k, b.data(), n, m, n, k);
    CHECK(lesson06::max_error(dd.download(), p, ref, {}) <= lesson06::tolerance(k));
  }
}
