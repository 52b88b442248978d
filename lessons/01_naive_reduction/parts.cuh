// What steps 2-4 of lesson 01 share: the block size, and the grid of steps 3-4 (step 3 introduces it).
#pragma once
#include <cstddef>

#include "common/device.cuh"
#include "lessons/01_naive_reduction/problem.cuh"

namespace lesson01 {

using kl::Scratch;

constexpr int kBlock = 256;  // threads per block for steps 2-4

// Enough blocks to fill every SM (8 blocks of 256 threads = 2048, the SM's thread limit), but
// never more blocks than there are elements to give them.
inline unsigned fill_grid(std::size_t n) {
  const std::size_t needed = (n + kBlock - 1) / kBlock;
  const std::size_t full = std::size_t(kl::sm_count()) * (2048 / kBlock);
  return static_cast<unsigned>(needed < full ? (needed > 0 ? needed : 1) : full);
}

}  // namespace lesson01
