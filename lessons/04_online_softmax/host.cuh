// Lesson 04, the problem as the executable and the tests see it: the float64 reference, the tolerance
// and error measure, the shapes the executable runs and its inputs. The problem as the kernels see it
// is problem.cuh; the steps' table and the dispatcher, softmax.cuh; the executable's run, run.cuh.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/check.cuh"
#include "common/parallel.hpp"
#include "common/random.hpp"
#include "lessons/04_online_softmax/problem.cuh"

namespace lesson04 {

// ---- the float64 reference ------------------------------------------------------------------------

// Softmax of each row of x * scale in double. A row holding NaN or +inf, or only -inf, comes out all
// NaN (x - max is NaN somewhere): the same choice PyTorch makes, and what every step must give.
// Rows are independent, so the CPU's cores take a share of rows each (same result on any core count).
inline std::vector<double> ref_softmax(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                                       double scale = 1.0) {
  std::vector<double> y(x.size());
  kl::parallel_for(static_cast<std::size_t>(rows), [&](std::size_t r0, std::size_t r1) {
    for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
      const float* xr = x.data() + r * cols;
      double* yr = y.data() + r * cols;
      double m = -INFINITY;
      for (std::int64_t c = 0; c < cols; ++c) {
        const double t = xr[c] * scale;
        m = (std::isnan(m) || t <= m) ? m : t;  // a NaN stays the max
      }
      double s = 0;
      for (std::int64_t c = 0; c < cols; ++c) s += yr[c] = std::exp(xr[c] * scale - m);
      for (std::int64_t c = 0; c < cols; ++c) yr[c] /= s;
    }
  });
  return y;
}

// A result y is right when |y - ref| <= rel * |ref| + abs for every element (NaN exactly where the
// reference is NaN). rel covers the rounding of the stored type; abs covers results too small for
// it: f16's subnormal spacing 2^-24, and for f32/bf16 the flush of e^x below 2^-126 to zero.
struct Tolerance {
  double rel, abs;
};

inline Tolerance tolerance(Dtype d) {
  if (d == Dtype::f32) return {1e-4, 1e-30};
  if (d == Dtype::f16) return {0x1p-10, 0x1p-24};
  return {0x1p-7, 1e-30};
}

// max |y - ref| / (|ref| + abs / rel): the relative error, with a floor for tiny results. The check
// passes when it is at most tol.rel; a NaN mismatch is an infinite error. y holds the step's output
// in its own type (float, __half, __nv_bfloat16); blocks of 2^16 elements go to the CPU's cores,
// and the max of the blocks' maxima does not depend on which core took which.
template <class T>
double max_error(const std::vector<T>& y, const std::vector<double>& ref, Tolerance tol) {
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::vector<double> worst((ref.size() + kBlock - 1) / kBlock, 0.0);
  kl::parallel_for(worst.size(), [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      for (std::size_t i = b * kBlock; i < std::min(ref.size(), (b + 1) * kBlock); ++i) {
        const double got = kl::to_float(y[i]);
        if (std::isnan(ref[i]) || std::isnan(got)) {
          if (std::isnan(ref[i]) != std::isnan(got)) worst[b] = INFINITY;
          continue;
        }
        worst[b] = std::max(worst[b], std::fabs(got - ref[i]) / (std::fabs(ref[i]) + tol.abs / tol.rel));
      }
    }
  });
  double all = 0;
  for (double w : worst) all = std::max(all, w);
  return all;
}

// ---- shapes ---------------------------------------------------------------------------------------

using Shape = std::pair<std::int64_t, std::int64_t>;  // (M rows, K columns)

constexpr std::int64_t kDefaultCols = 4096;
constexpr std::int64_t kDefaultElements = std::int64_t{1} << 26;  // 2^26: 256 MiB of f32, well over the L2

// The rows that make M * K closest to 2^26 for a given K (at least 1).
inline std::int64_t default_rows(std::int64_t cols) {
  return std::max<std::int64_t>(1, (kDefaultElements + cols / 2) / cols);
}

// --sweep: K = 32 ... 131072 in powers of two, and 1000, 4097, 50257 (odd sizes, a vocabulary).
inline std::vector<Shape> sweep_shapes() {
  std::vector<std::int64_t> ks = {1000, 4097, 50257};
  for (std::int64_t k = 32; k <= 131072; k *= 2) ks.push_back(k);
  std::sort(ks.begin(), ks.end());
  std::vector<Shape> shapes;
  for (std::int64_t k : ks) shapes.emplace_back(default_rows(k), k);
  return shapes;
}

// The shapes of one run from --rows and --cols (the driver refuses them next to --sweep). A row
// longer than kMaxCols or more than 2^40 elements in all is refused.
inline std::vector<Shape> shapes(std::optional<std::int64_t> rows, std::optional<std::int64_t> cols, bool sweep) {
  if (sweep) return sweep_shapes();
  const std::int64_t k = cols.value_or(kDefaultCols);
  if (k > kMaxCols)
    throw kl::UsageError("--cols: K = " + std::to_string(k) +
                         " is too large (at most 2^31 - 512: the block steps index a row in int)");
  const std::int64_t m = rows.value_or(default_rows(k));
  kl::checked_product({m, k}, std::int64_t{1} << 40, "M * K = " + std::to_string(m) + " * " + std::to_string(k));
  return {{m, k}};
}

// The shape as the CSV names it.
inline std::string shape_text(std::int64_t rows, std::int64_t cols) {
  return "MxK=" + std::to_string(rows) + "x" + std::to_string(cols);
}

// ---- inputs ---------------------------------------------------------------------------------------

// Normal(0, 2) values for a rows x cols matrix, seeded by K, rounded to T; `exact` gets the same
// values as floats, so that the reference sees exactly what the GPU reads.
template <class T>
std::vector<T> make_input(std::int64_t rows, std::int64_t cols, std::vector<float>& exact) {
  const auto n = static_cast<std::size_t>(rows * cols);
  exact = kl::normal_floats(n, 0.0, 2.0, kl::seed_for(static_cast<std::uint64_t>(cols)));
  std::vector<T> xt(n);
  kl::parallel_for(n, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      xt[i] = kl::from_float<T>(exact[i]);
      exact[i] = kl::to_float(xt[i]);
    }
  });
  return xt;
}

}  // namespace lesson04
