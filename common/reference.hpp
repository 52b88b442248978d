// float64 CPU references. Each lesson checks its GPU steps against these; later lessons add theirs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace kl {

struct SumRef {
  double sum = 0;      // the float64 sum (NaN if any input is NaN, or if +inf and -inf both occur)
  double abs_sum = 0;  // sum of |x|: the scale rounding errors are measured against
};

inline SumRef ref_sum(const float* x, std::size_t n) {
  SumRef r;
  for (std::size_t i = 0; i < n; ++i) {
    r.sum += x[i];
    r.abs_sum += std::fabs(static_cast<double>(x[i]));
  }
  return r;
}

inline double ref_mean(const float* x, std::size_t n) {
  return n ? ref_sum(x, n).sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

// Max that propagates NaN (std::max would drop it depending on argument order). -inf for n = 0.
inline double ref_max(const float* x, std::size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::max(m, static_cast<double>(x[i]));
  }
  return m;
}

inline double ref_l2_norm(const float* x, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return std::sqrt(s);
}

// How far a float32 sum of n terms may be from the exact one. The worst case over all summation
// orders is (n-1)*eps*sum|x| (Higham); for independent rounding errors it grows like sqrt(n)
// (Higham & Mary, 2019), which is what we allow, with a factor 4 of headroom.
inline double sum_tolerance(std::size_t n, double abs_sum) {
  const double eps = std::numeric_limits<float>::epsilon();
  const double terms = n > 1 ? std::min<double>(n - 1, 4.0 * std::sqrt(static_cast<double>(n))) : 0;
  return terms * eps * abs_sum + std::numeric_limits<float>::denorm_min();
}

// Error of `got` against a float64 reference, relative to `scale` (e.g. sum|x|): NaN and inf must
// match exactly (0 error) or the error is infinite.
inline double scaled_error(double got, double ref, double scale) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(ref) || std::isinf(got)) return got == ref ? 0 : INFINITY;
  return std::fabs(got - ref) / (scale > 0 ? scale : 1.0);
}

// A float32 sum is right when its error, relative to sum|x|, is within sum_tolerance.
inline bool sum_close(float got, const SumRef& ref, std::size_t n) {
  if (!std::isfinite(ref.sum) || !std::isfinite(got)) return scaled_error(got, ref.sum, 1.0) == 0;
  return std::fabs(got - ref.sum) <= sum_tolerance(n, ref.abs_sum);
}

}  // namespace kl
