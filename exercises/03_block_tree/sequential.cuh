// Exercise 03.1: turn the interleaved tree (step 2) into sequential addressing (step 3).
//
// The kernel below is lesson 03's step 2: in round `stride`, thread t adds s[2*stride*t + stride]
// into s[2*stride*t]. It sums correctly, but the grader checks more than the sum: it checks that the
// block adds its values in the order of sequential addressing, bit for bit (float addition is not
// associative, so a different tree gives different last bits on real-valued data). The grader
// launches one thread per element, blocks of 256 threads with 256 floats of dynamic shared memory,
// and adds the block partials itself.
//
// TODO:
//   1. Rewrite the loop: start with half = blockDim.x / 2 and halve it each round; in a round, the
//      threads t < half add s[t + half] into s[t]. Keep the __syncthreads() after every round.
//   2. Replace the question below by your answer, in a comment of two or three lines:
//      shared memory has 32 banks, 4 bytes wide (word i lives in bank i % 32). Which banks do the 32
//      lanes of a warp touch in the first round, before and after your change, and how many
//      accesses does each bank then serve one after another?
// Grade it: scripts/grade.sh 03.1
#pragma once
#include <cstddef>

__global__ void reduce_sequential(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    const unsigned index = 2 * stride * tid;
    if (index < blockDim.x) s[index] += s[index + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}
