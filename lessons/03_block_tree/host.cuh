// Lesson 03, the problem as the executable and the tests see it: beside the sum (common/sum_lesson.cuh),
// the references and tolerances of max, L2 norm and mean, which step 9's template also computes.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "common/reference.hpp"
#include "common/sum_lesson.cuh"
#include "lessons/03_block_tree/problem.cuh"

namespace lesson03 {

// How close a result of the template must be to the float64 reference: max and min exactly; the L2
// norm and the mean within the bound of a float sum of n terms (sum_tolerance), relative to their scale.
inline bool op_close(float got, double ref, double tol) {
  if (!std::isfinite(ref) || !std::isfinite(got)) return kl::scaled_error(got, ref, 1.0) == 0;
  return std::fabs(got - ref) <= tol;
}

struct OpCase {
  const char* name;
  kl::SumLauncher launch;
  double ref, tol;
};

// max, L2 norm and mean of x against their references (for --n's data and the tests).
inline std::vector<OpCase> op_cases(const std::vector<float>& x, kl::SumLauncher max, kl::SumLauncher l2,
                                    kl::SumLauncher mean) {
  const std::size_t n = x.size();
  const kl::SumRef sum = kl::ref_sum(x.data(), n);
  const double eps = std::numeric_limits<float>::epsilon();
  const double norm = kl::ref_l2_norm(x.data(), n), avg = kl::ref_mean(x.data(), n);
  return {{"max", max, kl::ref_max(x.data(), n), 0.0},
          {"l2_norm", l2, norm, norm * (kl::sum_tolerance(n, 1.0) + eps)},
          {"mean", mean, avg, (n ? kl::sum_tolerance(n, sum.abs_sum) / n : 0.0) + std::fabs(avg) * eps}};
}

}  // namespace lesson03
