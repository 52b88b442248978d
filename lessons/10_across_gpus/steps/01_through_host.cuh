// Lesson 10, step 1: the all-reduce through the host, the baseline every other step is measured against.
#pragma once
#include <cstddef>

#include "lessons/10_across_gpus/parts.cuh"

namespace lesson10 {

// The host's part, run by the stream once every download has landed: the G vectors added in float64
// in GPU order and rounded once, so that NaN and infinities propagate as in any float sum.
inline void CUDART_CB host_sum(void* arg) {
  const HostSum& h = *static_cast<const HostSum*>(arg);
  for (std::size_t i = 0; i < h.n; ++i) {
    double acc = 0;
    for (int g = 0; g < h.gpus; ++g) acc += h.parts[g * h.n + i];
    h.sum[i] = static_cast<float>(acc);
  }
}

// Step 1: every GPU copies its vector to pinned host memory (all at once, each over its own PCIe
// link), the CPU adds them, and every GPU copies the sum back. Each byte crosses PCIe twice and the
// CPU's single pass over G * n floats sits between the two copies: no overlap at all.
inline void launch_through_host(Group& g, cudaStream_t s) {
  const std::size_t bytes = g.n * sizeof(float);
  fork(g, s);
  for (int i = 0; i < g.gpus; ++i) {
    OnGpu on(i);
    CUDA_CHECK(cudaMemcpyAsync(const_cast<float*>(g.host.parts) + i * g.n, g.in[i], bytes, cudaMemcpyDeviceToHost,
                               g.stream[i]));
  }
  join(g, s);
  CUDA_CHECK(cudaLaunchHostFunc(s, host_sum, &g.host));
  fork(g, s);
  for (int i = 0; i < g.gpus; ++i) {
    OnGpu on(i);
    CUDA_CHECK(cudaMemcpyAsync(g.out[i], g.host.sum, bytes, cudaMemcpyHostToDevice, g.stream[i]));
  }
  join(g, s);
}

}  // namespace lesson10
