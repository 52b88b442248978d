// Median, min and max of repeated timings: the median resists the odd slow repetition.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <vector>

namespace kl {

struct Summary {
  double median = 0, min = 0, max = 0;
  int count = 0;
};

inline Summary summarize(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("summarize: no samples");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back(), static_cast<int>(n)};
}

}  // namespace kl
