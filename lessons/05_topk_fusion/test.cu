// Lesson 05 checks. CPU cases: the keys' order, the reference and its checker, K rounding, argument
// validation, the dispatcher's choices, step 6's and step 8's slices, the step table, the sweep. The "gpu"
// suite runs every step (and the dispatcher) on fresh logits in all three dtypes and many shapes
// and K, outputs poisoned, against the float64 reference; then the special values: ties, -inf,
// NaN, +inf; unaligned views; R = 1 and R = 10^5; bad K; graph capture; the public API.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/random.hpp"
#include "common/timing.cuh"
#include "lessons/05_topk_fusion/run.cuh"

using lesson05::Dtype;
using lesson05::kSteps;

namespace {

constexpr int kH100Sms = 132;

// Rounds to T and back, so the reference sees what the GPU reads.
template <class T>
std::vector<float> quantize(std::vector<float> v) {
  for (auto& x : v) x = kl::to_float(kl::from_float<T>(x));
  return v;
}

// Q(a, x) = Γ(a, x) / Γ(a), the regularised upper incomplete gamma function (a series below x = a + 1,
// Lentz's continued fraction above): a chi-square's p-value is Q(df / 2, chi2 / 2).
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double front = std::exp(-x + a * std::log(x) - std::lgamma(a));
  if (x < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-16; ++n) sum += term *= x / (a + n);
    return 1 - front * sum;
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = std::fabs(d) < 1e-300 ? 1e-300 : d;
    c = b + an / c;
    c = std::fabs(c) < 1e-300 ? 1e-300 : c;
    d = 1 / d;
    h *= d * c;
    if (std::fabs(d * c - 1) < 1e-16) break;
  }
  return front * h;
}

// The sampler's test row: 16 logits 0.3 apart, in shuffled order (so that indices do not follow ranks).
std::vector<float> sampler_row() {
  const int order[16] = {5, 12, 0, 9, 14, 3, 7, 1, 15, 10, 2, 8, 13, 6, 11, 4};
  std::vector<float> row(16);
  for (int i = 0; i < 16; ++i) row[i] = 0.3f * static_cast<float>(order[i]) - 2.0f;
  return row;
}

// The p-value of the counts of `tokens` against the reference distribution `kept` (index, probability):
// Pearson's chi-square, the cells expected below 5 draws merged into one. 0 when a token is outside.
double chi_square_p(const std::vector<int>& tokens, const std::vector<std::pair<int, double>>& kept) {
  std::map<int, std::int64_t> count;
  for (int t : tokens) ++count[t];
  for (const auto& seen : count)
    if (std::none_of(kept.begin(), kept.end(), [&](const auto& e) { return e.first == seen.first; })) return 0.0;
  const auto n = static_cast<double>(tokens.size());
  double chi2 = 0, small_expected = 0, small_seen = 0;
  int cells = 0;
  for (const auto& [t, p] : kept) {
    const double seen = static_cast<double>(count[t]);
    if (n * p < 5) {
      small_expected += n * p;
      small_seen += seen;
      continue;
    }
    chi2 += (seen - n * p) * (seen - n * p) / (n * p);
    ++cells;
  }
  if (small_expected > 0) {
    chi2 += (small_seen - small_expected) * (small_seen - small_expected) / small_expected;
    ++cells;
  }
  return cells < 2 ? 1.0 : gamma_q((cells - 1) / 2.0, chi2 / 2);
}

struct Output {
  std::vector<float> prob;
  std::vector<int> idx;
};

// Step 7 holds a row in a group's registers and turns longer rows down (NotSupported: n/a in the lesson);
// every other fused step takes any row.
bool turned_down(const lesson05::Step& st, int vocab) {
  return std::string(st.name) == "lanes_per_row" && vocab > lesson05::kMaxGroupRow;
}

// Whether every byte of b still holds `poison`: nothing was written to it.
bool still_poisoned(const kl::DeviceBuffer<float>& b, int poison) {
  const auto got = b.download();
  std::vector<float> want(got.size());
  std::memset(want.data(), poison, want.size() * sizeof(float));
  return std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
}

// Runs one step on x (rows x vocab, already rounded to T) with its outputs poisoned (`poison`
// bytes); `offset` elements shift the logits' pointer (an unaligned view).
template <class T>
Output run_step(const lesson05::Step& st, const std::vector<float>& x, std::int64_t rows, int vocab, int k,
                int poison = 0xFF, std::size_t offset = 0) {
  std::vector<T> xt(x.size() + offset);
  for (std::size_t i = 0; i < x.size(); ++i) xt[offset + i] = kl::from_float<T>(x[i]);
  const kl::DeviceBuffer<T> dx(xt);
  const auto out = static_cast<std::size_t>(rows * k);
  kl::DeviceBuffer<float> prob(out);
  kl::DeviceBuffer<int> idx(out);
  prob.poison(poison);
  idx.poison(poison);
  lesson05::Workspace ws;
  lesson05::run_step(st, {dx.data() + offset, prob.data(), idx.data(), rows, vocab, k, lesson05::dtype_of<T>()}, ws,
                     nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return {prob.download(out), idx.download(out)};
}

// Every step on one input against one reference: exact indices for the fused steps.
template <class T>
void check_all_steps(const std::vector<float>& xq, std::int64_t rows, int vocab, int k, std::size_t offset = 0) {
  const lesson05::Reference ref = lesson05::reference(xq, rows, vocab, k);
  for (const auto& st : kSteps) {
    const std::string step = st.name, dtype = lesson05::dtype_name(lesson05::dtype_of<T>());
    CAPTURE(step);
    CAPTURE(dtype);
    CAPTURE(rows);
    CAPTURE(vocab);
    CAPTURE(k);
    Output got;
    try {
      got = run_step<T>(st, xq, rows, vocab, k, 0xFF, offset);
    } catch (const kl::NotSupported&) {
      CHECK((!st.launch.fused || turned_down(st, vocab)));  // step 1, or step 7 on a long row
      continue;
    }
    CHECK_FALSE(turned_down(st, vocab));
    const lesson05::Tolerance tol = lesson05::tolerance(st.launch.fused ? Dtype::f32 : lesson05::dtype_of<T>());
    CHECK(lesson05::max_error(got.prob, got.idx, ref, xq, tol, st.launch.fused) <= tol.rel);
  }
}

// Shapes every lesson is checked on: a row shorter than a warp, awkward lengths (not multiples of the
// 4- or 8-element pack), MoE rows (step 7: every group width from 1 to 32 lanes, many rows per warp, the
// last warp part-filled, lanes past a row's end), vocabularies up to 262144; KL_SANITIZE=1 keeps small
// ones.
std::vector<std::pair<std::int64_t, int>> test_shapes() {
  if (kl::sanitizing()) return {{1, 1}, {3, 31}, {9, 33}, {70, 8}, {4, 1000}, {2, 4097}, {2, 9001}};
  return {{1, 1},     {3, 2},     {5, 31},    {21, 13},   {7, 33},     {64, 100},   {1000, 8},
          {333, 64},  {37, 200},  {97, 256},  {9, 1000},  {4, 1024},   {300, 4096}, {3, 4097},
          {2, 12345}, {3, 32000}, {3, 50257}, {2, 65536}, {1, 128256}, {2, 262144}};
}

std::vector<int> test_ks(int vocab) {
  std::vector<int> ks;
  for (int k : {1, 2, 5, 10, 32, 50, 64})
    if (k <= vocab && (!kl::sanitizing() || k == 1 || k == 2 || k == 5 || k == 64)) ks.push_back(k);
  return ks;
}

template <class T>
void every_step_every_shape() {
  for (const auto& [rows, vocab] : test_shapes()) {
    for (int k : test_ks(vocab)) {
      const auto seed = kl::seed_for(static_cast<std::uint64_t>(rows * 1000003 + vocab * 101 + k));
      check_all_steps<T>(quantize<T>(kl::normal_floats(rows * vocab, 0.0, 2.0, seed)), rows, vocab, k);
    }
  }
}

// The shapes the special-value cases use: each step's code paths (head, packs, tail; slices; step 7's
// whole-warp groups at V = 200).
std::vector<std::pair<std::int64_t, int>> special_shapes() {
  if (kl::sanitizing()) return {{4, 7}, {4, 1000}, {4, 4097}};
  return {{4, 7}, {4, 33}, {4, 200}, {4, 1000}, {4, 4097}, {4, 20011}};
}

struct SpecialCase {
  std::int64_t rows;
  int vocab, k;
};

// special_shapes() at K = 1 and 2 (step 7 keeps one or two slots a lane there) and at min(V, k) for
// each k of larger (past kMaximaK = 16: step 4 keeps its buffer's best by radix_keep).
std::vector<SpecialCase> special_cases(std::initializer_list<int> larger) {
  std::vector<SpecialCase> cases;
  for (const auto& [rows, vocab] : special_shapes()) {
    const int v = vocab;  // a lambda may not capture a structured binding before C++20
    std::vector<int> ks = {1, 2};
    for (int k : larger) ks.push_back(std::min(v, k));
    for (int k : ks)
      if (k <= v &&
          std::none_of(cases.begin(), cases.end(), [&](const SpecialCase& c) { return c.vocab == v && c.k == k; }))
        cases.push_back({rows, v, k});
  }
  return cases;
}

}  // namespace

TEST_CASE("the step table: unique names, unfused first, the dispatcher last") {
  std::set<std::string> names;
  for (const auto& st : kSteps) {
    CHECK(names.insert(st.name).second);
    CHECK((st.launch.run != nullptr));
  }
  CHECK(std::size(kSteps) == 9);
  CHECK_FALSE(kSteps[0].launch.fused);
  for (std::size_t i = 1; i < std::size(kSteps); ++i) CHECK(kSteps[i].launch.fused);
  CHECK(std::string(kSteps[lesson05::kDispatchStep - 1].name) == "dispatch");
  for (std::size_t i = 0; i < std::size(kSteps); ++i) {
    CHECK_FALSE(kSteps[i].library);  // step 1 is the ladder's first step, labelled "1" in the CSV
    CHECK(kSteps[i].needs_sm == 0);  // steps 4-6: __reduce_add_sync on sm_80+, shuffles below; step 8: sm_70+
  }
}

TEST_CASE("keys rank by logit, then by the lower index, NaN first, -0 equal to +0, and decode back") {
  const float inf = INFINITY;
  const std::vector<float> values = {NAN, inf, 1e30f, 3.f, 1.f, 1e-40f, 0.f, -0.f, -1e-40f, -2.f, -1e30f, -inf};
  for (std::size_t a = 0; a < values.size(); ++a) {
    for (std::size_t b = 0; b < values.size(); ++b) {
      for (int ia : {0, 7, 50000}) {
        for (int ib : {1, 7, 262143}) {
          if (a == b && ia == ib) continue;
          CAPTURE(values[a]);
          CAPTURE(values[b]);
          CHECK((lesson05::make_key(values[a], ia) > lesson05::make_key(values[b], ib)) ==
                lesson05::ranks_before(values[a], ia, values[b], ib));
        }
      }
    }
  }
  for (float v : values) {
    const lesson05::Key key = lesson05::make_key(v, 12345);
    CHECK(lesson05::key_index(key) == 12345);
    if (std::isnan(v)) CHECK(std::isnan(lesson05::key_value(key)));
    else CHECK(lesson05::key_value(key) == v);
    CHECK(key > 0);  // 0 is the empty slot, below every real key
  }
  CHECK(std::isnan(lesson05::key_value(0)));  // an empty slot's threshold: nothing is rejected yet
}

TEST_CASE("step 7's 32-bit keys of 16-bit logits rank as the 64-bit keys do, and decode back") {
  const float inf = INFINITY;
  const std::vector<float> values = {NAN, inf, 1e30f, 3.f, 1.f, 1e-7f, 1e-40f, 0.f, -0.f, -1e-7f, -2.f, -1e30f, -inf};
  auto check = [&](auto t) {
    using T = decltype(t);
    std::vector<float> q;  // the values as T holds them (1e30 is +inf in f16, 1e-40 a subnormal or 0)
    for (float v : values) q.push_back(kl::to_float(kl::from_float<T>(v)));
    for (std::size_t a = 0; a < q.size(); ++a) {
      for (std::size_t b = 0; b < q.size(); ++b) {
        for (int ia : {0, 7, 255}) {
          for (int ib : {1, 7, 65535}) {
            CAPTURE(q[a]);
            CAPTURE(q[b]);
            CHECK((lesson05::make_key32(kl::from_float<T>(q[a]), ia) >
                   lesson05::make_key32(kl::from_float<T>(q[b]), ib)) ==
                  (lesson05::make_key(q[a], ia) > lesson05::make_key(q[b], ib)));
          }
        }
      }
    }
    for (float v : q) {
      const lesson05::Key32 key = lesson05::make_key32(kl::from_float<T>(v), 1234);
      CHECK(lesson05::key_index(key) == 1234);
      if (std::isnan(v)) CHECK(std::isnan(lesson05::key32_value<T>(key)));
      else CHECK(lesson05::key32_value<T>(key) == v);
      CHECK(key > 0);
    }
  };
  check(__half{});
  check(__nv_bfloat16{});
  // Every NaN pattern (either sign, any payload) is the one NaN key, above +inf; -0 is +0.
  auto from_bits = [](auto t, unsigned short b) {
    decltype(t) x;
    std::memcpy(&x, &b, sizeof b);
    return x;
  };
  for (unsigned short b : {0x7C01, 0x7E00, 0xFC01, 0xFFFF})
    CHECK(lesson05::make_key32(from_bits(__half{}, b), 3) == lesson05::make_key32(kl::from_float<__half>(NAN), 3));
  for (unsigned short b : {0x7F81, 0x7FC0, 0xFF81, 0xFFFF})
    CHECK(lesson05::make_key32(from_bits(__nv_bfloat16{}, b), 3) ==
          lesson05::make_key32(kl::from_float<__nv_bfloat16>(NAN), 3));
  CHECK(lesson05::make_key32(from_bits(__half{}, 0x8000), 3) == lesson05::make_key32(from_bits(__half{}, 0), 3));
  CHECK(lesson05::make_key32(from_bits(__half{}, 0x7C00), 3) < lesson05::make_key32(from_bits(__half{}, 0x7C01), 3));
}

TEST_CASE("step 7's ordered ints rank as the floats do (-0 just below +0), and decode back") {
  const float inf = INFINITY;
  const std::vector<float> values = {-inf, -1e30f, -2.f, -1e-40f, -0.f, 0.f, 1e-40f, 1.f, 3.f, 1e30f, inf};  // rising
  auto ordered = [](float v) {
    int bits;
    std::memcpy(&bits, &v, sizeof bits);
    return lesson05::ordered_int(bits);
  };
  for (std::size_t a = 0; a + 1 < values.size(); ++a) CHECK(ordered(values[a]) < ordered(values[a + 1]));
  for (float v : values) {
    const int back = lesson05::ordered_int(ordered(v));
    float got;
    std::memcpy(&got, &back, sizeof got);
    CHECK(std::memcmp(&got, &v, sizeof v) == 0);
  }
}

TEST_CASE("step 7's sort network sorts every 0/1 input, and sort_best keeps the best 1 or 2 in order") {
  // Batcher's network sorts every input if it sorts every input of 0s and 1s (the 0-1 principle).
  for (unsigned bits = 0; bits < 256; ++bits) {
    unsigned keys[8], one[1], two[2];
    for (int i = 0; i < 8; ++i) keys[i] = (bits >> i) & 1u;
    unsigned copy1[8], copy2[8];
    std::memcpy(copy1, keys, sizeof keys);
    std::memcpy(copy2, keys, sizeof keys);
    lesson05::sort_registers(keys);
    for (int i = 0; i + 1 < 8; ++i) CHECK(keys[i] >= keys[i + 1]);
    lesson05::sort_best<1>(copy1, one);
    lesson05::sort_best<2>(copy2, two);
    CHECK(one[0] == keys[0]);
    CHECK((two[0] == keys[0] && two[1] == keys[1]));
  }
  unsigned long long keys[8] = {5, 9, 1, 7, 3, 8, 2, 6}, two[2];  // distinct keys, as step 7's are
  lesson05::sort_best<2>(keys, two);
  CHECK((two[0] == 9 && two[1] == 8));
  lesson05::sort_registers(keys);
  for (int i = 0; i + 1 < 8; ++i) CHECK(keys[i] > keys[i + 1]);
}

TEST_CASE("K rounds up to the compiled list lengths 1, 2, 4, ..., 64") {
  CHECK(lesson05::round_k(1) == 1);
  CHECK(lesson05::round_k(2) == 2);
  CHECK(lesson05::round_k(3) == 4);
  CHECK(lesson05::round_k(5) == 8);
  CHECK(lesson05::round_k(10) == 16);
  CHECK(lesson05::round_k(32) == 32);
  CHECK(lesson05::round_k(33) == 64);
  CHECK(lesson05::round_k(50) == 64);
  CHECK(lesson05::round_k(64) == 64);
  int seen = 0;
  lesson05::with_kc(50, [&](auto kc) { seen = kc(); });
  CHECK(seen == 64);
}

TEST_CASE("validate: K from 1 to 64 and at most V, R not negative") {
  const auto problem = [](std::int64_t rows, int vocab, int k) {
    return lesson05::Problem{nullptr, nullptr, nullptr, rows, vocab, k, Dtype::f32};
  };
  CHECK_NOTHROW(lesson05::validate(problem(4, 100, 10)));
  CHECK_NOTHROW(lesson05::validate(problem(0, 64, 64)));
  CHECK_NOTHROW(lesson05::validate(problem(1, 1, 1)));
  CHECK_THROWS_AS(lesson05::validate(problem(4, 5, 10)), kl::UsageError);  // K > V
  CHECK_THROWS_AS(lesson05::validate(problem(4, 100, 0)), kl::UsageError);
  CHECK_THROWS_AS(lesson05::validate(problem(4, 100, 65)), kl::UsageError);
  CHECK_THROWS_AS(lesson05::validate(problem(-1, 100, 1)), kl::UsageError);
  CHECK_THROWS_AS(lesson05::validate(problem(4, 0, 1)), kl::UsageError);
}

TEST_CASE("reference: sorted descending, ties by the lower index, probabilities of the whole row") {
  const std::vector<float> x = {1.f, 3.f, 2.f, 3.f, -1.f, 3.f, 0.f, 2.f};
  const lesson05::Reference ref = lesson05::reference(x, 1, 8, 5);
  CHECK(ref.idx == std::vector<int>{1, 3, 5, 2, 7});
  double s = 0;
  for (float v : x) s += std::exp(v - 3.0);
  CHECK(ref.prob[0] == doctest::Approx(1.0 / s).epsilon(1e-14));
  CHECK(ref.prob[3] == doctest::Approx(std::exp(-1.0) / s).epsilon(1e-14));
  CHECK(ref.prob[0] == ref.prob[2]);
  // a big random row: the first k of a full stable sort, each probability = the row's softmax
  const int vocab = 5000, k = 64;
  const auto y = kl::integer_floats(2 * vocab, -5, 5, kl::seed_for(501));  // many ties
  const lesson05::Reference r2 = lesson05::reference(y, 2, vocab, k);
  for (int row = 0; row < 2; ++row) {
    std::vector<int> order(vocab);
    for (int i = 0; i < vocab; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return y[row * vocab + a] > y[row * vocab + b]; });
    for (int j = 0; j < k; ++j) {
      CHECK(r2.idx[row * k + j] == order[j]);
      CHECK(r2.prob[row * k + j] == doctest::Approx(r2.p(y, row, order[j])).epsilon(1e-15));
    }
  }
}

TEST_CASE("reference: NaN ranks first and makes the row NaN, -inf ranks last with p = 0, only -inf is NaN") {
  const float inf = INFINITY;
  const std::vector<float> x = {1.f,  NAN,  2.f,  NAN,   // row 0: NaN positions first
                                -inf, 1.f,  -inf, -inf,  // row 1: one finite value
                                -inf, -inf, -inf, -inf,  // row 2: only -inf
                                0.f,  inf,  5.f,  1.f};  // row 3: +inf
  const lesson05::Reference ref = lesson05::reference(x, 4, 4, 3);
  CHECK(ref.idx == std::vector<int>{1, 3, 2, /**/ 1, 0, 2, /**/ 0, 1, 2, /**/ 1, 2, 3});
  for (int j = 0; j < 3; ++j) CHECK(std::isnan(ref.prob[j]));
  CHECK(ref.prob[3] == 1.0);
  CHECK(ref.prob[4] == 0.0);
  CHECK(ref.prob[5] == 0.0);
  for (int j = 6; j < 12; ++j) CHECK(std::isnan(ref.prob[j]));
}

TEST_CASE("max_error: the reference passes; a wrong, repeated or out-of-range index or a 1% error fails") {
  const int vocab = 300, k = 10;
  const auto x = kl::normal_floats(3 * vocab, 0, 2, kl::seed_for(502));
  const lesson05::Reference ref = lesson05::reference(x, 3, vocab, k);
  const lesson05::Tolerance tol = lesson05::tolerance(Dtype::f32);
  const std::vector<float> prob(ref.prob.begin(), ref.prob.end());
  CHECK(lesson05::max_error(prob, ref.idx, ref, x, tol, true) <= tol.rel);
  auto swapped = ref.idx;
  std::swap(swapped[3], swapped[4]);
  CHECK(std::isinf(lesson05::max_error(prob, swapped, ref, x, tol, true)));
  auto repeated = ref.idx;
  repeated[5] = repeated[4];
  CHECK(std::isinf(lesson05::max_error(prob, repeated, ref, x, tol, false)));
  auto outside = ref.idx;
  outside[0] = vocab;
  CHECK(std::isinf(lesson05::max_error(prob, outside, ref, x, tol, false)));
  auto off = prob;
  off[7] *= 1.01f;
  CHECK(lesson05::max_error(off, ref.idx, ref, x, tol, true) > tol.rel);
  // a near tie: two logits one float step apart may trade places in a rounded ranking (step 1)
  std::vector<float> tie = {2.f, std::nextafter(2.f, 3.f), 0.f, -1.f};
  const lesson05::Reference rt = lesson05::reference(tie, 1, 4, 2);
  const std::vector<float> pt(rt.prob.begin(), rt.prob.end());
  const std::vector<int> traded = {0, 1};
  CHECK(rt.idx == std::vector<int>{1, 0});
  CHECK(lesson05::max_error(pt, traded, rt, tie, tol, false) <= tol.rel);
  CHECK(std::isinf(lesson05::max_error(pt, traded, rt, tie, tol, true)));
}

TEST_CASE("tolerance: the reference rounded to each written dtype passes, an error of 1% does not") {
  const auto x = kl::normal_floats(4 * 1000, 0, 2, kl::seed_for(503));
  const lesson05::Reference ref = lesson05::reference(x, 4, 1000, 64);
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const std::string dtype = lesson05::dtype_name(d);
    CAPTURE(dtype);
    std::vector<float> rounded(ref.prob.size()), wrong(ref.prob.size());
    lesson05::with_type(d, [&](auto t) {
      using T = decltype(t);
      for (std::size_t i = 0; i < rounded.size(); ++i)
        rounded[i] = kl::to_float(kl::from_float<T>(static_cast<float>(ref.prob[i])));
    });
    for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] = static_cast<float>(ref.prob[i] * 1.02);
    const lesson05::Tolerance tol = lesson05::tolerance(d);
    CHECK(lesson05::max_error(rounded, ref.idx, ref, x, tol, true) <= tol.rel);
    CHECK(lesson05::max_error(wrong, ref.idx, ref, x, tol, true) > tol.rel);
  }
}

TEST_CASE(
    "the dispatcher: lanes sized to the row for MoE routing, a warp per row for many rows or short rows, a block for "
    "fewer, radix selects for decode") {
  using lesson05::choose_step;
  using lesson05::Dtype;
  CHECK(choose_step(4096, 50257, 10, kH100Sms) == 4);
  CHECK(choose_step(4096, 128256, 10, kH100Sms) == 4);
  CHECK(choose_step(100000, 257, 10, kH100Sms) == 4);
  CHECK(choose_step(1, 1000, 10, kH100Sms) == 4);  // short: not worth a block
  CHECK(choose_step(8, 4096, 10, kH100Sms) == 4);
  CHECK(choose_step(2112, 50257, 10, kH100Sms) == 4);
  CHECK(choose_step(528, 50257, 10, kH100Sms) == 4);  // a quarter of 16 warps per SM
  CHECK(choose_step(1024, 128256, 50, kH100Sms) == 4);
  CHECK(choose_step(527, 50257, 10, kH100Sms) == 5);
  CHECK(choose_step(256, 128256, 50, kH100Sms) == 5);
  CHECK(choose_step(66, 50257, 10, kH100Sms) == 5);  // 8 warps a row: a quarter of 16 per SM
  CHECK(choose_step(65, 50257, 10, kH100Sms) == 8);
  CHECK(choose_step(64, 128256, 50, kH100Sms) == 8);  // decode
  CHECK(choose_step(8, 128256, 10, kH100Sms) == 8);
  CHECK(choose_step(1, 4097, 10, kH100Sms) == 8);
  CHECK(choose_step(8, 128256, 1, kH100Sms) == 8);
  CHECK(choose_step(4096, 50257, 2, kH100Sms) == 4);   // K = 2: step 4, with its bound
  CHECK(choose_step(4096, 128256, 1, kH100Sms) == 4);  // K = 1 too: step 4's bound tracks the row's max
  CHECK(choose_step(4096, 50257, 1, kH100Sms) == 4);
  CHECK(choose_step(4096, 50257, 3, kH100Sms) == 4);
  CHECK(choose_step(2111, 50257, 1, kH100Sms) == 4);
  CHECK(choose_step(100000, 257, 1, kH100Sms) == 4);
  // MoE routing (V <= 256): a group of lanes sized to the row, at any R and K
  CHECK(choose_step(65536, 8, 2, kH100Sms) == 7);
  CHECK(choose_step(100000, 100, 10, kH100Sms) == 7);
  CHECK(choose_step(1, 8, 1, kH100Sms) == 7);
  CHECK(choose_step(16384, 128, 8, kH100Sms) == 7);
  CHECK(choose_step(16384, 129, 8, kH100Sms) == 7);
  CHECK(choose_step(1, 256, 64, kH100Sms) == 7);
  CHECK(choose_step(16384, 256, 2, kH100Sms) == 7);
  CHECK(choose_step(65536, 129, 1, kH100Sms) == 7);
  CHECK(lesson05::slice_count(1, 4097, 64, kH100Sms) == 2);  // step 6: past kShortRow a row holds two slices
}

TEST_CASE("step 7's groups: the fewest lanes (a power of two, at most 32) that hold at most 8 logits each") {
  using lesson05::lanes_per_row;
  CHECK(lanes_per_row(1) == 1);
  CHECK(lanes_per_row(8) == 1);
  CHECK(lanes_per_row(9) == 2);
  CHECK(lanes_per_row(64) == 8);
  CHECK(lanes_per_row(65) == 16);
  CHECK(lanes_per_row(256) == 32);
  CHECK(lanes_per_row(257) == 32);
  CHECK(lanes_per_row(lesson05::kMaxVocab) == 32);
  for (int vocab = 1; vocab <= 300; ++vocab) {
    const int g = lanes_per_row(vocab);
    CHECK(32 % g == 0);  // groups never straddle a warp
    CHECK((g == 32 || std::int64_t{g} * lesson05::kLogitsPerLane >= vocab));
    CHECK((g == 1 || std::int64_t{g / 2} * lesson05::kLogitsPerLane < vocab));
  }
}

TEST_CASE("step 6's slices: about two blocks per SM, each at least max(256, 32 K) logits, multiples of 8") {
  using lesson05::slice_count;
  CHECK(slice_count(8, 128256, 50, kH100Sms) == 33);
  CHECK(slice_count(1, 50257, 1, kH100Sms) == 196);
  CHECK(slice_count(1, 50257, 64, kH100Sms) == 24);
  CHECK(slice_count(1, 1000, 1, kH100Sms) == 3);
  CHECK(slice_count(1, 100, 1, kH100Sms) == 1);
  CHECK(slice_count(4096, 50257, 10, kH100Sms) == 2);  // step 6 run on many rows still splits
  for (int vocab : {1, 7, 1000, 4097, 50257, 262144}) {
    for (int slices : {1, 2, 3, 33, 196}) {
      const int len = lesson05::slice_length(vocab, slices);
      CHECK(len % 8 == 0);
      CHECK(std::int64_t{len} * slices >= vocab);
    }
  }
}

TEST_CASE(
    "step 8's slices: a chunk of 4096 each, at most 4096 / K (the merge's keys fit a chunk), chunks shared evenly") {
  using lesson05::kRadixChunk;
  using lesson05::radix_chunks;
  using lesson05::radix_first_chunk;
  using lesson05::radix_slices;
  CHECK(kRadixChunk == 4096);
  CHECK(radix_chunks(1) == 1);
  CHECK(radix_chunks(4096) == 1);
  CHECK(radix_chunks(4097) == 2);
  CHECK(radix_chunks(lesson05::kMaxVocab) == 524286);
  CHECK(radix_slices(128256, 50) == 32);  // decode: 32 blocks a row, a chunk each, at any R
  CHECK(radix_slices(50257, 10) == 13);
  CHECK(radix_slices(262144, 64) == 64);
  CHECK(radix_slices(262145, 64) == 64);  // 65 chunks: the last slice streams two
  CHECK(radix_first_chunk(262145, 64, 63) == 63);
  CHECK(radix_first_chunk(262145, 64, 64) == 65);
  CHECK(radix_slices(1000, 64) == 1);  // one slice: no merge
  CHECK(radix_slices(1 << 24, 1) == 4096);
  CHECK(radix_slices(lesson05::kMaxVocab, 64) == 64);
  for (int vocab : {1, 7, 4096, 4097, 50257, 128256, 262144, 262145, 1 << 24, lesson05::kMaxVocab}) {
    for (int k : {1, 10, 50, 64}) {
      if (k > vocab) continue;
      const int slices = radix_slices(vocab, k), chunks = radix_chunks(vocab);
      CAPTURE(vocab);
      CAPTURE(k);
      CHECK(slices * k <= kRadixChunk);
      CHECK(radix_first_chunk(vocab, slices, 0) == 0);
      CHECK(radix_first_chunk(vocab, slices, slices) == chunks);
      for (int j = 0; j < slices; ++j) {  // C / S chunks a slice, rounded down or up: none is empty
        const int n = radix_first_chunk(vocab, slices, j + 1) - radix_first_chunk(vocab, slices, j);
        REQUIRE(n >= chunks / slices);
        REQUIRE(n <= (chunks + slices - 1) / slices);
      }
    }
  }
}

TEST_CASE("the longest row kMaxVocab: every slice ends within int, and its seed does not overflow") {
  constexpr int v = lesson05::kMaxVocab;
  CHECK(v == INT_MAX - 8191);
  CHECK(lesson05::slice_count(1, v, 1, kH100Sms) == 264);
  for (int slices = 1; slices <= 1024; ++slices) {  // slice_count's range
    const int len = lesson05::slice_length(v, slices);
    const std::int64_t used = (std::int64_t{v} + len - 1) / len;
    REQUIRE(len % 8 == 0);
    REQUIRE(used * len >= v);
    REQUIRE(used * len <= INT_MAX);  // topk_block's begin + slice in the last slice
  }
  CHECK(lesson05::logits_seed({1, 50257, 10}) == 50257u * 131 + 10);  // the seed the committed results used
  CHECK(lesson05::logits_seed({1, v, 64}) == std::uint64_t{v} * 131 + 64);
}

TEST_CASE("--sweep: V in {32000, 50257, 128256} x K in {1, 10, 50} at R = 4096, K = 2 ... 64, decode rows, MoE") {
  const auto shapes = lesson05::sweep_shapes();
  CHECK(shapes.size() == 31);
  int decode = 0, moe = 0, full = 0;
  for (const auto& sh : shapes) {
    CHECK(sh.k <= lesson05::kMaxK);
    CHECK(sh.k <= sh.vocab);
    if (sh.vocab <= lesson05::kSmallRow) {
      ++moe;
      CHECK((sh.rows == 16384 || sh.rows == 65536));
    } else if (sh.rows == 4096) {
      ++full;
    } else {
      ++decode;
      CHECK(sh.vocab == 128256);
      CHECK(sh.k == 50);
    }
  }
  CHECK(full == 15);
  CHECK(decode == 6);
  CHECK(moe == 10);
  CHECK(lesson05::kDefaultShape.rows == 4096);
  CHECK(lesson05::kDefaultShape.vocab == 50257);
  CHECK(lesson05::kDefaultShape.k == 10);
  CHECK_THROWS_AS(lesson05::parse_dtype("f64"), kl::UsageError);
}

TEST_CASE("shapes: the defaults, the options, and refusals (K > 64, K > V, V > kMaxVocab, R >= 2^31, R * V > 2^40)") {
  const auto shape_of = [](std::map<std::string, std::int64_t> sizes) {
    kl::Args a;
    a.sizes = std::move(sizes);
    return lesson05::shapes(a);
  };
  const auto def = shape_of({});
  REQUIRE(def.size() == 1);
  CHECK(lesson05::shape_text(def[0]) == "RxVxK=4096x50257x10");
  const auto sh = shape_of({{"rows", 8}, {"vocab", 128256}, {"k", 50}});
  CHECK(lesson05::shape_text(sh[0]) == "RxVxK=8x128256x50");
  CHECK(shape_of({{"vocab", 64}, {"k", 64}})[0].k == 64);
  CHECK_THROWS_AS(shape_of({{"k", 65}}), kl::UsageError);
  CHECK_THROWS_AS(shape_of({{"vocab", 5}}), kl::UsageError);  // the default K = 10 > V
  CHECK_THROWS_AS(shape_of({{"vocab", 5}, {"k", 6}}), kl::UsageError);
  CHECK_THROWS_AS(shape_of({{"vocab", std::int64_t{1} << 31}}), kl::UsageError);
  CHECK_NOTHROW(shape_of({{"rows", 1}, {"vocab", lesson05::kMaxVocab}}));
  CHECK_THROWS_AS(shape_of({{"rows", 1}, {"vocab", lesson05::kMaxVocab + 1}}), kl::UsageError);
  CHECK_NOTHROW(shape_of({{"rows", INT_MAX}, {"vocab", 64}}));
  CHECK_THROWS_AS(shape_of({{"rows", std::int64_t{INT_MAX} + 1}, {"vocab", 64}}), kl::UsageError);
  CHECK_NOTHROW(shape_of({{"rows", std::int64_t{1} << 20}, {"vocab", std::int64_t{1} << 20}}));
  CHECK_THROWS_AS(shape_of({{"rows", std::int64_t{1} << 21}, {"vocab", std::int64_t{1} << 20}}), kl::UsageError);
  kl::Args sweep;
  sweep.sweep = true;
  CHECK(lesson05::shapes(sweep).size() == lesson05::sweep_shapes().size());
}

TEST_CASE("gamma_q: chi-square p-values at the tables' 5 % and 1 % points") {
  CHECK(gamma_q(0.5, 3.841 / 2) == doctest::Approx(0.05).epsilon(0.01));
  CHECK(gamma_q(5.0, 18.307 / 2) == doctest::Approx(0.05).epsilon(0.01));
  CHECK(gamma_q(2.0, 13.277 / 2) == doctest::Approx(0.01).epsilon(0.01));
  CHECK(gamma_q(20.0, 1.0) == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(gamma_q(1.0, 50.0) < 1e-10);
  CHECK(chi_square_p({1, 1, 2, 2}, {{1, 0.5}, {2, 0.5}}) == doctest::Approx(1.0));
  CHECK(chi_square_p({1, 3}, {{1, 0.5}, {2, 0.5}}) == 0.0);  // a token outside the distribution
}

TEST_CASE("the sampler's parameters: temperature > 0 and finite, top_p in (0, 1], top_k 1 to 64 and at most V") {
  using lesson05::SampleParams;
  const auto bad = [](SampleParams sp, int vocab = 100) {
    CHECK_THROWS_AS(lesson05::validate(sp, vocab), kl::UsageError);
  };
  CHECK_NOTHROW(lesson05::validate(SampleParams{}, 100));
  CHECK_NOTHROW(lesson05::validate(SampleParams{1e-30f, 1, 1e-6f}, 1));
  bad({0.f});
  bad({-1.f});
  bad({NAN});
  bad({INFINITY});
  bad({1.f, 50, 0.f});
  bad({1.f, 50, 1.0001f});
  bad({1.f, 50, NAN});
  bad({1.f, 0});
  bad({1.f, 65});
  bad({1.f, 50}, 49);
  kl::Args a;
  a.texts["temperature"] = "0.5";
  CHECK_THROWS_AS(lesson05::sample_params(a, 10, 100), kl::UsageError);  // needs --sample
  a.flags["sample"] = true;
  const SampleParams sp = lesson05::sample_params(a, 10, 100);
  CHECK(sp.temperature == 0.5f);
  CHECK(sp.top_k == 10);
  CHECK(sp.top_p == 1.f);
  for (const char* t : {"0", "-2", "nan", "abc", "1e", ""}) {
    a.texts["temperature"] = t;
    CHECK_THROWS_AS(lesson05::sample_params(a, 10, 100), kl::UsageError);
  }
  a.texts["temperature"] = "2";
  a.texts["seed"] = "18446744073709551615";
  CHECK(lesson05::sample_params(a, 10, 100).seed == 18446744073709551615ull);
  for (const char* seed : {"-1", "18446744073709551616", "1.5", "x"}) {
    a.texts["seed"] = seed;
    CHECK_THROWS_AS(lesson05::sample_params(a, 10, 100), kl::UsageError);
  }
}

TEST_CASE("sample_distribution: softmax(x / T) over the top_k, cut where the mass before a rank reaches top_p") {
  const std::vector<float> x = {0.f, 2.f, 1.f, -INFINITY};
  const int best[4] = {1, 2, 0, 3};
  const auto dist = [&](float t, int k, float p) { return lesson05::sample_distribution(x.data(), best, {t, k, p}); };
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e1 + e2;
  auto all = dist(1.f, 4, 1.f);  // the -inf logit has no weight: left out
  REQUIRE(all.size() == 3);
  CHECK(all[0].first == 1);
  CHECK(all[0].second == doctest::Approx(1 / z));
  CHECK(all[2].second == doctest::Approx(e2 / z));
  auto hot = dist(2.f, 3, 1.f);  // T = 2 flattens
  CHECK(hot[2].second == doctest::Approx(std::exp(-1.0) / (1 + std::exp(-0.5) + std::exp(-1.0))));
  auto two = dist(1.f, 2, 1.f);  // top_k = 2 renormalises over two
  REQUIRE(two.size() == 2);
  CHECK(two[0].second == doctest::Approx(1 / (1 + e1)));
  CHECK(dist(1.f, 3, 1 / z - 1e-6f).size() == 1);      // the first rank alone reaches top_p
  CHECK(dist(1.f, 3, 1 / z + 1e-3f).size() == 2);      // the mass before rank 1 is below top_p
  CHECK(dist(1e-20f, 3, 1.f).size() == 1);             // T -> 0: the argmax
  const std::vector<float> nan_row = {0.f, NAN, 1.f};  // NaN ranks first: the argmax's answer
  const int nan_best[3] = {1, 2, 0};
  CHECK(lesson05::sample_distribution(nan_row.data(), nan_best, {1.f, 3, 1.f}).size() == 1);
}

TEST_CASE("--logits: normal by default, masked rows hold at most 20 finite logits, equal rows all 1") {
  kl::Args a;
  CHECK(lesson05::shapes(a)[0].logits == lesson05::Logits::normal);
  a.texts["logits"] = "masked";
  const lesson05::Shape masked{3, 1000, 50, lesson05::shapes(a)[0].logits};
  CHECK(lesson05::shape_text(masked) == "RxVxK=3x1000x50;masked");
  a.sweep = true;
  for (const auto& sh : lesson05::shapes(a)) CHECK(sh.logits == lesson05::Logits::masked);
  a.texts["logits"] = "uniform";
  CHECK_THROWS_AS(lesson05::shapes(a), kl::UsageError);
  std::vector<float> xf;
  std::vector<float> xt;
  lesson05::make_logits(masked, xf, xt);
  for (int r = 0; r < 3; ++r) {
    const auto finite =
        std::count_if(xf.begin() + r * 1000, xf.begin() + (r + 1) * 1000, [](float v) { return v != -INFINITY; });
    CHECK(finite >= 15);
    CHECK(finite <= lesson05::kMaskedFinite);
  }
  lesson05::make_logits(lesson05::Shape{2, 100, 5, lesson05::Logits::equal}, xf, xt);
  CHECK(std::all_of(xt.begin(), xt.end(), [](float v) { return v == 1.0f; }));
}

TEST_SUITE("gpu") {
  TEST_CASE("every step matches the float64 reference, f32") { every_step_every_shape<float>(); }
  TEST_CASE("every step matches the float64 reference, f16") { every_step_every_shape<__half>(); }
  TEST_CASE("every step matches the float64 reference, bf16") { every_step_every_shape<__nv_bfloat16>(); }

  TEST_CASE("many ties: integer logits, every step returns the lowest indices among equals") {
    for (const auto& sh : special_shapes()) {
      const std::int64_t rows = sh.first;
      const int vocab = sh.second;
      for (int k : {1, 10, 64}) {
        if (k > vocab) continue;
        const auto x = kl::integer_floats(rows * vocab, -3, 3, kl::seed_for(510 + vocab + k));
        const lesson05::Reference ref = lesson05::reference(x, rows, vocab, k);
        for (const auto& st : kSteps) {
          if (turned_down(st, vocab)) continue;
          const std::string step = st.name;
          CAPTURE(step);
          CAPTURE(vocab);
          CAPTURE(k);
          const Output got = run_step<__half>(st, x, rows, vocab, k);
          CHECK(got.idx == ref.idx);  // exact for every step: equal logits give equal probabilities
        }
      }
    }
  }

  // Step 7's bound (float rows of 16 or 32 lanes, K > 2) keeps a row's logits at or above the k-th largest
  // lane max: rows of a few candidates take it, rows of many, of a NaN or of too few finite logits sort all.
  // Row r % 4: normal; integer logits (many ties); a tie of 9 at the top (candidates that tie); a NaN, or
  // 5 finite logits, the rest -inf. Groups of 16 lanes put two kinds in one warp; f16 rows sort all keys.
  TEST_CASE("step 7's bound: rows of few candidates (some tied) and rows that sort all, side by side in a warp") {
    const std::int64_t rows = kl::sanitizing() ? 8 : 64;
    for (int vocab : {33, 64, 100, 128, 129, 200, 256}) {
      for (int k : {3, 6, 8}) {
        auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(512 + vocab * 8 + k));
        const auto ints = kl::integer_floats(rows * vocab, -3, 3, kl::seed_for(513 + vocab * 8 + k));
        for (std::int64_t r = 0; r < rows; ++r) {
          float* row = x.data() + r * vocab;
          if (r % 4 == 1) std::copy(ints.begin() + r * vocab, ints.begin() + (r + 1) * vocab, row);
          if (r % 4 == 2)
            for (int j = 0; j < 9; ++j) row[(j * 37 + static_cast<int>(r)) % vocab] = 9.f;
          if (r % 4 == 3 && r % 8 == 3) row[static_cast<int>(r) % vocab] = NAN;
          if (r % 4 == 3 && r % 8 == 7) std::fill(row + 5, row + vocab, -INFINITY);
        }
        CAPTURE(vocab);
        CAPTURE(k);
        check_all_steps<float>(x, rows, vocab, k);
        check_all_steps<__half>(quantize<__half>(x), rows, vocab, k);
      }
    }
  }

  TEST_CASE("all-equal rows and rows of 20 finite logits (lesson05 --logits equal, masked) as the reference") {
    for (const auto logits : {lesson05::Logits::equal, lesson05::Logits::masked}) {
      for (const auto& sh : special_shapes()) {
        for (int k : {1, 50}) {
          const lesson05::Shape shape{sh.first, sh.second, k, logits};
          if (k > shape.vocab) continue;
          std::vector<float> xf, xt;
          lesson05::make_logits(shape, xf, xt);
          CAPTURE(lesson05::shape_text(shape));
          check_all_steps<float>(xf, shape.rows, shape.vocab, k);
        }
      }
    }
  }

  TEST_CASE("rising and falling rows: every logit a candidate (many buffer sorts), or none after the first") {
    for (const auto& [rows, vocab] : special_shapes()) {
      for (int k : {1, 10, 64}) {
        if (k > vocab) continue;
        auto rising = kl::normal_floats(rows * vocab, 0, 0.5, kl::seed_for(515 + vocab + k));
        auto falling = rising;
        for (std::int64_t i = 0; i < rows * vocab; ++i) {
          rising[i] += static_cast<float>(i % vocab) * 0.01f;
          falling[i] -= static_cast<float>(i % vocab) * 0.01f;
        }
        check_all_steps<float>(rising, rows, vocab, k);
        check_all_steps<float>(falling, rows, vocab, k);
        check_all_steps<__half>(quantize<__half>(rising), rows, vocab, k);
      }
    }
  }

  TEST_CASE("R = 1 and R = 10^5 short rows") {
    const std::int64_t many = kl::sanitizing() ? 2000 : 100000;
    for (int vocab : {7, 100}) {
      const auto x = kl::normal_floats(many * vocab, 0, 2, kl::seed_for(520 + vocab));
      check_all_steps<float>(x, many, vocab, 5);
      check_all_steps<__nv_bfloat16>(quantize<__nv_bfloat16>(x), many, vocab, 5);
    }
    const auto one = kl::normal_floats(50257, 0, 2, kl::seed_for(521));
    check_all_steps<float>(one, 1, 50257, 10);
  }

  TEST_CASE("logits shifted by +-1e4 and spread over +-1e30: the max subtraction keeps e^x finite") {
    for (const auto& [rows, vocab] : special_shapes()) {
      for (float shift : {1e4f, -1e4f}) {
        auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(530 + vocab));
        for (auto& v : x) v += shift;
        CAPTURE(shift);
        check_all_steps<float>(x, rows, vocab, std::min(vocab, 10));
      }
      auto wide = kl::normal_floats(rows * vocab, 0, 1e29, kl::seed_for(531 + vocab));
      check_all_steps<float>(wide, rows, vocab, std::min(vocab, 10));
    }
  }

  TEST_CASE("-inf is never picked while K finite values exist; with fewer, -inf fills in by index with p = 0") {
    for (const SpecialCase& c : special_cases({10, 50})) {
      const std::int64_t rows = c.rows;
      const int vocab = c.vocab, k = c.k;
      auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(540 + vocab));
      kl::Rng rng(kl::seed_for(541));
      for (int i = 0; i < vocab / 2; ++i) x[rng.index(vocab)] = -INFINITY;  // row 0: many masked
      const auto finite0 = std::count_if(x.begin(), x.begin() + vocab, [](float v) { return v != -INFINITY; });
      int finite1 = 0;  // row 1: a few finite values (at 1, 4, 7), the rest masked
      for (int c = 0; c < vocab; ++c) {
        const bool keep = c % 3 == 1 && c < 9;
        x[1 * vocab + c] = keep ? static_cast<float>(c) : -INFINITY;
        finite1 += keep;
      }
      for (int c = 0; c < vocab; ++c) x[2 * vocab + c] = -INFINITY;  // row 2: all masked
      for (const auto& st : kSteps) {
        if (turned_down(st, vocab)) continue;
        const std::string step = st.name;
        CAPTURE(step);
        CAPTURE(vocab);
        for (Dtype d : {Dtype::f32, Dtype::f16}) {
          lesson05::with_type(d, [&](auto t) {
            using T = decltype(t);
            const auto xq = quantize<T>(x);
            const lesson05::Reference ref = lesson05::reference(xq, rows, vocab, k);
            const Output got = run_step<T>(st, xq, rows, vocab, k, 0x3C);  // finite poison: NaN must be written
            const lesson05::Tolerance tol = lesson05::tolerance(st.launch.fused ? Dtype::f32 : d);
            CHECK(lesson05::max_error(got.prob, got.idx, ref, xq, tol, st.launch.fused) <= tol.rel);
            for (int j = 0; j < k; ++j) {
              if (finite0 >= k) CHECK(xq[got.idx[j]] != -INFINITY);
              CHECK(got.idx[k + j] == ref.idx[k + j]);
              if (j >= finite1) CHECK(got.prob[k + j] == 0.f);
              CHECK(std::isnan(got.prob[2 * k + j]));
              CHECK(got.idx[2 * k + j] == j);
            }
          });
        }
      }
    }
  }

  TEST_CASE("a NaN makes its row's probabilities NaN (+inf too); steps 2-9 rank those positions first") {
    for (const SpecialCase& c : special_cases({5, 50})) {
      const std::int64_t rows = c.rows;
      const int vocab = c.vocab, k = c.k;
      auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(550 + vocab));
      x[2 * vocab + vocab / 2] = NAN;
      x[2 * vocab + vocab - 1] = NAN;
      x[3 * vocab + vocab / 3] = INFINITY;
      for (const auto& st : kSteps) {
        if (turned_down(st, vocab)) continue;
        const std::string step = st.name;
        CAPTURE(step);
        CAPTURE(vocab);
        for (Dtype d : {Dtype::f32, Dtype::bf16}) {
          lesson05::with_type(d, [&](auto t) {
            using T = decltype(t);
            const auto xq = quantize<T>(x);
            const lesson05::Reference ref = lesson05::reference(xq, rows, vocab, k);
            const Output got = run_step<T>(st, xq, rows, vocab, k, 0x3C);
            const lesson05::Tolerance tol = lesson05::tolerance(st.launch.fused ? Dtype::f32 : d);
            CHECK(lesson05::max_error(got.prob, got.idx, ref, xq, tol, st.launch.fused) <= tol.rel);
            for (int j = 0; j < k; ++j) {
              CHECK(std::isnan(got.prob[2 * k + j]));
              CHECK(std::isnan(got.prob[3 * k + j]));
            }
            if (st.launch.fused) {
              CHECK(got.idx[2 * k] == vocab / 2);
              if (k > 1) CHECK(got.idx[2 * k + 1] == vocab - 1);
              CHECK(got.idx[3 * k] == vocab / 3);
            }
          });
        }
      }
    }
  }

  TEST_CASE("unaligned views and V not a multiple of the pack take the scalar head and tail") {
    for (const auto& [rows, vocab] : special_shapes()) {
      const auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(560 + vocab));
      for (std::size_t offset : {1, 3}) {
        CAPTURE(offset);
        check_all_steps<float>(x, rows, vocab, std::min(vocab, 10), offset);
        check_all_steps<__half>(quantize<__half>(x), rows, vocab, std::min(vocab, 10), offset + 2);
      }
    }
  }

  TEST_CASE("step 8 with other slice counts, f32: slices of several chunks, a merge of several chunks of keys") {
    const std::int64_t rows = 2;
    // 300000 logits: 74 chunks; 64 slices of 2 chunks at K = 64 (radix_slices), and 74 slices of one
    // (74 x 64 keys: a merge of 2 chunks). KL_SANITIZE=1: 3 chunks, streamed by one block.
    const std::vector<int> vocabs = kl::sanitizing() ? std::vector<int>{9001} : std::vector<int>{20011, 300000};
    for (int vocab : vocabs) {
      const auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(565 + vocab));
      const kl::DeviceBuffer<float> dx(x);
      for (int k : {1, 50, 64}) {
        const lesson05::Reference ref = lesson05::reference(x, rows, vocab, k);
        kl::DeviceBuffer<float> prob(rows * k);
        kl::DeviceBuffer<int> idx(rows * k);
        lesson05::Workspace ws;
        for (int slices : {1, 2, lesson05::radix_slices(vocab, k), lesson05::radix_chunks(vocab)}) {
          CAPTURE(vocab);
          CAPTURE(k);
          CAPTURE(slices);
          prob.poison();
          idx.poison();
          lesson05::run_radix<float>({dx.data(), prob.data(), idx.data(), rows, vocab, k, Dtype::f32}, slices, ws,
                                     nullptr);
          CUDA_CHECK(cudaDeviceSynchronize());
          const lesson05::Tolerance tol = lesson05::tolerance(Dtype::f32);
          CHECK(lesson05::max_error(prob.download(), idx.download(), ref, x, tol, true) <= tol.rel);
        }
      }
    }
  }

  TEST_CASE("bad K is refused before any launch: K = 0, K = 65, K > V; R = 0 launches nothing") {
    kl::DeviceBuffer<float> x(128), prob(128);
    kl::DeviceBuffer<int> idx(128);
    prob.poison(0x3C);
    lesson05::Workspace ws;
    for (const auto& st : kSteps) {
      const std::string step = st.name;
      CAPTURE(step);
      for (auto [vocab, k] : {std::pair<int, int>{100, 0}, {100, 65}, {5, 6}, {1, 2}}) {
        const lesson05::Problem p{x.data(), prob.data(), idx.data(), 4, vocab, k, Dtype::f32};
        CHECK_THROWS_AS(lesson05::run_step(st, p, ws, nullptr), kl::UsageError);
      }
      lesson05::run_step(st, {x.data(), prob.data(), idx.data(), 0, 100, 10, Dtype::f32}, ws, nullptr);
    }
    CHECK_THROWS_AS(lesson05::topk<float>(x.data(), prob.data(), idx.data(), 4, 5, 6, ws), kl::UsageError);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(still_poisoned(prob, 0x3C));
  }

  TEST_CASE("step 7 turns a row longer than its group's registers hold (V > 256) down, before any launch") {
    kl::DeviceBuffer<float> x(4 * 257), prob(4 * 8);
    kl::DeviceBuffer<int> idx(4 * 8);
    prob.poison(0x3C);
    lesson05::Workspace ws;
    const lesson05::Problem p{x.data(), prob.data(), idx.data(), 4, 257, 8, Dtype::f32};
    CHECK_THROWS_AS(lesson05::run_step(kSteps[6], p, ws, nullptr), kl::NotSupported);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(still_poisoned(prob, 0x3C));
  }

  TEST_CASE("a repeated run of every step can be captured in a CUDA graph and replayed") {
    const std::int64_t rows = 8;
    const int vocab = 20011, k = 50;
    const auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(570));
    const lesson05::Reference ref = lesson05::reference(x, rows, vocab, k);
    const kl::DeviceBuffer<float> dx(x);
    kl::DeviceBuffer<float> prob(rows * k);
    kl::DeviceBuffer<int> idx(rows * k);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (const auto& st : kSteps) {
      if (turned_down(st, vocab)) continue;
      const std::string step = st.name;
      CAPTURE(step);
      lesson05::Workspace ws;
      const lesson05::Problem p{dx.data(), prob.data(), idx.data(), rows, vocab, k, Dtype::f32};
      lesson05::run_step(st, p, ws, s);  // the first run grows the workspace
      CUDA_CHECK(cudaStreamSynchronize(s));
      prob.poison();
      idx.poison();
      kl::replay_once(s, [&](cudaStream_t stream) { lesson05::run_step(st, p, ws, stream); });
      const lesson05::Tolerance tol = lesson05::tolerance(Dtype::f32);
      CHECK(lesson05::max_error(prob.download(), idx.download(), ref, x, tol, st.launch.fused) <= tol.rel);
    }
    CUDA_CHECK(cudaStreamDestroy(s));
  }

  TEST_CASE("the public API runs the dispatcher, for a decode batch and for many rows") {
    for (const lesson05::Shape& sh : {lesson05::Shape{8, 128256, 50}, lesson05::Shape{3000, 777, 3}}) {
      const std::int64_t rows = sh.rows;
      const int vocab = sh.vocab, k = sh.k;
      CAPTURE(rows);
      const auto x = quantize<__half>(kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(580 + k)));
      std::vector<__half> xh(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) xh[i] = kl::from_float<__half>(x[i]);
      const kl::DeviceBuffer<__half> dx(xh);
      kl::DeviceBuffer<float> prob(rows * k);
      kl::DeviceBuffer<int> idx(rows * k);
      prob.poison();
      idx.poison();
      lesson05::Workspace ws;
      lesson05::topk(dx.data(), prob.data(), idx.data(), rows, vocab, k, ws);
      CUDA_CHECK(cudaDeviceSynchronize());
      const lesson05::Tolerance tol = lesson05::tolerance(Dtype::f32);
      const lesson05::Reference ref = lesson05::reference(x, rows, vocab, k);
      CHECK(lesson05::max_error(prob.download(), idx.download(), ref, x, tol, true) <= tol.rel);
    }
  }

  // n copies of `row` (rounded to T) through the sampler: one draw per row, Philox subsequence = row.
  template <class T>
  std::vector<int> draw(const std::vector<float>& row, std::int64_t n, const lesson05::SampleParams& sp) {
    const auto vocab = static_cast<std::int64_t>(row.size());
    std::vector<T> xt(static_cast<std::size_t>(n * vocab));
    for (std::int64_t i = 0; i < n * vocab; ++i) xt[i] = kl::from_float<T>(row[i % vocab]);
    const kl::DeviceBuffer<T> x(xt);
    kl::DeviceBuffer<int> tokens(static_cast<std::size_t>(n));
    tokens.poison();
    lesson05::SampleWorkspace ws;
    lesson05::sample(x.data(), tokens.data(), n, static_cast<int>(vocab), sp, ws);
    CUDA_CHECK(cudaDeviceSynchronize());
    return tokens.download(static_cast<std::size_t>(n));
  }

  TEST_CASE("the sampler draws from softmax(x / T) cut to top_k and top_p: chi-square p > 0.001 over 10^6 draws") {
    const std::int64_t n = kl::sanitizing() ? 10000 : 1000000;
    const std::vector<float> row = sampler_row();
    for (const lesson05::SampleParams& sp : {lesson05::SampleParams{0.5f, 16, 1.f},
                                             {1.f, 16, 1.f},
                                             {2.f, 16, 1.f},
                                             {1.f, 5, 1.f},
                                             {1.f, 16, 0.7f},
                                             {0.7f, 8, 0.8f}}) {
      CAPTURE(sp.temperature);
      CAPTURE(sp.top_k);
      CAPTURE(sp.top_p);
      const lesson05::Reference ref = lesson05::reference(row, 1, 16, sp.top_k);
      const auto kept = lesson05::sample_distribution(row.data(), ref.idx.data(), sp);
      CHECK(chi_square_p(draw<float>(row, n, sp), kept) > 1e-3);
      if (sp.top_p == 1.f && sp.top_k == 16 && sp.temperature == 1.f) {  // plain sampling, in 16-bit logits too
        const auto half = quantize<__half>(row), bf = quantize<__nv_bfloat16>(row);
        const lesson05::Reference rh = lesson05::reference(half, 1, 16, 16), rb = lesson05::reference(bf, 1, 16, 16);
        CHECK(chi_square_p(draw<__half>(half, n, sp), lesson05::sample_distribution(half.data(), rh.idx.data(), sp)) >
              1e-3);
        CHECK(chi_square_p(draw<__nv_bfloat16>(bf, n, sp),
                           lesson05::sample_distribution(bf.data(), rb.idx.data(), sp)) > 1e-3);
      }
    }
  }

  TEST_CASE("the sampler: T -> 0 is the argmax, the same seed and offset draw the same tokens, another offset others") {
    const std::int64_t rows = 1000;
    const int vocab = 1000, k = 50;
    const auto x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(590));
    const kl::DeviceBuffer<float> dx(x);
    kl::DeviceBuffer<int> tokens(rows);
    lesson05::SampleWorkspace ws;
    const auto run = [&](lesson05::SampleParams sp) {
      tokens.poison();
      lesson05::sample(dx.data(), tokens.data(), rows, vocab, sp, ws);
      CUDA_CHECK(cudaDeviceSynchronize());
      return tokens.download(rows);
    };
    const lesson05::Reference ref = lesson05::reference(x, rows, vocab, k);
    const auto cold = run({1e-6f, k, 0.9f, 7, 0});
    for (std::int64_t r = 0; r < rows; ++r)
      if (x[r * vocab + ref.idx[r * k]] > x[r * vocab + ref.idx[r * k + 1]]) CHECK(cold[r] == ref.idx[r * k]);
    const lesson05::SampleParams sp{1.f, k, 0.9f, 7, 3};
    const auto first = run(sp), again = run(sp);
    CHECK(first == again);
    CHECK(lesson05::sample_error(first, x, ref, sp) == 0.0);
    lesson05::SampleParams next = sp;
    next.offset = 4;
    CHECK(run(next) != first);
    next = sp;
    next.seed = 8;
    CHECK(run(next) != first);
  }

  TEST_CASE("the sampler: NaN, +inf and all -inf rows take their first rank; R = 0 and bad parameters launch nothing") {
    std::vector<float> x(3 * 64, 0.5f);
    x[5] = NAN;                                      // row 0: the NaN
    x[64 + 9] = INFINITY;                            // row 1: the +inf
    std::fill(x.begin() + 128, x.end(), -INFINITY);  // row 2: nothing has weight: index 0
    const kl::DeviceBuffer<float> dx(x);
    kl::DeviceBuffer<int> tokens(3);
    tokens.poison();
    lesson05::SampleWorkspace ws;
    lesson05::sample(dx.data(), tokens.data(), 3, 64, {1.f, 10, 0.9f}, ws);
    CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(tokens.download(3) == std::vector<int>{5, 9, 0});
    lesson05::sample(dx.data(), tokens.data(), 0, 64, {1.f, 10, 0.9f}, ws);
    CHECK_THROWS_AS(lesson05::sample(dx.data(), tokens.data(), 3, 64, {0.f, 10, 0.9f}, ws), kl::UsageError);
    CHECK_THROWS_AS(lesson05::sample(dx.data(), tokens.data(), 3, 64, {1.f, 65, 0.9f}, ws), kl::UsageError);
  }

  // The top-K through step 8, then sample_from_best: the sampler's path outside decode shapes.
  template <class T>
  std::vector<int> draw_apart(const kl::DeviceBuffer<T>& x, std::int64_t rows, int vocab,
                              const lesson05::SampleParams& sp) {
    kl::DeviceBuffer<float> prob(static_cast<std::size_t>(rows * sp.top_k));
    kl::DeviceBuffer<int> idx(static_cast<std::size_t>(rows * sp.top_k)), tokens(static_cast<std::size_t>(rows));
    tokens.poison();
    lesson05::Workspace ws;
    lesson05::run_radix<T>({x.data(), prob.data(), idx.data(), rows, vocab, sp.top_k, lesson05::dtype_of<T>()},
                           lesson05::radix_slices(vocab, sp.top_k), ws, nullptr);
    lesson05::sample_from_best<T><<<lesson05::warp_grid(rows), 32 * lesson05::kWarpsPerBlock>>>(
        x.data(), idx.data(), rows, vocab, sp.top_k, sp.temperature, sp.top_p, sp.seed, sp.offset, tokens.data());
    CUDA_CHECK(cudaDeviceSynchronize());
    return tokens.download(static_cast<std::size_t>(rows));
  }

  TEST_CASE("the sampler at decode shapes draws in step 8's merge: the same tokens as the top-K and a separate draw") {
    const std::int64_t rows = 8;
    const int vocab = 20000;  // 5 chunks: 5 slices a row, then the merge
    std::vector<float> x = kl::normal_floats(rows * vocab, 0, 2, kl::seed_for(591));
    x[vocab + 777] = NAN;                                                // row 1: a NaN
    std::fill(x.begin() + 2 * vocab, x.begin() + 3 * vocab, -INFINITY);  // row 2: 20 finite logits
    for (int i = 0; i < 20; ++i) x[2 * vocab + 997 * i] = 0.1f * i;
    std::fill(x.begin() + 3 * vocab, x.begin() + 4 * vocab, 1.f);  // row 3: all equal
    x[4 * vocab + 12345] = INFINITY;                               // row 4: a +inf
    std::vector<__half> xh(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xh[i] = kl::from_float<__half>(x[i]);
    const kl::DeviceBuffer<float> dx(x);
    const kl::DeviceBuffer<__half> dh(xh);
    kl::DeviceBuffer<int> tokens(rows);
    lesson05::SampleWorkspace ws;
    for (const lesson05::SampleParams& sp : {lesson05::SampleParams{0.8f, 50, 0.9f, 7, 0},
                                             {1.f, 64, 1.f, 8, 3},
                                             {3.f, 10, 0.5f, 9, 1},
                                             {1e-6f, 1, 0.9f, 7, 2},
                                             {1.f, 33, 0.99f, 1, 5}}) {
      CAPTURE(sp.top_k);
      CAPTURE(sp.temperature);
      REQUIRE(lesson05::choose_step(rows, vocab, sp.top_k, kl::sm_count()) == 8);
      tokens.poison();
      lesson05::sample(dx.data(), tokens.data(), rows, vocab, sp, ws);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<int> fused = tokens.download(rows);
      CHECK(fused == draw_apart(dx, rows, vocab, sp));
      CHECK(fused[1] == 777);
      CHECK(fused[4] == 12345);
      tokens.poison();
      lesson05::sample(dh.data(), tokens.data(), rows, vocab, sp, ws);
      CUDA_CHECK(cudaDeviceSynchronize());
      CHECK(tokens.download(rows) == draw_apart(dh, rows, vocab, sp));
    }
  }
}
