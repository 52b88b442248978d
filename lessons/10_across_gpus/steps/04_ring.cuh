// Lesson 10, step 4: a ring all-reduce for any G, pipelined in slices, with peer stores and flags.
#pragma once
#include <cuda/atomic>

#include <cstddef>

#include "lessons/10_across_gpus/parts.cuh"

namespace lesson10 {

// The ring's schedule: at step t (of 2 (G-1)) GPU `me` sends chunk (me - t) mod G to GPU me + 1, which
// is the chunk its predecessor sent it at step t - 1; role() says what it does with it (parts.cuh).
struct RingSchedule {
  __host__ __device__ static int chunk(int me, int t, int gpus) { return ((me - t) % gpus + gpus) % gpus; }
  __host__ __device__ static Role role(int t, int gpus) {
    if (t == 0) return Role::send_own;
    if (t < gpus - 1) return Role::add_send;
    return t == gpus - 1 ? Role::add_keep : Role::forward;
  }
};

constexpr int kRingThreads = 512;

// Each chunk in slices: about four per block, whole 4 KiB pages, so that every block pipelines a few.
struct RingGrid {
  std::size_t slice, slices;  // floats per slice, slices per chunk
  int blocks;                 // at most 2 per SM: every block resident, so a block waiting on a flag never
                              // keeps the block that would set it from running
};
inline RingGrid ring_grid(std::size_t n, int gpus, int sms) {
  const std::size_t len = chunk_len(n, gpus), most = 2 * static_cast<std::size_t>(sms);
  const std::size_t slice = ((len + 4 * most - 1) / (4 * most) + 1023) / 1024 * 1024;
  const std::size_t slices = (len + slice - 1) / slice;
  return {slice, slices, static_cast<int>(slices < most ? slices : most)};
}

// What GPU `me`'s kernel sees: its own buffers, the next GPU's, and the flags on both.
struct Ring {
  int gpus, me;
  std::size_t n, slice, slices;
  const float* in;
  float* out;
  const float* recv;  // partial sums the previous GPU stored here
  float* next_out;
  float* next_recv;
  unsigned* flags;  // flags[t * slices + j]: slice j of step t has landed here
  unsigned* next_flags;
  const unsigned* launches;  // the value a flag holds once set in this launch
};

// A flag is set by the previous GPU (release: its stores land first) and awaited here (acquire).
__device__ __forceinline__ void wait_flag(unsigned* flag, unsigned launch) {
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_system> f(*flag);
    while (f.load(cuda::memory_order_acquire) < launch) {}
  }
  __syncthreads();
}
__device__ __forceinline__ void set_flag(unsigned* flag, unsigned launch) {
  __threadfence_system();  // this thread's stores to the next GPU, visible there before the flag
  __syncthreads();
  if (threadIdx.x == 0)
    cuda::atomic_ref<unsigned, cuda::thread_scope_system>(*flag).store(launch, cuda::memory_order_release);
}

// One element (T = float4 or float) of the slice: what the role reads, where it stores it. What the
// previous GPU stored here is read through L2 (__ldcg): this SM's L1 does not see peer stores.
template <class T>
__device__ __forceinline__ void move(const Ring& r, Role role, std::size_t i) {
  const auto at = [](const float* p, std::size_t i) { return __ldcg(reinterpret_cast<const T*>(p + i)); };
  const auto put = [](float* p, std::size_t i, T v) { *reinterpret_cast<T*>(p + i) = v; };
  if (role == Role::forward) return put(r.next_out, i, at(r.out, i));
  const T own = *reinterpret_cast<const T*>(r.in + i);
  if (role == Role::send_own) return put(r.next_recv, i, own);
  T v = at(r.recv, i);
  if constexpr (sizeof(T) == sizeof(float4)) v = add4(own, v);
  else v = own + v;
  if (role == Role::add_send) return put(r.next_recv, i, v);
  put(r.out, i, v);  // add_keep: the chunk's full sum, kept here and sent on
  put(r.next_out, i, v);
}

// Step 4: the 2 (G-1) steps of the ring in one kernel per GPU. Each block takes slices of the step's
// chunk; for each it waits for the previous GPU's flag, adds and stores into the next GPU, and sets the
// next GPU's flag. A slice moves on as soon as it lands, so step t of one slice overlaps step t + 1 of
// another: every link busy in both directions, each byte added where it arrives, 2 (G-1)/G n per GPU.
template <class Schedule>
__global__ void __launch_bounds__(kRingThreads, 2) allreduce_ring(Ring r) {
  const unsigned launch = *r.launches;
  for (int t = 0; t < 2 * (r.gpus - 1); ++t) {
    const Range ch = chunk_range(r.n, r.gpus, Schedule::chunk(r.me, t, r.gpus));
    const Role role = Schedule::role(t, r.gpus);
    for (std::size_t j = blockIdx.x; j < r.slices; j += gridDim.x) {
      const std::size_t b = ch.begin + j * r.slice < ch.end ? ch.begin + j * r.slice : ch.end;
      const std::size_t e = b + r.slice < ch.end ? b + r.slice : ch.end;
      if (t > 0) wait_flag(r.flags + (t - 1) * r.slices + j, launch);
      std::size_t i = b + 4 * threadIdx.x;
      for (; i + 4 <= e; i += 4 * kRingThreads) move<float4>(r, role, i);
      for (i = b + (e - b) / 4 * 4 + threadIdx.x; i < e; i += kRingThreads) move<float>(r, role, i);  // n's tail
      set_flag(r.next_flags + t * r.slices + j, launch);
    }
  }
}

// One launch more on this GPU: the flags of this launch are set to the new count, so none needs a reset.
__global__ void count_launch(unsigned* launches) { ++*launches; }

template <class Schedule>
void enqueue_ring(Group& g, cudaStream_t s) {
  if (!g.peer_access) throw kl::NotSupported("needs peer access between every pair of GPUs");
  const RingGrid grid = ring_grid(g.n, g.gpus, g.sms);
  if (2 * (g.gpus - 1) * grid.slices > g.flag_count) throw kl::NotSupported("too few flags for this n");
  fork(g, s);
  for (int i = 0; i < g.gpus; ++i) {
    const int next = (i + 1) % g.gpus;
    const Ring r{g.gpus,    i,           g.n,          grid.slice, grid.slices,   g.in[i],      g.out[i],
                 g.recv[i], g.out[next], g.recv[next], g.flags[i], g.flags[next], g.launches[i]};
    OnGpu on(i);
    count_launch<<<1, 1, 0, g.stream[i]>>>(g.launches[i]);
    allreduce_ring<Schedule><<<grid.blocks, kRingThreads, 0, g.stream[i]>>>(r);
    CUDA_CHECK_LAUNCH();
  }
  join(g, s);
}

inline void launch_ring(Group& g, cudaStream_t s) { enqueue_ring<RingSchedule>(g, s); }

}  // namespace lesson10
