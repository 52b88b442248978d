// Lesson 07 — attention on the tensor cores: O = softmax(Q·Kᵀ·scale)·V for Q, K, V [B, H, S, D] in
// f16, with f32 accumulation and an f16 output. Part A (steps 1-4) is the tile problem: B independent
// 16×16×16 attentions (H = 1, S = D = 16), one warp per tile, climbing from the WMMA + shared-memory
// softmax reference design to a softmax done on the mma.sync accumulator in registers. Part B
// (steps 5-6) is the same computation for long sequences (D = 64 or 128, S up to 16384, causal or
// not): a flash-attention forward that never writes the S×S score matrix. main.cu and test.cu walk
// kSteps (the end of this file): a new step is benchmarked and tested by adding one entry.
#pragma once
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/device.cuh"
#include "common/parallel.hpp"
#include "lessons/04_online_softmax/softmax.cuh"

namespace lesson07 {

// ---- the problem ----------------------------------------------------------------------------------

// Q, K, V and O are [batch, heads, seq, dim] f16, contiguous. Row i of a head attends to keys
// j <= i when causal (the mask is top-left aligned: query i and key i are the same position).
struct Problem {
  const __half *q = nullptr, *k = nullptr, *v = nullptr;
  __half* o = nullptr;
  std::int64_t batch = 0;
  int heads = 1, seq = 16, dim = 16;
  bool causal = false;
  float scale = 0.25f;  // 1 / sqrt(dim) unless asked otherwise

  __host__ __device__ std::int64_t heads_total() const { return batch * heads; }
  __host__ __device__ std::int64_t rows() const { return batch * heads * seq; }
  __host__ __device__ std::int64_t elements() const { return rows() * dim; }
};

enum class Part { tile, flash };

inline const char* part_name(Part p) { return p == Part::tile ? "tile" : "flash"; }

// Useful FLOPs: two GEMMs of 2·S·S·D per head; causal attention needs only half of them.
inline double flops(const Problem& p) {
  const double f = 4.0 * static_cast<double>(p.heads_total()) * p.seq * static_cast<double>(p.seq) * p.dim;
  return p.causal ? f / 2 : f;
}

// The fewest bytes: Q, K, V read once and O written once (f16).
inline double bytes(const Problem& p) { return 4.0 * static_cast<double>(p.elements()) * 2.0; }

// Refuses a shape no step of the part can take, before anything is launched (exit 2 in the driver).
inline void validate(const Problem& p, Part part) {
  if (p.batch < 1 || p.heads < 1 || p.seq < 1) throw kl::UsageError("B, H and S must be at least 1");
  if (!(p.scale > 0) || !std::isfinite(p.scale)) throw kl::UsageError("the scale must be a positive finite number");
  if (part == Part::tile) {
    if (p.heads != 1 || p.seq != 16 || p.dim != 16 || p.causal)
      throw kl::UsageError("the tile part is B independent 16x16x16 problems: H = 1, S = D = 16, not causal");
    return;
  }
  if (p.dim != 64 && p.dim != 128)
    throw kl::UsageError("D = " + std::to_string(p.dim) + ": the flash steps are compiled for D = 64 and D = 128 only");
  if (static_cast<double>(p.elements()) > 0x1p40) throw kl::UsageError("B * H * S * D is too large");
}

// A step that turns a shape down at run time (the library's materialised S too large): n/a.
struct NotSupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- inputs -------------------------------------------------------------------------------------------

// Uniform values in [-a, a) straight into f16 on the GPU, from a hash of (seed, index): the flash
// shapes hold up to 2^27 elements per tensor, too many to draw on the CPU for every sweep point.
__global__ void fill_uniform_kernel(__half* x, std::int64_t n, std::uint64_t seed, float a) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x) {
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = __float2half_rn(a * (2.f * static_cast<float>(z >> 40) * 0x1p-24f - 1.f));
  }
}

inline void fill_uniform(__half* x, std::int64_t n, std::uint64_t seed, float a) {
  fill_uniform_kernel<<<kl::sm_count() * 8, 256>>>(x, n, seed, a);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
}

inline std::vector<float> to_floats(const std::vector<__half>& h) {
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
  return f;
}

// ---- references -------------------------------------------------------------------------------------

// float64 attention of the query rows listed in `rows` (global row indices b·H·S + h·S + i, or all
// rows when empty), from inputs already rounded to f16. Returns rows.size() x dim values.
inline std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const Problem& p, std::vector<std::int64_t> rows = {}) {
  if (rows.empty()) {
    rows.resize(static_cast<std::size_t>(p.rows()));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  }
  const int S = p.seq, D = p.dim;
  std::vector<double> out(rows.size() * D);
  kl::parallel_for(rows.size(), [&](std::size_t r0, std::size_t r1) {
    std::vector<double> s(S);
    for (std::size_t r = r0; r < r1; ++r) {
      const std::int64_t row = rows[r], head = row / S;
      const int i = static_cast<int>(row % S), keys = p.causal ? i + 1 : S;
      const float* qr = q.data() + row * D;
      double m = -INFINITY, sum = 0;
      for (int j = 0; j < keys; ++j) {
        const float* kr = k.data() + (head * S + j) * D;
        double d = 0;
        for (int c = 0; c < D; ++c) d += static_cast<double>(qr[c]) * kr[c];
        s[j] = d * p.scale;
        m = std::max(m, s[j]);
      }
      double* o = out.data() + r * D;
      for (int c = 0; c < D; ++c) o[c] = 0;
      for (int j = 0; j < keys; ++j) {
        const double e = std::exp(s[j] - m);
        sum += e;
        const float* vr = v.data() + (head * S + j) * D;
        for (int c = 0; c < D; ++c) o[c] += e * vr[c];
      }
      for (int c = 0; c < D; ++c) o[c] /= sum;
    }
  });
  return out;
}

// The same on the GPU in f32, for shapes too large for the CPU: one block of 128 threads per listed
// row; each chunk of 128 keys is scored (one key per thread), then thread c < D folds the chunk into
// its output column with the online (max, sum). Slow and simple: it checks only sampled rows.
__global__ void reference_rows_kernel(Problem p, const std::int64_t* rows, float* out) {
  __shared__ float s[128];
  __shared__ float qs[128];
  const int S = p.seq, D = p.dim;
  const std::int64_t row = rows[blockIdx.x], head = row / S;
  const int i = static_cast<int>(row % S), keys = p.causal ? i + 1 : S;
  if (threadIdx.x < D) qs[threadIdx.x] = __half2float(p.q[row * D + threadIdx.x]);
  float m = -INFINITY, sum = 0, o = 0;
  for (int j0 = 0; j0 < keys; j0 += 128) {
    __syncthreads();
    const int j = j0 + threadIdx.x;
    if (j < keys) {
      const __half* kr = p.k + (head * S + j) * D;
      float d = 0;
      for (int c = 0; c < D; ++c) d += qs[c] * __half2float(kr[c]);
      s[threadIdx.x] = d * p.scale;
    }
    __syncthreads();
    const int n = min(128, keys - j0);
    for (int jj = 0; jj < n; ++jj) {
      const float mn = fmaxf(m, s[jj]), alpha = expf(m - mn), e = expf(s[jj] - mn);
      sum = sum * alpha + e;
      if (threadIdx.x < D) o = o * alpha + e * __half2float(p.v[(head * S + j0 + jj) * D + threadIdx.x]);
      m = mn;
    }
  }
  if (threadIdx.x < D) out[static_cast<std::int64_t>(blockIdx.x) * D + threadIdx.x] = o / sum;
}

inline std::vector<double> reference_gpu(const Problem& p, const std::vector<std::int64_t>& rows) {
  const kl::DeviceBuffer<std::int64_t> drows(rows);
  kl::DeviceBuffer<float> out(rows.size() * p.dim);
  reference_rows_kernel<<<static_cast<unsigned>(rows.size()), 128>>>(p, drows.data(), out.data());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> f = out.download();
  return std::vector<double>(f.begin(), f.end());
}

// The rows a large shape is checked on: about `count` rows spread over all heads and positions
// (a stride coprime with S, so the positions within a head cycle through all of them), plus the
// first and the last row.
inline std::vector<std::int64_t> sample_rows(const Problem& p, std::int64_t count = 4096) {
  const std::int64_t total = p.rows();
  std::vector<std::int64_t> rows;
  if (total <= count) {
    for (std::int64_t r = 0; r < total; ++r) rows.push_back(r);
    return rows;
  }
  std::int64_t stride = total / count;
  while (std::gcd(stride, static_cast<std::int64_t>(p.seq)) != 1) ++stride;
  for (std::int64_t r = 0; r < total; r += stride) rows.push_back(r);
  if (rows.back() != total - 1) rows.push_back(total - 1);
  return rows;
}

// A result o is right when |o - ref| <= kRel * (|ref| + kFloor): f16 output and f16 probabilities
// round at 2^-11, and the outputs are averages of values of size ~1, so an absolute floor of 0.1 *
// kRel = 1e-3 covers outputs near zero. Returns the largest |o - ref| / (|ref| + kFloor); NaN is inf.
constexpr double kRel = 1e-2, kFloor = 0.1;

inline double max_error(const std::vector<__half>& o, const std::vector<double>& ref,
                        const std::vector<std::int64_t>& rows, int dim) {
  double worst = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (int c = 0; c < dim; ++c) {
      const double got = __half2float(o[rows[r] * dim + c]), want = ref[r * dim + c];
      const double e = std::fabs(got - want) / (std::fabs(want) + kFloor);
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
  }
  return worst;
}

// ---- tensor-core helpers (mma.sync PTX, steps 4 and 6) ----------------------------------------------

// Fragment layouts of mma.sync.m16n8k16 (f16 inputs, f32 accumulator), with g = lane / 4 and
// t = lane % 4 (PTX ISA, "Matrix Fragments for mma.m16n8k16"):
//   A (16×16, row-major) a[0..3]: rows g, g+8, g, g+8 at columns 2t..2t+1, 2t..2t+1, 2t+8.., 2t+8..
//   B (16×8, "col")     b[0..1]: column g, rows 2t..2t+1 and 2t+8..2t+9
//   C (16×8, f32)       c[0..3]: row g cols 2t, 2t+1; row g+8 cols 2t, 2t+1
// Each a[i] / b[i] register holds two halves. The C of two neighbouring n-tiles is exactly the A
// layout of the next product: P = softmax(S) feeds O += P·V without leaving the registers.
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 f16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8
// and receives, of each matrix, row l / 4, columns 2(l % 4)..+1 (.trans: column l / 4, rows 2(l % 4)..+1).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

__device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

// 2^x in one MUFU instruction (x = -inf gives 0).
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global -> shared without passing through registers; `valid` false writes zeros (tails).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const auto a = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

constexpr float kLog2e = 1.4426950408889634f;

// ---- Part A, step 1: the reference design ------------------------------------------------------------

namespace wmma = nvcuda::wmma;
constexpr int kT = 16;  // the tile: 16 queries, 16 keys, 16 dims

// S = QKᵀ and O = PV by WMMA (K read as a column-major B: its rows are Kᵀ's columns); the scores,
// the probabilities and the output pass through shared memory between the steps.
__device__ __forceinline__ void tile_scores(const __half* q, const __half* k, float* s) {
  wmma::fragment<wmma::matrix_a, kT, kT, kT, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, kT, kT, kT, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, kT, kT, kT, float> c;
  wmma::fill_fragment(c, 0.f);
  wmma::load_matrix_sync(a, q, kT);
  wmma::load_matrix_sync(b, k, kT);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(s, c, kT, wmma::mem_row_major);
}

// O = P·V, through a float tile in shared memory (WMMA stores accumulators only there), to f16.
__device__ __forceinline__ void tile_output(const __half* p, const __half* v, float* scratch, __half* o) {
  wmma::fragment<wmma::matrix_a, kT, kT, kT, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, kT, kT, kT, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, kT, kT, kT, float> c;
  wmma::fill_fragment(c, 0.f);
  wmma::load_matrix_sync(a, p, kT);
  wmma::load_matrix_sync(b, v, kT);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(scratch, c, kT, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < kT * kT; i += 32) o[i] = __float2half_rn(scratch[i]);
}

// The softmax micro-kernel of the reference: lane c < 16 owns column c, lanes 16-31 idle, the 16
// rows one after another, each with a 5-step shuffle max and a 5-step shuffle sum over the warp.
__device__ __forceinline__ void softmax_rows_half_warp(const float* s, __half* p, float scale) {
  const int lane = threadIdx.x % 32;
  for (int row = 0; row < kT; ++row) {
    const float x = lane < kT ? s[row * kT + lane] * scale : -INFINITY;
    float m = x;
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float e = lane < kT ? __expf(x - m) : 0.f;
    float sum = e;
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane < kT) p[row * kT + lane] = __float2half_rn(e / sum);
  }
}

__global__ void tile_reference(Problem pr) {
  __shared__ float s[kT * kT];
  __shared__ __half p[kT * kT];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * kT * kT;
  tile_scores(pr.q + off, pr.k + off, s);
  __syncwarp();
  softmax_rows_half_warp(s, p, pr.scale);
  __syncwarp();
  tile_output(p, pr.v + off, s, pr.o + off);
}

// ---- Part A, step 2: all 32 lanes busy -------------------------------------------------------------

// Lanes 16-31 take the odd row of each pair: 8 passes instead of 16, and the reductions stay inside
// each half-warp (4 shuffle steps instead of 5).
__device__ __forceinline__ void softmax_two_rows(const float* s, __half* p, float scale) {
  const int lane = threadIdx.x % 32, col = lane % kT;
  for (int pass = 0; pass < kT / 2; ++pass) {
    const int row = 2 * pass + lane / kT;
    const float x = s[row * kT + col] * scale;
    float m = x;
    for (int o = 8; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float e = __expf(x - m);
    float sum = e;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    p[row * kT + col] = __float2half_rn(e / sum);
  }
}

__global__ void tile_all_lanes(Problem pr) {
  __shared__ float s[kT * kT];
  __shared__ __half p[kT * kT];
  const std::int64_t off = static_cast<std::int64_t>(blockIdx.x) * kT * kT;
  tile_scores(pr.q + off, pr.k + off, s);
  __syncwarp();
  softmax_two_rows(s, p, pr.scale);
  __syncwarp();
  tile_output(p, pr.v + off, s, pr.o + off);
}

// ---- Part A, step 3: several tiles per block --------------------------------------------------------

constexpr int kTileWarps = 8;

// One tile per warp, 8 warps per block: a one-warp block leaves most of an SM's warp slots empty
// (at most 32 blocks per SM), so latency was hidden by 32 warps at best; now by up to 64.
__global__ void tile_multi_warp(Problem pr) {
  __shared__ float s[kTileWarps][kT * kT];
  __shared__ __half p[kTileWarps][kT * kT];
  const int w = threadIdx.x / 32;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kTileWarps + w;
  if (tile >= pr.batch) return;  // whole warps leave; no block-wide barrier follows
  const std::int64_t off = tile * kT * kT;
  tile_scores(pr.q + off, pr.k + off, s[w]);
  __syncwarp();
  softmax_two_rows(s[w], p[w], pr.scale);
  __syncwarp();
  tile_output(p[w], pr.v + off, s[w], pr.o + off);
}

// ---- Part A, step 4: softmax on the accumulator in registers ------------------------------------------

// Each tensor arrives with one 16-byte load per lane into shared memory, then ldmatrix. S = QKᵀ is
// two m16n8k16 products whose C fragments hold, per lane, 4 scores of row g and 4 of row g+8: the
// row max and sum take 2 shuffles inside the lane's quad, and P goes to the second product as its A
// operand straight from the registers. No float tile in shared memory, no WMMA store/load.
__global__ void tile_registers(Problem pr) {
  __shared__ __align__(16) __half sm[kTileWarps][3][kT * kT];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t tile = static_cast<std::int64_t>(blockIdx.x) * kTileWarps + w;
  if (tile >= pr.batch) return;
  const std::int64_t off = tile * kT * kT;
  __half(*x)[kT * kT] = sm[w];
  reinterpret_cast<uint4*>(x[0])[lane] = reinterpret_cast<const uint4*>(pr.q + off)[lane];
  reinterpret_cast<uint4*>(x[1])[lane] = reinterpret_cast<const uint4*>(pr.k + off)[lane];
  reinterpret_cast<uint4*>(x[2])[lane] = reinterpret_cast<const uint4*>(pr.v + off)[lane];
  __syncwarp();
  // lane l points at row l % 8 of 8×8 matrix l / 8; the matrices in the order the fragments want
  const int mi = lane / 8, r8 = lane % 8;
  std::uint32_t qa[4], kb[4], vb[4];
  ldmatrix_x4(qa, &x[0][((mi % 2) * 8 + r8) * kT + (mi / 2) * 8]);        // A: (rows, cols) 0/0, 8/0, 0/8, 8/8
  ldmatrix_x4(kb, &x[1][((mi / 2) * 8 + r8) * kT + (mi % 2) * 8]);        // B for keys 0-7, then keys 8-15
  ldmatrix_x4_trans(vb, &x[2][((mi % 2) * 8 + r8) * kT + (mi / 2) * 8]);  // B for dims 0-7, then dims 8-15
  float s[2][4] = {};
  mma_16816(s[0], qa, kb[0], kb[1]);
  mma_16816(s[1], qa, kb[2], kb[3]);
  // rows g (elements 0, 1) and g + 8 (elements 2, 3): max and sum over the 4 lanes of the quad
  const float c = pr.scale * kLog2e;
  float m[2], l[2];
  for (int h = 0; h < 2; ++h) {
    m[h] = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 1));
    m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 2));
    l[h] = 0;
    for (int n = 0; n < 2; ++n)
      for (int e = 2 * h; e < 2 * h + 2; ++e) l[h] += s[n][e] = exp2_fast((s[n][e] - m[h]) * c);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  const std::uint32_t pa[4] = {pack_half2(s[0][0], s[0][1]), pack_half2(s[0][2], s[0][3]),
                               pack_half2(s[1][0], s[1][1]), pack_half2(s[1][2], s[1][3])};
  float o[2][4] = {};
  mma_16816(o[0], pa, vb[0], vb[1]);
  mma_16816(o[1], pa, vb[2], vb[3]);
  auto* out = reinterpret_cast<std::uint32_t*>(pr.o + off);
  for (int n = 0; n < 2; ++n) {
    out[g * 8 + n * 4 + t] = pack_half2(o[n][0] / l[0], o[n][1] / l[0]);
    out[(g + 8) * 8 + n * 4 + t] = pack_half2(o[n][2] / l[1], o[n][3] / l[1]);
  }
}

// ---- Part B, step 5: flash-attention forward with WMMA -----------------------------------------------

constexpr int kBr = 64, kBc = 64, kFlashWarps = 4;  // a block: 64 queries, 4 warps of 16 rows

// The head and first query row of this block. Neighbouring blocks take the query tiles of one head,
// so the blocks on the GPU at a time share a few heads' K and V in L2 (head-minor order made every
// block read another head: 90% DRAM throughput in ncu). Within a head the last query tiles (the
// most keys when causal) start first.
__device__ __forceinline__ void flash_block(const Problem& p, int br, std::int64_t& head, int& q0) {
  const int nq = (p.seq + br - 1) / br;
  head = blockIdx.x / nq;
  q0 = (nq - 1 - static_cast<int>(blockIdx.x % nq)) * br;
}

// The key tiles a query tile [q0, q0 + br) needs: all of them, or up to the diagonal when causal.
__device__ __forceinline__ int key_tiles(const Problem& p, int q0, int br) {
  const int nk = (p.seq + kBc - 1) / kBc;
  return p.causal ? min(nk, (q0 + br + kBc - 1) / kBc) : nk;
}

// Rows [r0, r0 + n) of a [seq, D] head into shared memory (row stride D), zeros past seq: the tails
// are masked, never padded by a copy in global memory.
template <int D>
__device__ __forceinline__ void load_rows(__half* dst, const __half* src, int r0, int n, int seq) {
  for (int i = threadIdx.x; i < n * D / 8; i += blockDim.x) {
    const int r = i / (D / 8), c = i % (D / 8);
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < seq) val = reinterpret_cast<const uint4*>(src + static_cast<std::int64_t>(r0 + r) * D)[c];
    reinterpret_cast<uint4*>(dst + r * D)[c] = val;
  }
}

// Scale the running output by alpha = e^(m_old - m_new) when the row max moves (then add P·V): the
// online softmax of lesson 04 applied to a whole output row instead of a sum. Lane pairs own a row,
// each lane half of its D columns.
template <int D>
__device__ __forceinline__ void rescale_output(float (&o)[D / 2], float alpha) {
#pragma unroll
  for (int j = 0; j < D / 2; ++j) o[j] *= alpha;
}

// The online softmax of lesson 04 over key tiles: per 64 keys, S = Q·Kᵀ by WMMA into shared memory,
// two lanes per row update (max, sum) and write P in f16, O = O·alpha + P·V with the WMMA product
// stored to shared memory and added to the lanes' registers. S never reaches global memory.
template <int D>
__global__ void __launch_bounds__(kFlashWarps * 32) flash_wmma(Problem p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kW = D > kBc ? D : kBc;  // the float scratch holds S (16×64) or P·V (16×D)
  __half* qs = reinterpret_cast<__half*>(smem);
  __half* ks = qs + kBr * D;
  __half* vs = ks + kBc * D;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* scratch = reinterpret_cast<float*>(vs + kBc * D) + w * 16 * kW;
  __half* ps = reinterpret_cast<__half*>(reinterpret_cast<float*>(vs + kBc * D) + kFlashWarps * 16 * kW) + w * 16 * kBc;

  std::int64_t head;
  int q0;
  flash_block(p, kBr, head, q0);
  const std::int64_t base = head * p.seq * D;
  load_rows<D>(qs, p.q + base, q0, kBr, p.seq);

  const int r = lane / 2, half = lane % 2, qi = q0 + w * 16 + r;
  const float c = p.scale * kLog2e;
  float m = -INFINITY, l = 0, o[D / 2] = {};
  const int nk = key_tiles(p, q0, kBr);
  for (int kt = 0; kt < nk; ++kt) {
    const int k0 = kt * kBc;
    __syncthreads();  // the previous tile is no longer read
    load_rows<D>(ks, p.k + base, k0, kBc, p.seq);
    load_rows<D>(vs, p.v + base, k0, kBc, p.seq);
    __syncthreads();
    for (int n = 0; n < kBc / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
        wmma::load_matrix_sync(a, qs + w * 16 * D + kk * 16, D);
        wmma::load_matrix_sync(b, ks + n * 16 * D + kk * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(scratch + n * 16, acc, kW, wmma::mem_row_major);
    }
    __syncwarp();
    // lane pair (2r, 2r+1): row r, keys half*32 .. +32 of the tile
    float sv[kBc / 2], mt = -INFINITY;
    for (int j = 0; j < kBc / 2; ++j) {
      const int key = k0 + half * (kBc / 2) + j;
      const bool masked = key >= p.seq || (p.causal && key > qi);
      sv[j] = masked ? -INFINITY : scratch[r * kW + half * (kBc / 2) + j];
      mt = fmaxf(mt, sv[j]);
    }
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
    const float mn = fmaxf(m, mt), mc = mn == -INFINITY ? 0.f : mn * c;  // a row with no key yet stays 0
    const float alpha = exp2_fast(m * c - mc);
    float sum = 0;
    for (int j = 0; j < kBc / 2; ++j) {
      const float e = exp2_fast(sv[j] * c - mc);
      sum += e;
      ps[r * kBc + half * (kBc / 2) + j] = __float2half_rn(e);
    }
    l = l * alpha + sum;
    m = mn;
    rescale_output<D>(o, alpha);
    __syncwarp();
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
      for (int kk = 0; kk < kBc / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
        wmma::load_matrix_sync(a, ps + kk * 16, kBc);
        wmma::load_matrix_sync(b, vs + kk * 16 * D + n * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(scratch + n * 16, acc, kW, wmma::mem_row_major);
    }
    __syncwarp();
    for (int j = 0; j < D / 2; ++j) o[j] += scratch[r * kW + half * (D / 2) + j];
    __syncwarp();  // the scratch is rewritten by the next tile's scores
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  if (qi < p.seq) {
    __half* out = p.o + base + static_cast<std::int64_t>(qi) * D + half * (D / 2);
    for (int j = 0; j < D / 2; j += 2) *reinterpret_cast<__half2*>(out + j) = __floats2half2_rn(o[j] / l, o[j + 1] / l);
  }
}

template <int D>
constexpr std::size_t flash_wmma_smem() {
  constexpr int kW = D > kBc ? D : kBc;
  return (kBr + 2 * kBc) * D * 2 + kFlashWarps * 16 * (kW * 4 + kBc * 2);
}

// ---- Part B, step 6: tuned (mma.sync, registers, cp.async double buffering) -----------------------------

// Shared tiles are [64 rows][D] f16 with the 16-byte chunk c of row r stored at chunk c ^ (r % 8):
// the 8 rows an ldmatrix reads at one column then fall in 8 different bank groups (no conflicts).
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * D + ((chunk ^ (row % 8)) * 8);
}

// K and V tile [k0, k0 + 64) of one head into a stage: 16-byte cp.async per chunk, zero-filled past S.
template <int D>
__device__ __forceinline__ void load_kv_async(__half* ks, __half* vs, const __half* k, const __half* v, int k0, int seq) {
  for (int i = threadIdx.x; i < kBc * D / 8; i += blockDim.x) {
    const int r = i / (D / 8), ch = i % (D / 8);
    const bool ok = k0 + r < seq;
    const std::int64_t g = ok ? static_cast<std::int64_t>(k0 + r) * D + ch * 8 : 0;
    cp_async16(ks + swz<D>(r, ch), k + g, ok);
    cp_async16(vs + swz<D>(r, ch), v + g, ok);
  }
}

// The FA2 recipe on mma.sync: Q fragments stay in registers for the whole key loop; S = Q·Kᵀ lands in
// C fragments whose rows are known (g and g+8), so the row max and sum take two quad shuffles; P is
// packed to f16 A fragments in place and multiplies V at once; the next K/V tile streams in by
// cp.async while this one is used; ldmatrix reads swizzled (conflict-free) tiles; 2 barriers per tile;
// a warp whose rows are all above a causal key tile skips it.
// Step 6's block: 8 warps of 16 query rows. Each K/V tile brought to shared memory serves 128 queries
// (step 5: 64), and 2 blocks per SM at D = 64 (one at D = 128) keep 16 (8) warps resident.
constexpr int kMmaWarps = 8, kMmaBr = 16 * kMmaWarps;

template <int D, bool kCausal>
__global__ void __launch_bounds__(kMmaWarps * 32, D == 64 ? 2 : 1) flash_mma(Problem p) {
  extern __shared__ __align__(128) unsigned char smem[];
  __half* kst = reinterpret_cast<__half*>(smem);  // [2 stages][kBc * D] for K, then the same for V
  __half* vst = kst + 2 * kBc * D;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  std::int64_t head;
  int q0;
  flash_block(p, kMmaBr, head, q0);
  const std::int64_t base = head * p.seq * D;
  const __half *k = p.k + base, *v = p.v + base;
  const int nk = key_tiles(p, q0, kMmaBr);
  load_kv_async<D>(kst, vst, k, v, 0, p.seq);
  cp_async_commit();

  // Q's A fragments, straight from global memory (once per block): rows g and g+8 of the warp's 16
  const int row0 = q0 + w * 16 + g;
  std::uint32_t qa[D / 16][4];
  for (int kk = 0; kk < D / 16; ++kk) {
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + (i % 2) * 8, col = kk * 16 + (i / 2) * 8 + 2 * t;
      qa[kk][i] = row < p.seq ? *reinterpret_cast<const std::uint32_t*>(p.q + base + static_cast<std::int64_t>(row) * D + col) : 0u;
    }
  }

  const float c = p.scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
  float o[D / 8][4] = {};
  const int mi = lane / 8, r8 = lane % 8;
  for (int kt = 0; kt < nk; ++kt) {
    const int k0 = kt * kBc, stage = kt % 2;
    if (kt + 1 < nk) {
      load_kv_async<D>(kst + (1 - stage) * kBc * D, vst + (1 - stage) * kBc * D, k, v, k0 + kBc, p.seq);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this stage's tile has landed for every thread
    const __half* ks = kst + stage * kBc * D;
    const __half* vs = vst + stage * kBc * D;
    if (!kCausal || k0 <= row0 - g + 15) {  // else the warp's 16 rows see none of these keys
      // S (16 × 64) = Q·Kᵀ: n-tile nt holds keys nt*8 .. +7; one ldmatrix.x4 gives two k-steps of it
      float s[kBc / 8][4] = {};
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {
          std::uint32_t b[4];
          ldmatrix_x4(b, ks + swz<D>(nt * 8 + r8, kk * 2 + mi));
          mma_16816(s[nt], qa[kk], b[0], b[1]);
          mma_16816(s[nt], qa[kk + 1], b[2], b[3]);
        }
      }
      // mask only the tiles that need it: the sequence's tail and, when causal, the diagonal
      if (k0 + kBc > p.seq || (kCausal && k0 + kBc - 1 > row0 - g)) {
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = k0 + nt * 8 + 2 * t + e % 2, row = row0 + (e / 2) * 8;
            if (key >= p.seq || (kCausal && key > row)) s[nt][e] = -INFINITY;
          }
      }
      // online softmax for rows g (h = 0) and g + 8 (h = 1); l keeps this lane's partial sum
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mt = m[h];
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) mt = fmaxf(mt, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float mc = mt == -INFINITY ? 0.f : mt * c;
        const float alpha = exp2_fast(m[h] * c - mc);
        m[h] = mt;
        float sum = 0;
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) sum += s[nt][e] = exp2_fast(fmaf(s[nt][e], c, -mc));
        l[h] = l[h] * alpha + sum;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[n][2 * h] *= alpha;
          o[n][2 * h + 1] *= alpha;
        }
      }
      // O += P·V: k-step ks = keys 16ks .. +15 = S's n-tiles 2ks and 2ks+1, already in A layout
#pragma unroll
      for (int ks16 = 0; ks16 < kBc / 16; ++ks16) {
        const std::uint32_t pa[4] = {pack_half2(s[2 * ks16][0], s[2 * ks16][1]), pack_half2(s[2 * ks16][2], s[2 * ks16][3]),
                                     pack_half2(s[2 * ks16 + 1][0], s[2 * ks16 + 1][1]),
                                     pack_half2(s[2 * ks16 + 1][2], s[2 * ks16 + 1][3])};
#pragma unroll
        for (int n = 0; n < D / 8; n += 2) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, vs + swz<D>(ks16 * 16 + (mi % 2) * 8 + r8, n + mi / 2));
          mma_16816(o[n], pa, b[0], b[1]);
          mma_16816(o[n + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before the next cp.async overwrites it
  }
  // the lanes of a quad hold partial sums of the same rows
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + h * 8;
    if (row >= p.seq) continue;
    auto* out = reinterpret_cast<std::uint32_t*>(p.o + base + static_cast<std::int64_t>(row) * D);
    for (int n = 0; n < D / 8; ++n) out[n * 4 + t] = pack_half2(o[n][2 * h] / l[h], o[n][2 * h + 1] / l[h]);
  }
}

template <int D>
constexpr std::size_t flash_mma_smem() {
  return 2 * 2 * kBc * D * 2;  // K and V, two stages
}

// ---- launchers ----------------------------------------------------------------------------------------

// Scratch the library baseline keeps between runs (handle, S and P, cuDNN's workspace for lesson 04's
// softmax), so that a repeated run allocates nothing and can be captured in a CUDA graph.
struct Workspace {
  cublasHandle_t cublas = nullptr;
  kl::DeviceBuffer<unsigned char> cublas_ws;
  kl::DeviceBuffer<__half> s, prob;
  lesson04::Workspace softmax_ws;
  Workspace() = default;
  ~Workspace() {
    if (cublas) cublasDestroy(cublas);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

inline void launch_tile_reference(const Problem& p, Workspace&, cudaStream_t s) {
  tile_reference<<<static_cast<unsigned>(p.batch), 32, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline void launch_tile_all_lanes(const Problem& p, Workspace&, cudaStream_t s) {
  tile_all_lanes<<<static_cast<unsigned>(p.batch), 32, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline unsigned tile_blocks(const Problem& p) { return static_cast<unsigned>((p.batch + kTileWarps - 1) / kTileWarps); }

inline void launch_tile_multi_warp(const Problem& p, Workspace&, cudaStream_t s) {
  tile_multi_warp<<<tile_blocks(p), 32 * kTileWarps, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline void launch_tile_registers(const Problem& p, Workspace&, cudaStream_t s) {
  tile_registers<<<tile_blocks(p), 32 * kTileWarps, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline unsigned flash_blocks(const Problem& p, int br) {
  const std::int64_t n = (p.seq + br - 1) / br * p.heads_total();
  if (n > 0x7fffffff) throw NotSupported("more than 2^31 - 1 query tiles");
  return static_cast<unsigned>(n);
}

// The flash kernels ask for more than the default 48 KiB of shared memory: allowed once per kernel
// (on its first launch, the untimed check run, so never inside a CUDA-graph capture).
template <auto Kernel>
void launch_with_smem(std::size_t smem, int warps, const Problem& p, cudaStream_t s) {
  static const bool allowed = [smem] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)allowed;
  Kernel<<<flash_blocks(p, 16 * warps), warps * 32, smem, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline void launch_flash_wmma(const Problem& p, Workspace&, cudaStream_t s) {
  if (p.dim == 64) launch_with_smem<flash_wmma<64>>(flash_wmma_smem<64>(), kFlashWarps, p, s);
  else launch_with_smem<flash_wmma<128>>(flash_wmma_smem<128>(), kFlashWarps, p, s);
}

inline void launch_flash_mma(const Problem& p, Workspace&, cudaStream_t s) {
  if (p.dim == 64 && p.causal) launch_with_smem<flash_mma<64, true>>(flash_mma_smem<64>(), kMmaWarps, p, s);
  else if (p.dim == 64) launch_with_smem<flash_mma<64, false>>(flash_mma_smem<64>(), kMmaWarps, p, s);
  else if (p.causal) launch_with_smem<flash_mma<128, true>>(flash_mma_smem<128>(), kMmaWarps, p, s);
  else launch_with_smem<flash_mma<128, false>>(flash_mma_smem<128>(), kMmaWarps, p, s);
}

// ---- the library baseline: cuBLAS batched GEMM, lesson 04's softmax, cuBLAS batched GEMM ---------------

// The materialised S and P (f16, B·H·S² each) may take at most this much device memory.
constexpr double kLibraryBudgetBytes = 16.0 * (1 << 30);

inline double library_bytes(const Problem& p) {
  return 2.0 * 2.0 * static_cast<double>(p.heads_total()) * p.seq * static_cast<double>(p.seq);
}

// Causal: S[i][j] = -inf above the diagonal, before the softmax (one block row per query row).
__global__ void mask_upper(__half* s, int seq) {
  const std::int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % seq);
  for (int j = i + 1 + threadIdx.x; j < seq; j += blockDim.x) s[row * seq + j] = __float2half(-INFINITY);
}

inline void cublas_check(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(call) + " failed: cuBLAS status " + std::to_string(st));
}

// S = scale·Q·Kᵀ (f16, f32 accumulation), P = softmax(S) by lesson 04's dispatcher, O = P·V. cuBLAS
// is column-major: a row-major X is its transpose, so S (row-major) is computed as Sᵀ = K·Qᵀ.
inline void launch_library(const Problem& p, Workspace& ws, cudaStream_t s) {
  const double need = library_bytes(p);
  if (need > kLibraryBudgetBytes)
    throw NotSupported("the materialised S and P need " + std::to_string(static_cast<long long>(need / (1 << 30))) +
                       " GiB, over the 16 GiB budget");
  if (p.heads_total() > 0x7fffffff) throw NotSupported("more than 2^31 - 1 heads for one batched call");
  if (!ws.cublas) {
    cublas_check(cublasCreate(&ws.cublas), "cublasCreate");
    ws.cublas_ws.resize(std::size_t{32} << 20);
    cublas_check(cublasSetWorkspace(ws.cublas, ws.cublas_ws.data(), ws.cublas_ws.size()), "cublasSetWorkspace");
  }
  const auto n = static_cast<std::size_t>(p.heads_total()) * p.seq * p.seq;
  if (ws.s.size() < n) {
    kl::ensure_fits(2.0 * n * 2.0, "the library baseline's S and P");
    ws.s.resize(n);
    ws.prob.resize(n);
  }
  cublas_check(cublasSetStream(ws.cublas, s), "cublasSetStream");
  const int S = p.seq, D = p.dim, batch = static_cast<int>(p.heads_total());
  const float zero = 0.f, one = 1.f;
  cublas_check(cublasGemmStridedBatchedEx(ws.cublas, CUBLAS_OP_T, CUBLAS_OP_N, S, S, D, &p.scale, p.k, CUDA_R_16F, D,
                                          static_cast<long long>(S) * D, p.q, CUDA_R_16F, D, static_cast<long long>(S) * D,
                                          &zero, ws.s.data(), CUDA_R_16F, S, static_cast<long long>(S) * S, batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (S = Q K^T)");
  if (p.causal) {
    mask_upper<<<static_cast<unsigned>(p.rows()), 256, 0, s>>>(ws.s.data(), S);
    CUDA_CHECK_LAUNCH();
  }
  lesson04::softmax(ws.s.data(), ws.prob.data(), p.rows(), S, ws.softmax_ws, 1.f, s);
  cublas_check(cublasGemmStridedBatchedEx(ws.cublas, CUBLAS_OP_N, CUBLAS_OP_N, D, S, S, &one, p.v, CUDA_R_16F, D,
                                          static_cast<long long>(S) * D, ws.prob.data(), CUDA_R_16F, S,
                                          static_cast<long long>(S) * S, &zero, p.o, CUDA_R_16F, D,
                                          static_cast<long long>(S) * D, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (O = P V)");
}

// The tensor-core limit, measured: a cuBLAS f16 GEMM (f32 accumulation, as the steps use) of
// 8192³, median of 10 after 3 warm-ups, in TFLOP/s.
inline double measure_tensor_tflops() {
  const int n = 8192;
  kl::DeviceBuffer<__half> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
  CUDA_CHECK(cudaMemset(a.data(), 0, a.size() * 2));
  CUDA_CHECK(cudaMemset(b.data(), 0, b.size() * 2));
  cublasHandle_t h;
  cublas_check(cublasCreate(&h), "cublasCreate");
  const float one = 1.f, zero = 0.f;
  const double ms = kl::median_ms(3, 10, [&] {
    cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16F, n, b.data(), CUDA_R_16F,
                              n, &zero, c.data(), CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  cublasDestroy(h);
  return 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

// ---- the table of steps ---------------------------------------------------------------------------------

using Launcher = void (*)(const Problem& p, Workspace& ws, cudaStream_t s);

struct AttentionStep {
  const char* label;  // "1" ... "6", or "lib"
  const char* name;
  const char* idea;
  Part part;
  bool library;
  Launcher launch;
};

inline constexpr AttentionStep kSteps[] = {
    {"1", "tile_reference", "1 warp/block: WMMA QK^T -> smem, lanes 0-15 softmax a row at a time, WMMA PV", Part::tile,
     false, launch_tile_reference},
    {"2", "tile_all_lanes", "step 1 with lanes 16-31 on the odd rows: 8 passes, half-warp shuffles", Part::tile, false,
     launch_tile_all_lanes},
    {"3", "tile_multi_warp", "step 2 with 8 warps per block, one tile per warp", Part::tile, false,
     launch_tile_multi_warp},
    {"4", "tile_registers", "mma.sync: softmax on the accumulator fragment, P reused as the A operand", Part::tile,
     false, launch_tile_registers},
    {"lib", "cublas_softmax_cublas", "cuBLAS batched GEMM + lesson 04 softmax + cuBLAS batched GEMM", Part::tile, true,
     launch_library},
    {"5", "flash_wmma", "64-query blocks loop over 64-key tiles: WMMA + online (max, sum) + output rescale",
     Part::flash, false, launch_flash_wmma},
    {"6", "flash_mma", "128-query blocks, mma.sync, Q/S/P/O in registers, swizzled ldmatrix, cp.async x2", Part::flash, false,
     launch_flash_mma},
    {"lib", "cublas_materialised_S", "cuBLAS batched GEMM -> S in memory, lesson 04 softmax, batched GEMM", Part::flash,
     true, launch_library},
};

// Runs a step: validates the shape for its part first (no launch on bad input).
inline void run_step(const AttentionStep& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p, st.part);
  st.launch(p, ws, s);
}

// ---- shapes ---------------------------------------------------------------------------------------------

constexpr std::int64_t kDefaultTiles = 65536;

inline Problem tile_problem(std::int64_t tiles) {
  Problem p;
  p.batch = tiles;
  return p;
}

// The flash shapes keep B·S = 65536 tokens with H = 16 heads: S = 4096, D = 64 is B = 16 (the
// issue's PyTorch measurement).
inline Problem flash_problem(std::int64_t batch, int heads, int seq, int dim, bool causal) {
  Problem p;
  p.batch = batch;
  p.heads = heads;
  p.seq = seq;
  p.dim = dim;
  p.causal = causal;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  return p;
}

constexpr std::int64_t kSweepTokens = 65536;
constexpr int kDefaultHeads = 16, kDefaultSeq = 4096, kDefaultDim = 64;

// --sweep: the tile problem at B = 4096 and 65536; the flash steps at S = 128 ... 16384 (B = 65536 / S,
// H = 16) for D = 64 and 128, causal and not.
inline std::vector<std::pair<Part, Problem>> sweep_shapes() {
  std::vector<std::pair<Part, Problem>> shapes;
  for (std::int64_t b : {std::int64_t{4096}, kDefaultTiles}) shapes.emplace_back(Part::tile, tile_problem(b));
  for (int dim : {64, 128})
    for (bool causal : {false, true})
      for (int seq = 128; seq <= 16384; seq *= 2)
        shapes.emplace_back(Part::flash, flash_problem(kSweepTokens / seq, kDefaultHeads, seq, dim, causal));
  return shapes;
}

}  // namespace lesson07
