// A wrong technique for exercise 03.1, kept to test the grader: step 1's interleaved tree, where the
// threads whose index is a multiple of 2*stride add their neighbour (tid % (2*stride) == 0). It adds
// the pairs of the interleaved order, not of sequential addressing, so its last bits differ on
// real-valued data: it must fail the check. (It is also slower: step 1 takes 0.656 ms against step
// 3's 0.319 ms at 2^26 floats on the H100, about 0.49 of the solution's speed.)
#pragma once
#include <cstddef>

__global__ void reduce_sequential(const float* x, std::size_t n, float* partial) {
  extern __shared__ float s[];
  const unsigned tid = threadIdx.x;
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + tid;
  s[tid] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
    if (tid % (2 * stride) == 0) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) partial[blockIdx.x] = s[0];
}
