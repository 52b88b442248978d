// Lesson 05's sampler, the product a decoder calls (a student may skip it): the next token of each
// row of logits, drawn from softmax(x / T) cut to the top_k most likely tokens, then to the fewest of
// those whose probability reaches top_p (the nucleus), renormalised. The K best come from the
// dispatcher (one read of the logits); one more kernel, a warp per row, applies T and top_p to them
// and draws with cuRAND's Philox generator: the same seed and offset give the same tokens.
#pragma once
#include <curand_kernel.h>

#include <cstdint>

#include "common/buffer.cuh"
#include "common/check.cuh"
#include "lessons/05_topk_fusion/problem.cuh"
#include "lessons/05_topk_fusion/topk.cuh"

namespace lesson05 {

// A warp per row draws from its k winners (idx, largest first): rank r in lane r % 32. The weights
// w_r = e^((x_r - x_0) / T) need the winners' logits again, read from x (k loads a row), since the
// top-K's probabilities at T = 1 would underflow where a high T still gives weight. A warp scan gives
// the prefix sums c; rank r is in the nucleus while the weight before it is below top_p of the total
// (rank 0 always is); one uniform u in (0, 1] picks the first kept rank whose prefix reaches u times
// the nucleus' mass. A row whose best logit is NaN or infinite takes rank 0, as an argmax would.
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
  const float top = __shfl_sync(kl::kFullMask, v[0], 0);
  if (!isfinite(top)) {  // NaN ranks first; +inf takes all the weight, -inf everywhere none
    if (lane == 0) tokens[row] = id[0];
    return;
  }
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
  const int token = __shfl_sync(kl::kFullMask, pick < 32 ? id[0] : id[1], pick % 32);
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
  topk(x, ws.prob.data(), ws.idx.data(), rows, vocab, sp.top_k, ws.topk, s);
  sample_from_best<T><<<warp_grid(rows), 32 * kWarpsPerBlock, 0, s>>>(
      x, ws.idx.data(), rows, vocab, sp.top_k, sp.temperature, sp.top_p, sp.seed, sp.offset, tokens);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
