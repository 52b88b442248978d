// Lesson 07, the problem as the executable and the tests see it: the inputs, the float64 (CPU) and f32
// (GPU, sampled rows) references, the error measure and the shapes the executable runs. The problem as
// the kernels see it is problem.cuh.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/buffer.cuh"
#include "common/cli.hpp"
#include "common/device.cuh"
#include "common/ladder.hpp"
#include "common/parallel.hpp"
#include "common/random.hpp"
#include "lessons/07_wmma_attention/problem.cuh"

namespace lesson07 {

// ---- inputs -------------------------------------------------------------------------------------------

// Uniform values in [-a, a) straight into f16 on the GPU, from a hash of (seed, index): the flash
// shapes hold up to 2^27 elements per tensor, too many to draw on the CPU for every sweep point.
// (static, as the kernels of this file: lesson 09 includes it in two files of one executable.)
static __global__ void fill_uniform_kernel(__half* x, std::int64_t n, std::uint64_t seed, float a) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
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

inline std::vector<__half> to_halves(const std::vector<float>& x) {
  std::vector<__half> h(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) h[i] = __float2half_rn(x[i]);
  return h;
}

// Every value rounded to f16 and back: what the GPU reads, as the float64 reference must see it.
inline std::vector<float> f16_rounded(std::vector<float> x) {
  for (auto& e : x) e = __half2float(__float2half_rn(e));
  return x;
}

// n values uniform with unit variance ([-sqrt(3), sqrt(3))), drawn on the CPU, not yet rounded.
inline std::vector<float> unit_uniform(std::size_t n, std::uint64_t seed) {
  return kl::uniform_floats(n, -1.7320508, 1.7320508, seed);
}

// The tests' inputs (lessons 07 and 09 and their exercises): Q, K, V uniform with unit variance from the
// seeds seed, seed + 1 and seed + 2, already rounded to f16, so that the float64 reference sees exactly
// what the GPU reads.
struct HostQkv {
  std::vector<float> q, k, v;
};

inline HostQkv test_inputs(const Problem& p, std::uint64_t seed) {
  const auto n = static_cast<std::size_t>(p.elements());
  return {f16_rounded(unit_uniform(n, seed)), f16_rounded(unit_uniform(n, seed + 1)),
          f16_rounded(unit_uniform(n, seed + 2))};
}

// Q, K, V and O of one problem on the GPU (the executables' and the tests'); on(p) points p at them.
struct DeviceQkvo {
  kl::DeviceBuffer<__half> q, k, v, o;
  explicit DeviceQkvo(const Problem& p)  // O, and Q, K, V for fill
      : q(static_cast<std::size_t>(p.elements())), k(q.size()), v(q.size()), o(q.size()) {}
  explicit DeviceQkvo(const HostQkv& in) : q(to_halves(in.q)), k(to_halves(in.k)), v(to_halves(in.v)), o(q.size()) {}
  Problem on(Problem p) {
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.o = o.data();
    return p;
  }
  // Q, K, V uniform with unit variance, drawn on the GPU from the seeds kl::seed_for(salt), (salt + 1)
  // and (salt + 2).
  void fill(std::uint64_t salt) {
    const auto n = static_cast<std::int64_t>(q.size());
    lesson07::fill_uniform(q.data(), n, kl::seed_for(salt), 1.7320508f);
    lesson07::fill_uniform(k.data(), n, kl::seed_for(salt + 1), 1.7320508f);
    lesson07::fill_uniform(v.data(), n, kl::seed_for(salt + 2), 1.7320508f);
  }
};

// The inputs of a run, seeded by the shape.
inline void fill_inputs(const Problem& p, DeviceQkvo& d) {
  const std::uint64_t salt = static_cast<std::uint64_t>(p.batch) * 7919 + static_cast<std::uint64_t>(p.seq) * 131 +
                             static_cast<std::uint64_t>(p.dim) + p.causal;  // 64-bit: S * 131 may pass INT_MAX
  d.fill(salt);
}

// ---- references -------------------------------------------------------------------------------------

// float64 attention of the query rows listed in `rows` (global row indices b·H·S + h·S + i, or all
// rows when empty), from inputs already rounded to f16. Returns rows.size() x dim values.
inline std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const Problem& p,
                                     std::vector<std::int64_t> rows = {}) {
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
static __global__ void reference_rows_kernel(Problem p, const std::int64_t* rows, float* out) {
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

// Every row of a problem, in order: the rows the tests check, and the executable for the tile part.
inline std::vector<std::int64_t> all_rows(const Problem& p) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(p.rows()));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  return rows;
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
// kRel = 1e-3 covers outputs near zero.
constexpr double kRel = 1e-2, kFloor = 0.1;

// The largest |o - ref| / (|ref| + kFloor) over one row of dim values: row `row` of o against row `r`
// of ref. NaN is inf.
inline double row_error(const std::vector<__half>& o, std::int64_t row, const std::vector<double>& ref, std::size_t r,
                        int dim) {
  double worst = 0;
  for (int c = 0; c < dim; ++c) {
    const double got = __half2float(o[row * dim + c]), want = ref[r * dim + c];
    const double e = std::fabs(got - want) / (std::fabs(want) + kFloor);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// The largest row_error over the listed rows of o (ref holds their references, in the same order).
inline double max_error(const std::vector<__half>& o, const std::vector<double>& ref,
                        const std::vector<std::int64_t>& rows, int dim) {
  double worst = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) worst = std::max(worst, row_error(o, rows[r], ref, r, dim));
  return worst;
}

// ---- shapes ---------------------------------------------------------------------------------------------

// One shape the executable runs: the part and its problem.
using Shape = std::pair<Part, Problem>;

constexpr std::int64_t kDefaultTiles = 65536;

inline Problem tile_problem(std::int64_t tiles) {
  Problem p;
  p.batch = tiles;
  return p;
}

// The flash shapes keep B·S = 65536 tokens with H = 16 heads: S = 4096, D = 64 is B = 16.
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
inline std::vector<Shape> sweep_shapes() {
  std::vector<Shape> shapes;
  for (std::int64_t b : {std::int64_t{4096}, kDefaultTiles}) shapes.emplace_back(Part::tile, tile_problem(b));
  for (int dim : {64, 128})
    for (bool causal : {false, true})
      for (int seq = 128; seq <= 16384; seq *= 2)
        shapes.emplace_back(Part::flash, flash_problem(kSweepTokens / seq, kDefaultHeads, seq, dim, causal));
  return shapes;
}

// The shape column of the CSV: "B=65536" (tile), "BxHxSxD=16x16x4096x64" (flash, ";causal" when so).
inline std::string shape_text(const Shape& sh) {
  const Problem& p = sh.second;
  if (sh.first == Part::tile) return "B=" + std::to_string(p.batch);
  return "BxHxSxD=" + std::to_string(p.batch) + "x" + std::to_string(p.heads) + "x" + std::to_string(p.seq) + "x" +
         std::to_string(p.dim) + (p.causal ? ";causal" : "");
}

// ---- the shapes of a run, from the command line --------------------------------------------------------

// --heads, --seq and --dim are ints in Problem: larger values are refused, not clamped.
constexpr std::int64_t kMaxSide = std::int64_t{1} << 30;

inline int side_option(const kl::Args& a, const std::string& name, int fallback) {
  const auto v = a.size(name);
  if (!v) return fallback;
  if (*v > kMaxSide)
    throw kl::UsageError("--" + name + ": " + std::to_string(*v) + " is too large (at most " +
                         std::to_string(kMaxSide) + ")");
  return static_cast<int>(*v);
}

// --part: tile, flash, or both (the default, each part at its default shape).
inline std::string part_option(const kl::Args& a) {
  const std::string part = a.text("part").value_or("both");
  if (part != "tile" && part != "flash" && part != "both")
    throw kl::UsageError("--part must be one of tile, flash, both (got '" + kl::escaped(part) + "')");
  return part;
}

// The largest --scale a shape can take: the kernels compute scale * log2(e) * score in float, then
// differences of two such values, so that must stay below FLT_MAX / 2 with room to spare (a factor
// 4 here). The lesson's inputs are uniform in [-sqrt(3), sqrt(3)], so |score| <= 3 * D.
inline double max_scale(const Problem& p) {
  return std::numeric_limits<float>::max() / (4.0 * 1.4426950408889634 * 3.0 * p.dim);
}

// The shapes of this run (the sweep's, or one per part asked for), validated before any GPU work.
inline std::vector<Shape> shapes(const kl::Args& a) {
  const std::string part = part_option(a);
  Problem tile = tile_problem(a.size("batch").value_or(kDefaultTiles));
  Problem flash =
      flash_problem(a.size("batch").value_or(kSweepTokens / kDefaultSeq), side_option(a, "heads", kDefaultHeads),
                    side_option(a, "seq", kDefaultSeq), side_option(a, "dim", kDefaultDim), a.flag("causal"));
  const auto scale = a.text("scale");
  if (scale) {
    char* end = nullptr;
    const double x = std::strtod(scale->c_str(), &end);
    if (end == scale->c_str() || *end != '\0' || !(x > 0) || !std::isfinite(static_cast<float>(x)))
      throw kl::UsageError("--scale must be a positive number (got '" + kl::escaped(*scale) + "')");
    tile.scale = flash.scale = static_cast<float>(x);
  }
  const bool flash_options = a.given("heads") || a.given("seq") || a.given("dim") || a.flag("causal");
  if (part == "tile" && flash_options)
    throw kl::UsageError("--heads, --seq, --dim and --causal belong to --part flash");
  if (part == "both" && (a.given("batch") || flash_options))
    throw kl::UsageError(
        "shape options need --part tile or --part flash (the default runs both parts at their defaults)");
  if (a.sweep && part != "both") throw kl::UsageError("--sweep picks its own shapes: drop --part");
  std::vector<Shape> out;
  if (a.sweep) {
    out = sweep_shapes();
    if (scale)
      for (auto& sh : out) sh.second.scale = tile.scale;
  } else {
    if (part != "flash") out.emplace_back(Part::tile, tile);
    if (part != "tile") out.emplace_back(Part::flash, flash);
  }
  for (const auto& [pt, p] : out) {
    validate(p, pt);
    if (p.scale > max_scale(p)) {
      char bound[64];
      std::snprintf(bound, sizeof bound, "%.3g (got %.3g)", max_scale(p), static_cast<double>(p.scale));
      throw kl::UsageError("--scale is too large for D = " + std::to_string(p.dim) +
                           ": scale * log2(e) * max|score| must stay finite: at most " + bound);
    }
  }
  return out;
}

}  // namespace lesson07
