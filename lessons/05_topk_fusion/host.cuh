// Lesson 05, the problem as the executable and the tests see it: the float64 reference, the error
// measure and its tolerance, the shapes from the command line and the inputs. The problem as the
// kernels see it is problem.cuh.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.hpp"
#include "common/ladder.hpp"
#include "common/parallel.hpp"
#include "common/random.hpp"
#include "lessons/05_topk_fusion/problem.cuh"

namespace lesson05 {

// ---- the float64 reference ------------------------------------------------------------------------

// Per row: the softmax statistics in double and the first k entries of the row's order. The order
// is a stable sort by (-p, index), which is the order of (-x, index) since p = e^(x - m) / s
// grows with x; we sort by x so that probabilities too small for a double (x - m < -745) keep their
// order. NaN ranks above everything (as in torch.topk), NaNs among themselves by index.
// Probabilities: a row holding NaN or +inf, or only -inf, has NaN probabilities (x - m is NaN).
struct Reference {
  std::int64_t rows = 0;
  int vocab = 0, k = 0;
  std::vector<double> m, s;  // per row: max, sum of e^(x - max)
  std::vector<int> idx;      // rows x k
  std::vector<double> prob;  // rows x k

  double p(const std::vector<float>& x, std::int64_t row, int i) const {
    return std::exp(static_cast<double>(x[row * vocab + i]) - m[row]) / s[row];
  }
};

// True when logit a (at index ia) comes before logit b (at ib) in a row's order.
inline bool ranks_before(float a, int ia, float b, int ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

inline Reference reference(const std::vector<float>& x, std::int64_t rows, int vocab, int k) {
  Reference ref;
  ref.rows = rows;
  ref.vocab = vocab;
  ref.k = k;
  ref.m.resize(rows);
  ref.s.resize(rows);
  ref.idx.resize(rows * k);
  ref.prob.resize(rows * k);
  kl::parallel_for(static_cast<std::size_t>(rows), [&](std::size_t r0, std::size_t r1) {
    std::vector<int> order(vocab);
    for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
      const float* xr = x.data() + r * vocab;
      double m = -INFINITY, s = 0;
      for (int i = 0; i < vocab; ++i) m = std::isnan(xr[i]) || std::isnan(m) ? NAN : std::max(m, double{xr[i]});
      for (int i = 0; i < vocab; ++i) s += std::exp(xr[i] - m);
      ref.m[r] = m;
      ref.s[r] = s;
      for (int i = 0; i < vocab; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return ranks_before(xr[a], a, xr[b], b); });
      for (int j = 0; j < k; ++j) {
        ref.idx[r * k + j] = order[j];
        ref.prob[r * k + j] = std::exp(xr[order[j]] - m) / s;
      }
    }
  });
  return ref;
}

// ---- the error measure ------------------------------------------------------------------------------

// How close a probability must be: error = |p - ref| / (|ref| + abs / rel), passing at <= rel. The
// fused steps compute in float and write float; step 1 writes its probabilities in the input type.
struct Tolerance {
  double rel, abs;
};

inline Tolerance tolerance(Dtype written) {
  if (written == Dtype::f16) return {2e-3, 1e-7};      // 2^-11 rounding, subnormals below 6e-5
  if (written == Dtype::bf16) return {1.6e-2, 1e-30};  // 2^-8 rounding
  return {1e-4, 1e-30};
}

inline double prob_error(double got, double ref, Tolerance tol) {
  if (std::isnan(got) || std::isnan(ref)) return std::isnan(got) && std::isnan(ref) ? 0 : INFINITY;
  return std::fabs(got - ref) / (std::fabs(ref) + tol.abs / tol.rel);
}

// The largest error over all rows and ranks; infinite when an index is out of range, repeated, or
// not the reference's. `exact`: the index at every rank must be the reference's (the fused steps
// rank logits, exactly as the reference does). Otherwise (step 1 ranks rounded probabilities) an
// index may differ where its probability is within tolerance of the reference's at that rank.
inline double max_error(const std::vector<float>& prob, const std::vector<int>& idx, const Reference& ref,
                        const std::vector<float>& x, Tolerance tol, bool exact) {
  std::vector<double> worst(static_cast<std::size_t>(ref.rows), 0.0);
  const int k = ref.k;
  kl::parallel_for(static_cast<std::size_t>(ref.rows), [&](std::size_t r0, std::size_t r1) {
    for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
      double e = 0;
      for (int j = 0; j < k; ++j) {
        const int got = idx[r * k + j];
        const double want = ref.prob[r * k + j];
        e = std::max(e, prob_error(prob[r * k + j], want, tol));
        bool repeated = false;
        for (int i = 0; i < j; ++i) repeated = repeated || idx[r * k + i] == got;
        if (got < 0 || got >= ref.vocab || repeated) e = INFINITY;
        else if (got != ref.idx[r * k + j] && (exact || prob_error(ref.p(x, r, got), want, tol) > tol.rel))
          e = INFINITY;
      }
      worst[r] = e;
    }
  });
  return worst.empty() ? 0.0 : *std::max_element(worst.begin(), worst.end());
}

// ---- the sampler's reference and options (sample.cuh) ---------------------------------------------

// The sampler's distribution for one row in float64, from the reference's top_k winners `best` (largest
// first): softmax(x / T) over them, cut to the nucleus (a rank is kept while the mass before it is below
// top_p of the total, the first always), renormalised. `slack` widens the cut by that much of the mass,
// for a kernel that sums in float. A row whose best logit is NaN or infinite keeps its first rank.
// Returns the kept (index, probability) pairs, largest first.
inline std::vector<std::pair<int, double>> sample_distribution(const float* xr, const int* best, const SampleParams& sp,
                                                               double slack = 0) {
  const double top = xr[best[0]];
  if (!std::isfinite(top)) return {{best[0], 1.0}};
  std::vector<double> w(sp.top_k);
  double total = 0;
  for (int j = 0; j < sp.top_k; ++j) total += w[j] = std::exp((xr[best[j]] - top) / sp.temperature);
  std::vector<std::pair<int, double>> kept;
  double before = 0, mass = 0;
  for (int j = 0; j < sp.top_k && (j == 0 || before < std::min(1.0, sp.top_p + slack) * total); ++j) {
    if (w[j] > 0) kept.push_back({best[j], w[j]});
    before += w[j];
    mass += w[j];
  }
  for (auto& [i, p] : kept) p /= mass;
  return kept;
}

// The share of rows whose token is outside the reference's nucleus (widened by 1e-4 of the mass: the
// kernel sums in float): 0 for a right sampler, whatever its draws.
inline double sample_error(const std::vector<int>& tokens, const std::vector<float>& x, const Reference& ref,
                           const SampleParams& sp) {
  std::int64_t outside = 0;
  for (std::int64_t r = 0; r < ref.rows; ++r) {
    const auto kept = sample_distribution(x.data() + r * ref.vocab, ref.idx.data() + r * ref.k, sp, 1e-4);
    outside += std::none_of(kept.begin(), kept.end(), [&](const auto& e) { return e.first == tokens[r]; });
  }
  return ref.rows > 0 ? static_cast<double>(outside) / static_cast<double>(ref.rows) : 0.0;
}

// --sample's parameters: top_k is --k; --temperature and --top-p are numbers (default 1), --seed an
// unsigned 64-bit integer (default 0). Refused without --sample, or when validate() refuses them.
inline double parse_number(const std::string& option, const std::string& text) {
  std::size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw kl::UsageError("--" + option + ": '" + kl::escaped(text) + "' is not a number");
  return v;
}

inline SampleParams sample_params(const kl::Args& a, int k, int vocab) {
  SampleParams sp;
  for (const char* name : {"temperature", "top-p", "seed"})
    if (a.given(name) && !a.flag("sample")) throw kl::UsageError(std::string("--") + name + " needs --sample");
  if (auto t = a.text("temperature")) sp.temperature = static_cast<float>(parse_number("temperature", *t));
  if (auto t = a.text("top-p")) sp.top_p = static_cast<float>(parse_number("top-p", *t));
  if (auto t = a.text("seed")) {
    if (t->empty() || t->find_first_not_of("0123456789") != std::string::npos || t->size() > 20)
      throw kl::UsageError("--seed: '" + kl::escaped(*t) + "' is not an unsigned 64-bit integer");
    try {
      sp.seed = std::stoull(*t);
    } catch (const std::exception&) {
      throw kl::UsageError("--seed: '" + kl::escaped(*t) + "' is not an unsigned 64-bit integer");
    }
  }
  sp.top_k = k;
  try {
    validate(sp, vocab);
  } catch (const kl::UsageError& e) {
    throw kl::UsageError(std::string("--sample: ") + e.what());
  }
  return sp;
}

// ---- shapes and inputs ----------------------------------------------------------------------------

// The logits of a run (--logits): normal(0, 2); masked: 20 finite logits per row, the others -inf
// (masked decoding, fewer than K candidates); equal: every logit 1 (all ties).
enum class Logits { normal, masked, equal };
constexpr int kMaskedFinite = 20;

struct Shape {
  std::int64_t rows;
  int vocab, k;
  Logits logits = Logits::normal;
};

constexpr Shape kDefaultShape{4096, 50257, 10};

inline std::string shape_text(const Shape& sh) {
  const char* kind = sh.logits == Logits::masked ? ";masked" : sh.logits == Logits::equal ? ";equal" : "";
  return "RxVxK=" + std::to_string(sh.rows) + "x" + std::to_string(sh.vocab) + "x" + std::to_string(sh.k) + kind;
}

inline Logits parse_logits(const std::optional<std::string>& text) {
  if (!text || *text == "normal") return Logits::normal;
  if (*text == "masked") return Logits::masked;
  if (*text == "equal") return Logits::equal;
  throw kl::UsageError("--logits: '" + kl::escaped(*text) + "' is not one of normal, masked, equal");
}

// --sweep: R = 4096 with V in {32000, 50257, 128256} x K in {1, 10, 50}; K = 2 ... 64 at V = 50257
// (the speed-up vs K figure); decode, R = 1 ... 1024 at V = 128256, K = 50; and MoE routing, R = 16384
// and 65536 tokens over 8 experts (top-1, top-2), 64 (top-6), 128 and 256 (top-8).
inline std::vector<Shape> sweep_shapes() {
  std::vector<Shape> shapes;
  for (int v : {32000, 50257, 128256})
    for (int k : {1, 10, 50}) shapes.push_back({4096, v, k});
  for (int k : {2, 4, 8, 16, 32, 64}) shapes.push_back({4096, 50257, k});
  for (std::int64_t r : {1, 8, 32, 64, 256, 1024}) shapes.push_back({r, 128256, 50});
  for (std::int64_t r : {16384, 65536})
    for (const auto& [v, k] : {std::pair{8, 1}, {8, 2}, {64, 6}, {128, 8}, {256, 8}}) shapes.push_back({r, v, k});
  return shapes;
}

// The shape from --rows, --vocab and --k (defaults where not given), or the sweep's; refused, never
// clamped, before any GPU work.
inline std::vector<Shape> shapes(const kl::Args& a) {
  const Logits logits = parse_logits(a.text("logits"));
  if (a.flag("sample") && a.step) throw kl::UsageError("--sample times the sampler, not a step: leave out --step");
  if (a.sweep) {
    std::vector<Shape> all = sweep_shapes();
    for (Shape& sh : all) {
      sh.logits = logits;
      sample_params(a, sh.k, sh.vocab);  // refused before any GPU work
    }
    return all;
  }
  Shape sh = kDefaultShape;
  sh.logits = logits;
  sh.rows = a.size("rows").value_or(sh.rows);
  const std::int64_t vocab = a.size("vocab").value_or(sh.vocab);
  const std::int64_t k = a.size("k").value_or(sh.k);
  if (vocab > kMaxVocab)
    throw kl::UsageError("--vocab: V = " + std::to_string(vocab) +
                         " is too large (at most 2^31 - 8192: rows are indexed in int)");
  if (sh.rows > kMaxRows)
    throw kl::UsageError("--rows: R = " + std::to_string(sh.rows) +
                         " is too large (at most 2^31 - 1: step 5 launches a block per row)");
  if (k > kMaxK) throw kl::UsageError("--k: K = " + std::to_string(k) + " is too large (at most 64)");
  if (k > vocab)
    throw kl::UsageError("--k: K = " + std::to_string(k) + " is larger than --vocab V = " + std::to_string(vocab) +
                         " (a row has only V probabilities)");
  kl::checked_product({sh.rows, vocab}, std::int64_t{1} << 40, "R * V");
  sh.vocab = static_cast<int>(vocab);
  sh.k = static_cast<int>(k);
  sample_params(a, sh.k, sh.vocab);
  return {sh};
}

// Device memory of one shape: step 1 holds the logits, probabilities and their sorted copy, indices
// twice, cub's scratch.
inline double device_bytes(const Shape& sh, Dtype dtype) {
  return static_cast<double>(sh.rows) * sh.vocab * (3.0 * dtype_bytes(dtype) + 16.0);
}

// The seed of a shape's logits, in 64 bits: no V can overflow it.
inline std::uint64_t logits_seed(const Shape& sh) { return static_cast<std::uint64_t>(sh.vocab) * 131 + sh.k; }

// Fresh logits for a shape: normal(0, 2) (or --logits' kind) rounded to T (xt, what the GPU reads) and
// back to float (xf, what the reference sees).
template <class T>
void make_logits(const Shape& sh, std::vector<float>& xf, std::vector<T>& xt) {
  const auto n = static_cast<std::size_t>(sh.rows * sh.vocab);
  xf = kl::normal_floats(n, 0.0, 2.0, kl::seed_for(logits_seed(sh)));
  if (sh.logits == Logits::equal) std::fill(xf.begin(), xf.end(), 1.0f);
  if (sh.logits == Logits::masked) {
    kl::Rng rng(kl::seed_for(static_cast<std::uint64_t>(sh.vocab) * 131 + 7));
    for (std::int64_t r = 0; r < sh.rows; ++r) {
      float* row = xf.data() + r * sh.vocab;
      std::vector<float> keep(kMaskedFinite);
      std::vector<int> at(kMaskedFinite);
      for (int j = 0; j < kMaskedFinite; ++j) {
        at[j] = static_cast<int>(rng.index(static_cast<std::size_t>(sh.vocab)));
        keep[j] = row[at[j]];
      }
      std::fill(row, row + sh.vocab, -INFINITY);
      for (int j = 0; j < kMaskedFinite; ++j) row[at[j]] = keep[j];
    }
  }
  xt.resize(n);
  kl::parallel_for(n, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      xt[i] = kl::from_float<T>(xf[i]);
      xf[i] = kl::to_float(xt[i]);  // the reference sees exactly what the GPU reads
    }
  });
}

}  // namespace lesson05
