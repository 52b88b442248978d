// Lesson 10 — across GPUs: the all-reduce of a float32 vector held on each of G GPUs of one machine,
// the sum on every GPU. This file is the problem as the steps see it: the group of GPUs (each GPU's
// input, output, scratch and stream), how n floats split into G chunks, and the bandwidth formulas.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "common/check.cuh"
#include "common/step.hpp"

namespace lesson10 {

constexpr int kMaxGpus = 8;  // one machine: an HGX board holds 8 GPUs

// Step 1's host sum: the G downloaded vectors, one after another, and where their sum goes.
struct HostSum {
  const float* parts = nullptr;  // G * n floats, pinned
  float* sum = nullptr;          // n floats, pinned
  std::size_t n = 0;
  int gpus = 0;
};

// The GPUs 0 .. G-1 and what each holds. GPU g's input in[g] is never written by a step; out[g]
// receives the sum. Every pointer of index g is memory of GPU g, every stream and done event too.
struct Group {
  int gpus = 0;
  std::size_t n = 0;                  // floats per GPU
  int sms = 0;                        // SMs of GPU 0 (all GPUs of the group are alike)
  bool peer_access = false;           // every GPU can read and write every other's memory
  const float* in[kMaxGpus] = {};     // GPU g's vector
  float* out[kMaxGpus] = {};          // GPU g's copy of the sum
  float* recv[kMaxGpus] = {};         // n floats of scratch on GPU g (steps 2 and 4)
  unsigned* flags[kMaxGpus] = {};     // step 4's flags on GPU g
  unsigned* launches[kMaxGpus] = {};  // step 4's launch counter on GPU g: the value its flags wait for
  std::size_t flag_count = 0;         // flags per GPU
  cudaStream_t stream[kMaxGpus] = {};
  cudaEvent_t forked = nullptr;     // on GPU 0: recorded where the timer's stream forks
  cudaEvent_t done[kMaxGpus] = {};  // on GPU g: recorded where GPU g's stream joins back
  HostSum host;                     // step 1's pinned buffers
  void* nccl = nullptr;             // the library row's communicators (ncclComm_t[G]), or null
};

// A step's launcher enqueues the whole all-reduce behind what the timer's stream `s` (a stream of
// GPU 0) holds, and makes `s` wait for all of it, so that the timer's events measure every GPU.
using Launch = void (*)(Group& g, cudaStream_t s);
using AllReduceStep = kl::Step<Launch>;

// [begin, end) of the vector.
struct Range {
  std::size_t begin, end;
};

// n floats in G chunks of ceil(n / G) rounded up to 4 floats, so that every chunk starts on a
// 16-byte boundary (float4 loads); the last chunks may be short or empty (n = 1: only chunk 0).
__host__ __device__ inline std::size_t chunk_len(std::size_t n, int gpus) {
  const std::size_t len = (n + gpus - 1) / gpus;
  return (len + 3) / 4 * 4;
}
__host__ __device__ inline Range chunk_range(std::size_t n, int gpus, int c) {
  const std::size_t len = chunk_len(n, gpus);
  const std::size_t begin = c * len < n ? c * len : n;
  return {begin, begin + len < n ? begin + len : n};
}

// NCCL's bus bandwidth: an all-reduce of B bytes must send and receive 2 (G-1) / G * B bytes per GPU
// (reduce-scatter, then all-gather), so busbw = algbw * 2 (G-1) / G compares with a link's bandwidth
// whatever G is. algbw = B / time.
constexpr double bus_factor(int gpus) { return 2.0 * (gpus - 1) / gpus; }
constexpr double algbw_gbps(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }
constexpr double busbw_gbps(double bytes, double ms, int gpus) { return algbw_gbps(bytes, ms) * bus_factor(gpus); }

}  // namespace lesson10
