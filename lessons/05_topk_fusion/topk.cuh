// Lesson 05 — fused softmax + top-K: for each row of logits [R, V], the K largest softmax
// probabilities and their indices, sorted by probability (ties: the lower index first). Step 1
// writes the whole probability row and sorts it; steps 2-6 read each logit once and write only
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
  // step 5: each slice's top-k keys and its (max, sum)
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

// A pack of P logits: one max, at most one rescale, P exponentials; and one compare of the pack's
// max against the threshold rejects the whole pack, which is what random logits almost always do.
template <int P, int KC>
__device__ __forceinline__ void push_pack(Partial<KC>& part, const float (&v)[P], int i0) {
  float pm = v[0];
#pragma unroll
  for (int i = 1; i < P; ++i) pm = kl::MaxOp::combine(pm, v[i]);  // a NaN stays, and is not rejected
  if (pm > part.m) {
    part.s *= __expf(part.m - pm);
    part.m = pm;
  }
  const float base = part.m == -INFINITY ? 0.f : part.m;
#pragma unroll
  for (int i = 0; i < P; ++i) part.s += __expf(v[i] - base);
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

// ---- steps 4 and 5: a block per row, a row split over blocks ---------------------------------------

constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / 32;

// One block folds a slice of a row (slice = the whole row for step 4): its 8 warps each merge their
// lanes, write their k winners and (m, s) to shared memory, and warp 0 merges those 8 lists the same
// way (each lane re-inserts a share of them into a fresh list). With one slice per row the block
// writes the answer; with several it writes the slice's k keys and (m, s) for topk_merge_slices.
// 8 warps on one row: a few long rows still keep enough loads in flight to fill the GPU.
template <class T, int KC>
__global__ void __launch_bounds__(kBlockThreads) topk_block(const T* x, int vocab, int k, int slices, int slice,
                                                            float* prob, int* idx, Key* part_keys, float2* part_stats) {
  __shared__ Key candidates[kBlockWarps * KC];
  __shared__ float2 warp_ms[kBlockWarps];
  const std::int64_t row = blockIdx.x / slices;
  const int part_id = static_cast<int>(blockIdx.x % slices);
  const int begin = part_id * slice, end = min(vocab, begin + slice);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Partial<KC> part;
  scan_packed(x + row * vocab, begin, end, static_cast<int>(threadIdx.x), kBlockThreads, part);
  warp_stats(part.m, part.s);
  Key first = 0, second = 0;
  warp_merge(part.keys, k, lane, first, second);
  if (lane < k) candidates[warp * KC + lane] = first;
  if (lane + 32 < k) candidates[warp * KC + lane + 32] = second;
  if (lane == 0) warp_ms[warp] = make_float2(part.m, part.s);
  __syncthreads();
  if (warp != 0) return;
  Partial<KC> block;
  for (int c = lane; c < kBlockWarps * KC; c += 32) {
    const Key key = c % KC < k ? candidates[c] : 0;
    if (key > block.keys[KC - 1]) insert_sorted(block.keys, key);
  }
  if (lane < kBlockWarps) {
    block.m = warp_ms[lane].x;
    block.s = warp_ms[lane].y;
  }
  warp_stats(block.m, block.s);
  warp_merge(block.keys, k, lane, first, second);
  if (slices == 1) {
    write_winners(first, second, k, lane, block.m, block.s, prob + row * k, idx + row * k);
    return;
  }
  Key* out = part_keys + static_cast<std::int64_t>(blockIdx.x) * k;
  if (lane < k) out[lane] = first;
  if (lane + 32 < k) out[lane + 32] = second;
  if (lane == 0) part_stats[blockIdx.x] = make_float2(block.m, block.s);
}

// Step 5's second kernel: a warp per row reads the slices' (m, s) and sorted k keys (a slice's
// keys are read only while they beat the lane's list), then merges as in step 2.
template <int KC>
__global__ void topk_merge_slices(const Key* part_keys, const float2* part_stats, std::int64_t rows, int slices, int k,
                                  float* prob, int* idx) {
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  Partial<KC> part;
  for (int sl = lane; sl < slices; sl += 32) {
    const std::int64_t at = row * slices + sl;
    combine(part.m, part.s, part_stats[at].x, part_stats[at].y);
    for (int j = 0; j < k; ++j) {
      const Key key = part_keys[at * k + j];
      if (!(key > part.keys[KC - 1])) break;
      insert_sorted(part.keys, key);
    }
  }
  finish_warp(part, k, lane, prob + row * k, idx + row * k);
}

// Step 5's geometry: about two blocks per SM in all (a decode batch of 8 rows gets 33 slices of a
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

template <class T, int KC>
void run_block(const Problem& p, int slices, Workspace& ws, cudaStream_t s) {
  const int slice = slice_length(p.vocab, slices);
  const int used = (p.vocab + slice - 1) / slice;  // rounding the slice up may leave the last one empty
  if (used > 1) {
    ws.part_keys.resize(static_cast<std::size_t>(p.rows * used * p.k));
    ws.part_stats.resize(static_cast<std::size_t>(p.rows * used));
  }
  const auto blocks = static_cast<unsigned>(p.rows * used);
  topk_block<T, KC><<<blocks, kBlockThreads, 0, s>>>(static_cast<const T*>(p.x), p.vocab, p.k, used, slice, p.prob,
                                                     p.idx, ws.part_keys.data(), ws.part_stats.data());
  CUDA_CHECK_LAUNCH();
  if (used > 1) {
    topk_merge_slices<KC><<<warp_grid(p.rows), 32 * kWarpsPerBlock, 0, s>>>(ws.part_keys.data(), ws.part_stats.data(),
                                                                             p.rows, used, p.k, p.prob, p.idx);
    CUDA_CHECK_LAUNCH();
  }
}

inline void launch_block_per_row(const Problem& p, Workspace& ws, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) { with_kc(p.k, [&](auto kc) { run_block<decltype(t), kc()>(p, 1, ws, s); }); });
}

inline void launch_split_row(const Problem& p, Workspace& ws, cudaStream_t s) {
  const int slices = slice_count(p.rows, p.vocab, p.k, kl::sm_count());
  with_type(p.dtype, [&](auto t) { with_kc(p.k, [&](auto kc) { run_block<decltype(t), kc()>(p, slices, ws, s); }); });
}

// ---- step 6: the dispatcher -----------------------------------------------------------------------

// A streaming kernel needs about 16 warps per SM, each with two 16-byte loads per lane in flight,
// to cover the memory latency (H100: ~3.3 TB/s x ~0.8 us = ~2.6 MB in flight, ~20 KB per SM).
// A warp per row gives R warps; a block per row 8 R; slices make more. K decides how many warps can
// be resident at all: 64 keys per thread take ~200 registers (ptxas), room for one 256-thread
// block (8 warps) per SM, so at K > 32 fewer rows already fill the GPU. Rows of at most kShortRow
// logits are never worth splitting. K also sets step 5's slice length (slice_count).
constexpr int kWantedWarpsPerSm = 16;
constexpr int kShortRow = 4096;

inline int resident_warps_per_sm(int k) { return round_k(k) == kMaxK ? 8 : kWantedWarpsPerSm; }

inline int choose_step(std::int64_t rows, int vocab, int k, int sms) {
  const std::int64_t wanted = std::int64_t{sms} * resident_warps_per_sm(k);
  if (vocab <= kShortRow || rows >= wanted) return 3;
  if (rows * kBlockWarps >= wanted) return 4;
  return 5;
}

inline int chosen_step(const Problem& p) { return choose_step(p.rows, p.vocab, p.k, kl::sm_count()); }

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
    {"block_per_row", "a block per row: 8 warps split the row, merge through shared memory", launch_block_per_row, true},
    {"split_row", "a row split over blocks + a second kernel merging the slices (decode)", launch_split_row, true},
    {"dispatch", "picks step 3, 4 or 5 by R, V and K", launch_dispatch, true},
};

inline constexpr int kDispatchStep = 6;

inline void launch_dispatch(const Problem& p, Workspace& ws, cudaStream_t s) { kSteps[chosen_step(p) - 1].launch(p, ws, s); }

// Runs a step: validates the problem first (no launch on bad input), launches nothing for R = 0.
inline void run_step(const TopkStep& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (p.rows == 0) return;
  st.launch(p, ws, s);
}

// The public API: the k largest softmax probabilities of each row of x [rows, vocab] and their
// indices, sorted (ties: the lower index first), through the dispatcher. ws keeps step 5's scratch
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
