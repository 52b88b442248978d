// Lesson 10, step 2: as step 1 with GPU 0 in the host's place: peer copies, no trip through the CPU.
#pragma once
#include <cstddef>

#include "lessons/10_across_gpus/parts.cuh"

namespace lesson10 {

// acc = a + b over n floats: float4 body, scalar tail (n need not be a multiple of 4).
__global__ void add_vectors(float* acc, const float* a, const float* b, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t tid = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  for (std::size_t k = tid; k < n / 4; k += stride) store4(acc + 4 * k, add4(load4(a + 4 * k), load4(b + 4 * k)));
  for (std::size_t i = n / 4 * 4 + tid; i < n; i += stride) acc[i] = a[i] + b[i];
}

// Step 2: GPU 0 gathers: it copies GPU h's vector into its scratch with cudaMemcpyPeerAsync (the
// copy engines, over NVLink where the GPUs have it) and adds it, h = 1 .. G-1, then copies the sum
// out to every GPU. No CPU, no PCIe; but every byte goes through GPU 0's links, one copy at a time,
// and each add waits for its copy: 2 (G-1) n floats on one GPU's links, the others idle.
inline void launch_peer_copies(Group& g, cudaStream_t s) {
  const std::size_t bytes = g.n * sizeof(float);
  const unsigned blocks = static_cast<unsigned>(g.sms * 4);
  fork(g, s);
  {
    OnGpu on(0);
    for (int h = 1; h < g.gpus; ++h) {
      CUDA_CHECK(cudaMemcpyPeerAsync(g.recv[0], 0, g.in[h], h, bytes, g.stream[0]));
      add_vectors<<<blocks, 256, 0, g.stream[0]>>>(g.out[0], h == 1 ? g.in[0] : g.out[0], g.recv[0], g.n);
      CUDA_CHECK_LAUNCH();
    }
    for (int h = 1; h < g.gpus; ++h) CUDA_CHECK(cudaMemcpyPeerAsync(g.out[h], h, g.out[0], 0, bytes, g.stream[0]));
  }
  join(g, s);
}

}  // namespace lesson10
