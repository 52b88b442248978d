// Lesson 05 — fused softmax + top-K: for each row of logits [R, V], the K largest softmax
// probabilities and their indices, sorted by probability (ties: the lower index first). Step 1
// writes the whole probability row and sorts it; steps 2-7 read each logit once and write only
// the K winners. Logits are f32, f16 or bf16 (loaded in that type, arithmetic in float); the
// outputs are always float probabilities and int indices. main.cu and test.cu walk kSteps (the end
// of this file), so a new step is benchmarked and tested by adding one entry.
#pragma once
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/pack.cuh"
#include "common/parallel.hpp"
#include "common/warp.cuh"
#include "lessons/04_online_softmax/softmax.cuh"

namespace lesson05 {

// ---- the problem ----------------------------------------------------------------------------------

// The element types (Dtype, dtype_of, with_type, ...) live in common/pack.cuh.
using kl::Dtype;
using kl::dtype_bytes;
using kl::dtype_name;
using kl::dtype_of;
using kl::parse_dtype;
using kl::with_type;

// One top-K call: x holds rows x vocab logits of dtype; prob and idx receive rows x k results.
struct Problem {
  const void* x = nullptr;
  float* prob = nullptr;
  int* idx = nullptr;
  std::int64_t rows = 0;
  int vocab = 0, k = 0;
  Dtype dtype = Dtype::f32;
};

constexpr int kMaxK = 64;

// Refuses what no step can do, before anything is launched: K outside 1..64, or K > V (a row has
// only V probabilities to pick from).
inline void validate(const Problem& p) {
  if (p.k < 1 || p.k > kMaxK) throw kl::UsageError("K = " + std::to_string(p.k) + " is out of range: K must be 1 to 64");
  if (p.vocab < 1) throw kl::UsageError("V = " + std::to_string(p.vocab) + ": a row needs at least one logit");
  if (p.k > p.vocab)
    throw kl::UsageError("K = " + std::to_string(p.k) + " is larger than V = " + std::to_string(p.vocab) +
                         ": a row has only V probabilities");
  if (p.rows < 0) throw kl::UsageError("R = " + std::to_string(p.rows) + " is negative");
}

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
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    default: f(std::integral_constant<int, 64>{}); break;
  }
}

// A step that turns a shape down (step 1 past cub's int item count): the driver shows it as n/a.
struct NotSupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- the float64 reference ------------------------------------------------------------------------

// Per row: the softmax statistics in double and the first k entries of the row's order. The order
// is a stable sort by (-p, index), which is the order of (-x, index) since p = e^(x - m) / s
// grows with x; we sort by x so that probabilities too small for a double (x - m < -745) keep their
// order. NaN ranks above everything (as in torch.topk), NaNs among themselves by index.
// Probabilities: a row holding NaN or +inf, or only -inf, has NaN probabilities (x - m is NaN).
struct Reference {
  std::int64_t rows = 0;
  int vocab = 0, k = 0;
  std::vector<double> m, s;     // per row: max, sum of e^(x - max)
  std::vector<int> idx;         // rows x k
  std::vector<double> prob;     // rows x k

  double p(const std::vector<float>& x, std::int64_t row, int i) const {
    return std::exp(static_cast<double>(x[row * vocab + i]) - m[row]) / s[row];
  }
};

// True when logit a (at index ia) comes before logit b (at ib) in a row's order.
inline bool ranks_before(float a, int ia, float b, int ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}

inline Reference reference(const std::vector<float>& x, std::int64_t rows, int vocab, int k) {
  Reference ref;
  ref.rows = rows;
  ref.vocab = vocab;
  ref.k = k;
  ref.m.resize(rows);
  ref.s.resize(rows);
  ref.idx.resize(rows * k);
  ref.prob.resize(rows * k);
  kl::parallel_for(static_cast<std::size_t>(rows), [&](std::size_t r0, std::size_t r1) {
    std::vector<int> order(vocab);
    for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
      const float* xr = x.data() + r * vocab;
      double m = -INFINITY, s = 0;
      for (int i = 0; i < vocab; ++i) m = std::isnan(xr[i]) || std::isnan(m) ? NAN : std::max(m, double{xr[i]});
      for (int i = 0; i < vocab; ++i) s += std::exp(xr[i] - m);
      ref.m[r] = m;
      ref.s[r] = s;
      for (int i = 0; i < vocab; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return ranks_before(xr[a], a, xr[b], b); });
      for (int j = 0; j < k; ++j) {
        ref.idx[r * k + j] = order[j];
        ref.prob[r * k + j] = std::exp(xr[order[j]] - m) / s;
      }
    }
  });
  return ref;
}

// How close a probability must be: error = |p - ref| / (|ref| + abs / rel), passing at <= rel. The
// fused steps compute in float and write float; step 1 writes its probabilities in the input type.
struct Tolerance {
  double rel, abs;
};

inline Tolerance tolerance(Dtype written) {
  if (written == Dtype::f16) return {2e-3, 1e-7};   // 2^-11 rounding, subnormals below 6e-5
  if (written == Dtype::bf16) return {1.6e-2, 1e-30};  // 2^-8 rounding
  return {1e-4, 1e-30};
}

inline double prob_error(double got, double ref, Tolerance tol) {
  if (std::isnan(got) || std::isnan(ref)) return std::isnan(got) && std::isnan(ref) ? 0 : INFINITY;
  return std::fabs(got - ref) / (std::fabs(ref) + tol.abs / tol.rel);
}

// The largest error over all rows and ranks; infinite when an index is out of range, repeated, or
// not the reference's. `exact`: the index at every rank must be the reference's (the fused steps
// rank logits, exactly as the reference does). Otherwise (step 1 ranks rounded probabilities) an
// index may differ where its probability is within tolerance of the reference's at that rank.
inline double max_error(const std::vector<float>& prob, const std::vector<int>& idx, const Reference& ref,
                        const std::vector<float>& x, Tolerance tol, bool exact) {
  std::vector<double> worst(static_cast<std::size_t>(ref.rows), 0.0);
  const int k = ref.k;
  kl::parallel_for(static_cast<std::size_t>(ref.rows), [&](std::size_t r0, std::size_t r1) {
    for (auto r = static_cast<std::int64_t>(r0); r < static_cast<std::int64_t>(r1); ++r) {
      double e = 0;
      for (int j = 0; j < k; ++j) {
        const int got = idx[r * k + j];
        const double want = ref.prob[r * k + j];
        e = std::max(e, prob_error(prob[r * k + j], want, tol));
        bool repeated = false;
        for (int i = 0; i < j; ++i) repeated = repeated || idx[r * k + i] == got;
        if (got < 0 || got >= ref.vocab || repeated) e = INFINITY;
        else if (got != ref.idx[r * k + j] && (exact || prob_error(ref.p(x, r, got), want, tol) > tol.rel)) e = INFINITY;
      }
      worst[r] = e;
    }
  });
  return worst.empty() ? 0.0 : *std::max_element(worst.begin(), worst.end());
}

// ---- step 1: softmax, write the probabilities, sort each row, keep K --------------------------------

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

// Row r's segment runs from offsets[r] to offsets[r + 1]; each element's value is its index in the row.
__global__ void sort_inputs(int* iota, int* offsets, std::int64_t rows, int vocab) {
  const std::int64_t n = rows * vocab;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x) {
    iota[i] = static_cast<int>(i % vocab);
    if (i % vocab == 0) offsets[i / vocab] = static_cast<int>(i);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) offsets[rows] = static_cast<int>(n);
}

// The first k of each sorted row become the answer.
template <class T>
__global__ void keep_first_k(const T* sorted, const int* iota_sorted, std::int64_t rows, int vocab, int k, float* prob,
                             int* idx) {
  const std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * k) return;
  const std::int64_t from = i / k * vocab + i % k;
  prob[i] = kl::to_float(sorted[from]);
  idx[i] = iota_sorted[from];
}

// Reads R x V logits, writes R x V probabilities (lesson 04), then cub reads them and the indices
// and writes both sorted (radix sort: several passes), and we keep K per row: 3 to 5 times the
// bytes of one read of the logits. cub's radix sort is stable, so equal probabilities stay in
// index order.
template <class T>
void launch_unfused_t(const Problem& p, Workspace& ws, cudaStream_t s) {
  const std::int64_t n = p.rows * p.vocab;
  if (n >= INT_MAX) throw NotSupported("cub's segmented sort counts items in int: R x V must be below 2^31");
  const T* probs = reinterpret_cast<const T*>(ws.probs.data());
  T* sorted = reinterpret_cast<T*>(ws.sorted.data());
  if (ws.prepared_rows != p.rows || ws.prepared_vocab != p.vocab || ws.prepared_dtype != p.dtype) {
    ws.probs.resize(n * sizeof(T));
    ws.sorted.resize(n * sizeof(T));
    ws.iota.resize(n);
    ws.iota_sorted.resize(n);
    ws.offsets.resize(p.rows + 1);
    probs = reinterpret_cast<const T*>(ws.probs.data());
    sorted = reinterpret_cast<T*>(ws.sorted.data());
    sort_inputs<<<kl::sm_count() * 8, 256, 0, s>>>(ws.iota.data(), ws.offsets.data(), p.rows, p.vocab);
    CUDA_CHECK_LAUNCH();
    ws.cub_bytes = 0;
    CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        nullptr, ws.cub_bytes, probs, sorted, ws.iota.data(), ws.iota_sorted.data(), static_cast<int>(n),
        static_cast<int>(p.rows), ws.offsets.data(), ws.offsets.data() + 1, 0, static_cast<int>(sizeof(T) * 8), s));
    ws.cub_temp.resize(ws.cub_bytes);
    ws.prepared_rows = p.rows;
    ws.prepared_vocab = p.vocab;
    ws.prepared_dtype = p.dtype;
  }
  lesson04::softmax<T>(static_cast<const T*>(p.x), reinterpret_cast<T*>(ws.probs.data()), p.rows, p.vocab,
                       ws.softmax_ws, 1.f, s);
  std::size_t bytes = ws.cub_bytes;
  CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      ws.cub_temp.data(), bytes, probs, sorted, ws.iota.data(), ws.iota_sorted.data(), static_cast<int>(n),
      static_cast<int>(p.rows), ws.offsets.data(), ws.offsets.data() + 1, 0, static_cast<int>(sizeof(T) * 8), s));
  const std::int64_t out = p.rows * p.k;
  keep_first_k<T><<<static_cast<unsigned>((out + 255) / 256), 256, 0, s>>>(sorted, ws.iota_sorted.data(), p.rows,
                                                                           p.vocab, p.k, p.prob, p.idx);
  CUDA_CHECK_LAUNCH();
}

inline void launch_unfused(const Problem& p, Workspace& ws, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) { launch_unfused_t<decltype(t)>(p, ws, s); });
}

// ---- the pieces of the fused steps ----------------------------------------------------------------

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
    s *= __expf(m - x);
    m = x;
  }
  s += __expf(x - (m == -INFINITY ? 0.f : m));
}

// The (m, s) of two parts together. A part that saw nothing finite has s = 0 and adds nothing; a
// NaN in either sum stays.
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  const float mx = kl::MaxOp::combine(m, m2);
  s = (s == 0.f ? 0.f : s * __expf(m - mx)) + (s2 == 0.f ? 0.f : s2 * __expf(m2 - mx));
  m = mx;
}

// Butterfly over the warp: every lane ends with the row's (m, s), bit for bit the same.
__device__ __forceinline__ void warp_stats(float& m, float& s) {
  for (int offset = 16; offset > 0; offset /= 2)
    combine(m, s, __shfl_xor_sync(kl::kFullMask, m, offset), __shfl_xor_sync(kl::kFullMask, s, offset));
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
    prob[lane] = __expf(key_value(first) - m) / s;
    idx[lane] = key_index(first);
  }
  if (lane + 32 < k) {
    prob[lane + 32] = __expf(key_value(second) - m) / s;
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

inline unsigned warp_grid(std::int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// ---- step 2: fused, one warp per row --------------------------------------------------------------

// One read of the row: each lane folds its logits (c = lane, lane + 32, ...) into its (m, s) and its
// sorted list, then the warp merges. Bytes drop to one read, but every logit pays a KC-long insertion.
template <class T, int KC>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) topk_warp_per_row(const T* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * vocab;
  Partial<KC> part;
  for (int c = lane; c < vocab; c += 32) {
    const float v = kl::to_float(xr[c]);
    add_to_sum(part.m, part.s, v);
    insert_sorted(part.keys, make_key(v, c));
  }
  finish_warp(part, k, lane, prob + row * k, idx + row * k);
}

inline void launch_warp_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    with_kc(p.k, [&](auto kc) {
      topk_warp_per_row<T, kc()><<<warp_grid(p.rows), 32 * kWarpsPerBlock, 0, s>>>(static_cast<const T*>(p.x), p.rows,
                                                                                   p.vocab, p.k, p.prob, p.idx);
    });
  });
  CUDA_CHECK_LAUNCH();
}

// ---- step 3: 16-byte loads and an early reject ----------------------------------------------------

// One logit, inserted only if it is not below the thread's KC-th best (a NaN is never below).
template <int KC>
__device__ __forceinline__ void push(Partial<KC>& part, float v, int i) {
  add_to_sum(part.m, part.s, v);
  if (!(v < part.threshold)) {
    insert_sorted(part.keys, make_key(v, i));
    part.threshold = key_value(part.keys[KC - 1]);
  }
}

// The per-logit arithmetic of the streaming loops, one instruction each where the ISA allows:
// max.NaN (sm_80+) is the NaN-propagating max in one instruction instead of compare, test, select;
// ex2.approx.ftz skips the subnormal fix-up that __expf carries (a term below 2^-126 next to the
// max's term 1 changes no float sum).
__device__ __forceinline__ float max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return kl::MaxOp::combine(a, b);
#endif
}

__device__ __forceinline__ float exp_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.44269504f));
  return r;
}

// The online softmax update for a pack; returns the pack's max. An absent logit is -inf: it adds
// e^-inf = 0.
template <int P>
__device__ __forceinline__ float add_pack_to_sum(float& m, float& s, const float (&v)[P]) {
  float pm = v[0];
#pragma unroll
  for (int i = 1; i < P; ++i) pm = max_nan(pm, v[i]);  // a NaN stays
  if (pm > m) {
    s *= exp_ftz(m - pm);
    m = pm;
  }
  const float base = m == -INFINITY ? 0.f : m;
#pragma unroll
  for (int i = 0; i < P; ++i) s += exp_ftz(v[i] - base);
  return pm;
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
  const auto misaligned = static_cast<int>(reinterpret_cast<std::uintptr_t>(row + begin) / sizeof(T) % P);
  const int head = min(end - begin, misaligned == 0 ? 0 : P - misaligned);
  if (t < head) push(part, kl::to_float(row[begin + t]), begin + t);
  const int body = begin + head, packs = (end - body) / P;
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
  if (t < end - tail) push(part, kl::to_float(row[tail + t]), tail + t);
}

// Step 2 with 16-byte loads (4 floats or 8 halves per instruction) and the early reject: for random
// logits a lane's list fills in its first few packs and later packs almost never get in, so the
// insertion cost vanishes and the kernel is left with the loads, one max and P exponentials per pack.
template <class T, int KC>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) topk_warp_vector(const T* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
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

// ---- step 4: one threshold and one candidate buffer per warp ----------------------------------------

// Step 3's early reject is per lane: each of the 32 lanes fills its own list first and keeps a
// threshold that only its own logits raise, and a warp inserts whenever any one lane must. Step 4
// keeps the K best of the whole warp instead: logits not below the warp's K-th best so far are
// appended to a buffer in shared memory (a ballot gives each lane its slot), and when the buffer
// fills, the warp sorts it and keeps the K best, which raises the threshold for all 32 lanes at once.
// For random logits a row of 50257 sends only ~K ln(V / K) candidates through the buffer.

template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));  // logits per 16-byte load
// Room for the K <= 64 keys kept after a sort plus one pack from each of the 32 lanes, with slack:
// 256 keys (2 KiB) per warp for f32, 512 for f16 and bf16.
template <class T>
constexpr int kCap = 64 * kPack<T>;

// A warp's selection: a buffer of cap keys in shared memory, whose first `count` are candidates
// (after a sort: the best, largest first), and the threshold: the K-th best logit after the last
// sort, -inf while fewer than K were seen (then every logit gets in). count and threshold are the
// same in every lane.
struct Selection {
  Key* buf;
  int cap;
  int count = 0;
  float threshold = -INFINITY;
};

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
    case 64: warp_sort<64>(buf, lane); break;
    case 128: warp_sort<128>(buf, lane); break;
    case 256: warp_sort<256>(buf, lane); break;
    default: warp_sort<512>(buf, lane); break;  // no buffer holds more than 512 keys
  }
  return min(count, k);
}

// Keeps the k best candidates, sorted, at the front of the buffer and raises the threshold to the
// k-th best logit.
__device__ __forceinline__ void keep_best(Selection& sel, int k, int lane) {
  sel.count = sort_candidates(sel.buf, sel.count, k, lane);
  if (sel.count == k) sel.threshold = key_value(sel.buf[k - 1]);
}

// Appends the lanes' keys that are `in` after the buffer's candidates, in lane order; the caller
// keeps 32 slots free.
__device__ __forceinline__ void append(Selection& sel, bool in, Key key, int lane) {
  const unsigned mask = __ballot_sync(kl::kFullMask, in);
  if (in) sel.buf[sel.count + __popc(mask & ((1u << lane) - 1))] = key;
  sel.count += __popc(mask);
}

// One logit per lane (valid = false: the lane has none): in if not below the threshold (NaN is
// never below).
__device__ __forceinline__ void offer(Selection& sel, bool valid, float v, int i, int k, int lane) {
  if (sel.count > sel.cap - 32) keep_best(sel, k, lane);
  append(sel, valid && !(v < sel.threshold), make_key(v, i), lane);
}

// When to sort. For k up to kFullSortK, whenever fewer than 32 P slots are free: a sort is rare and
// lifts the threshold a long way, so sooner is better. Above, only when the warp's marked keys would
// not fit: sorts are frequent and each frees room for few keys, so every one should be full. After
// a sort at most k + 32 P keys are held, which fits every buffer (k <= 64).
constexpr int kFullSortK = 32;

// A pack of P logits per lane (kept in the input type until needed): when no lane's pack max
// reaches the threshold, which is almost always, the whole warp moves on after one vote. Otherwise
// each lane marks its logits that are in, and every round appends each lane's lowest marked one:
// usually one round, where a ballot per logit of the pack cost P.
template <class T, int P>
__device__ __forceinline__ void offer_pack(Selection& sel, bool valid, const kl::Pack<T, P>& raw, float pack_max, int i0,
                                           int k, int lane) {
  if (!__any_sync(kl::kFullMask, valid && !(pack_max < sel.threshold))) return;
  float v[P];
  kl::to_floats(raw, v);
  unsigned marked = 0;
#pragma unroll
  for (int i = 0; i < P; ++i) marked |= valid && !(v[i] < sel.threshold) ? 1u << i : 0u;
  int incoming = 32 * P;  // at most
  if (k > kFullSortK) incoming = static_cast<int>(__reduce_add_sync(kl::kFullMask, __popc(marked)));
  if (sel.count + incoming > sel.cap) keep_best(sel, k, lane);
  while (__any_sync(kl::kFullMask, marked != 0)) {
    const int i = __ffs(marked) - 1;
    float x = v[0];
#pragma unroll
    for (int j = 1; j < P; ++j) x = i == j ? v[j] : x;  // v[i] without a local-memory array
    append(sel, marked != 0, make_key(x, i0 + i), lane);
    marked &= marked - 1;
  }
}

// Seeds an empty selection's threshold before anything is appended, so that the first sort does
// not hold every logit of the first packs: each lane's two best logits of its first pack (64 keys),
// sorted, and the k-th of them. k logits at least that large exist, so no logit below can win.
template <class T, int P>
__device__ __forceinline__ void seed_threshold(Selection& sel, bool valid, const kl::Pack<T, P>& raw, int i0, int k,
                                               int lane) {
  float v[P];
  kl::to_floats(raw, v);
  Key best = 0, second = 0;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const Key key = valid ? make_key(v[i], i0 + i) : 0;
    second = key > best ? best : (key > second ? key : second);
    best = key > best ? key : best;
  }
  sel.buf[2 * lane] = best;
  sel.buf[2 * lane + 1] = second;
  sort_candidates(sel.buf, 64, k, lane);
  if (sel.buf[k - 1] != 0) sel.threshold = key_value(sel.buf[k - 1]);
  __syncwarp();  // every lane has read it before the appends overwrite it
}

// Thread t of nt scans elements [begin, end) of a row: kInFlight 16-byte packs per batch, their
// loads all issued before any is used. The first pack seeds the threshold; the scalar head (up to
// the first 16-byte boundary) and tail come last. Every warp runs the same number of batches, so
// that the votes and ballots always see all 32 lanes; a lane past the end offers nothing.
// 4 packs per batch in every dtype: 64 bytes a lane, 2 KB a warp in flight. A pack's appends are a
// short loop, so the 4 packs of 8 halves fit the instruction cache. (16-bit rows are bound by the
// instructions per logit, not by the bytes in flight: 2 packs ran as fast; see the README.)
constexpr int kInFlight = 4;

template <class T>
__device__ __forceinline__ void scan_select(const T* row, int begin, int end, int t, int nt, float& m, float& s,
                                            Selection& sel, int k, int lane) {
  constexpr int P = kPack<T>;
  const auto misaligned = static_cast<int>(reinterpret_cast<std::uintptr_t>(row + begin) / sizeof(T) % P);
  const int head = min(end - begin, misaligned == 0 ? 0 : P - misaligned);
  const int body = begin + head, packs = (end - body) / P, tail = body + packs * P;
  const auto single = [&](int at, int count) {
    const bool has = t < count;
    const float v = has ? kl::to_float(row[at + t]) : -INFINITY;
    add_to_sum(m, s, v);
    offer(sel, has, v, at + t, k, lane);
  };
  for (int first = 0; first < packs; first += kInFlight * nt) {  // the same trip count in every lane
    kl::Pack<T, P> raw[kInFlight];  // kept in the input type until used: 4 registers per pack
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int q = first + u * nt + t;
      if (q < packs) raw[u] = kl::load_raw<P>(row + body + q * P);
      else for (T& x : raw[u].v) x = kl::from_float<T>(-INFINITY);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int q = first + u * nt + t;
      float v[P];
      kl::to_floats(raw[u], v);
      const float pack_max = add_pack_to_sum(m, s, v);
      if (u == 0 && first == 0) seed_threshold(sel, q < packs, raw[u], body + q * P, k, lane);
      offer_pack(sel, q < packs, raw[u], pack_max, body + q * P, k, lane);
    }
  }
  single(begin, head);  // after the seeding, which needs the buffer empty
  single(tail, end - tail);
}

// p = e^(x - m) / s for the k sorted winners at the front of buf, written side by side.
__device__ __forceinline__ void write_best(const Key* buf, int k, int lane, float m, float s, float* prob, int* idx) {
  for (int j = lane; j < k; j += 32) {
    prob[j] = __expf(key_value(buf[j]) - m) / s;
    idx[j] = key_index(buf[j]);
  }
}

// Streams `lists` sorted lists of k keys (list l at keys + l * stride; key 0: none) through an
// empty selection. The largest of the lists' k-th keys seeds the threshold (that list alone holds k
// keys at least as large), so most keys are rejected before they reach the buffer. The keys are
// read kBatch per lane at a time, so that their latency is paid once per 256 keys.
__device__ __forceinline__ void select_from_lists(Selection& sel, const Key* keys, int lists, int stride, int k,
                                                  int lane) {
  Key kth = 0;
  for (int l = lane; l < lists; l += 32) kth = max(kth, keys[static_cast<std::int64_t>(l) * stride + k - 1]);
  for (int offset = 16; offset > 0; offset /= 2) kth = max(kth, __shfl_xor_sync(kl::kFullMask, kth, offset));
  if (kth != 0) sel.threshold = key_value(kth);
  constexpr int kBatch = 8;
  const int total = lists * k;
  for (int base = 0; base < total; base += 32 * kBatch) {
    Key batch[kBatch];
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      const int c = base + 32 * r + lane;
      batch[r] = c < total ? keys[static_cast<std::int64_t>(c / k) * stride + c % k] : 0;
    }
    __syncwarp();  // in a block the lists sit in shared memory, where the appends below write
#pragma unroll
    for (int r = 0; r < kBatch; ++r) {
      if (sel.count > sel.cap - 32) keep_best(sel, k, lane);
      append(sel, batch[r] != 0 && !(key_value(batch[r]) < sel.threshold), batch[r], lane);
    }
  }
  keep_best(sel, k, lane);
}

// At most 64 registers, so that 4 blocks (32 rows) fit on an SM: R = 4096 rows run in one wave.
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, 4) topk_warp_select(const T* x, std::int64_t rows, int vocab, int k,
                                                                       float* prob, int* idx) {
  __shared__ Key buffers[kWarpsPerBlock * kCap<T>];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + warp;
  if (row >= rows) return;  // the whole warp leaves together
  Selection sel{buffers + warp * kCap<T>, kCap<T>};
  float m = -INFINITY, s = 0.f;
  scan_select(x + row * vocab, 0, vocab, lane, 32, m, s, sel, k, lane);
  keep_best(sel, k, lane);
  warp_stats(m, s);
  write_best(sel.buf, k, lane, m, s, prob + row * k, idx + row * k);
}

inline void launch_warp_select(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    topk_warp_select<T><<<warp_grid(p.rows), 32 * kWarpsPerBlock, 0, s>>>(static_cast<const T*>(p.x), p.rows, p.vocab,
                                                                         p.k, p.prob, p.idx);
  });
  CUDA_CHECK_LAUNCH();
}

// ---- steps 5 and 6: a block per row, a row split over blocks ---------------------------------------

constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / 32;

// One block folds a slice of a row (slice = the whole row for step 5): each of its 8 warps selects
// as in step 4, then warp 0 streams the 8 warps' sorted lists through one more selection. With
// one slice per row the block writes the answer; with several it writes the slice's k best keys
// and (m, s) for topk_merge_slices. 8 warps on one row keep enough loads in flight when rows are few.
template <class T>
__global__ void __launch_bounds__(kBlockThreads, 4) topk_block(const T* x, int vocab, int k, int slices, int slice,
                                                            float* prob, int* idx, Key* part_keys, float2* part_stats) {
  __shared__ Key buffers[kBlockWarps * kCap<T>];
  __shared__ float2 warp_ms[kBlockWarps];
  const std::int64_t row = blockIdx.x / slices;
  const int begin = static_cast<int>(blockIdx.x % slices) * slice, end = min(vocab, begin + slice);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Selection sel{buffers + warp * kCap<T>, kCap<T>};
  float m = -INFINITY, s = 0.f;
  scan_select(x + row * vocab, begin, end, static_cast<int>(threadIdx.x), kBlockThreads, m, s, sel, k, lane);
  keep_best(sel, k, lane);  // the warp's k best (key 0 where it saw fewer) at the front of its buffer
  warp_stats(m, s);
  if (lane == 0) warp_ms[warp] = make_float2(m, s);
  __syncthreads();
  if (warp != 0) return;
  // Warp 0 streams the 8 lists through a selection in its own buffer: it has read its own list
  // before it appends, and the room check keeps its appends out of the other warps' buffers.
  Selection block{buffers, kCap<T>};
  select_from_lists(block, buffers, kBlockWarps, kCap<T>, k, lane);
  m = lane < kBlockWarps ? warp_ms[lane].x : -INFINITY;
  s = lane < kBlockWarps ? warp_ms[lane].y : 0.f;
  warp_stats(m, s);
  if (slices == 1) {
    write_best(buffers, k, lane, m, s, prob + row * k, idx + row * k);
    return;
  }
  for (int j = lane; j < k; j += 32) part_keys[static_cast<std::int64_t>(blockIdx.x) * k + j] = buffers[j];
  if (lane == 0) part_stats[blockIdx.x] = make_float2(m, s);
}

// Step 6's second kernel: one warp (one block) per row streams the slices' sorted lists through a
// selection and combines the slices' (m, s). A block of one warp, so that a decode batch of 8 rows
// runs on 8 SMs rather than sharing one SM's shared memory.
constexpr int kMergeCap = 256;

__global__ void __launch_bounds__(32) topk_merge_slices(const Key* part_keys, const float2* part_stats, int slices,
                                                        int k, float* prob, int* idx) {
  __shared__ Key buffer[kMergeCap];
  const std::int64_t row = blockIdx.x;
  const int lane = threadIdx.x;
  float m = -INFINITY, s = 0.f;
  for (int sl = lane; sl < slices; sl += 32) combine(m, s, part_stats[row * slices + sl].x, part_stats[row * slices + sl].y);
  warp_stats(m, s);
  Selection sel{buffer, kMergeCap};
  select_from_lists(sel, part_keys + row * slices * k, slices, k, k, lane);
  write_best(sel.buf, k, lane, m, s, prob + row * k, idx + row * k);
}

// Step 6's geometry: about two blocks per SM in all (a decode batch of 8 rows gets 33 slices of a
// 128k row). A slice holds at least max(256, 32 K) logits, so that the slices' winners, which the
// second kernel reads again (8 bytes per key), stay below a quarter of the row's bytes.
constexpr int kMinSlice = 256;

inline int slice_count(std::int64_t rows, int vocab, int k, int sms) {
  const std::int64_t wanted = (2 * std::int64_t{sms} + rows - 1) / std::max<std::int64_t>(rows, 1);
  const int most = std::min(1024, std::max(1, vocab / std::max(kMinSlice, 32 * k)));
  return static_cast<int>(std::clamp<std::int64_t>(wanted, std::min(2, most), most));
}

inline int slice_length(int vocab, int slices) {
  const int per = (vocab + slices - 1) / slices;
  return (per + 7) / 8 * 8;
}

template <class T>
void run_block(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  const int slice = slice_length(p.vocab, slices);
  const int used = (p.vocab + slice - 1) / slice;  // rounding the slice up may leave the last one empty
  if (used > 1) {
    ws.part_keys.resize(static_cast<std::size_t>(p.rows * used * p.k));
    ws.part_stats.resize(static_cast<std::size_t>(p.rows * used));
  }
  const auto blocks = static_cast<unsigned>(p.rows * used);
  topk_block<T><<<blocks, kBlockThreads, 0, s>>>(static_cast<const T*>(p.x), p.vocab, p.k, used, slice, p.prob, p.idx,
                                                 ws.part_keys.data(), ws.part_stats.data());
  CUDA_CHECK_LAUNCH();
  if (used > 1) {
    topk_merge_slices<<<static_cast<unsigned>(p.rows), 32, 0, s>>>(ws.part_keys.data(), ws.part_stats.data(), used,
                                                                    p.k, p.prob, p.idx);
    CUDA_CHECK_LAUNCH();
  }
}

inline void launch_block_per_row(const Problem& p, Workspace& ws, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) { run_block<decltype(t)>(p, 1, ws, s); });
}

inline void launch_split_row(const Problem& p, Workspace& ws, cudaStream_t s) {
  const int slices = slice_count(p.rows, p.vocab, p.k, kl::sm_count());
  with_type(p.dtype, [&](auto t) { run_block<decltype(t)>(p, slices, ws, s); });
}

// ---- step 7: the dispatcher -----------------------------------------------------------------------

// A streaming kernel needs about 16 warps per SM, each with two 16-byte loads per lane in flight,
// to cover the memory latency (H100: ~3.3 TB/s x ~0.8 us = ~2.6 MB in flight, ~20 KB per SM).
// A warp per row gives R warps; a block per row 8 R; slices make more. Rows of at most kShortRow
// logits are never worth splitting. K sets step 6's slice length (slice_count).
constexpr int kWantedWarpsPerSm = 16;
constexpr int kShortRow = 4096;

inline int choose_step(std::int64_t rows, int vocab, int sms) {
  const std::int64_t wanted = std::int64_t{sms} * kWantedWarpsPerSm;
  if (vocab <= kShortRow || rows >= wanted) return 4;
  if (rows * kBlockWarps >= wanted) return 5;
  return 6;
}

inline int chosen_step(const Problem& p) { return choose_step(p.rows, p.vocab, kl::sm_count()); }

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s);  // after the table

// ---- the table of steps ---------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);

struct TopkStep {
  const char* name;
  const char* idea;
  Launcher launch;
  bool fused;  // ranks logits itself: its indices must equal the reference's exactly
};

inline constexpr TopkStep kSteps[] = {
    {"unfused", "lesson 04 softmax writes R x V probs; cub segmented radix sort; keep K", launch_unfused, false},
    {"warp_per_row", "fused: a warp per row, online (max, sum) + register top-K per lane, warp merge",
     launch_warp_per_row, true},
    {"warp_vector", "step 2 + 16-byte loads + early reject below each lane's K-th best", launch_warp_vector, true},
    {"warp_select", "one K-best list per warp: a shared threshold, candidates appended to shared memory",
     launch_warp_select, true},
    {"block_per_row", "a block per row: 8 warps select, warp 0 sorts their lists together", launch_block_per_row, true},
    {"split_row", "a row split over blocks + a second kernel merging the slices (decode)", launch_split_row, true},
    {"dispatch", "picks step 4, 5 or 6 by R and V", launch_dispatch, true},
};

inline constexpr int kDispatchStep = 7;

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s) { kSteps[chosen_step(p) - 1].launch(p, ws, s); }

// Runs a step: validates the problem first (no launch on bad input), launches nothing for R = 0.
inline void run_step(const TopkStep& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (p.rows == 0) return;
  st.launch(p, ws, s);
}

// The public API: the k largest softmax probabilities of each row of x [rows, vocab] and their
// indices, sorted (ties: the lower index first), through the dispatcher. ws keeps step 6's scratch
// between calls (and makes a repeated call capturable in a CUDA graph). Throws kl::UsageError,
// launching nothing, when k is not in 1..64 or k > vocab.
template <class T>
void topk(const T* x, float* prob, int* idx, std::int64_t rows, int vocab, int k, Workspace& ws, cudaStream_t s = nullptr) {
  run_step(kSteps[kDispatchStep - 1], Problem{x, prob, idx, rows, vocab, k, dtype_of<T>()}, ws, s);
}

// ---- shapes ---------------------------------------------------------------------------------------

struct Shape {
  std::int64_t rows;
  int vocab, k;
};

constexpr Shape kDefaultShape{4096, 50257, 10};

// --sweep: R = 4096 with V in {32000, 50257, 128256} x K in {1, 10, 50}; K = 2 ... 64 at V = 50257
// (the speed-up vs K figure); and the decode case R = 8, V = 128256, K = 50.
inline std::vector<Shape> sweep_shapes() {
  std::vector<Shape> shapes;
  for (int v : {32000, 50257, 128256})
    for (int k : {1, 10, 50}) shapes.push_back({4096, v, k});
  for (int k : {2, 4, 8, 16, 32, 64}) shapes.push_back({4096, 50257, k});
  shapes.push_back({8, 128256, 50});
  return shapes;
}

}  // namespace lesson05
