// Lesson 05's sampler, the product a decoder calls (a student may skip it): the next token of each
// row of logits, drawn from softmax(x / T) cut to the top_k most likely tokens, then to the fewest of
// those whose probability reaches top_p (the nucleus), renormalised. The K best come from the
// dispatcher (one read of the logits); one more kernel, a warp per row, applies T and top_p to them
// and draws with cuRAND's Philox generator: the same seed and offset give the same tokens. Where the
// dispatcher takes step 8 (decode batches), the draw runs at the end of step 8's merge instead: one
// launch fewer, the same tokens.
#pragma once
#include <curand_kernel.h>

#include <cstdint>

#include "common/buffer.cuh"
#include "common/check.cuh"
#include "lessons/05_topk_fusion/problem.cuh"
#include "lessons/05_topk_fusion/topk.cuh"

namespace lesson05 {

// The draw from a row's k winners (largest first), in a warp: rank r in lane r % 32. The weights
// w_r = e^((x_r - x_0) / T) need the winners' logits, not the top-K's probabilities, which at T = 1
// would underflow where a high T still gives weight. A warp scan gives
// the prefix sums c; rank r is in the nucleus while the weight before it is below top_p of the total
// (rank 0 always is); one uniform u in (0, 1] picks the first kept rank whose prefix reaches u times
// the nucleus' mass. A row whose best logit is NaN or infinite takes rank 0, as an argmax would.
// draw_token takes each lane's two ranks (index id[h] and logit v[h] of rank lane + 32 h; -inf past k)
// and returns the token in every lane.
__device__ __forceinline__ int draw_token(const int (&id)[2], const float (&v)[2], int k, float temperature,
                                          float top_p, std::uint64_t seed, std::uint64_t offset, std::int64_t row) {
  const int lane = threadIdx.x % 32;
  const float top = __shfl_sync(kl::kFullMask, v[0], 0);
  if (!isfinite(top)) return __shfl_sync(kl::kFullMask, id[0], 0);  // NaN ranks first; +inf takes all the weight
  // divided, not multiplied by 1 / T: a tiny T must give -inf below the max and 0 at it, never NaN
  float c[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) c[h] = kl::exp_ftz((v[h] - top) / temperature);
  for (int d = 1; d < 32; d *= 2) {  // inclusive prefix sums over the ranks of each half
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float up = __shfl_up_sync(kl::kFullMask, c[h], d);
      if (lane >= d) c[h] += up;
    }
  }
  const float half = __shfl_sync(kl::kFullMask, c[0], 31);
  c[1] += half;
  const float total = __shfl_sync(kl::kFullMask, c[1], 31);
  // the weight before each rank: the previous rank's prefix, so that it never falls as the rank rises
  float before[2] = {__shfl_up_sync(kl::kFullMask, c[0], 1), __shfl_up_sync(kl::kFullMask, c[1], 1)};
  if (lane == 0) {
    before[0] = 0.f;
    before[1] = half;
  }
  const bool keep0 = lane < k && before[0] < top_p * total;
  const bool keep1 = lane + 32 < k && before[1] < top_p * total;
  const int last = __popc(__ballot_sync(kl::kFullMask, keep0)) + __popc(__ballot_sync(kl::kFullMask, keep1)) - 1;
  const float mass = __shfl_sync(kl::kFullMask, last < 32 ? c[0] : c[1], last % 32);
  float u = 0.f;
  if (lane == 0) {
    curandStatePhilox4_32_10_t state;
    curand_init(seed, static_cast<unsigned long long>(row), offset, &state);
    u = curand_uniform(&state);  // in (0, 1]
  }
  const float target = __shfl_sync(kl::kFullMask, u, 0) * mass;
  const unsigned hit0 = __ballot_sync(kl::kFullMask, keep0 && c[0] >= target);
  const unsigned hit1 = __ballot_sync(kl::kFullMask, keep1 && c[1] >= target);
  const int pick = hit0 ? __ffs(hit0) - 1 : hit1 ? 32 + __ffs(hit1) - 1 : last;  // last: rounding at u = 1
  return __shfl_sync(kl::kFullMask, pick < 32 ? id[0] : id[1], pick % 32);
}

// A warp per row: its k winners' indices from the top-K, their logits read again from x (k loads).
template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    sample_from_best(const T* x, const int* idx, std::int64_t rows, int vocab, int k, float temperature, float top_p,
                     std::uint64_t seed, std::uint64_t offset, int* tokens) {
  const std::int64_t row = blockIdx.x * std::int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x % 32;
  int id[2];
  float v[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = lane + 32 * h;
    id[h] = r < k ? idx[row * k + r] : 0;
    v[h] = r < k ? kl::to_float(x[row * vocab + id[h]]) : -INFINITY;
  }
  const int token = draw_token(id, v, k, temperature, top_p, seed, offset, row);
  if (lane == 0) tokens[row] = token;
}

// Step 8's merge with the draw as its end: warp 0 sorts the row's k winners in registers (as
// write_radix_best does) and draws from them; a key holds its logit exactly, so nothing is read again.
__global__ void __launch_bounds__(kBlockThreads)
    sample_radix_merge(const Key* part_keys, int slices, int k, float temperature, float top_p, std::uint64_t seed,
                       std::uint64_t offset, int* tokens) {
  __shared__ RadixShared sh;
  const std::int64_t row = blockIdx.x;
  select_slices_best(part_keys, row, slices, k, sh);
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  Key best[2];
  sorted_winners(sh, best);
  int id[2];
  float v[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = lane + 32 * h;
    id[h] = r < k ? key_index(best[h]) : 0;
    v[h] = r < k ? key_value(best[h]) : -INFINITY;
  }
  const int token = draw_token(id, v, k, temperature, top_p, seed, offset, row);
  if (lane == 0) tokens[row] = token;
}

// Scratch the sampler keeps between calls: the top-K's workspace and its K winners per row. A repeated
// call of the same shape allocates nothing, so it can be captured in a CUDA graph.
struct SampleWorkspace {
  Workspace topk;
  kl::DeviceBuffer<float> prob;
  kl::DeviceBuffer<int> idx;
};

// The public API: tokens[r] = a draw from row r of x [rows, vocab] (see SampleParams). Throws
// kl::UsageError, launching nothing, for the parameters validate() refuses.
template <class T>
void sample(const T* x, int* tokens, std::int64_t rows, int vocab, const SampleParams& sp, SampleWorkspace& ws,
            cudaStream_t s = nullptr) {
  validate(sp, vocab);
  if (rows == 0) return;
  const auto winners = static_cast<std::size_t>(rows * sp.top_k);
  ws.prob.resize(winners);  // grows only
  ws.idx.resize(winners);
  const Problem p{x, ws.prob.data(), ws.idx.data(), rows, vocab, sp.top_k, dtype_of<T>()};
  const int slices = radix_slices(vocab, sp.top_k);  // at most one a chunk
  if (chosen_step(p) == 8 && slices > 1) {
    launch_radix_slices<T>(p, slices, ws.topk, s);
    sample_radix_merge<<<static_cast<unsigned>(rows), kBlockThreads, 0, s>>>(
        ws.topk.part_keys.data(), slices, sp.top_k, sp.temperature, sp.top_p, sp.seed, sp.offset, tokens);
    CUDA_CHECK_LAUNCH();
    return;
  }
  topk(x, ws.prob.data(), ws.idx.data(), rows, vocab, sp.top_k, ws.topk, s);
  sample_from_best<T><<<warp_grid(rows), 32 * kWarpsPerBlock, 0, s>>>(
      x, ws.idx.data(), rows, vocab, sp.top_k, sp.temperature, sp.top_p, sp.seed, sp.offset, tokens);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
