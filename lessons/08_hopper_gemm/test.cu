// Lesson 08 checks. CPU cases: the step table, validation, the command-line shapes and their text. The
// "gpu" suite walks the whole table, so a new step is tested by its entry alone: every step on fresh
// bf16 and f16 inputs, D poisoned, against the float64 reference of every element, on shapes whose
// tails are no multiple of any tile (M, N, K = 8 ... 2304), with α, β ≠ 0 and every epilogue, more tiles
// than SMs (the persistent steps loop), replay from a CUDA graph; gemm() on any shape (1, primes); NaN
// and Inf in A reach exactly their row; the executable's f32 reference against float64. A step that
// cannot run here (K or N not a multiple of 8, step 1 below sm_80, a Hopper step off sm_90) is n/a:
// reported with its reason, neither passed nor failed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/timing.cuh"
#include "lessons/08_hopper_gemm/host.cuh"

using lesson08::Act;
using lesson08::Dtype;
using lesson08::kSteps;
using lesson08::Problem;
using lesson08::Shape;

namespace {

std::uint16_t to_bits(float x, Dtype t) {
  std::uint16_t bits;
  if (t == Dtype::bf16) {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    std::memcpy(&bits, &h, 2);
  } else {
    const __half h = __float2half_rn(x);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}

float from_bits(std::uint16_t bits, Dtype t) {
  if (t == Dtype::bf16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &bits, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &bits, 2);
  return __half2float(h);
}

// One problem's inputs on the host (already rounded to the dtype: the reference sees what the GPU reads)
// and on the device, with D poisoned (all NaN).
struct Case {
  Shape shape;
  std::vector<float> a, b, c, bias;
  kl::DeviceBuffer<std::uint16_t> da, db, dc, dd;
  kl::DeviceBuffer<float> dbias;

  static std::vector<float> rounded(std::size_t n, Dtype t, std::uint64_t seed) {
    std::vector<float> x = kl::uniform_floats(n, -1.0, 1.0, seed);
    for (auto& e : x) e = from_bits(to_bits(e, t), t);
    return x;
  }
  static std::vector<std::uint16_t> bits(const std::vector<float>& x, Dtype t) {
    std::vector<std::uint16_t> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_bits(x[i], t);
    return out;
  }
  Case(const Shape& sh, std::uint64_t seed)
      : shape(sh),
        a(rounded(static_cast<std::size_t>(sh.m) * sh.k, sh.dtype, seed)),
        b(rounded(static_cast<std::size_t>(sh.k) * sh.n, sh.dtype, seed + 1)),
        c(sh.beta != 0.f ? rounded(static_cast<std::size_t>(sh.m) * sh.n, sh.dtype, seed + 2) : std::vector<float>{}),
        bias(sh.bias ? kl::uniform_floats(sh.n, -1.0, 1.0, seed + 3) : std::vector<float>{}),
        da(bits(a, sh.dtype)),
        db(bits(b, sh.dtype)),
        dc(bits(c, sh.dtype)),
        dd(static_cast<std::size_t>(sh.m) * sh.n),
        dbias(bias) {}
  Problem problem() {
    Problem p = shape.problem();
    p.a = da.data(), p.b = db.data(), p.c = shape.beta != 0.f ? dc.data() : nullptr, p.d = dd.data();
    p.bias = shape.bias ? dbias.data() : nullptr;
    return p;
  }
  std::vector<double> reference() { return lesson08::reference_cpu(problem(), a, b, c, bias); }
  double max_error(const std::vector<double>& ref) const {
    const std::vector<std::uint16_t> d = dd.download(dd.size());
    double worst = 0;
    for (std::size_t i = 0; i < d.size(); ++i)
      worst = std::fmax(worst, lesson08::element_error(from_bits(d[i], shape.dtype), ref[i]));
    return worst;
  }
};

// A launcher refused its step (kl::NotSupported): the library may turn a problem down; a step of the
// lesson only for the shape (K or N not a multiple of 8) or for the code this process has for the GPU.
void refused(const lesson08::Step& st, const Problem& p, const kl::NotSupported& e) {
  const std::string why = e.what();
  MESSAGE("step " << st.name << " n/a: " << why);
  if (st.library) return;
  if (why.rfind("needs sm_", 0) == 0)
    CHECK(why.rfind("needs sm_" + std::to_string(st.needs_sm) + (st.arch_specific ? "a" : ""), 0) == 0);
  else CHECK((!lesson08::rows_aligned(p) && why.find("multiples of 8") != std::string::npos));
}

// Every step of the table on one problem against the float64 reference of every element, D poisoned.
void check_steps(const Shape& sh, std::uint64_t seed) {
  Case c(sh, seed);
  const Problem p = c.problem();
  const std::vector<double> ref = c.reference();
  for (const auto& st : kSteps) {
    const std::string step = st.name, shape = lesson08::shape_text(sh), dtype = lesson08::dtype_name(sh.dtype);
    CAPTURE(step);
    CAPTURE(shape);
    CAPTURE(dtype);
    c.dd.poison();
    lesson08::Workspace ws;
    try {
      lesson08::run_step(st, p, ws, nullptr);
    } catch (const kl::NotSupported& e) {
      refused(st, p, e);
      continue;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(c.max_error(ref) <= lesson08::kRel);
  }
}

kl::Args args(const std::map<std::string, std::int64_t>& sizes, const std::map<std::string, std::string>& texts = {},
              bool bias = false) {
  kl::Args a;
  a.sizes = sizes;
  a.texts = texts;
  if (bias) a.flags["bias"] = true;
  return a;
}

}  // namespace

TEST_CASE("the step table: names, ideas, launchers, what each needs; step 1 sm_80, then sm_90a, libraries last") {
  std::set<std::string> names;
  REQUIRE(kSteps.size() >= 3);
  CHECK(std::string(kSteps.front().name) == "mma_sync");
  CHECK(kSteps.front().needs_sm == 80);
  bool library_seen = false;
  for (int i = 0; i < static_cast<int>(kSteps.size()); ++i) {
    const auto& st = kSteps[i];
    CAPTURE(st.name);
    CHECK(std::string(st.idea).size() > 0);
    CHECK((st.launch != nullptr));
    CHECK(names.insert(st.name).second);
    CHECK(kl::find_steps(kSteps, st.name) == std::vector<int>{i});
    CHECK((st.needs_sm == 0 || st.needs_sm == 80 || st.needs_sm == 90));
    CHECK(st.arch_specific == (st.needs_sm == 90));
    if (st.library) library_seen = true;
    else CHECK_FALSE(library_seen);  // the lesson's own steps come first
  }
  CHECK(names.count("cublas") == 1);
  CHECK(names.count("cublaslt_epilogue") == 1);
  CHECK(lesson08::hopper_steps().size() + 3 == kSteps.size());
}

TEST_CASE("validate refuses empty and oversized problems and non-finite alpha or beta; accepts any size >= 1") {
  const auto p = [](int m, int n, int k) { return Shape{m, n, k}.problem(); };
  CHECK_NOTHROW(lesson08::validate(p(1, 1, 1)));
  CHECK_NOTHROW(lesson08::validate(p(37, 53, 61)));
  CHECK_NOTHROW(lesson08::validate(p(1 << 17, 1 << 20, 1 << 17)));  // each product exactly 2^37
  CHECK_THROWS_AS(lesson08::validate(p(0, 8, 8)), kl::UsageError);
  CHECK_THROWS_AS(lesson08::validate(p(8, -8, 8)), kl::UsageError);
  CHECK_THROWS_AS(lesson08::validate(p(1 << 20, 1 << 20, 8)), kl::UsageError);
  CHECK_THROWS_AS(lesson08::validate(p(8, (1 << 30) + 1, 1 << 8)), kl::UsageError);
  Problem q = p(8, 8, 8);
  q.alpha = INFINITY;
  CHECK_THROWS_AS(lesson08::validate(q), kl::UsageError);
  CHECK(lesson08::rows_aligned(p(3, 8, 16)));
  CHECK_FALSE(lesson08::rows_aligned(p(8, 12, 16)));
  CHECK_FALSE(lesson08::rows_aligned(p(8, 16, 4)));
}

TEST_CASE("shapes: the default, the options, the sweep; bad options refused; shape_text") {
  const auto def = lesson08::shapes(args({}));
  REQUIRE(def.size() == 1);
  CHECK(lesson08::shape_text(def[0]) == "MxNxK=8192x8192x8192");
  CHECK(def[0].dtype == Dtype::bf16);
  auto a = args({{"m", 100}, {"n", 24}, {"k", 7}}, {{"alpha", "0.5"}, {"beta", "-2"}, {"act", "gelu_tanh"}}, true);
  a.dtype = "f16";
  const auto one = lesson08::shapes(a);
  REQUIRE(one.size() == 1);
  CHECK(lesson08::shape_text(one[0]) == "MxNxK=100x24x7;alpha=0.5;beta=-2;bias;gelu_tanh");
  CHECK(one[0].dtype == Dtype::f16);
  CHECK_THROWS_WITH_AS(lesson08::shapes(args({}, {{"act", "gelu_erf"}})), doctest::Contains("--act"), kl::UsageError);
  CHECK_THROWS_AS(lesson08::shapes(args({}, {{"alpha", "abc"}})), kl::UsageError);
  CHECK_THROWS_AS(lesson08::shapes(args({}, {{"beta", "nan"}})), kl::UsageError);
  CHECK_THROWS_AS(lesson08::shapes(args({{"m", std::int64_t{1} << 31}})), kl::UsageError);
  kl::Args sweep;
  sweep.sweep = true;
  const auto all = lesson08::shapes(sweep);
  std::set<std::string> seen;
  for (const auto& sh : all) CHECK(seen.insert(lesson08::shape_text(sh)).second);
  CHECK(seen.count("MxNxK=8192x8192x8192") == 1);
  CHECK(seen.count("MxNxK=8192x8192x8192;bias;gelu_tanh") == 1);
  CHECK(seen.count("MxNxK=8192x128256x4096") == 1);
  CHECK(seen.count("MxNxK=16384x16384x16384") == 1);
}

TEST_CASE("flops counts 2 M N K; the element error: NaN and Inf match only themselves") {
  CHECK(lesson08::flops(Shape{8192, 4096, 1024}.problem()) == 2.0 * 8192 * 4096 * 1024);
  CHECK(lesson08::element_error(1.0, 1.0) == 0);
  CHECK(lesson08::element_error(3.0, 1.0) == doctest::Approx(1.0));
  CHECK(lesson08::element_error(NAN, NAN) == 0);
  CHECK(std::isinf(lesson08::element_error(NAN, 1.0)));
  CHECK(std::isinf(lesson08::element_error(1.0, NAN)));
  CHECK(lesson08::element_error(INFINITY, INFINITY) == 0);
  CHECK(std::isinf(lesson08::element_error(-INFINITY, INFINITY)));
}

TEST_SUITE("gpu") {
  TEST_CASE("every step, bf16 and f16: tails, alpha and beta, every epilogue") {
    std::vector<Shape> shapes = {{128, 256, 64}, {1, 8, 8}, {129, 264, 72}, {300, 520, 200}, {257, 136, 1000}};
    if (kl::sanitizing()) shapes = {{129, 264, 72}};
    for (Dtype t : {Dtype::bf16, Dtype::f16})
      for (Shape sh : shapes) {
        sh.dtype = t;
        check_steps(sh, kl::seed_for(sh.m + sh.n + sh.k));
        Shape full = sh;
        full.alpha = 0.5f, full.beta = -1.5f, full.bias = true, full.act = Act::gelu_tanh;
        check_steps(full, kl::seed_for(7 + sh.m));
        if (kl::sanitizing()) continue;
        Shape relu = sh;
        relu.act = Act::relu;
        check_steps(relu, kl::seed_for(9 + sh.k));
      }
  }

  TEST_CASE("every step: more tiles than SMs, so every block of a persistent step takes several") {
    if (kl::sanitizing()) return;
    check_steps({2048, 2304, 64}, kl::seed_for(31));
  }

  TEST_CASE("gemm(): any M, N, K (1, primes, K and N no multiple of 8), every path checked") {
    std::vector<Shape> shapes = {{1, 1, 1}, {37, 53, 61}, {5, 13, 3}, {130, 260, 72}, {64, 40, 24}};
    for (Dtype t : {Dtype::bf16, Dtype::f16})
      for (Shape sh : shapes) {
        sh.dtype = t, sh.beta = 0.25f, sh.bias = true, sh.act = Act::gelu_tanh;
        const std::string shape = lesson08::shape_text(sh);
        CAPTURE(shape);
        Case c(sh, kl::seed_for(sh.m * 7 + sh.k));
        lesson08::gemm(c.problem(), nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        CHECK(c.max_error(c.reference()) <= lesson08::kRel);
      }
  }

  TEST_CASE("every step: NaN and Inf in a row of A reach exactly that row of D") {
    Case c({200, 264, 128}, kl::seed_for(41));
    c.a[17 * 128 + 5] = NAN;
    c.a[150 * 128 + 100] = INFINITY;
    c.da = kl::DeviceBuffer<std::uint16_t>(Case::bits(c.a, Dtype::bf16));
    const Problem p = c.problem();
    for (const auto& st : kSteps) {
      const std::string step = st.name;
      CAPTURE(step);
      c.dd.poison();
      lesson08::Workspace ws;
      try {
        lesson08::run_step(st, p, ws, nullptr);
      } catch (const kl::NotSupported& e) {
        refused(st, p, e);
        continue;
      }
      const std::vector<std::uint16_t> d = c.dd.download(c.dd.size());
      int bad_rows = 0, wrong = 0;
      for (int i = 0; i < p.m; ++i) {
        bool all_bad = true, none_bad = true;
        for (int j = 0; j < p.n; ++j) {
          const bool finite = std::isfinite(from_bits(d[static_cast<std::size_t>(i) * p.n + j], Dtype::bf16));
          all_bad &= !finite;
          none_bad &= finite;
        }
        if (i == 17 || i == 150) bad_rows += all_bad;
        else wrong += !none_bad;
      }
      CHECK(bad_rows == 2);
      CHECK(wrong == 0);
    }
  }

  TEST_CASE("after its first run every step replays from a CUDA graph (the executable times short steps so)") {
    Shape sh{136, 264, 200};
    sh.bias = true, sh.act = Act::gelu_tanh;
    Case c(sh, kl::seed_for(51));
    const Problem p = c.problem();
    const std::vector<double> ref = c.reference();
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const auto& st : kSteps) {
      const std::string step = st.name;
      CAPTURE(step);
      lesson08::Workspace ws;
      try {
        lesson08::run_step(st, p, ws, stream);  // the first run may create handles and set attributes
      } catch (const kl::NotSupported& e) {
        refused(st, p, e);
        continue;
      }
      CUDA_CHECK(cudaStreamSynchronize(stream));
      c.dd.poison();
      kl::replay_once(stream, [&](cudaStream_t s) { lesson08::run_step(st, p, ws, s); });
      CHECK(c.max_error(ref) <= lesson08::kRel);
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
  }

  TEST_CASE("the executable's f32 GPU reference agrees with float64, and its error sees an unwritten tile") {
    Shape sh{300, 264, 520};
    sh.beta = 0.5f, sh.bias = true, sh.act = Act::gelu_tanh;
    Case c(sh, kl::seed_for(61));
    const Problem p = c.problem();
    lesson08::GpuReference ref(p);
    const std::vector<float> f32 = ref.ref.download(ref.ref.size());
    const std::vector<double> f64 = c.reference();
    double worst = 0;
    for (std::size_t i = 0; i < f32.size(); ++i) worst = std::fmax(worst, lesson08::element_error(f32[i], f64[i]));
    CHECK(worst < 1e-5);
    lesson08::gemm(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(ref.max_error(p) <= lesson08::kRel);
    CUDA_CHECK(cudaMemset(c.dd.data() + 299 * 264 + 200, 0xFF, 2));  // one NaN where a value belongs
    CHECK(std::isinf(ref.max_error(p)));
  }
}
