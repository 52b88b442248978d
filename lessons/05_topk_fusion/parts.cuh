// The pieces several steps of lesson 05 share, each under the step that introduced it: the scratch
// the steps keep, the compiled list lengths, the 64-bit keys, the per-thread sorted list, the online
// softmax update, and the end of a warp-per-row kernel (the row's (m, s), the warp merge, the writes).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/buffer.cuh"
#include "common/pack.cuh"
#include "common/softmax_math.cuh"
#include "common/warp.cuh"
#include "lessons/04_online_softmax/softmax.cuh"
#include "lessons/05_topk_fusion/problem.cuh"

namespace lesson05 {

// Scratch the steps keep between runs. It grows on a step's first (untimed) run for a shape; a
// repeated run allocates nothing and launches only kernels, so it can be captured in a CUDA graph.
struct Workspace {
  // step 1: the probabilities, their sorted copy, the indices 0..V-1 per row and their sorted copy,
  // the segment offsets, cub's temporary storage, and the shape these were prepared for
  kl::DeviceBuffer<unsigned char> probs, sorted, cub_temp;
  kl::DeviceBuffer<int> iota, iota_sorted, offsets;
  lesson04::Workspace softmax_ws;  // kept, so that a repeated run allocates nothing
  std::size_t cub_bytes = 0;
  std::int64_t prepared_rows = -1;
  int prepared_vocab = -1;
  Dtype prepared_dtype = Dtype::f32;
  // step 6: each slice's top-k keys and its (max, sum)
  kl::DeviceBuffer<unsigned long long> part_keys;
  kl::DeviceBuffer<float2> part_stats;
};

// ---- introduced by step 2 (fused, a warp per row) --------------------------------------------------

// The kernels are compiled for list lengths 1, 2, 4, ..., 64; a run-time K uses the next one up
// and writes only its first K winners.
inline int round_k(int k) {
  int kc = 1;
  while (kc < k) kc *= 2;
  return kc;
}

// Calls f(std::integral_constant<int, KC>{}) for the compiled list length KC = round_k(k).
template <class F>
void with_kc(int k, F&& f) {
  switch (round_k(k)) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 8:
      f(std::integral_constant<int, 8>{});
      break;
    case 16:
      f(std::integral_constant<int, 16>{});
      break;
    case 32:
      f(std::integral_constant<int, 32>{});
      break;
    default:
      f(std::integral_constant<int, 64>{});
      break;
  }
}

// A candidate is one 64-bit key: the logit's bits made order-preserving (flip all bits of a negative
// float, set the sign bit of a positive one; NaN made +NaN, so it ranks above +inf) in the high half,
// and ~index in the low half. One unsigned compare then ranks by (logit, then lower index), and all
// keys are distinct. Key 0 is "empty": below every real key (-inf's key is 0x007FFFFF'xxxxxxxx).
using Key = unsigned long long;

__host__ __device__ inline Key make_key(float x, int i) {
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  if (x != x) u = 0x7FC00000u;
  if (x == 0.f) u = 0;  // -0 and +0 are the same logit: the index decides
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (Key{u} << 32) | (0xFFFFFFFFu - static_cast<unsigned>(i));
}

__host__ __device__ inline float key_value(Key key) {
  unsigned u = static_cast<unsigned>(key >> 32);
  u = (u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

__host__ __device__ inline int key_index(Key key) { return static_cast<int>(0xFFFFFFFFu - static_cast<unsigned>(key)); }

// Puts a key in its place in a list sorted largest first and drops the last one. Slot j takes its
// upper neighbour (the key went above it), the key, or keeps its own; the loop is fully unrolled so
// the list stays in registers (a runtime index would move it to local memory). KC compares per call.
template <int KC>
__device__ __forceinline__ void insert_sorted(Key (&keys)[KC], Key key) {
#pragma unroll
  for (int j = KC - 1; j > 0; --j) keys[j] = key > keys[j - 1] ? keys[j - 1] : (key > keys[j] ? key : keys[j]);
  keys[0] = key > keys[0] ? key : keys[0];
}

// What one thread (then a warp, a block) has seen of a row: the online softmax state (max m, and
// s = sum of e^(x - m)), the KC best keys, and the KC-th best logit as a float, the early-reject
// threshold (NaN while the list is not full, so that everything is inserted then).
template <int KC>
struct Partial {
  float m = -INFINITY, s = 0.f, threshold = NAN;
  Key keys[KC] = {};
};

// The online softmax update for one logit: a larger max rescales the sum first. While the max is
// still -inf, terms are taken against 0 (e^(-inf - -inf) would be NaN); NaN and +inf make s NaN.
__device__ __forceinline__ void add_to_sum(float& m, float& s, float x) {
  if (x > m) {
    s *= kl::fast_exp(m - x);
    m = x;
  }
  s += kl::fast_exp(x - (m == -INFINITY ? 0.f : m));
}

// Butterfly over the warp with kl::combine (common/softmax_math.cuh): every lane ends with the row's
// (m, s), bit for bit the same. A lane that met a NaN while its max was still -inf holds (-inf, NaN)
// (add_to_sum keeps NaN out of the max), which kl::combine would take for an empty part: such a lane
// first makes its max NaN too, so that the NaN reaches the whole row.
__device__ __forceinline__ void warp_stats(float& m, float& s) {
  if (s != s) m = s;
  for (int offset = 16; offset > 0; offset /= 2) {
    const kl::MaxSum r =
        kl::combine({m, s}, {__shfl_xor_sync(kl::kFullMask, m, offset), __shfl_xor_sync(kl::kFullMask, s, offset)});
    m = r.m;
    s = r.s;
  }
}

// Merges the warp's 32 sorted lists in k rounds: every lane offers its best remaining key, a
// max-butterfly finds the warp's best, and the lane that held it pops it. Lane r keeps round r's
// winner in `first`, round 32 + r's in `second`.
template <int KC>
__device__ __forceinline__ void warp_merge(Key (&keys)[KC], int k, int lane, Key& first, Key& second) {
  for (int r = 0; r < k; ++r) {
    Key best = keys[0];
    for (int offset = 16; offset > 0; offset /= 2) {
      const Key other = __shfl_xor_sync(kl::kFullMask, best, offset);
      best = other > best ? other : best;
    }
    if (keys[0] == best) {
#pragma unroll
      for (int j = 0; j < KC - 1; ++j) keys[j] = keys[j + 1];
      keys[KC - 1] = 0;
    }
    if (lane == r) first = best;
    if (lane == r - 32) second = best;
  }
}

// p = e^(x - m) / s for each winner, with the row's final (m, s); lanes write the k results side by side.
__device__ __forceinline__ void write_winners(Key first, Key second, int k, int lane, float m, float s, float* prob,
                                              int* idx) {
  if (lane < k) {
    prob[lane] = kl::fast_exp(key_value(first) - m) / s;
    idx[lane] = key_index(first);
  }
  if (lane + 32 < k) {
    prob[lane + 32] = kl::fast_exp(key_value(second) - m) / s;
    idx[lane + 32] = key_index(second);
  }
}

// The end of every warp-per-row kernel: the row's (m, s), the k winners, the K probabilities.
template <int KC>
__device__ __forceinline__ void finish_warp(Partial<KC>& part, int k, int lane, float* prob, int* idx) {
  warp_stats(part.m, part.s);
  Key first = 0, second = 0;
  warp_merge(part.keys, k, lane, first, second);
  write_winners(first, second, k, lane, part.m, part.s, prob, idx);
}

constexpr int kWarpsPerBlock = 8;  // warp-per-row kernels: 8 rows per block of 256 threads

inline unsigned warp_grid(std::int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// ---- introduced by step 3 (16-byte loads, early reject) ---------------------------------------------

// The online softmax update for a pack; returns the pack's max. An absent logit is -inf: it adds
// e^-inf = 0. One max.NaN instruction per logit (kl::max_nan_1op), at most one rescale, and P
// exponentials without __expf's subnormal fix-up (kl::exp_ftz: a term below 2^-126 next to the
// max's term 1 changes no float sum).
template <int P>
__device__ __forceinline__ float add_pack_to_sum(float& m, float& s, const float (&v)[P]) {
  float pm = v[0];
#pragma unroll
  for (int i = 1; i < P; ++i) pm = kl::max_nan_1op(pm, v[i]);
  if (pm > m) {
    s *= kl::exp_ftz(m - pm);
    m = pm;
  }
  const float base = m == -INFINITY ? 0.f : m;
#pragma unroll
  for (int i = 0; i < P; ++i) s += kl::exp_ftz(v[i] - base);
  return pm;
}

// ---- introduced by step 4 (a K-best selection per warp) --------------------------------------------

// Sorts the first N keys of buf largest first: a bitonic network whose N / 2 compare-exchanges per
// stage are shared by the lanes. A lane loads two pairs before it stores either, so two
// shared-memory latencies overlap (more pairs at once would cost the streaming loops registers).
template <int N>
__device__ void warp_sort(Key* buf, int lane) {
  constexpr int kPairs = N / 64 < 2 ? N / 64 : 2;  // per lane and batch
  __syncwarp();
  for (int size = 2; size <= N; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int t0 = lane; t0 < N / 2; t0 += 32 * kPairs) {
        Key a[kPairs], b[kPairs];
#pragma unroll
        for (int r = 0; r < kPairs; ++r) {
          const int t = t0 + 32 * r, lo = 2 * t - (t & (stride - 1));  // t with a 0 bit inserted at `stride`
          a[r] = buf[lo];
          b[r] = buf[lo + stride];
        }
#pragma unroll
        for (int r = 0; r < kPairs; ++r) {
          const int t = t0 + 32 * r, lo = 2 * t - (t & (stride - 1));
          const bool descending = (lo & size) == 0;  // runs of `size` alternate descending / ascending
          buf[lo] = (a[r] < b[r]) == descending ? b[r] : a[r];
          buf[lo + stride] = (a[r] < b[r]) == descending ? a[r] : b[r];
        }
      }
      __syncwarp();
    }
  }
}

// Sorts the first `count` keys, padded with empty keys (0) to a power of two (64 ... 512), and
// returns how many of the best are kept: min(count, k).
__device__ __forceinline__ int sort_candidates(Key* buf, int count, int k, int lane) {
  int n = 64;
  while (n < count) n *= 2;
  for (int i = count + lane; i < n; i += 32) buf[i] = 0;
  switch (n) {
    case 64:
      warp_sort<64>(buf, lane);
      break;
    case 128:
      warp_sort<128>(buf, lane);
      break;
    case 256:
      warp_sort<256>(buf, lane);
      break;
    default:
      warp_sort<512>(buf, lane);
      break;  // no buffer holds more than 512 keys
  }
  return min(count, k);
}

}  // namespace lesson05
