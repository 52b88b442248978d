// What the steps of lesson 10 share: working on one GPU of the group at a time and handing the timer
// back GPU 0 (every step), the fork of the timer's stream into one stream per GPU and the join back
// (every step), float4 arithmetic (step 2 introduces it), and the roles of a ring step (step 4).
#pragma once
#include <cstddef>

#include "lessons/10_across_gpus/problem.cuh"

namespace lesson10 {

// Every step: GPU g is the current device while its work is enqueued (kernel launches go to the
// current device); at the end GPU 0 is current again, the device of the timer's stream.
class OnGpu {
 public:
  explicit OnGpu(int g) { CUDA_CHECK(cudaSetDevice(g)); }
  ~OnGpu() { cudaSetDevice(0); }
  OnGpu(const OnGpu&) = delete;
  OnGpu& operator=(const OnGpu&) = delete;
};

// Every step: each GPU's stream waits for what the timer's stream `s` holds so far (fork), and `s`
// waits for every GPU's stream (join). Between the two, the GPUs work at once; after the join, the
// timer's stop event follows the last GPU's last piece of work.
inline void fork(Group& g, cudaStream_t s) {
  CUDA_CHECK(cudaEventRecord(g.forked, s));
  for (int i = 0; i < g.gpus; ++i) CUDA_CHECK(cudaStreamWaitEvent(g.stream[i], g.forked, 0));
}
inline void join(Group& g, cudaStream_t s) {
  for (int i = 0; i < g.gpus; ++i) {
    OnGpu on(i);
    CUDA_CHECK(cudaEventRecord(g.done[i], g.stream[i]));
  }
  for (int i = 0; i < g.gpus; ++i) CUDA_CHECK(cudaStreamWaitEvent(s, g.done[i], 0));
}

// Step 2: 16-byte loads and adds. A Range's float4 body starts 16-byte aligned (chunk_range).
__device__ __forceinline__ float4 add4(float4 a, float4 b) { return {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w}; }
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// Step 4: what GPU g does with the chunk of ring step t (of 2 (G-1)). Reduce-scatter first: it sends its
// own input (t = 0), then adds its input to the partial sum received at step t - 1 and sends that on
// (t < G - 1); at t = G - 1 the received partial plus its input is the chunk's full sum, which it keeps
// and sends. All-gather then: it forwards the full chunk received at step t - 1 (t >= G).
enum class Role { send_own, add_send, add_keep, forward };

}  // namespace lesson10
