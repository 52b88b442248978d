// Lesson 10, step 3: kernels read and write the other GPUs' memory: each GPU reduces its 1/G share.
#pragma once
#include <cstddef>

#include "lessons/10_across_gpus/parts.cuh"

namespace lesson10 {

// What one GPU's kernel sees: every GPU's input and output (peer pointers, valid once peer access is on).
struct Peers {
  int gpus;
  std::size_t n;
  const float* in[kMaxGpus];
  float* out[kMaxGpus];
};

inline Peers peers_of(const Group& g) {
  Peers p{g.gpus, g.n, {}, {}};
  for (int i = 0; i < g.gpus; ++i) {
    p.in[i] = g.in[i];
    p.out[i] = g.out[i];
  }
  return p;
}

// Step 3: GPU `me` reads chunk `me` of all G inputs (G - 1 of them over NVLink, as loads of its own
// kernel), adds them in GPU order, and stores the sum into chunk `me` of all G outputs: a reduce-scatter
// and an all-gather in one pass. Every GPU's links carry (G-1)/G of the vector each way, all at once,
// and no chunk is touched by two GPUs, so the GPUs need no signal to each other.
__global__ void allreduce_peer_access(Peers p, int me) {
  const Range r = chunk_range(p.n, p.gpus, me);
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t tid = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t packs = (r.end - r.begin) / 4;
  for (std::size_t k = tid; k < packs; k += stride) {
    const std::size_t i = r.begin + 4 * k;
    float4 v[kMaxGpus];
#pragma unroll
    for (int h = 0; h < kMaxGpus; ++h)
      if (h < p.gpus) v[h] = load4(p.in[h] + i);  // G loads in flight before the first add
    float4 s = v[0];
#pragma unroll
    for (int h = 1; h < kMaxGpus; ++h)
      if (h < p.gpus) s = add4(s, v[h]);
#pragma unroll
    for (int h = 0; h < kMaxGpus; ++h)
      if (h < p.gpus) store4(p.out[h] + i, s);
  }
  for (std::size_t i = r.begin + 4 * packs + tid; i < r.end; i += stride) {  // the chunk's last 0-3 floats
    float s = p.in[0][i];
    for (int h = 1; h < p.gpus; ++h) s += p.in[h][i];
    for (int h = 0; h < p.gpus; ++h) p.out[h][i] = s;
  }
}

inline void launch_peer_access(Group& g, cudaStream_t s) {
  if (!g.peer_access) throw kl::NotSupported("needs peer access between every pair of GPUs");
  const Peers p = peers_of(g);
  fork(g, s);
  for (int i = 0; i < g.gpus; ++i) {
    OnGpu on(i);
    allreduce_peer_access<<<g.sms * 4, 256, 0, g.stream[i]>>>(p, i);
    CUDA_CHECK_LAUNCH();
  }
  join(g, s);
}

}  // namespace lesson10
