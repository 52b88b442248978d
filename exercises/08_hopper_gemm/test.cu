// Grades exercises 08.1 and 08.2, built twice (exercise08_test: the files of exercises/08_hopper_gemm or
// a student's copy; solution08_test: the solutions and the wrong techniques, which must fail). Both
// binaries are compiled for sm_90a alone, like the lesson's Hopper steps; on another GPU the GPU parts
// are not graded. The GPU parts run one given kernel, step 2's (one warpgroup, 128 x 128 tiles, TMA
// into one 128-byte-swizzled stage, wgmma m64n128k16 from shared memory), templated on the two graded
// functions, so that the lesson's measured kernels stay as they are. 08.1: the descriptor's bit
// fields against known encodings on the CPU, then that kernel with the graded descriptors against
// float64. 08.2: that kernel with the graded epilogue, for every α, β, bias and activation, against
// float64. Neither exercise can stall a pipeline (the barriers are the given kernel's), so no wait
// needs a bound here.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/grade.cuh"
#include "common/random.hpp"
#include "common/tma.cuh"
#include "common/wgmma.cuh"
#include "lessons/08_hopper_gemm/hopper.cuh"
#include "lessons/08_hopper_gemm/hopper_parts.cuh"
#include "lessons/08_hopper_gemm/host.cuh"
#include "lessons/08_hopper_gemm/parts.cuh"

// Each set of exercise files in a namespace of its own: the files graded, the solution, the wrong
// techniques. (Everything those files include is included above, outside the namespaces.)
namespace graded {
#include <fused_epilogue.cuh>
#include <smem_desc.cuh>
}  // namespace graded
#ifdef KL_SOLUTION_BUILD
namespace solution = graded;
#else
namespace solution {
#include "solutions/08_hopper_gemm/fused_epilogue.cuh"
#include "solutions/08_hopper_gemm/smem_desc.cuh"
}  // namespace solution
#endif
namespace no_swizzle_mode {
#include "solutions/08_hopper_gemm/wrong/no_swizzle_mode.cuh"
}
namespace offsets_swapped {
#include "solutions/08_hopper_gemm/wrong/offsets_swapped.cuh"
}
namespace bias_scaled_by_alpha {
#include "solutions/08_hopper_gemm/wrong/bias_scaled_by_alpha.cuh"
}
namespace activation_before_c {
#include "solutions/08_hopper_gemm/wrong/activation_before_c.cuh"
}

namespace {

using lesson08::Act;
using lesson08::Problem;
using T = __nv_bfloat16;

// ---- the two graded functions as the given kernel takes them ----------------------------------------------

template <class Ns>
struct Desc;
#define KL_DESC(ns)                                                                                                  \
  template <>                                                                                                        \
  struct Desc<struct ns##_tag> {                                                                                     \
    __host__ __device__ static std::uint64_t make(std::uint32_t addr, std::uint32_t leading, std::uint32_t stride) { \
      return ns::make_desc(addr, leading, stride);                                                                   \
    }                                                                                                                \
  };
KL_DESC(graded)
KL_DESC(solution)
KL_DESC(no_swizzle_mode)
KL_DESC(offsets_swapped)
#undef KL_DESC

template <class Ns>
struct Epilogue;
#define KL_EPILOGUE(ns)                                                                                    \
  template <>                                                                                              \
  struct Epilogue<struct ns##_tag> {                                                                       \
    __device__ __forceinline__ static void store(const Problem& p, int row, int col, float v0, float v1) { \
      ns::store_pair_fused<T>(p, row, col, v0, v1);                                                        \
    }                                                                                                      \
  };
KL_EPILOGUE(graded)
KL_EPILOGUE(solution)
KL_EPILOGUE(bias_scaled_by_alpha)
KL_EPILOGUE(activation_before_c)
#undef KL_EPILOGUE

// 08.1's epilogue: the lesson's plain one, α·acc + β·C (the race runs α = 1, β = 0).
struct PlainEpilogue {
  __device__ __forceinline__ static void store(const Problem& p, int row, int col, float v0, float v1) {
    lesson08::store_pair<T>(p, row, col, v0, v1);
  }
};

// ---- the given kernel: step 2 of the lesson, with the descriptors and the epilogue as parameters ---------

constexpr int kBm = 128, kBn = 128;
// A wrong descriptor makes wgmma read past the stage: the slack keeps those reads inside the block's
// shared memory, so that the mistake shows as wrong numbers rather than a fault (both wrong techniques
// kept below ran so on an H200). Three blocks of 72 KiB fit in a SM's 228 KiB, and the kernel's
// registers (over 128 a thread: 128 accumulators) allow no more than three anyway.
constexpr int kSmem = 72 * 1024;
static_assert(kSmem >= 1024 + lesson08::stage_bytes<kBm, kBn>() + 8, "one stage and its mbarrier must fit");

// One warpgroup computes the 128 x 128 tile of D as two 64 x 128 halves. Per 64-wide k-tile thread 0
// asks the copy engine for A's and B's boxes; everyone waits on the mbarrier; each half is 4 wgmmas of
// k = 16, A's k-step 32 bytes along its swizzled rows, B's 16 rows (2 KiB) down its panels.
template <class D, class E>
__global__ void __launch_bounds__(128)
    gemm_given(Problem p, lesson08::TileOrder order, const __grid_constant__ lesson08::GemmMaps maps) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stage = lesson08::align_1024(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(stage + lesson08::stage_bytes<kBm, kBn>());
  if (threadIdx.x == 0) {
    kl::mbarrier_init(full, 1);
    kl::mbarrier_init_fence();
  }
  __syncthreads();
  int tm, tn;
  order.tile(blockIdx.x, tm, tn);
  const int m0 = tm * kBm, n0 = tn * kBn, kts = (p.k + lesson08::kBk - 1) / lesson08::kBk;
  const unsigned char* b = stage + kBm * kl::kRowBytes;

  float acc[2][kBn / 2];
  for (int kt = 0; kt < kts; ++kt) {
    if (threadIdx.x == 0) lesson08::load_k_tile<kBm, kBn>(stage, maps, full, m0, n0, kt);
    kl::mbarrier_wait(full, kt % 2);
    kl::wgmma_fence();
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int ks = 0; ks < lesson08::kBk / 16; ++ks)
        kl::wgmma_ss_kn<kBn, T>(
            acc[h], D::make(kl::smem_u32(stage + h * 64 * kl::kRowBytes + ks * 32), 16, kl::kAtomBytes),
            D::make(kl::smem_u32(b + ks * 16 * kl::kRowBytes), 64 * kl::kRowBytes, kl::kAtomBytes), kt > 0 || ks > 0);
    kl::wgmma_commit();
    kl::wgmma_wait<0>();
    __syncthreads();  // every warp has read the stage before the next tile's TMA overwrites it
  }
  // Thread (warp w, lane 4g + t) holds rows 16w + g and 16w + g + 8 of each half, columns 8j + 2t, + 1.
  const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int j = 0; j < kBn / 8; ++j) {
      const int row = m0 + 64 * h + 16 * w + g, col = n0 + 8 * j + 2 * t;
      E::store(p, row, col, acc[h][4 * j], acc[h][4 * j + 1]);
      E::store(p, row + 8, col, acc[h][4 * j + 2], acc[h][4 * j + 3]);
    }
}

template <class D, class E>
void enqueue_gemm(const Problem& p, cudaStream_t s) {
  CUDA_CHECK(cudaFuncSetAttribute(gemm_given<D, E>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const lesson08::TileOrder order{(p.m + kBm - 1) / kBm, (p.n + kBn - 1) / kBn};
  gemm_given<D, E><<<order.count(), 128, kSmem, s>>>(p, order, lesson08::gemm_maps(p, kBm));
  CUDA_CHECK_LAUNCH();
}

// ---- inputs and the float64 reference -----------------------------------------------------------------------

// A, B, C in [-1, 1] and rounded to bf16 (the reference sees what the GPU reads), a bias in [-1, 1], and
// Σ A·B in float64 for every element of D; D poisoned before each run.
struct Gemm {
  int m, n, k;
  std::vector<float> c, bias;
  std::vector<double> ab;
  kl::DeviceBuffer<T> a_dev, b_dev, c_dev, d;
  kl::DeviceBuffer<float> bias_dev;

  static std::vector<float> rounded(std::size_t n, std::uint64_t seed) {
    auto x = kl::uniform_floats(n, -1.0, 1.0, kl::seed_for(seed));
    for (auto& e : x) e = __bfloat162float(__float2bfloat16_rn(e));
    return x;
  }
  static std::vector<T> bf16(const std::vector<float>& x) {
    std::vector<T> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = __float2bfloat16_rn(x[i]);
    return out;
  }
  Gemm(int m_, int n_, int k_, std::uint64_t seed) : m(m_), n(n_), k(k_) {
    const auto a = rounded(std::size_t(m) * k, seed), b = rounded(std::size_t(k) * n, seed + 1);
    c = rounded(std::size_t(m) * n, seed + 2);
    bias = kl::uniform_floats(n, -1.0, 1.0, kl::seed_for(seed + 3));
    ab.assign(std::size_t(m) * n, 0.0);
    for (int i = 0; i < m; ++i)
      for (int kk = 0; kk < k; ++kk) {
        const double x = a[std::size_t(i) * k + kk];
        for (int j = 0; j < n; ++j) ab[std::size_t(i) * n + j] += x * b[std::size_t(kk) * n + j];
      }
    a_dev.upload(bf16(a));
    b_dev.upload(bf16(b));
    c_dev.upload(bf16(c));
    bias_dev.upload(bias);
    d.resize(std::size_t(m) * n);
  }
  Problem problem(float alpha, float beta, bool with_bias, Act act) {
    Problem p;
    p.m = m, p.n = n, p.k = k, p.alpha = alpha, p.beta = beta, p.act = act;
    p.a = a_dev.data(), p.b = b_dev.data(), p.c = beta != 0.f ? c_dev.data() : nullptr, p.d = d.data();
    p.bias = with_bias ? bias_dev.data() : nullptr;
    return p;
  }
  // The first element of D off the float64 reference by more than the lesson's tolerance, or "".
  kl::grade::Failure compare(const Problem& p) {
    const std::vector<T> got = d.download();
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        const std::size_t e = std::size_t(i) * n + j;
        double v = p.alpha * ab[e] + (p.beta != 0.f ? p.beta * double(c[e]) : 0.0) + (p.bias ? bias[j] : 0.0);
        if (p.act == Act::relu) v = v > 0 ? v : 0;
        if (p.act == Act::gelu_tanh) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        const double g = __bfloat162float(got[e]);
        if (!(lesson08::element_error(g, v) <= lesson08::kRel))
          return "D[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + kl::grade::num(g) + ", expected " +
                 kl::grade::num(v);
      }
    return {};
  }
};

std::string shape_text(const Gemm& g) {
  return "M = " + std::to_string(g.m) + ", N = " + std::to_string(g.n) + ", K = " + std::to_string(g.k);
}

// Shapes whose edges are no multiple of a tile (K and N multiples of 8, as TMA needs), and one of
// many tiles and k-tiles.
std::vector<std::array<int, 3>> check_shapes() {
  if (kl::grade::sanitized()) return {{64, 64, 64}, {136, 200, 72}};
  return {{64, 64, 64}, {1, 8, 8}, {136, 200, 72}, {300, 264, 520}, {640, 768, 512}};
}

// Inputs filled on the GPU for the races (uniform in [-1, 1]; lesson08::fill_uniform).
struct Large {
  kl::DeviceBuffer<T> a, b, c, d;
  kl::DeviceBuffer<float> bias;
  Large(int m, int n, int k)
      : a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n), d(std::size_t(m) * n), bias(n) {
    lesson08::fill_uniform(a.data(), a.size(), 1);
    lesson08::fill_uniform(b.data(), b.size(), 2);
    lesson08::fill_uniform(c.data(), c.size(), 3);
    lesson08::fill_uniform(bias.data(), bias.size(), 4);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
};

// ---- 08.1: the descriptor ------------------------------------------------------------------------------------

template <class D>
kl::grade::Failure check_desc() {
  for (const auto& [m, n, k] : check_shapes()) {
    Gemm g(m, n, k, 10 * m + n + k);
    const Problem p = g.problem(1.f, 0.f, false, Act::none);
    g.d.poison();
    enqueue_gemm<D, PlainEpilogue>(p, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const kl::grade::Failure f = g.compare(p);
    if (!f.empty()) return shape_text(g) + ": " + f;
  }
  return {};
}

// 4096³ (32 MiB for each of A, B and D); then D there against the solution's.
template <class Mine>
kl::grade::Speed race_desc() {
  if (kl::grade::sanitized()) return {};
  const int s = 4096;
  Large in(s, s, s);
  Problem p;
  p.m = p.n = p.k = s;
  p.a = in.a.data(), p.b = in.b.data(), p.d = in.d.data();
  const auto mine = [&](cudaStream_t st) { enqueue_gemm<Mine, PlainEpilogue>(p, st); };
  const auto solution = [&](cudaStream_t st) { enqueue_gemm<Desc<struct solution_tag>, PlainEpilogue>(p, st); };
  return kl::grade::race(mine, solution, [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(mine, solution, in.d, 1e-2, 1e-2);
    return f.empty() ? f : "D's " + f;
  });
}

// ---- 08.2: the fused epilogue --------------------------------------------------------------------------------

const char* act_text(Act a) { return lesson08::act_name(a); }

template <class E>
kl::grade::Failure check_epilogue() {
  for (const auto& [m, n, k] : check_shapes()) {
    Gemm g(m, n, k, 10 * m + n + k + 5);
    for (float alpha : {1.f, 0.5f})
      for (float beta : {0.f, -0.75f})
        for (bool bias : {false, true})
          for (Act act : {Act::none, Act::relu, Act::gelu_tanh}) {
            const Problem p = g.problem(alpha, beta, bias, act);
            g.d.poison();
            enqueue_gemm<Desc<struct solution_tag>, E>(p, nullptr);
            CUDA_CHECK(cudaDeviceSynchronize());
            const kl::grade::Failure f = g.compare(p);
            if (!f.empty())
              return shape_text(g) + ", alpha = " + kl::grade::num(alpha) + ", beta = " + kl::grade::num(beta) +
                     (bias ? ", bias" : ", no bias") + ", act " + act_text(act) + ": " + f;
          }
  }
  return {};
}

// M = N = 8192, K = 512 with β·C, a bias and gelu_tanh: C and D are 128 MiB each, so the epilogue is a
// large share of the time; then D there against the solution's.
template <class Mine>
kl::grade::Speed race_epilogue() {
  if (kl::grade::sanitized()) return {};
  const int m = 8192, n = 8192, k = 512;
  Large in(m, n, k);
  Problem p;
  p.m = m, p.n = n, p.k = k, p.alpha = 1.25f, p.beta = 0.5f, p.act = Act::gelu_tanh;
  p.a = in.a.data(), p.b = in.b.data(), p.c = in.c.data(), p.d = in.d.data(), p.bias = in.bias.data();
  const auto mine = [&](cudaStream_t st) { enqueue_gemm<Desc<struct solution_tag>, Mine>(p, st); };
  const auto solution = [&](cudaStream_t st) {
    enqueue_gemm<Desc<struct solution_tag>, Epilogue<struct solution_tag>>(p, st);
  };
  return kl::grade::race(mine, solution, [&] {
    const kl::grade::Failure f = kl::grade::same_as_solution(mine, solution, in.d, 1e-2, 1e-2);
    return f.empty() ? f : "D's " + f;
  });
}

std::string hex(std::uint64_t x, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

TEST_CASE("exercise 08.1 [cpu]: make_desc encodes the address, the two offsets and the 128-byte swizzle") {
  struct Known {
    std::uint32_t addr, leading, stride;
    std::uint64_t want;
    const char* what;
  };
  // Worked by hand from the field table: (addr >> 4) | (LBO >> 4) << 16 | (SBO >> 4) << 32 | 1 << 62.
  const Known known[] = {
      {0x0000, 16, 1024, 0x4000004000010000ull, "A's first k-step at address 0"},
      {0x0420, 16, 1024, 0x4000004000010042ull, "A's second k-step (32 bytes on) of a stage at 0x400"},
      {0x4400, 8192, 1024, 0x4000004002000440ull, "B's panels (LBO 8 KiB) at 0x4400"},
      {0x4C00, 8192, 1024, 0x40000040020004c0ull, "B's second k-step (16 rows, 2 KiB on)"},
      {0x3FFF0, 16, 1024, 0x4000004000013fffull, "the highest shared-memory address"},
      {0x10400, 1024, 2048, 0x4000008000401040ull, "other offsets: LBO 1 KiB, SBO 2 KiB"},
  };
  for (const Known& c : known) {
    const std::uint64_t got = graded::make_desc(c.addr, c.leading, c.stride);
    INFO(std::string(c.what) << ": make_desc(" << hex(c.addr, 5) << ", " << c.leading << ", " << c.stride
                             << ") = " << hex(got, 16) << ", expected " << hex(c.want, 16) << " (address bits "
                             << (got & 0x3FFF) << " of " << (c.want & 0x3FFF) << ", LBO " << (got >> 16 & 0x3FFF)
                             << " of " << (c.want >> 16 & 0x3FFF) << ", SBO " << (got >> 32 & 0x3FFF) << " of "
                             << (c.want >> 32 & 0x3FFF) << ", layout " << (got >> 62) << " of " << (c.want >> 62)
                             << ")");
    CHECK(got == c.want);
  }
}

TEST_SUITE("gpu") {
  TEST_CASE("exercise 08.1: step 2's GEMM through the graded descriptors") {
    if (!lesson08::hopper_available()) return kl::grade::not_graded("08.1", lesson08::hopper_missing());
    kl::grade::verdict("08.1", check_desc<Desc<struct graded_tag>>(), race_desc<Desc<struct graded_tag>>());
  }

  TEST_CASE("exercise 08.2: the fused epilogue of step 7") {
    if (!lesson08::hopper_available()) return kl::grade::not_graded("08.2", lesson08::hopper_missing());
    kl::grade::verdict("08.2", check_epilogue<Epilogue<struct graded_tag>>(),
                       race_epilogue<Epilogue<struct graded_tag>>());
  }

  TEST_CASE("wrong 08.1: a descriptor without the swizzle mode") {
    if (!lesson08::hopper_available()) return kl::grade::not_graded("08.1", lesson08::hopper_missing());
    kl::grade::wrong_variant("08.1", "no_swizzle_mode", kl::grade::Fails::check,
                             check_desc<Desc<struct no_swizzle_mode_tag>>(),
                             race_desc<Desc<struct no_swizzle_mode_tag>>());
  }

  TEST_CASE("wrong 08.1: the leading and stride offsets swapped") {
    if (!lesson08::hopper_available()) return kl::grade::not_graded("08.1", lesson08::hopper_missing());
    kl::grade::wrong_variant("08.1", "offsets_swapped", kl::grade::Fails::check,
                             check_desc<Desc<struct offsets_swapped_tag>>(),
                             race_desc<Desc<struct offsets_swapped_tag>>());
  }

  TEST_CASE("wrong 08.2: the bias added before α") {
    if (!lesson08::hopper_available()) return kl::grade::not_graded("08.2", lesson08::hopper_missing());
    kl::grade::wrong_variant("08.2", "bias_scaled_by_alpha", kl::grade::Fails::check,
                             check_epilogue<Epilogue<struct bias_scaled_by_alpha_tag>>(),
                             race_epilogue<Epilogue<struct bias_scaled_by_alpha_tag>>());
  }

  TEST_CASE("wrong 08.2: β·C added after the activation") {
    if (!lesson08::hopper_available()) return kl::grade::not_graded("08.2", lesson08::hopper_missing());
    kl::grade::wrong_variant("08.2", "activation_before_c", kl::grade::Fails::check,
                             check_epilogue<Epilogue<struct activation_before_c_tag>>(),
                             race_epilogue<Epilogue<struct activation_before_c_tag>>());
  }
}
