// Lesson 04 checks. CPU cases: the reference's properties, the combine rule, the tolerances, the
// launch geometry and the dispatcher's choices (pure host functions), the step table. The "gpu"
// suite runs every step that supports a shape (and the dispatcher) on fresh inputs in all three
// dtypes with a poisoned output, then the special values: K = 1, shifted rows, -inf, NaN, unaligned
// views, empty problems, the scale factor.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "lessons/04_online_softmax/run.cuh"

using kl::MaxSum;
using lesson04::Dtype;
using lesson04::kSteps;

namespace {

constexpr lesson04::DeviceCaps kH100{9, 0, 232448};
constexpr lesson04::DeviceCaps kA100{8, 0, 166912};

lesson04::Problem shape(std::int64_t rows, std::int64_t cols, Dtype d = Dtype::f32, float scale = 1.f) {
  return lesson04::Problem{nullptr, nullptr, rows, cols, d, scale};
}

// The (max, sum of e^(x - max)) of some values, in double.
MaxSum direct_stats(const std::vector<float>& v) {
  double m = -INFINITY, s = 0;
  for (float x : v) m = std::max(m, static_cast<double>(x));
  for (float x : v) s += std::exp(x - m);
  return {static_cast<float>(m), static_cast<float>(s)};
}

// Rounds to T and back, so the reference sees what the GPU reads.
template <class T>
std::vector<float> quantize(std::vector<float> v) {
  for (auto& x : v) x = kl::to_float(kl::from_float<T>(x));
  return v;
}

// Where x and y start in their buffers, in elements: {0, 0} aligned, {1, 1} both views misaligned
// alike (the block steps still move 16-byte packs), {1, 0} misaligned differently (packs of 1).
struct Offsets {
  std::size_t x = 0, y = 0;
};

// Runs one step on x (rows x cols, already rounded to T), its output poisoned with `poison`, the
// two pointers shifted by `at`. Returns the output as floats.
template <class T>
std::vector<float> run_step(const lesson04::SoftmaxStep& st, const std::vector<float>& x, std::int64_t rows,
                            std::int64_t cols, float scale = 1.f, int poison = 0xFF, Offsets at = {}) {
  const std::size_t n = x.size();
  std::vector<T> xt(n + at.x);
  for (std::size_t i = 0; i < n; ++i) xt[at.x + i] = kl::from_float<T>(x[i]);
  const kl::DeviceBuffer<T> dx(xt);
  kl::DeviceBuffer<T> dy(n + at.y);
  dy.poison(poison);
  lesson04::Workspace ws;
  st.launch(lesson04::Problem{dx.data() + at.x, dy.data() + at.y, rows, cols, lesson04::dtype_of<T>(), scale}, ws,
            nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<T> got = dy.download();
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = kl::to_float(got[at.y + i]);
  return out;
}

// Why a step cannot run on this GPU in this build, whatever the shape ("" when it can): step 6 needs
// sm_90 and its kernel's sm_90 code (a PTX-only compute_80 build holds none); the others run anywhere.
std::string arch_na(const lesson04::SoftmaxStep& st) {
  return st.launch.run == lesson04::launch_cluster ? lesson04::cluster_missing() : std::string();
}

// The steps to run on a shape: the ones that can run here and support it, the library only when
// asked for. A step that cannot run here is skipped with its reason (said once).
std::vector<int> steps_for(std::int64_t rows, std::int64_t cols, Dtype d, float scale, bool library) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(std::size(kSteps)); ++i) {
    if (kSteps[i].library && !library) continue;
    if (const std::string why = arch_na(kSteps[i]); !why.empty()) {
      static std::set<int> told;
      if (told.insert(i).second) MESSAGE("step " << kSteps[i].name << " n/a: " << why);
      continue;
    }
    if (kSteps[i].launch.support(shape(rows, cols, d, scale), lesson04::device_caps()).empty()) out.push_back(i);
  }
  return out;
}

// Runs every supporting step and checks it against the float64 reference, and that rows sum to 1.
template <class T>
void check_all_steps(const std::vector<float>& xq, std::int64_t rows, std::int64_t cols, float scale = 1.f,
                     bool library = false, Offsets at = {}) {
  const Dtype d = lesson04::dtype_of<T>();
  const lesson04::Tolerance tol = lesson04::tolerance(d);
  const std::vector<double> ref = lesson04::ref_softmax(xq, rows, cols, scale);
  for (int i : steps_for(rows, cols, d, scale, library)) {
    const std::string step = kSteps[i].name;  // CAPTURE of a char* would print the pointer
    CAPTURE(step);
    const std::string dtype = lesson04::dtype_name(d);
    CAPTURE(dtype);
    CAPTURE(rows);
    CAPTURE(cols);
    std::vector<float> y;
    try {
      y = run_step<T>(kSteps[i], xq, rows, cols, scale, 0xFF, at);
    } catch (const lesson04::NotSupported&) {
      continue;  // the library may turn a shape down; the lesson's steps never do
    }
    CHECK(lesson04::max_error(y, ref, tol) <= tol.rel);
    for (std::int64_t r = 0; r < rows; r += std::max<std::int64_t>(1, rows / 7)) {
      double sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) sum += y[r * cols + c];
      CHECK(std::fabs(sum - 1.0) <= tol.rel + cols * tol.abs);
    }
  }
}

// Shapes every lesson is checked on: rows shorter than a warp, awkward lengths, more rows than step 3's
// grid (1000 x 4096), rows longer than shared memory (step 3's limit) and than a cluster (step 6's);
// KL_SANITIZE=1 keeps small ones.
std::vector<std::pair<std::int64_t, std::int64_t>> test_shapes() {
  if (kl::sanitizing()) return {{1, 1}, {5, 31}, {33, 33}, {9, 1000}, {2, 4096}, {3, 4097}, {2, 20000}};
  return {{1, 1},     {3, 1},     {1, 7},     {5, 31},    {64, 32},    {33, 33},    {7, 100},     {5, 128},  {37, 256},
          {9, 1000},  {4, 1024},  {3, 2047},  {5, 2048},  {6, 3072},   {3, 4097},   {1000, 4096}, {4, 6144}, {2, 8192},
          {3, 12345}, {2, 16384}, {2, 50257}, {2, 65536}, {1, 131072}, {2, 300000}, {1, 600001}};
}

template <class T>
void every_step_every_shape() {
  for (const auto& sh : test_shapes()) {
    const std::int64_t rows = sh.first, cols = sh.second;
    const auto seed = kl::seed_for(static_cast<std::uint64_t>(rows * 1000003 + cols));
    check_all_steps<T>(quantize<T>(kl::normal_floats(rows * cols, 0.0, 2.0, seed)), rows, cols, 1.f, true);
    check_all_steps<T>(quantize<T>(kl::integer_floats(rows * cols, -3, 3, seed + 1)), rows, cols);  // many ties
  }
}

// e^x for n values of x, by kl::exp_ftz (steps 2-7), by __expf (the same without .ftz) and by expf (step 1).
__global__ void exp_probe(const float* x, int n, float* fast, float* intrinsic, float* accurate) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    fast[i] = kl::exp_ftz(x[i]);
    intrinsic[i] = __expf(x[i]);
    accurate[i] = expf(x[i]);
  }
}

// A few shapes that reach every step and both pack paths, for the special-value cases.
// 3072 and 8192: step 3's rows in registers (f32 and f16); the rest its shared-memory cache, step 2 and beyond.
const std::vector<std::pair<std::int64_t, std::int64_t>> kSpecialShapes = {{4, 1},    {4, 7},    {6, 33},   {4, 1000},
                                                                           {4, 3072}, {3, 4097}, {3, 8192}, {3, 65536}};

}  // namespace

TEST_CASE("the step table: unique names, steps 1-7 then the library, the dispatcher at step 7") {
  std::set<std::string> names;
  for (const auto& st : kSteps) {
    CHECK(names.insert(st.name).second);
    CHECK((st.launch.run != nullptr && st.launch.support != nullptr));
    CHECK(st.needs_sm == (std::string(st.name) == "cluster" ? 90 : 0));
    CHECK((st.launch.run == lesson04::launch_cluster) == (st.needs_sm == 90));  // arch_na asks step 6 alone
  }
  CHECK(std::size(kSteps) == 8);
  CHECK(kSteps[std::size(kSteps) - 1].library);
  CHECK(std::string(kSteps[lesson04::kDispatchStep - 1].name) == "dispatch");
}

TEST_CASE("reference: rows sum to 1, K = 1 gives 1, a shift changes nothing, scale multiplies x") {
  const auto x = kl::normal_floats(3 * 100, 0, 3, kl::seed_for(40));
  const auto y = lesson04::ref_softmax(x, 3, 100);
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 100; ++c) s += y[r * 100 + c];
    CHECK(s == doctest::Approx(1.0).epsilon(1e-12));
  }
  CHECK(lesson04::ref_softmax({123.f, -4.f, 1e30f}, 3, 1) == std::vector<double>{1.0, 1.0, 1.0});
  std::vector<float> shifted = x, doubled = x;
  for (auto& v : shifted) v += 1000.f;  // rounds x to steps of 2^-14
  for (auto& v : doubled) v *= 2.f;     // exact
  const auto ys = lesson04::ref_softmax(shifted, 3, 100);
  const auto y2 = lesson04::ref_softmax(doubled, 3, 100);
  const auto yscaled = lesson04::ref_softmax(x, 3, 100, 2.0);
  for (std::size_t i = 0; i < y.size(); ++i) {
    CHECK(ys[i] == doctest::Approx(y[i]).epsilon(1e-3));
    CHECK(y2[i] == doctest::Approx(yscaled[i]).epsilon(1e-12));
  }
  CHECK(lesson04::ref_softmax({1000.f, 1000.f}, 1, 2) == std::vector<double>{0.5, 0.5});  // no overflow
}

TEST_CASE("reference: -inf gives 0, a row of only -inf or with NaN or +inf is all NaN, other rows unaffected") {
  const float inf = INFINITY;
  const auto y = lesson04::ref_softmax({0.f, -inf, 0.f, -inf, -inf, -inf, 1.f, NAN, 2.f, inf, 1.f, 2.f}, 4, 3);
  CHECK(y[0] == 0.5);
  CHECK(y[1] == 0.0);
  for (int i = 3; i < 12; ++i) CHECK(std::isnan(y[i]));
}

TEST_CASE("combine: merging two parts equals the (max, sum) of their union, in any order") {
  const auto a = kl::normal_floats(50, 0, 3, kl::seed_for(41));
  const auto b = kl::normal_floats(70, 5, 3, kl::seed_for(42));  // a larger max: a's sum is rescaled
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const MaxSum want = direct_stats(both);
  for (const MaxSum got :
       {kl::combine(direct_stats(a), direct_stats(b)), kl::combine(direct_stats(b), direct_stats(a))}) {
    CHECK(got.m == want.m);
    CHECK(got.s == doctest::Approx(want.s).epsilon(1e-6));
  }
}

TEST_CASE("combine: (-inf, 0) is the identity and two of them stay (-inf, 0), NaN wins") {
  const MaxSum empty{-INFINITY, 0.f}, part{2.f, 3.5f};
  CHECK(kl::combine(empty, part).m == 2.f);
  CHECK(kl::combine(empty, part).s == 3.5f);
  CHECK(kl::combine(part, empty).s == 3.5f);
  const MaxSum none = kl::combine(empty, empty);
  CHECK(none.m == -INFINITY);
  CHECK(none.s == 0.f);  // not NaN: a lane that saw nothing must not poison its row
  const MaxSum nan = kl::combine(part, {NAN, 1.f});
  CHECK(std::isnan(nan.m));
  CHECK(std::isnan(nan.s));
}

TEST_CASE("tolerance: the reference rounded to each dtype passes, an error of 1% does not") {
  const std::int64_t rows = 4, cols = 1000;
  const auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(43));
  const auto ref = lesson04::ref_softmax(x, rows, cols);
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const std::string dtype = lesson04::dtype_name(d);
    CAPTURE(dtype);
    std::vector<float> rounded(ref.size()), wrong(ref.size());
    const lesson04::Tolerance tol = lesson04::tolerance(d);
    lesson04::with_type(d, [&](auto t) {
      using T = decltype(t);
      std::vector<T> in_type(ref.size());
      for (std::size_t i = 0; i < ref.size(); ++i) {
        in_type[i] = kl::from_float<T>(static_cast<float>(ref[i]));
        rounded[i] = kl::to_float(in_type[i]);
      }
      CHECK(lesson04::max_error(in_type, ref, tol) == lesson04::max_error(rounded, ref, tol));  // T read as float
    });
    CHECK(lesson04::max_error(rounded, ref, tol) <= tol.rel);
    for (std::size_t i = 0; i < ref.size(); ++i) wrong[i] = static_cast<float>(ref[i] * 1.01);
    CHECK(lesson04::max_error(wrong, ref, tol) > tol.rel);
    rounded[17] = NAN;
    CHECK(std::isinf(lesson04::max_error(rounded, ref, tol)));
  }
}

TEST_CASE("widest_pack: 16 bytes when pointers and K allow, less for odd K or unaligned views") {
  alignas(16) static float buf[64];
  CHECK(kl::widest_pack(buf, buf, 4096, 4) == 4);
  CHECK(kl::widest_pack(buf, buf, 4096, 2) == 8);
  CHECK(kl::widest_pack(buf, buf, 1000, 2) == 8);
  CHECK(kl::widest_pack(buf, buf, 4097, 4) == 1);
  CHECK(kl::widest_pack(buf, buf, 50, 4) == 2);
  CHECK(kl::widest_pack(buf + 1, buf, 4096, 4) == 1);
  CHECK(kl::widest_pack(buf, buf + 2, 4096, 4) == 2);
}

TEST_CASE("the block steps' pack: 16 bytes for any K while x and y are misaligned alike, else 1") {
  alignas(16) static float buf[64];
  auto block_pack = [](const float* x, float* y, std::int64_t cols, Dtype d) {
    int got = 0;
    const lesson04::Problem p{x, y, 2, cols, d, 1.f};
    if (d == Dtype::f32) lesson04::with_block_pack<float>(p, [&](auto pack) { got = decltype(pack)::value; });
    else lesson04::with_block_pack<__half>(p, [&](auto pack) { got = decltype(pack)::value; });
    return got;
  };
  CHECK(block_pack(buf, buf + 32, 4096, Dtype::f32) == 4);
  CHECK(block_pack(buf, buf + 32, 4097, Dtype::f32) == 4);  // odd K: single elements at the row ends only
  CHECK(block_pack(buf + 1, buf + 33, 50257, Dtype::f32) == 4);
  CHECK(block_pack(buf + 1, buf + 32, 4096, Dtype::f32) == 1);
  CHECK(block_pack(buf, buf + 32, 50257, Dtype::f16) == 8);
  CHECK(block_pack(buf, buf + 33, 4096, Dtype::f16) == 1);
}

TEST_CASE("step 2's geometry: short rows share a warp, long rows spread packs over 32 lanes") {
  CHECK(lesson04::warp_shape(1, 1).lanes == 1);
  CHECK(lesson04::warp_shape(7, 1).lanes == 8);
  CHECK(lesson04::warp_shape(32, 4).lanes == 8);  // 4 rows per warp
  CHECK(lesson04::warp_shape(128, 4).lanes == 32);
  CHECK(lesson04::warp_shape(128, 4).packs == 1);
  CHECK(lesson04::warp_shape(1000, 4).packs == 8);
  CHECK(lesson04::warp_shape(2048, 1).packs == 64);
  CHECK(lesson04::warp_shape(2048, 8).packs == 8);
  // 16-bit rows of more than 8 packs: two packs a lane; shorter rows keep one pack a lane
  CHECK(lesson04::warp_shape(128, 8, 2).lanes == 8);
  CHECK(lesson04::warp_shape(128, 8, 2).packs == 2);
  CHECK(lesson04::warp_shape(256, 8, 2).lanes == 16);
  CHECK(lesson04::warp_shape(256, 8, 2).packs == 2);
  CHECK(lesson04::warp_shape(64, 8, 2).lanes == 8);
  CHECK(lesson04::warp_shape(64, 8, 2).packs == 1);
  CHECK(lesson04::warp_shape(8, 8, 2).lanes == 1);
  CHECK(lesson04::warp_shape(100, 4, 2).lanes == 16);  // 25 packs, rounded up to 32
  CHECK(lesson04::warp_shape(512, 8, 2).lanes == 32);
  CHECK(lesson04::warp_shape(512, 8, 2).packs == 2);
  CHECK(lesson04::warp_shape(2048, 8, 2).packs == 8);
  for (std::int64_t cols : {1, 5, 33, 100, 1000, 2048})  // every pack of the row has a lane
    for (int pack : {1, 2, 4, 8})
      for (int min_packs : {1, 2}) {
        const auto w = lesson04::warp_shape(cols, pack, min_packs);
        CHECK(std::int64_t{w.lanes} * w.packs * pack >= cols);
        CHECK(w.lanes <= 32);
      }
}

TEST_CASE("step 3's block size: the smallest that keeps the most threads resident") {
  CHECK(lesson04::kBlockSizes[lesson04::fullest_block({14, 8, 4, 2})] == 256);
  CHECK(lesson04::kBlockSizes[lesson04::fullest_block({1, 1, 1, 1})] == 1024);
  CHECK(lesson04::kBlockSizes[lesson04::fullest_block({16, 8, 4, 2})] == 128);
}

TEST_CASE("step 6's cluster: 2 to 8 CTAs, parts aligned to the pack") {
  CHECK(lesson04::cluster_size(8192, 4) == 2);
  CHECK(lesson04::cluster_size(65536, 4) == 4);
  CHECK(lesson04::cluster_size(131072, 4) == 8);
  CHECK(lesson04::cluster_size(131072, 2) == 4);
  CHECK(lesson04::cluster_size(600001, 4) == 8);
  CHECK(lesson04::cluster_part(50257, 4, 1) == 12565);
  CHECK(lesson04::cluster_part(65536, 4, 4) == 16384);
  CHECK(lesson04::cluster_part(10, 4, 4) == 4);
}

TEST_CASE("which steps say n/a: step 2 past 2048, step 3 past shared memory, step 6 outside its range") {
  CHECK(lesson04::warp_support(shape(1, 2048), kH100).empty());
  CHECK_FALSE(lesson04::warp_support(shape(1, 2049), kH100).empty());
  CHECK(lesson04::cached_support(shape(1, 50257), kH100).empty());
  CHECK_FALSE(lesson04::cached_support(shape(1, 65536), kH100).empty());
  CHECK(lesson04::cached_support(shape(1, 65536, Dtype::f16), kH100).empty());
  CHECK_FALSE(lesson04::cached_support(shape(1, 50257), kA100).empty());
  CHECK(lesson04::cluster_support(shape(1, 65536), kH100).empty());
  CHECK(lesson04::cluster_support(shape(1, 300000), kH100).empty());
  CHECK_FALSE(lesson04::cluster_support(shape(1, 600001), kH100).empty());  // 8 CTAs cannot hold 2.3 MiB
  CHECK_FALSE(lesson04::cluster_support(shape(1, 4096), kH100).empty());    // one block holds it
  CHECK_FALSE(lesson04::cluster_support(shape(1, 65536), kA100).empty());   // no clusters before sm_90
  CHECK_FALSE(lesson04::cudnn_support(shape(1, 100, Dtype::f32, 0.5f), kH100).empty());
}

TEST_CASE("the dispatcher: registers, then shared memory, then a cluster, online past that") {
  using lesson04::choose_step;
  // The table of README § step 7 (H100), f32 and f16 in 16-byte packs, then narrower.
  CHECK(choose_step(1, Dtype::f32, 1, kH100) == 2);
  CHECK(choose_step(32, Dtype::f32, 4, kH100) == 2);
  CHECK(choose_step(1024, Dtype::f32, 4, kH100) == 2);
  CHECK(choose_step(2048, Dtype::f32, 4, kH100) == 2);
  CHECK(choose_step(4096, Dtype::f32, 4, kH100) == 3);
  CHECK(choose_step(8192, Dtype::f32, 4, kH100) == 3);
  CHECK(choose_step(16384, Dtype::f32, 4, kH100) == 3);  // 64 KiB: still the cache in f32
  CHECK(choose_step(16385, Dtype::f32, 1, kH100) == 6);
  CHECK(choose_step(32768, Dtype::f32, 4, kH100) == 6);
  CHECK(choose_step(131072, Dtype::f32, 4, kH100) == 6);
  CHECK(choose_step(2048, Dtype::f16, 8, kH100) == 2);
  CHECK(choose_step(4096, Dtype::f16, 8, kH100) == 3);   // the cache
  CHECK(choose_step(16384, Dtype::f16, 8, kH100) == 3);  // 32 KiB
  CHECK(choose_step(16384, Dtype::bf16, 8, kH100) == 3);
  CHECK(choose_step(32768, Dtype::f16, 8, kH100) == 6);  // 64 KiB: a cluster in 16-bit types
  CHECK(choose_step(4097, Dtype::f16, 1, kH100) == 3);
  CHECK(choose_step(12345, Dtype::f16, 1, kH100) == 3);
  CHECK(choose_step(1000, Dtype::f32, 1, kH100) == 2);
  CHECK(choose_step(1025, Dtype::f32, 1, kH100) == 3);  // narrow packs leave registers at 1024
  CHECK(choose_step(2048, Dtype::f16, 1, kH100) == 3);  // unaligned: scalar loads, leave registers sooner
  CHECK(choose_step(2048, Dtype::f32, 2, kH100) == 3);
  CHECK(choose_step(4097, Dtype::f32, 1, kH100) == 3);
  CHECK(choose_step(50257, Dtype::f32, 1, kH100) == 6);
  CHECK(choose_step(50257, Dtype::f16, 1, kH100) == 6);
  CHECK(choose_step(600001, Dtype::f32, 1, kH100) == 5);
  CHECK(choose_step(32768, Dtype::f32, 4, kA100) == 3);  // no clusters: the cache while it fits
  CHECK(choose_step(65536, Dtype::f32, 4, kA100) == 5);
  // An H100 running a build without step 6's sm_90 code (PTX for compute_80 only): no clusters either.
  CHECK(choose_step(32768, Dtype::f32, 4, kH100, false) == 3);
  CHECK(choose_step(32768, Dtype::f16, 8, kH100, false) == 3);
  CHECK(choose_step(50257, Dtype::f32, 1, kH100, false) == 3);
  CHECK(choose_step(65536, Dtype::f32, 4, kH100, false) == 5);
  CHECK(choose_step(2048, Dtype::f32, 4, kH100, false) == 2);
  for (int k : {1, 100, 4096, 8192, 50257, 131072, 600001})
    for (Dtype d : {Dtype::f32, Dtype::f16}) CHECK(choose_step(k, d, 4, kH100) != 4);  // step 4 never wins
  for (std::int64_t k = 1; k <= 1 << 20; k = k * 3 + 1) {
    for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
      const int s = choose_step(k, d, 1, kH100);
      CHECK(kSteps[s - 1].launch.support(shape(1, k, d), kH100).empty());  // never a step that says n/a
      for (const lesson04::DeviceCaps& caps : {kH100, kA100}) {
        const int t = choose_step(k, d, 1, caps, false);  // never step 6 where it cannot run
        CHECK(t != 6);
        CHECK(kSteps[t - 1].launch.support(shape(1, k, d), caps).empty());
      }
    }
  }
}

TEST_CASE("--sweep: K = 32 ... 131072 and 1000, 4097, 50257, each with M * K close to 2^26") {
  const auto shapes = lesson04::sweep_shapes();
  CHECK(shapes.size() == 16);
  std::set<std::int64_t> ks;
  for (const auto& [m, k] : shapes) {
    ks.insert(k);
    CHECK(std::fabs(static_cast<double>(m * k) / (1 << 26) - 1.0) < 0.01);
  }
  for (std::int64_t k : {32, 64, 1000, 4096, 4097, 50257, 131072}) CHECK(ks.count(k) == 1);
  CHECK(lesson04::default_rows(4096) == 16384);
  CHECK_THROWS_AS(lesson04::parse_dtype("f64"), kl::UsageError);
}

TEST_CASE("shapes: defaults K = 4096 and M = 2^26 / K; K above kMaxCols and M * K above 2^40 are refused") {
  using lesson04::shapes;
  CHECK(shapes(std::nullopt, std::nullopt, false) == std::vector<lesson04::Shape>{{16384, 4096}});
  CHECK(shapes(std::nullopt, 1000, false) == std::vector<lesson04::Shape>{{67109, 1000}});
  CHECK(shapes(3, 7, false) == std::vector<lesson04::Shape>{{3, 7}});
  CHECK(shapes(std::nullopt, std::nullopt, true) == lesson04::sweep_shapes());
  CHECK(lesson04::kMaxCols == (std::int64_t{1} << 31) - 512);
  CHECK(shapes(2, lesson04::kMaxCols, false).size() == 1);
  CHECK_THROWS_AS(shapes(2, lesson04::kMaxCols + 1, false), kl::UsageError);  // row 1's pack index would wrap
  CHECK_THROWS_AS(shapes(1, INT_MAX, false), kl::UsageError);
  CHECK(shapes(std::int64_t{1} << 20, std::int64_t{1} << 20, false).size() == 1);
  CHECK_THROWS_AS(shapes(std::int64_t{1} << 20, (std::int64_t{1} << 20) + 1, false), kl::UsageError);
}

TEST_SUITE("gpu") {
  TEST_CASE("every step and the dispatcher match the float64 softmax, f32") { every_step_every_shape<float>(); }
  TEST_CASE("every step and the dispatcher match the float64 softmax, f16") { every_step_every_shape<__half>(); }
  TEST_CASE("every step and the dispatcher match the float64 softmax, bf16") {
    every_step_every_shape<__nv_bfloat16>();
  }

  TEST_CASE("M = 10^6 short rows") {
    if (kl::sanitizing()) return;
    for (std::int64_t cols : {1, 7, 32}) {
      const std::int64_t rows = 1000000;
      const auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(44 + cols));
      check_all_steps<float>(x, rows, cols);
      check_all_steps<__half>(quantize<__half>(x), rows, cols);
    }
  }

  TEST_CASE("K = 1 gives exactly 1 whatever the input") {
    const std::vector<float> x = {-1e4f, 0.f, 3.f, 1e4f, -7.5f};
    for (int i : steps_for(5, 1, Dtype::f32, 1.f, false)) {
      const std::string step = kSteps[i].name;
      CAPTURE(step);
      CHECK(run_step<float>(kSteps[i], x, 5, 1) == std::vector<float>(5, 1.f));
      CHECK(run_step<__half>(kSteps[i], x, 5, 1) == std::vector<float>(5, 1.f));
    }
  }

  TEST_CASE("inputs shifted by +-1e4: the max subtraction keeps e^x finite") {
    for (const auto& sh : kSpecialShapes) {
      const std::int64_t rows = sh.first, cols = sh.second;
      for (float shift : {1e4f, -1e4f}) {
        auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(45 + cols));
        for (auto& v : x) v += shift;
        CAPTURE(shift);
        check_all_steps<float>(x, rows, cols);
        check_all_steps<__half>(quantize<__half>(x), rows, cols);
        check_all_steps<__nv_bfloat16>(quantize<__nv_bfloat16>(x), rows, cols);
      }
    }
  }

  TEST_CASE("-inf entries give exactly 0; a row of only -inf is NaN (as in PyTorch), the others are unaffected") {
    for (const auto& sh : kSpecialShapes) {
      const std::int64_t rows = sh.first, cols = sh.second;
      if (cols < 2) continue;
      auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(46 + cols));
      kl::Rng rng(kl::seed_for(47));
      for (std::int64_t r = 0; r < rows; ++r)
        for (int j = 0; j < 3; ++j) x[r * cols + static_cast<std::int64_t>(rng.index(cols - 1))] = -INFINITY;
      for (std::int64_t c = 0; c < cols; ++c) x[1 * cols + c] = -INFINITY;  // row 1: all masked
      const auto ref = lesson04::ref_softmax(x, rows, cols);
      for (int i : steps_for(rows, cols, Dtype::f32, 1.f, false)) {
        const std::string step = kSteps[i].name;
        CAPTURE(step);
        CAPTURE(cols);
        const auto y = run_step<float>(kSteps[i], x, rows, cols, 1.f, 0x3C);  // finite poison: NaN must be written
        CHECK(lesson04::max_error(y, ref, lesson04::tolerance(Dtype::f32)) <= 1e-4);
        for (std::size_t j = 0; j < x.size(); ++j)
          if (x[j] == -INFINITY && j / cols != 1) CHECK(y[j] == 0.f);
        for (std::int64_t c = 0; c < cols; ++c) CHECK(std::isnan(y[cols + c]));
        const auto xh = quantize<__half>(x);
        const auto yh = run_step<__half>(kSteps[i], xh, rows, cols, 1.f, 0x3C);
        const lesson04::Tolerance tol = lesson04::tolerance(Dtype::f16);
        CHECK(lesson04::max_error(yh, lesson04::ref_softmax(xh, rows, cols), tol) <= tol.rel);
      }
    }
  }

  TEST_CASE("a NaN makes its row NaN and leaves the other rows alone") {
    for (const auto& sh : kSpecialShapes) {
      const std::int64_t rows = sh.first, cols = sh.second;
      auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(48 + cols));
      x[2 * cols + cols / 2] = NAN;
      for (int i : steps_for(rows, cols, Dtype::f32, 1.f, false)) {
        const std::string step = kSteps[i].name;
        CAPTURE(step);
        CAPTURE(cols);
        for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
          lesson04::with_type(d, [&](auto t) {
            using T = decltype(t);
            const auto xq = quantize<T>(x);
            const auto y = run_step<T>(kSteps[i], xq, rows, cols, 1.f, 0x3C);
            const lesson04::Tolerance tol = lesson04::tolerance(d);
            CHECK(lesson04::max_error(y, lesson04::ref_softmax(xq, rows, cols), tol) <= tol.rel);
            for (std::int64_t c = 0; c < cols; ++c) CHECK(std::isnan(y[2 * cols + c]));
          });
        }
      }
    }
  }

  TEST_CASE("unaligned views: misaligned alike (16-byte packs between single ends) or not (packs of 1)") {
    for (const auto& sh : kSpecialShapes) {
      const std::int64_t rows = sh.first, cols = sh.second;
      const auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(49 + cols));
      check_all_steps<float>(x, rows, cols, 1.f, false, {1, 1});
      check_all_steps<float>(x, rows, cols, 1.f, false, {3, 2});
      check_all_steps<__half>(quantize<__half>(x), rows, cols, 1.f, false, {3, 3});
      check_all_steps<__half>(quantize<__half>(x), rows, cols, 1.f, false, {7, 0});
    }
    kl::DeviceBuffer<float> b(64);
    CHECK(kl::widest_pack(b.data() + 1, b.data(), 4096, 4) == 1);
  }

  TEST_CASE("the scale factor: softmax(x * scale), including negative scales") {
    for (const auto& sh : kSpecialShapes) {
      const std::int64_t rows = sh.first, cols = sh.second;
      const auto x = kl::normal_floats(rows * cols, 0, 3, kl::seed_for(50 + cols));
      for (float scale : {0.125f, -1.f, 0.f}) {
        CAPTURE(scale);
        check_all_steps<float>(x, rows, cols, scale);
        check_all_steps<__half>(quantize<__half>(x), rows, cols, scale);
        check_all_steps<__nv_bfloat16>(quantize<__nv_bfloat16>(x), rows, cols, scale);
      }
    }
  }

  TEST_CASE("M = 0 or K = 0: nothing is launched and the output is untouched") {
    for (const auto& st : kSteps) {
      const std::string step = st.name;
      CAPTURE(step);
      for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{0, 100}, {100, 0}, {0, 0}}) {
        kl::DeviceBuffer<float> x(128), y(128);
        y.poison(0x3C);
        lesson04::Workspace ws;
        st.launch(lesson04::Problem{x.data(), y.data(), rows, cols, Dtype::f32, 1.f}, ws, nullptr);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        const auto got = y.download();
        std::vector<float> poison(128);
        std::memset(poison.data(), 0x3C, poison.size() * sizeof(float));
        CHECK(std::memcmp(got.data(), poison.data(), 128 * sizeof(float)) == 0);
      }
    }
    lesson04::softmax<float>(nullptr, nullptr, 0, 4096);
    CHECK(cudaGetLastError() == cudaSuccess);
  }

  TEST_CASE("exp_ftz vs expf: relative error over the x softmax feeds them, [-87, 0]; __expf gives the same bits") {
    const int n = 1 << 20;
    const auto x = kl::uniform_floats(n, -87.0, 0.0, kl::seed_for(52));
    const kl::DeviceBuffer<float> dx(x);
    kl::DeviceBuffer<float> fast(n), intrinsic(n), accurate(n);
    exp_probe<<<n / 256, 256>>>(dx.data(), n, fast.data(), intrinsic.data(), accurate.data());
    CUDA_CHECK_LAUNCH();
    const auto f = fast.download(), in = intrinsic.download(), a = accurate.download();
    double worst_fast = 0, worst_accurate = 0;
    int differ = 0;  // .ftz changes only results below 2^-126, which e^x on [-87, 0] never gives
    for (int i = 0; i < n; ++i) {
      const double e = std::exp(static_cast<double>(x[i]));
      worst_fast = std::max(worst_fast, std::fabs(f[i] - e) / e);
      worst_accurate = std::max(worst_accurate, std::fabs(a[i] - e) / e);
      differ += f[i] != in[i];
    }
    MESSAGE("max relative error on [-87, 0]: exp_ftz ", worst_fast, ", expf ", worst_accurate);
    CHECK(differ == 0);
    CHECK(worst_accurate <= 0x1p-22);  // expf: within 2 ulp
    CHECK(worst_fast <= 4e-6);         // ~2^-22 + the rounding of x * log2(e), largest at x = -87
    CHECK(worst_fast > worst_accurate);
  }

  TEST_CASE("the public API runs the dispatcher") {
    const std::int64_t rows = 3, cols = 777;
    const auto x = kl::normal_floats(rows * cols, 0, 2, kl::seed_for(51));
    const kl::DeviceBuffer<float> dx(x);
    kl::DeviceBuffer<float> dy(x.size());
    dy.poison();
    lesson04::softmax(dx.data(), dy.data(), rows, cols, 0.5f);
    CUDA_CHECK(cudaDeviceSynchronize());
    const lesson04::Tolerance tol = lesson04::tolerance(Dtype::f32);
    CHECK(lesson04::max_error(dy.download(), lesson04::ref_softmax(x, rows, cols, 0.5), tol) <= tol.rel);
  }
}
