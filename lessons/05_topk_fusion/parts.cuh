// The pieces several steps of lesson 05 share, each under the step that introduced it: the scratch
// the steps keep, the compiled list lengths, the 64-bit keys, the per-thread sorted list, the online
// softmax update, the end of a warp-per-row kernel (the row's (m, s), the warp merge, the writes),
// step 4's selection, step 5's block, step 7's sort in registers, its group reductions and its keys,
// and step 8's radix select of a block.
#pragma once
#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/arch.cuh"
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
  // steps 6 and 8: each slice's top-k keys and its (max, sum)
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

// Butterfly over the warp (or over each aligned group of `width` lanes, a power of two) with
// kl::combine (common/softmax_math.cuh): every lane ends with its row's (m, s), bit for bit the same.
// A lane that met a NaN while its max was still -inf holds (-inf, NaN) (add_to_sum keeps NaN out of
// the max), which kl::combine would take for an empty part: such a lane first makes its max NaN too,
// so that the NaN reaches the whole row.
__device__ __forceinline__ void warp_stats(float& m, float& s, int width = 32) {
  if (s != s) m = s;
  for (int offset = width / 2; offset > 0; offset /= 2) {
    const kl::MaxSum r =
        kl::combine({m, s}, {__shfl_xor_sync(kl::kFullMask, m, offset), __shfl_xor_sync(kl::kFullMask, s, offset)});
    m = r.m;
    s = r.s;
  }
}

// The largest key of each aligned group of `width` lanes (a power of two; 32: the whole warp), in
// every lane of the group: a max-butterfly whose offsets stay below `width`.
template <class K>
__device__ __forceinline__ K group_max(K key, int width = 32) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    const K other = __shfl_xor_sync(kl::kFullMask, key, offset);
    key = other > key ? other : key;
  }
  return key;
}

// Drops the best key of a sorted list: every key moves up one slot and the last slot empties
// (compile-time indices, so that the list stays in registers).
template <class K, int KC>
__device__ __forceinline__ void pop_best(K (&keys)[KC]) {
#pragma unroll
  for (int j = 0; j < KC - 1; ++j) keys[j] = keys[j + 1];
  keys[KC - 1] = 0;
}

// Merges the warp's 32 sorted lists in k rounds: every lane offers its best remaining key, a
// max-butterfly finds the warp's best, and the lane that held it pops it. Lane r keeps round r's
// winner in `first`, round 32 + r's in `second`.
template <int KC>
__device__ __forceinline__ void warp_merge(Key (&keys)[KC], int k, int lane, Key& first, Key& second) {
  for (int r = 0; r < k; ++r) {
    const Key best = group_max(keys[0]);
    if (keys[0] == best) pop_best(keys);
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

// The max of a pack's logits, NaN if one is: one max.NaN instruction per logit (kl::max_nan_1op).
template <int P>
__device__ __forceinline__ float pack_max(const float (&v)[P]) {
  float pm = v[0];
#pragma unroll
  for (int i = 1; i < P; ++i) pm = kl::max_nan_1op(pm, v[i]);
  return pm;
}

// The same max of a pack held as raw (v: its logits widened). A 16-bit pack takes it in pairs in its
// own type (kl::pack_extreme): for 8 halves two instructions and two conversions instead of 7 max.NaN
// on the widened logits; a 16-bit value widens exactly, so the max is the same float.
template <class T, int P>
__device__ __forceinline__ float pack_max(const kl::Pack<T, P>& raw, const float (&v)[P]) {
  if constexpr (sizeof(T) == 2 && P >= 2) {
    float a, b;
    kl::pack_extreme<true>(raw, a, b);
    return kl::max_nan_1op(a, b);
  } else return pack_max(v);
}

// The online softmax update for a pack whose max is pm; returns pm. An absent logit is -inf: it adds
// e^-inf = 0. At most one rescale, and P exponentials without __expf's subnormal fix-up (kl::exp_ftz: a
// term below 2^-126 next to the max's term 1 changes no float sum).
// kDrop: the pack may lie past the row's end (valid false) and then adds nothing.
template <bool kDrop = false, int P>
__device__ __forceinline__ float add_pack_to_sum(float& m, float& s, const float (&v)[P], float pm, bool valid) {
  if constexpr (kDrop) pm = valid ? pm : -INFINITY;
  if (pm > m) {
    s *= kl::exp_ftz(m - pm);
    m = pm;
  }
  const float base = m == -INFINITY ? 0.f : m;
  float ps = 0.f;
  float& sum = kDrop ? ps : s;  // kDrop: the pack's sum apart, added only if valid
#pragma unroll
  for (int i = 0; i < P; ++i) sum += kl::exp_ftz(v[i] - base);
  if constexpr (kDrop) s += valid ? ps : 0.f;
  return pm;
}

// The same update with the pack's max taken from v.
template <bool kDrop = false, int P>
__device__ __forceinline__ float add_pack_to_sum(float& m, float& s, const float (&v)[P], bool valid = true) {
  return add_pack_to_sum<kDrop>(m, s, v, pack_max(v), valid);
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
  unsigned* hist = nullptr;  // the warp's 256 bins for radix_keep (kernels that keep by radix only)
};

// Keeps the k best candidates, sorted, at the front of the buffer and raises the threshold to the
// k-th best logit (with kBound, unless the lanes' maxima put it higher already: see raise_to_maxima).
template <bool kBound = false>
__device__ __forceinline__ void keep_best(Selection& sel, int k, int lane) {
  sel.count = sort_candidates(sel.buf, sel.count, k, lane);
  if (sel.count != k) return;
  if constexpr (kBound) sel.threshold = fmaxf(sel.threshold, key_value(sel.buf[k - 1]));  // NaN: the other
  else sel.threshold = key_value(sel.buf[k - 1]);
}

// Writes the lanes' keys that are `in` at dst[count], dst[count + 1], ... in lane order, and adds
// their number to count (the same in every lane).
__device__ __forceinline__ void compact(Key* dst, int& count, bool in, Key key, int lane) {
  const unsigned mask = __ballot_sync(kl::kFullMask, in);
  if (in) dst[count + __popc(mask & ((1u << lane) - 1))] = key;
  count += __popc(mask);
}

// In one warp, over a 256-bin histogram (lane l reads bins 8l ... 8l + 7): the bin, counting down
// from the top, that holds the need-th key, how many keys it holds and how many are above it; the
// same in every lane. found is false when all the bins together hold fewer than need keys.
struct KthBin {
  int bin;
  unsigned count, above;
  bool found;
};

__device__ __forceinline__ KthBin kth_bin(const unsigned* hist, unsigned need, int lane) {
  const uint4* four = reinterpret_cast<const uint4*>(hist) + 2 * lane;  // 2 loads, 2-way bank conflicts
  const uint4 lo = four[0], hi = four[1];
  const unsigned h[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const unsigned own = h[0] + h[1] + h[2] + h[3] + h[4] + h[5] + h[6] + h[7];
  unsigned upto = own;  // keys in this lane's bins and above (the lanes above hold the higher bins)
  for (int offset = 1; offset < 32; offset *= 2) {
    const unsigned up = __shfl_down_sync(kl::kFullMask, upto, offset);
    if (lane + offset < 32) upto += up;
  }
  const bool here = upto - own < need && need <= upto;  // in one lane, unless fewer than need keys
  unsigned above = upto - own, count = 0;               // in that lane: the keys above the bin, and in it
  int bin = -1;
#pragma unroll
  for (int j = 7; j >= 0; --j) {  // down the lane's bins to the one where the count reaches need
    const bool hit = bin < 0 && above + h[j] >= need;
    above += bin < 0 && !hit ? h[j] : 0;
    bin = hit ? 8 * lane + j : bin;
    count = hit ? h[j] : count;
  }
  const int src = __ffs(__ballot_sync(kl::kFullMask, here)) - 1;
  if (src < 0) return {-1, 0, 0, false};
  return {__shfl_sync(kl::kFullMask, bin, src), __shfl_sync(kl::kFullMask, count, src),
          __shfl_sync(kl::kFullMask, above, src), true};
}

// What radix_keep leaves: the candidates kept and the new threshold.
struct Kept {
  int count;
  float threshold;
};

// Keeps the k best candidates at the front of the buffer, unsorted, and raises the threshold to the
// k-th best logit, without sorting: step 8's radix select by one warp, over its own histogram. Pass by
// pass, 8 bits at a time from the top, the keys on the prefix so far count their next digit, and
// kth_bin finds the k-th key's bin; once that bin holds at most 32 keys, they are ranked against each
// other. A few passes of one atomicAdd a key replace a bitonic sort of up to 512 keys (45 stages of
// shared-memory exchanges); the sort after the row's last logit orders the k.
// Inlined at every call: as a function call, the streaming loop around it kept values in local
// memory across the call, loaded and stored on every iteration (SASS; the loop then ran slower).
__device__ __forceinline__ Kept radix_keep(Key* buf, int n, float old_threshold, unsigned* hist, int k, int lane) {
  if (n < k) return {n, old_threshold};
  Key prefix = 0, threshold = 0;
  unsigned need = k;
  for (int shift = 56;; shift -= 8) {
    for (int bin = lane; bin < 256; bin += 32) hist[bin] = 0;
    __syncwarp();
    for (int i = lane; i < n; i += 32) {
      const Key key = buf[i];
      if (shift == 56 || (key >> (shift + 8)) == (prefix >> (shift + 8)))
        atomicAdd(&hist[static_cast<unsigned>(key >> shift) & 255u], 1u);
    }
    __syncwarp();
    const KthBin b = kth_bin(hist, need, lane);  // found: n >= k keys
    prefix |= Key(b.bin) << shift;
    need -= b.above;
    __syncwarp();           // every lane has read the histogram
    if (b.count == need) {  // the bin's keys are exactly the ones still needed
      threshold = prefix;
      break;
    }
    if (b.count <= 32) {  // gather the bin's keys (over the histogram) and rank them
      Key* const bin_keys = reinterpret_cast<Key*>(hist);
      int gathered = 0;
      for (int i0 = 0; i0 < n; i0 += 32) {
        const Key key = i0 + lane < n ? buf[i0 + lane] : 0;
        compact(bin_keys, gathered, i0 + lane < n && (key >> shift) == (prefix >> shift), key, lane);
      }
      __syncwarp();
      const Key mine = lane < gathered ? bin_keys[lane] : 0;
      unsigned higher = 0;
      for (int j = 0; j < gathered; ++j) higher += bin_keys[j] > mine;
      const unsigned hit = __ballot_sync(kl::kFullMask, lane < gathered && higher == need - 1);  // keys are distinct
      threshold = __shfl_sync(kl::kFullMask, mine, __ffs(hit) - 1);
      __syncwarp();
      break;
    }
  }
  // Keys >= threshold to the front, in order (a lane writes only where every lane has read), and the
  // smallest of them, the k-th best: threshold may be a bin's floor, below every key in the bin.
  int kept = 0;
  Key kth = ~Key{0};
  for (int i0 = 0; i0 < n; i0 += 32) {
    const Key key = i0 + lane < n ? buf[i0 + lane] : 0;
    const bool in = i0 + lane < n && key >= threshold;
    const unsigned mask = __ballot_sync(kl::kFullMask, in);
    if (in) buf[kept + __popc(mask & ((1u << lane) - 1))] = key;
    kept += __popc(mask);
    kth = in ? min(kth, key) : kth;
  }
  for (int offset = 16; offset > 0; offset /= 2) kth = min(kth, __shfl_xor_sync(kl::kFullMask, kth, offset));
  __syncwarp();
  return {kept, key_value(kth)};
}

// Appends the lanes' keys that are `in` after the buffer's candidates, in lane order; the caller
// keeps 32 slots free.
__device__ __forceinline__ void append(Selection& sel, bool in, Key key, int lane) {
  compact(sel.buf, sel.count, in, key, lane);
}

// One logit per lane (valid = false: the lane has none): in if not below the threshold (NaN is
// never below). A tie gets in too: the scalar head comes after the body, so its indices are lower.
template <bool kBound = false>
__device__ __forceinline__ void offer(Selection& sel, bool valid, float v, int i, int k, int lane) {
  if (sel.count > sel.cap - 32) keep_best<kBound>(sel, k, lane);
  append(sel, valid && !(v < sel.threshold), make_key(v, i), lane);
}

// When to keep the buffer's k best (keep_best's sort, or radix_keep for k > kMaximaK). For k up to
// kFullSortK, whenever fewer than 32 P slots are free: a keep is rare and lifts the threshold a long
// way, so sooner is better. Above, when the warp's marked keys would take the buffer past kKeepAt
// keys: the threshold rises only at a keep, so a fuller buffer leaves it low for longer and lets more
// packs through the vote, and an emptier one keeps more often. After a keep at most k + 32 P keys are
// held, which fits every buffer (k <= 64).
constexpr int kFullSortK = 32;
constexpr int kKeepAt = 192;  // 3/4 of f32's buffer, 3/8 of 16-bit's: faster than 128 and 256 (NOTES.md)

// The sum of v over the warp's 32 lanes, in every lane: one instruction (__reduce_add_sync) on sm_80+,
// a butterfly of 5 shuffles below, so that steps 4-6 run on every GPU from sm_75. With `width` a smaller
// power of two, each aligned group of `width` lanes gets its group's sum (a butterfly: redux.sync has one
// result per warp).
__device__ __forceinline__ int warp_sum(int v, int width = 32) {
#if KL_ARCH_AT_LEAST(80)
  if (width == 32) return __reduce_add_sync(kl::kFullMask, v);
#endif
#pragma unroll
  for (int offset = width / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kl::kFullMask, v, offset);
  return v;
}

// Sorts the 32 R values a warp holds, R a lane (rank e = 32 r + lane), largest first: a bitonic
// network whose exchanges across lanes are shuffles (at stride 32, the lane's other register).
template <class T, int R>
__device__ __forceinline__ void warp_sort_registers(T (&v)[R], int lane) {
#pragma unroll
  for (int size = 2; size <= 32 * R; size *= 2) {
#pragma unroll
    for (int stride = size / 2; stride > 0; stride /= 2) {
      T other[R];  // rank e's pair is e ^ stride
#pragma unroll
      for (int r = 0; r < R; ++r)
        other[r] = stride == 32 ? v[(r + 1) % R] : __shfl_xor_sync(kl::kFullMask, v[r], stride);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int e = 32 * r + lane;  // runs of `size` ranks alternate descending / ascending
        const bool larger = ((e & stride) == 0) == ((e & size) == 0);
        v[r] = larger ? max(v[r], other[r]) : min(v[r], other[r]);
      }
    }
  }
}

// The warp's 32 running maxima are 32 logits already offered, so k of them (k <= kMaximaK) at least
// as large as their k-th largest exist: nothing below it can win. Between two sorts this bound
// follows the row's best as it is read (for k = 1 it is the row's max so far), where the buffer's
// k-th best is only as recent as the last sort. A bitonic sort of the 32 values across the lanes.
// The kernels that use it are compiled apart (kBound = true): behind a run-time test in one kernel,
// its code slowed the larger k it never ran for (NOTES.md).
constexpr int kMaximaK = 16;

// Calls f(std::true_type{}) when k <= kMaximaK, else f(std::false_type{}): the kBound of the kernel to launch.
template <class F>
void with_bound(int k, F&& f) {
  if (k <= kMaximaK) f(std::true_type{});
  else f(std::false_type{});
}

__device__ __forceinline__ void raise_to_maxima(Selection& sel, float lane_max, int k, int lane) {
  float v[1] = {lane_max};
  warp_sort_registers(v, lane);
  const float kth = __shfl_sync(kl::kFullMask, v[0], k - 1);
  // Just below it, so that the k-th itself (perhaps in the pack being offered) still gets in.
  if (kth > -INFINITY) sel.threshold = fmaxf(sel.threshold, nextafterf(kth, -INFINITY));
}

// A pack of P logits per lane (kept in the input type until needed): when no lane's pack max
// passes the threshold, which is almost always, the whole warp moves on after one vote. Otherwise
// each lane marks its logits that are in, and every round appends each lane's lowest marked one:
// usually one round, where a ballot per logit of the pack cost P. A logit must be above the
// threshold: the packs come in rising index order, so one equal to it ranks below the K-th key (a
// lower index) and cannot win. Rows of equal logits, or of fewer than K finite ones (-inf = -inf),
// would otherwise send every logit through the buffer and its sorts. With kBound (k <= kMaximaK) a
// pack that passes first raises the threshold to the lanes' maxima (lane_max: this lane's, this pack
// included), and most packs then fail the vote after all.
template <bool kBound, bool kRadix, class T, int P>
__device__ __forceinline__ void offer_pack(Selection& sel, bool valid, const kl::Pack<T, P>& raw, float pack_max,
                                           float lane_max, int i0, int k, int lane) {
  if (!__any_sync(kl::kFullMask, valid && !(pack_max <= sel.threshold))) return;
  if constexpr (kBound) {
    raise_to_maxima(sel, lane_max, k, lane);
    if (!__any_sync(kl::kFullMask, valid && !(pack_max <= sel.threshold))) return;
  }
  float v[P];
  kl::to_floats(raw, v);
  unsigned marked = 0;
#pragma unroll
  for (int i = 0; i < P; ++i) marked |= valid && !(v[i] <= sel.threshold) ? 1u << i : 0u;
  int incoming = 32 * P;  // at most
  if (k > kFullSortK) incoming = warp_sum(__popc(marked));
  if (sel.count + incoming > (!kBound && k > kFullSortK ? min(kKeepAt, sel.cap) : sel.cap)) {
    if constexpr (kRadix) {
      const Kept kept = radix_keep(sel.buf, sel.count, sel.threshold, sel.hist, k, lane);
      sel.count = kept.count;
      sel.threshold = kept.threshold;
    } else keep_best<kBound>(sel, k, lane);
  }
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
// not hold every logit of the first packs: each lane's two best logits (`best`, `second`; 64 keys),
// sorted, and the k-th of them. k logits at least that large exist, so no logit below can win; the
// threshold sits just below it, so that the k (offered next, with their packs) are above it.
__device__ __forceinline__ void seed_threshold(Selection& sel, Key best, Key second, int k, int lane) {
  sel.buf[2 * lane] = best;
  sel.buf[2 * lane + 1] = second;
  sort_candidates(sel.buf, 64, k, lane);
  const float kth = key_value(sel.buf[k - 1]);
  if (sel.buf[k - 1] != 0 && kth > -INFINITY) sel.threshold = nextafterf(kth, -INFINITY);
  __syncwarp();  // every lane has read it before the appends overwrite it
}

// Folds a pack's logits (logit i has index i0 + i; none where !valid) into this lane's two best keys.
template <class T, int P>
__device__ __forceinline__ void two_best(Key& best, Key& second, bool valid, const kl::Pack<T, P>& raw, int i0) {
  float v[P];
  kl::to_floats(raw, v);
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const Key key = valid ? make_key(v[i], i0 + i) : 0;
    second = key > best ? best : (key > second ? key : second);
    best = key > best ? key : best;
  }
}

// Thread t of nt scans elements [begin, end) of a row: kInFlight 16-byte packs per batch, their
// loads all issued before any is used. The first pack or batch seeds the threshold; the scalar head (up to
// the first 16-byte boundary) and tail come last. Every warp runs the same number of batches, so
// that the votes and ballots always see all 32 lanes; a lane past the end offers nothing.
// 4 packs per batch: 64 bytes a lane, 2 KB a warp in flight. 16-bit rows with k > kMaximaK take 2:
// there a pack's offer holds radix_keep, and 4 unrolled copies of it overflowed the instruction cache
// (ncu: no_instruction the top stall); 2 run faster at most of those shapes, not all (NOTES.md).
template <class T, bool kRadix>
constexpr int kPacksInFlight = sizeof(T) == 2 && kRadix ? 2 : 4;

template <bool kBound, bool kRadix = false, class T>
__device__ __forceinline__ void scan_select(const T* row, int begin, int end, int t, int nt, float& m, float& s,
                                            Selection& sel, int k, int lane) {
  constexpr int P = kPack<T>;
  constexpr int kInFlight = kPacksInFlight<T, kRadix>;
  const kl::PackSplit<P, T, int> split(row + begin, end - begin);
  const int body = begin + split.head, packs = split.packs, tail = body + packs * P;
  // A lane past the last pack: 16-bit rows load pack 0 again (cached) and drop it whole, as a byte
  // permute per half would merge -inf in; f32 rows take -inf, one move per logit.
  constexpr bool kRefill = sizeof(T) == 2;
  const auto single = [&](int at, int count) {
    const bool has = t < count;
    const float v = has ? kl::to_float(row[at + t]) : -INFINITY;
    add_to_sum(m, s, v);
    offer<kBound>(sel, has, v, at + t, k, lane);
  };
  for (int first = 0; first < packs; first += kInFlight * nt) {  // the same trip count in every lane
    kl::Pack<T, P> raw[kInFlight];  // kept in the input type until used: 4 registers per pack
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int q = first + u * nt + t;
      if constexpr (kRefill) raw[u] = kl::load_raw<P>(row + body + (q < packs ? q : 0) * P);
      else if (q < packs) raw[u] = kl::load_raw<P>(row + body + q * P);
      else
        for (T& x : raw[u].v) x = kl::from_float<T>(-INFINITY);
    }
    if constexpr (!kBound) {  // k > kMaximaK: the first batch seeds the threshold, higher than its first pack would
      if (first == 0) {
        Key best = 0, second = 0;
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) two_best(best, second, u * nt + t < packs, raw[u], body + (u * nt + t) * P);
        seed_threshold(sel, best, second, k, lane);
      }
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int q = first + u * nt + t;
      float v[P];
      kl::to_floats(raw[u], v);
      const float pm = add_pack_to_sum<kRefill>(m, s, v, pack_max(raw[u], v), q < packs);
      if constexpr (kBound) {  // the lanes' maxima raise the bar from the first pack on: that pack seeds it
        if (u == 0 && first == 0) {
          Key best = 0, second = 0;
          two_best(best, second, q < packs, raw[u], body + q * P);
          seed_threshold(sel, best, second, k, lane);
        }
      }
      offer_pack<kBound, kRadix>(sel, q < packs, raw[u], pm, m, body + q * P, k, lane);
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

// ---- introduced by step 5 (a block per row), reused by step 6 (the row split over blocks) ----------

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

constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / 32;

// One block folds a slice of a row (slice = the whole row for step 5): each of its 8 warps selects
// as in step 4, then warp 0 streams the 8 warps' sorted lists through one more selection. With
// one slice per row the block writes the answer; with several it writes the slice's k best keys
// and (m, s) for topk_merge_slices. 8 warps on one row keep enough loads in flight when rows are few.
template <class T, bool kBound>
__global__ void __launch_bounds__(kBlockThreads, 4)
    topk_block(const T* x, int vocab, int k, int slices, int slice, float* prob, int* idx, Key* part_keys,
               float2* part_stats) {
  constexpr bool kRadix = !kBound;  // as step 4: past kMaximaK a warp keeps its buffer's K best by radix_keep
  __shared__ Key buffers[kBlockWarps * kCap<T>];
  __shared__ alignas(16) unsigned hists[kRadix ? kBlockWarps * 256 : 1];
  __shared__ float2 warp_ms[kBlockWarps];
  const std::int64_t row = blockIdx.x / slices;
  const int begin = static_cast<int>(blockIdx.x % slices) * slice, end = min(vocab, begin + slice);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  Selection sel{buffers + warp * kCap<T>, kCap<T>};
  sel.hist = hists + (kRadix ? warp * 256 : 0);
  float m = -INFINITY, s = 0.f;
  scan_select<kBound, kRadix>(x + row * vocab, begin, end, static_cast<int>(threadIdx.x), kBlockThreads, m, s, sel, k,
                              lane);
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

// ---- introduced by step 7 (a row in a group's registers) ------------------------------------------

// Sorts a thread's N keys largest first (N a power of two): Batcher's odd-even merge sort, a network
// of compile-time indices (19 exchanges for N = 8, against a bitonic network's 24), so the keys stay
// in registers and an exchange is a max and a min.
template <class K, int N>
__host__ __device__ __forceinline__ void sort_registers(K (&keys)[N]) {
#pragma unroll
  for (int p = 1; p < N; p *= 2) {  // merge sorted runs of p into runs of 2 p
#pragma unroll
    for (int d = p; d > 0; d /= 2) {  // exchange distance
#pragma unroll
      for (int a = 0; a < N; ++a) {  // a and a + d, if a is a first one at this distance in its run
        const int b = a + d, from = d % p;
        if (b < N && a >= from && (a - from) % (2 * d) < d && a / (2 * p) == b / (2 * p)) {
          const K x = keys[a], y = keys[b];
          keys[a] = x > y ? x : y;
          keys[b] = x > y ? y : x;
        }
      }
    }
  }
}

// The best S of a thread's N keys, largest first, in best[0 .. S - 1]: the whole network when S = N;
// for S = 1 or 2 (K = 1 or 2 winners a row) each key passes once through S slots (a max and a min
// per slot), fewer exchanges than sorting all N.
template <int S, class K, int N>
__host__ __device__ __forceinline__ void sort_best(K (&keys)[N], K (&best)[S]) {
  if constexpr (S == N) {
    sort_registers(keys);
#pragma unroll
    for (int j = 0; j < S; ++j) best[j] = keys[j];
  } else {
#pragma unroll
    for (int j = 0; j < S; ++j) best[j] = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      K x = keys[i];
#pragma unroll
      for (int j = 0; j < S; ++j) {
        const K hi = x > best[j] ? x : best[j];
        x = x > best[j] ? best[j] : x;
        best[j] = hi;
      }
    }
  }
}

// group_max for a whole warp (width 32) on sm_80+: two redux.sync instructions instead of five levels
// of 64-bit shuffles and compares, the key's high half (the logit) first, then its low half (~index)
// among the lanes that hold that logit. redux.sync yields one value per warp (a uniform register), so
// narrower groups, which would take turns, keep the butterfly.
__device__ __forceinline__ Key group_max_redux(Key key, int width) {
#if KL_ARCH_AT_LEAST(80)
  if (width == 32) {
    const unsigned hi = __reduce_max_sync(kl::kFullMask, static_cast<unsigned>(key >> 32));
    const unsigned lo =
        __reduce_max_sync(kl::kFullMask, static_cast<unsigned>(key >> 32) == hi ? static_cast<unsigned>(key) : 0u);
    return Key{hi} << 32 | lo;
  }
#endif
  return group_max(key, width);
}

// A 16-bit logit (f16, bf16) and its index in one 32-bit key, ranked as make_key ranks a float: the
// logit's 16 bits made order-preserving (NaN made 0x7FFF, above +inf; -0 made +0) in the high half,
// ~index in the low half (rows of at most 65536 logits). One 32-bit compare then ranks two keys, where
// a 64-bit key takes two; key 0 is empty.
using Key32 = unsigned;

template <class T>
__host__ __device__ inline unsigned short bits16(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half_as_ushort(x);
  else return __bfloat16_as_ushort(x);
}

// A 16-bit pattern whose magnitude bits lie above +inf's is a NaN.
template <class T>
constexpr unsigned kInfBits16 = std::is_same_v<T, __half> ? 0x7C00u : 0x7F80u;

// From the logit as stored, with integer operations on its bits (no conversion to float and back).
template <class T>
__host__ __device__ inline Key32 make_key32(T x, int i) {
  unsigned h = bits16(x);
  const unsigned magnitude = h & 0x7FFFu;
  if (magnitude > kInfBits16<T>) h = 0x7FFFu;  // every NaN made +NaN
  if (magnitude == 0) h = 0;                   // -0 made +0
  h = (h & 0x8000u) ? (~h & 0xFFFFu) : (h | 0x8000u);
  return h << 16 | (0xFFFFu - static_cast<unsigned>(i));
}

template <class T>
__host__ __device__ inline float key32_value(Key32 key) {
  unsigned h = key >> 16;
  h = (h & 0x8000u) ? (h & 0x7FFFu) : (~h & 0xFFFFu);
  if constexpr (std::is_same_v<T, __half>) return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
  else return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(h)));
}

__host__ __device__ inline int key_index(Key32 key) { return static_cast<int>(0xFFFFu - (key & 0xFFFFu)); }

// group_max_redux for 32-bit integers: Key32 keys (unsigned) and step 7's bound's ordered ints (ordered_int,
// below; signed): one redux.sync, whose max is signed or unsigned as the type is, on a whole warp.
template <class I, std::enable_if_t<std::is_integral_v<I> && sizeof(I) == 4, int> = 0>
__device__ __forceinline__ I group_max_redux(I v, int width) {
#if KL_ARCH_AT_LEAST(80)
  if (width == 32) return __reduce_max_sync(kl::kFullMask, v);
#endif
  return group_max(v, width);
}

// Step 7's keys, made from the logit as stored: 32 bits for a 16-bit logit (make_key32, integer
// operations on its bits), 64 for a float (make_key).
template <class T>
using LaneKey = std::conditional_t<sizeof(T) == 2, Key32, Key>;

template <class T>
__device__ __forceinline__ LaneKey<T> lane_key(T x, int i) {
  if constexpr (sizeof(T) == 2) return make_key32<T>(x, i);
  else return make_key(x, i);
}

template <class T>
__device__ __forceinline__ float lane_key_value(LaneKey<T> key) {
  if constexpr (sizeof(T) == 2) return key32_value<T>(key);
  else return key_value(key);
}

// A float's bits as an int that orders as the float does (NaN aside; -0 just below +0): a negative
// float's magnitude bits flipped. Its own inverse.
__host__ __device__ __forceinline__ int ordered_int(int bits) { return bits ^ ((bits >> 31) & 0x7FFFFFFF); }

// The k-th largest of the group's lane maxima (ordered ints), counting repeats: a round takes the
// group's largest, counts the lanes that hold it and retires them. At least k logits of the row are at
// or above it, so the row's k-th best is too: a lower bound for the winners. k rounds, whichever round
// reaches k, so that the groups of a warp take their shuffles together; `top` is round 0's, the row's max.
// With k > G (more winners than lanes) only round 0 runs, and the bound is INT_MIN: none.
template <int G>
__device__ __forceinline__ int kth_lane_max(int mine, int k, int& top) {
  const unsigned first = threadIdx.x % 32 / G * G, bits = G == 32 ? ~0u : (1u << G) - 1;
  int bound = INT_MIN, count = 0;
  for (int r = 0; r < (k <= G ? k : 1); ++r) {
    const int best = group_max_redux(mine, G);
    if (r == 0) top = best;
    count += __popc(__ballot_sync(kl::kFullMask, mine == best) >> first & bits);
    if (count >= k && bound == INT_MIN) bound = best;
    mine = mine == best ? INT_MIN : mine;
  }
  return k <= G ? bound : INT_MIN;
}

// The exclusive prefix sum of n over the lanes of a group: where a lane's candidates go in the group's list.
template <int G>
__device__ __forceinline__ int group_offset(int n, int lane) {
  int sum = n;
  for (int d = 1; d < G; d *= 2) {
    const int other = __shfl_up_sync(kl::kFullMask, sum, d, G);
    if (lane >= d) sum += other;
  }
  return sum - n;
}

// Step 7's bound, for float rows of 16 or 32 lanes at K > 2 (kBounded): a lane's 8 logits as loaded
// (`raw`, slots past the row ignored) become floats; the row's max m and sum s of e^(x - m) come first
// (NaN if the row has a NaN or +inf). The logits at or above kth_lane_max's bound, about K + 1 of them,
// go to the group's `list` in shared memory; lane l makes keys of entries l, l + G, ... (32 / G of them),
// sorts them, and k <= G rounds of the group's largest head give each lane at most one winner, which it
// writes. Returns false, with nothing written, when a live group of the warp has no finite bound, a NaN
// or +inf, or more than 32 such logits; the caller then sorts all 8 keys a lane. The answer is the warp's.
// Where it pays (H100; results/h100/lesson05_bound_all_ab.txt with the bound on every dtype and on groups
// of 8 lanes too, lesson05_bound_ab.txt as kept): a float's keys are 64 bits, so sorting 8 and the rounds
// cost at least twice what 16-bit logits' 32-bit keys do. With 32-bit keys the bound lost at 64 and 128 experts and
// moved 200 and 256 little, either way; float rows of 8 lanes did not move.
template <class T, int G>
constexpr bool kBounded = sizeof(T) == 4 && G >= 16;

template <class T, int G>
__device__ __forceinline__ bool bounded_topk(const T (&raw)[8], bool live, std::int64_t row, int vocab, int k, int lane,
                                             float2* list, float* prob, int* idx) {
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = live && 8 * lane + i < vocab ? kl::to_float(raw[i]) : -INFINITY;
  float lane_max = v[0];
#pragma unroll
  for (int i = 1; i < 8; ++i) lane_max = fmaxf(lane_max, v[i]);  // NaN left out: s catches it
  int top = 0;
  const int bound = kth_lane_max<G>(ordered_int(__float_as_int(lane_max)), k, top);
  const float m = __int_as_float(ordered_int(top)), floor = __int_as_float(ordered_int(bound));
  const float base = m == -INFINITY ? 0.f : m;
  float s = 0.f;
  int n = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    s += kl::exp_ftz(v[i] - base);
    n += v[i] >= floor;
  }
  s = kl::warp_allreduce(s, G);
  const int listed = warp_sum(n, G);
  if (!__all_sync(kl::kFullMask, !live || (floor > -INFINITY && listed <= 32 && s == s))) return false;
  int at = group_offset<G>(n, lane);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (live && v[i] >= floor) list[at++] = make_float2(v[i], __int_as_float(8 * lane + i));
  __syncwarp();
  LaneKey<T> keys[32 / G], heads[32 / G], won = 0;
#pragma unroll
  for (int c = 0; c < 32 / G; ++c) {
    const int e = lane + G * c;
    keys[c] = live && e < listed ? lane_key<T>(static_cast<T>(list[e].x), __float_as_int(list[e].y)) : 0;
  }
  sort_best<32 / G>(keys, heads);
  for (int r = 0; r < k; ++r) {  // k <= G here: round r's winner is lane r's
    const LaneKey<T> best = group_max_redux(heads[0], G);
    if (heads[0] == best) pop_best(heads);
    if (r == lane) won = best;
  }
  const float inv = 1.f / s;
  if (live && lane < k) {
    prob[row * k + lane] = kl::fast_exp(lane_key_value<T>(won) - m) * inv;
    idx[row * k + lane] = key_index(won);
  }
  return true;
}

// ---- introduced by step 8 (a radix select per block) ---------------------------------------------

// A block of 256 threads holds kRadixItems keys a thread: a chunk of 4096 logits (or keys) per select.
constexpr int kRadixItems = 16;
constexpr int kRadixChunk = kRadixItems * kBlockThreads;

// Once the k-th key's bin holds at most kRankKeys keys, they are ranked against each other instead of
// split by further passes.
constexpr int kRankKeys = kBlockThreads;

// What a pass of radix_threshold decided: another pass, the threshold found, or a bin few enough to rank.
enum RadixDone : int { kPassOn = 0, kFound = 1, kRank = 2 };

// A block's selection in shared memory: two histograms (a pass fills one while the next is zeroed),
// the prefix of the k-th key found so far, the keys of its bin once few enough to rank, and the winners.
struct RadixShared {
  alignas(16) unsigned hist[2][256];
  Key prefix;
  int done, count, ranked;  // done: kPassOn, kFound (prefix is the threshold) or kRank (rank the bin)
  unsigned need;
  Key rank[kRankKeys];
  Key best[kMaxK];
  float2 warp_ms[kBlockWarps];
};

// Appends this thread's keys that are `in` to dst after the block's `count` keys, in any order. Each
// lane counts its own (a bit a key), a warp scan gives each lane its place in the warp's run, and one
// atomicAdd a warp claims the run: with an atomicAdd a key, the lanes holding one take turns on the
// same counter, key after key.
template <int N, class In>
__device__ __forceinline__ void append_keys(const Key (&keys)[N], In&& in, Key* dst, int& count) {
  static_assert(N <= 32, "one bit a key");
  const int lane = threadIdx.x % 32;
  unsigned mine = 0;  // bit i: keys[i] is in
#pragma unroll
  for (int i = 0; i < N; ++i) mine |= in(keys[i]) ? 1u << i : 0u;
  const int n = __popc(mine);
  int upto = n;  // inclusive scan over the lanes
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int below = __shfl_up_sync(kl::kFullMask, upto, d);
    upto += lane >= d ? below : 0;
  }
  int at = 0;
  if (lane == 31 && upto > 0) at = atomicAdd(&count, upto);
  at = __shfl_sync(kl::kFullMask, at, 31) + upto - n;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (mine >> i & 1u) dst[at++] = keys[i];
}

// The k-th key when its bin (the keys whose bits above `shift` equal prefix's) holds at most kRankKeys
// keys, sh.need of them winners: the bin's keys are gathered, and the one with exactly need - 1 keys
// of the bin above it is the threshold (the keys are distinct). One gather and one compare per pair
// replace the passes over the lower digits, which keys of equal value (likelier in 16 bits) carry on
// into the index's bits.
template <int N>
__device__ Key rank_threshold(const Key (&keys)[N], Key prefix, int shift, RadixShared& sh) {
  const auto in_bin = [&](Key key) { return key != 0 && (key >> shift) == (prefix >> shift); };
  append_keys(keys, in_bin, sh.rank, sh.ranked);
  __syncthreads();
  const int n = sh.ranked;
  const unsigned need = sh.need;
  for (int c = threadIdx.x; c < n; c += kBlockThreads) {
    const Key key = sh.rank[c];
    unsigned above = 0;
    for (int j = 0; j < n; ++j) above += sh.rank[j] > key;
    if (above == need - 1) sh.prefix = key;
  }
  __syncthreads();
  return sh.prefix;
}

// The threshold of the block's k best keys: exactly min(k, non-empty keys) are >= it (key 0, empty,
// is never counted). Pass by pass from the top 8 bits, each key that matches the prefix adds its next
// digit to a histogram in shared memory, one atomicAdd a key (cheaper here than grouping a warp's equal
// digits by __match_any_sync first: NOTES.md), and warp 0 finds the bin of the k-th key, counting
// from the top. It stops when that bin holds just the keys still needed (the keys are distinct, so by
// the 8th pass), or few enough to rank.
template <int N>
__device__ Key radix_threshold(const Key (&keys)[N], int k, RadixShared& sh) {
  const int t = threadIdx.x, lane = t % 32;
  sh.hist[0][t] = 0;
  Key prefix = 0;
  unsigned need = k;  // in warp 0: the keys still needed in the prefix's bin
  __syncthreads();
  for (int pass = 0, shift = 56;; ++pass, shift -= 8) {
    unsigned* hist = sh.hist[pass % 2];
    sh.hist[(pass + 1) % 2][t] = 0;  // for the next pass (warp 0 read it before the last sync)
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const bool in = keys[i] != 0 && (shift == 56 || (keys[i] >> (shift + 8)) == (prefix >> (shift + 8)));
      if (in) atomicAdd(&hist[static_cast<unsigned>(keys[i] >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (t < 32) {
      const KthBin b = kth_bin(hist, need, lane);
      Key next = 1;  // fewer than k keys (first pass only): threshold 1 takes every non-empty one
      if (b.found) {
        need -= b.above;
        next = prefix | Key(b.bin) << shift;
      }
      const unsigned count = b.count;
      if (lane == 0) {
        sh.prefix = next;
        sh.done = !b.found || count == need ? kFound : count <= kRankKeys ? kRank : kPassOn;
        sh.need = need;
        sh.count = 0;  // keep_winners counts from 0
        sh.ranked = 0;
      }
    }
    __syncthreads();
    prefix = sh.prefix;
    if (sh.done == kFound) return max(prefix, Key{1});  // -inf's keys start with a digit 0, and empty keys are 0
    if (sh.done == kRank) return rank_threshold(keys, prefix, shift, sh);
  }
}

// Puts the block's keys >= threshold in sh.best[0, sh.count), in any order.
template <int N>
__device__ void keep_winners(const Key (&keys)[N], Key threshold, RadixShared& sh) {
  const auto wins = [&](Key key) { return key >= threshold; };
  append_keys(keys, wins, sh.best, sh.count);
  __syncthreads();
}

// The k best keys of `chunks` chunks, left in sh.best[0, sh.count): fill(c, keys) puts this thread's
// kRadixItems keys of chunk c in keys; the winners of the chunks before ride along as one more key
// in the first k threads.
template <class Fill>
__device__ void radix_select(int chunks, int k, RadixShared& sh, Fill&& fill) {
  for (int c = 0; c < chunks; ++c) {
    Key keys[kRadixItems + 1];
    keys[kRadixItems] = c > 0 && static_cast<int>(threadIdx.x) < sh.count ? sh.best[threadIdx.x] : 0;
    fill(c, keys);
    keep_winners(keys, radix_threshold(keys, k, sh), sh);
  }
}

// The block's (m, s), in warp 0: each warp's state through shared memory, then warp_stats over the 8.
__device__ __forceinline__ kl::MaxSum block_stats(float m, float s, RadixShared& sh) {
  const int lane = threadIdx.x % 32;
  warp_stats(m, s);
  if (lane == 0) sh.warp_ms[threadIdx.x / 32] = make_float2(m, s);
  __syncthreads();
  m = lane < kBlockWarps ? sh.warp_ms[lane].x : -INFINITY;
  s = lane < kBlockWarps ? sh.warp_ms[lane].y : 0.f;
  warp_stats(m, s);
  return {m, s};
}

// In warp 0: the block's winners (at most 64, empty slots 0) sorted largest first in registers, rank r
// in lane r % 32, in v[r / 32].
__device__ __forceinline__ void sorted_winners(const RadixShared& sh, Key (&v)[2]) {
  const int lane = threadIdx.x;
  v[0] = lane < sh.count ? sh.best[lane] : 0;
  v[1] = lane + 32 < sh.count ? sh.best[lane + 32] : 0;
  warp_sort_registers(v, lane);
}

// Warp 0 writes the row's answer: the sorted winners (first, second as write_winners takes them),
// then their probabilities.
__device__ void write_radix_best(const RadixShared& sh, int k, kl::MaxSum ms, float* prob, int* idx) {
  Key v[2];
  sorted_winners(sh, v);
  write_winners(v[0], v[1], k, static_cast<int>(threadIdx.x), ms.m, ms.s, prob, idx);
}

}  // namespace lesson05
