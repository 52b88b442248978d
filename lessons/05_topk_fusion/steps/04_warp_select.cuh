// Step 4: one threshold and one candidate buffer per warp. The bitonic warp sort it uses is in
// parts.cuh; steps 5 and 6 include this file and keep its selection (Selection, keep_best, append,
// scan_select, write_best).
#pragma once
#include <cstdint>

#include "common/arch.cuh"
#include "common/pack.cuh"
#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

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
// sort, NaN while fewer than K were seen (no comparison with NaN is true, so every logit gets in).
// count and threshold are the same in every lane.
struct Selection {
  Key* buf;
  int cap;
  int count = 0;
  float threshold = NAN;
};

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
// never below). A tie gets in too: the scalar head comes after the body, so its indices are lower.
__device__ __forceinline__ void offer(Selection& sel, bool valid, float v, int i, int k, int lane) {
  if (sel.count > sel.cap - 32) keep_best(sel, k, lane);
  append(sel, valid && !(v < sel.threshold), make_key(v, i), lane);
}

// When to sort. For k up to kFullSortK, whenever fewer than 32 P slots are free: a sort is rare and
// lifts the threshold a long way, so sooner is better. Above, only when the warp's marked keys would
// not fit: sorts are frequent and each frees room for few keys, so every one should be full. After
// a sort at most k + 32 P keys are held, which fits every buffer (k <= 64).
constexpr int kFullSortK = 32;

// The sum of v over the warp's 32 lanes, in every lane: one instruction (__reduce_add_sync) on sm_80+,
// a butterfly of 5 shuffles below, so that steps 4-7 run on every GPU from sm_75.
__device__ __forceinline__ int warp_sum(int v) {
#if KL_ARCH_AT_LEAST(80)
  return __reduce_add_sync(kl::kFullMask, v);
#else
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kl::kFullMask, v, offset);
  return v;
#endif
}

// A pack of P logits per lane (kept in the input type until needed): when no lane's pack max
// passes the threshold, which is almost always, the whole warp moves on after one vote. Otherwise
// each lane marks its logits that are in, and every round appends each lane's lowest marked one:
// usually one round, where a ballot per logit of the pack cost P. A logit must be above the
// threshold: the packs come in rising index order, so one equal to it ranks below the K-th key (a
// lower index) and cannot win. Rows of equal logits, or of fewer than K finite ones (-inf = -inf),
// would otherwise send every logit through the buffer and its sorts.
template <class T, int P>
__device__ __forceinline__ void offer_pack(Selection& sel, bool valid, const kl::Pack<T, P>& raw, float pack_max,
                                           int i0, int k, int lane) {
  if (!__any_sync(kl::kFullMask, valid && !(pack_max <= sel.threshold))) return;
  float v[P];
  kl::to_floats(raw, v);
  unsigned marked = 0;
#pragma unroll
  for (int i = 0; i < P; ++i) marked |= valid && !(v[i] <= sel.threshold) ? 1u << i : 0u;
  int incoming = 32 * P;  // at most
  if (k > kFullSortK) incoming = warp_sum(__popc(marked));
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
// sorted, and the k-th of them. k logits at least that large exist, so no logit below can win; the
// threshold sits just below it, so that the k (offered next, with their pack) are above it.
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
  const float kth = key_value(sel.buf[k - 1]);
  if (sel.buf[k - 1] != 0 && kth > -INFINITY) sel.threshold = nextafterf(kth, -INFINITY);
  __syncwarp();  // every lane has read it before the appends overwrite it
}

// Thread t of nt scans elements [begin, end) of a row: kInFlight 16-byte packs per batch, their
// loads all issued before any is used. The first pack seeds the threshold; the scalar head (up to
// the first 16-byte boundary) and tail come last. Every warp runs the same number of batches, so
// that the votes and ballots always see all 32 lanes; a lane past the end offers nothing.
// 4 packs per batch in every dtype: 64 bytes a lane, 2 KB a warp in flight. A pack's appends are a
// short loop, so the 4 packs of 8 halves fit the instruction cache (NOTES.md: the choice for 16-bit rows).
constexpr int kInFlight = 4;

template <class T>
__device__ __forceinline__ void scan_select(const T* row, int begin, int end, int t, int nt, float& m, float& s,
                                            Selection& sel, int k, int lane) {
  constexpr int P = kPack<T>;
  const kl::PackSplit<P, T, int> split(row + begin, end - begin);
  const int body = begin + split.head, packs = split.packs, tail = body + packs * P;
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
      else
        for (T& x : raw[u].v) x = kl::from_float<T>(-INFINITY);
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
  single(begin, split.head);  // after the seeding, which needs the buffer empty
  single(tail, split.tail);
}

// p = e^(x - m) / s for the k sorted winners at the front of buf, written side by side.
__device__ __forceinline__ void write_best(const Key* buf, int k, int lane, float m, float s, float* prob, int* idx) {
  for (int j = lane; j < k; j += 32) {
    prob[j] = kl::fast_exp(key_value(buf[j]) - m) / s;
    idx[j] = key_index(buf[j]);
  }
}

// Step 3's kernel with one K-best selection per warp: one threshold for all 32 lanes, rarely crossed,
// so almost every pack costs a vote and nothing more. At most 64 registers, so that 4 blocks (32
// rows) fit on an SM: R = 4096 rows run in one wave.
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, 4)
    topk_warp_select(const T* x, std::int64_t rows, int vocab, int k, float* prob, int* idx) {
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

}  // namespace lesson05
