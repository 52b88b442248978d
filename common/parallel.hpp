// parallel_for: splits [0, count) over the CPU's cores. The CPU side of a check (inputs, float64
// references, comparisons) over 2^26 elements takes seconds on one core; the GPU side milliseconds.
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace kl {

// Calls body(begin, end) on disjoint chunks covering [0, count), one thread per core. Give it
// coarse work items (rows, blocks of elements): each call starts its own threads.
template <class Body>
void parallel_for(std::size_t count, Body body) {
  const std::size_t threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunk = (count + threads - 1) / threads;
  if (threads == 1 || count < 2) {
    body(std::size_t{0}, count);
    return;
  }
  std::vector<std::thread> pool;
  for (std::size_t begin = 0; begin < count; begin += chunk)
    pool.emplace_back(body, begin, std::min(count, begin + chunk));
  for (auto& t : pool) t.join();
}

}  // namespace kl
