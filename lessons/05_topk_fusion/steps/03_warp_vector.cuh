// Step 3: step 2 with 16-byte loads and an early reject below each lane's K-th best. add_pack_to_sum,
// the per-pack online softmax update that step 4 keeps, is in parts.cuh.
#pragma once
#include <cstdint>

#include "common/pack.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

// One logit, inserted only if it is not below the thread's KC-th best (a NaN is never below).
template <int KC>
__device__ __forceinline__ void push(Partial<KC>& part, float v, int i) {
  add_to_sum(part.m, part.s, v);
  if (!(v < part.threshold)) {
    insert_sorted(part.keys, make_key(v, i));
    part.threshold = key_value(part.keys[KC - 1]);
  }
}

// A pack of P logits: one max, at most one rescale, P exponentials; and one compare of the pack's
// max against the threshold rejects the whole pack, which is what random logits almost always do.
template <int P, int KC>
__device__ __forceinline__ void push_pack(Partial<KC>& part, const float (&v)[P], int i0) {
  const float pm = add_pack_to_sum(part.m, part.s, v);
  if (!(pm < part.threshold)) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      if (!(v[i] < part.threshold)) {
        insert_sorted(part.keys, make_key(v[i], i0 + i));
        part.threshold = key_value(part.keys[KC - 1]);
      }
    }
  }
}

// Thread t of nt folds elements [begin, end) of a row: single logits up to the first 16-byte
// boundary (any V, any row start), then packs t, t + nt, ... two at a time so that two 16-byte
// loads are in flight, then the single logits after the last whole pack.
template <class T, int KC>
__device__ __forceinline__ void scan_packed(const T* row, int begin, int end, int t, int nt, Partial<KC>& part) {
  constexpr int P = 16 / sizeof(T);
  const kl::PackSplit<P, T, int> split(row + begin, end - begin);
  if (t < split.head) push(part, kl::to_float(row[begin + t]), begin + t);
  const int body = begin + split.head, packs = split.packs;
  int q = t;
  for (; q + nt < packs; q += 2 * nt) {
    float a[P], b[P];
    kl::load_pack<P>(row + body + q * P, a);
    kl::load_pack<P>(row + body + (q + nt) * P, b);
    push_pack(part, a, body + q * P);
    push_pack(part, b, body + (q + nt) * P);
  }
  if (q < packs) {
    float a[P];
    kl::load_pack<P>(row + body + q * P, a);
    push_pack(part, a, body + q * P);
  }
  const int tail = body + packs * P;
  if (t < split.tail) push(part, kl::to_float(row[tail + t]), tail + t);
}

// Step 2 with 16-byte loads (4 floats or 8 halves per instruction) and the early reject: for random
// logits a lane's list fills in its first few packs and later packs almost never get in, so the
// insertion cost vanishes and the kernel is left with the loads, one max and P exponentials per pack.
template <class T, int KC>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    topk_warp_vector(const T* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  Partial<KC> part;
  scan_packed(x + row * vocab, 0, vocab, lane, 32, part);
  finish_warp(part, k, lane, prob + row * k, idx + row * k);
}

inline void launch_warp_vector(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_kc(p.k, [&](auto kc) {
      topk_warp_vector<T, kc()><<<warp_grid(p.rows), 32 * kWarpsPerBlock, 0, s>>>(static_cast<const T*>(p.x), p.rows,
                                                                                  p.vocab, p.k, p.prob, p.idx);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
