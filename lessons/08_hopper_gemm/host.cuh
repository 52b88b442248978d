// Lesson 08, what the executable needs beside the kernels: the shapes from the command line (or the
// sweep), the inputs, the references (float64 on the CPU for the tests, f32 on the GPU for the
// executable's shapes), the error measure and its tolerance, the tensor-core limit, and the run of the
// chosen steps on one shape.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/buffer.cuh"
#include "common/cublas.cuh"
#include "common/ladder.hpp"
#include "lessons/08_hopper_gemm/gemm.cuh"

namespace lesson08 {

// ---- shapes ------------------------------------------------------------------------------------------

constexpr int kDefaultSide = 8192;

inline Act parse_act(const std::string& s) {
  for (Act a : {Act::none, Act::relu, Act::gelu_tanh})
    if (s == act_name(a)) return a;
  throw kl::UsageError("--act must be one of none, relu, gelu_tanh (got '" + kl::escaped(s) + "')");
}

inline Dtype parse_dtype(const std::string& s) {
  if (s == "bf16") return Dtype::bf16;
  if (s == "f16") return Dtype::f16;
  throw kl::UsageError("--dtype must be bf16 or f16 (got '" + kl::escaped(s) + "')");
}

// A problem of the run before its buffers exist: sizes, type and epilogue.
struct Shape {
  int m, n, k;
  Dtype dtype = Dtype::bf16;
  float alpha = 1.f, beta = 0.f;
  Act act = Act::none;
  bool bias = false;

  Problem problem() const {  // without buffers: for validate() and the counts
    Problem p;
    p.m = m, p.n = n, p.k = k, p.dtype = dtype, p.alpha = alpha, p.beta = beta, p.act = act;
    return p;
  }
};

// "MxNxK=8192x8192x8192", then ";alpha=..", ";beta=..", ";bias", ";gelu_tanh" where they are not the defaults.
inline std::string shape_text(const Shape& sh) {
  std::string s = "MxNxK=" + std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k);
  char buf[64];
  if (sh.alpha != 1.f) s += (std::snprintf(buf, sizeof buf, ";alpha=%g", sh.alpha), buf);
  if (sh.beta != 0.f) s += (std::snprintf(buf, sizeof buf, ";beta=%g", sh.beta), buf);
  if (sh.bias) s += ";bias";
  if (sh.act != Act::none) s += std::string(";") + act_name(sh.act);
  return s;
}

// Squares 512 ... 16384, the fused epilogue (bias + gelu_tanh) at 8192³, and the GEMMs of a language
// model's layer at M = 8192 tokens: (N, K) = (4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096).
inline std::vector<Shape> sweep_shapes(Dtype t) {
  std::vector<Shape> out;
  for (int s : {512, 1024, 2048, 4096, 6144, 8192, 12288, 16384}) out.push_back({s, s, s, t});
  out.push_back({8192, 8192, 8192, t, 1.f, 0.f, Act::gelu_tanh, true});
  for (auto [n, k] : {std::pair{4096, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}})
    out.push_back({8192, n, k, t});
  return out;
}

inline int side_option(const kl::Args& a, const char* name) {
  const auto v = a.size(name);
  if (!v) return kDefaultSide;
  if (*v > 2147483647) throw kl::UsageError(std::string("--") + name + " is too large (at most 2^31 - 1)");
  return static_cast<int>(*v);
}

// The shapes of a run, validated before any GPU work: one from --m, --n, --k (8192 each), --alpha,
// --beta, --act and --bias, or the sweep's.
inline std::vector<Shape> shapes(const kl::Args& a) {
  const Dtype t = parse_dtype(a.dtype.empty() ? "bf16" : a.dtype);
  const float alpha = a.text("alpha") ? kl::Cli::parse_float("--alpha", *a.text("alpha")) : 1.f;
  const float beta = a.text("beta") ? kl::Cli::parse_float("--beta", *a.text("beta")) : 0.f;
  const Act act = parse_act(a.text("act").value_or("none"));
  std::vector<Shape> out = a.sweep ? sweep_shapes(t)
                                   : std::vector<Shape>{{side_option(a, "m"), side_option(a, "n"), side_option(a, "k"),
                                                         t, 1.f, 0.f, act, a.flag("bias")}};
  for (auto& sh : out) {
    sh.alpha = alpha, sh.beta = beta;
    validate(sh.problem());
  }
  return out;
}

// Device memory of one shape: A, B, C (when β ≠ 0), D, the f32 reference, the bias, cuBLAS's workspace.
inline double device_bytes(const Shape& sh) {
  const double mn = static_cast<double>(sh.m) * sh.n;
  return 2.0 * (static_cast<double>(sh.m) * sh.k + static_cast<double>(sh.k) * sh.n + mn * (sh.beta != 0.f ? 2 : 1)) +
         4.0 * mn + 4.0 * sh.n + (32 << 20);
}

// ---- inputs ------------------------------------------------------------------------------------------

// x[i] uniform in [-1, 1), from a hash of (i, seed), rounded to T: the same values on every GPU.
template <class T>
__global__ void fill_uniform_kernel(T* x, std::int64_t n, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 0x9E3779B1u ^ static_cast<std::uint32_t>(i >> 32) ^ seed;
    h ^= h >> 16, h *= 0x7FEB352Du, h ^= h >> 15, h *= 0x846CA68Bu, h ^= h >> 16;
    const float v = static_cast<float>(h >> 8) * (2.f / 16777216.f) - 1.f;
    if constexpr (std::is_same_v<T, float>) x[i] = v;
    else x[i] = Elem<T>::from_float(v);
  }
}

template <class T>
void fill_uniform(T* x, std::int64_t n, std::uint32_t seed) {
  fill_uniform_kernel<T><<<kl::sm_count() * 8, 256>>>(x, n, seed);
  CUDA_CHECK_LAUNCH();
}

// The device buffers of one shape, filled; problem() is the shape on them.
struct Inputs {
  Shape shape;
  kl::DeviceBuffer<std::uint16_t> a, b, c, d;
  kl::DeviceBuffer<float> bias;

  explicit Inputs(const Shape& p)
      : shape(p),
        a(static_cast<std::size_t>(p.m) * p.k),
        b(static_cast<std::size_t>(p.k) * p.n),
        c(p.beta != 0.f ? static_cast<std::size_t>(p.m) * p.n : 0),
        d(static_cast<std::size_t>(p.m) * p.n),
        bias(p.bias ? p.n : 0) {
    const auto fill = [&](kl::DeviceBuffer<std::uint16_t>& x, std::uint32_t seed) {
      if (p.dtype == Dtype::bf16) fill_uniform(reinterpret_cast<__nv_bfloat16*>(x.data()), x.size(), seed);
      else fill_uniform(reinterpret_cast<__half*>(x.data()), x.size(), seed);
    };
    fill(a, 1), fill(b, 2), fill(c, 3);
    if (p.bias) fill_uniform(bias.data(), bias.size(), 4);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  Problem problem() {
    Problem p = shape.problem();
    p.a = a.data(), p.b = b.data(), p.c = p.beta != 0.f ? c.data() : nullptr, p.d = d.data();
    p.bias = shape.bias ? bias.data() : nullptr;
    return p;
  }
};

// ---- references and the error ------------------------------------------------------------------------

// A step passes at max |d - ref| / (|ref| + 1) <= kRel: the 16-bit rounding of D (2^-9 relative for
// bf16) and, for unfused steps with an epilogue, of the intermediate D, sit far below it; a k-tile or a
// tile left out sits far above it.
constexpr double kRel = 1e-2;

__host__ __device__ inline double element_error(double d, double ref) {
  if (isnan(ref) || isnan(d)) return isnan(ref) && isnan(d) ? 0.0 : INFINITY;
  if (isinf(ref) || isinf(d)) return d == ref ? 0.0 : INFINITY;
  return fabs(d - ref) / (fabs(ref) + 1.0);
}

// max element_error over all of D, on the GPU (errors are >= 0, so their bits order as integers).
template <class T>
__global__ void max_error_kernel(Problem p, const float* ref, unsigned* worst) {
  const std::int64_t total = static_cast<std::int64_t>(p.m) * p.n;
  float w = 0.f;
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    w = fmaxf(w, static_cast<float>(element_error(Elem<T>::to_float(static_cast<const T*>(p.d)[e]), ref[e])));
  }
  atomicMax(worst, __float_as_uint(w));
}

// The executable's check: the f32 reference of the whole of D (gemm_simt), compared everywhere.
struct GpuReference {
  kl::DeviceBuffer<float> ref;
  kl::DeviceBuffer<unsigned> worst{1};
  explicit GpuReference(const Problem& p) : ref(static_cast<std::size_t>(p.m) * p.n) {
    if (p.dtype == Dtype::bf16) launch_simt_as<__nv_bfloat16>(p, ref.data(), nullptr);
    else launch_simt_as<__half>(p, ref.data(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  double max_error(const Problem& p) {
    CUDA_CHECK(cudaMemset(worst.data(), 0, sizeof(unsigned)));
    if (p.dtype == Dtype::bf16)
      max_error_kernel<__nv_bfloat16><<<kl::sm_count() * 8, 256>>>(p, ref.data(), worst.data());
    else max_error_kernel<__half><<<kl::sm_count() * 8, 256>>>(p, ref.data(), worst.data());
    CUDA_CHECK_LAUNCH();
    unsigned bits = 0;
    CUDA_CHECK(cudaMemcpy(&bits, worst.data(), sizeof bits, cudaMemcpyDeviceToHost));
    float err;
    std::memcpy(&err, &bits, sizeof err);
    return err;
  }
};

// float64 on the CPU, every element (test shapes): act(α·Σ a·b + β·c + bias).
inline std::vector<double> reference_cpu(const Problem& p, const std::vector<float>& a, const std::vector<float>& b,
                                         const std::vector<float>& c, const std::vector<float>& bias) {
  std::vector<double> out(static_cast<std::size_t>(p.m) * p.n);
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int k = 0; k < p.k; ++k)
        acc += static_cast<double>(a[static_cast<std::size_t>(i) * p.k + k]) * b[static_cast<std::size_t>(k) * p.n + j];
      const std::size_t e = static_cast<std::size_t>(i) * p.n + j;
      double v =
          p.alpha * acc + (p.beta != 0.f ? p.beta * static_cast<double>(c[e]) : 0.0) + (bias.empty() ? 0.0 : bias[j]);
      if (p.act == Act::relu) v = v > 0 ? v : 0;
      if (p.act == Act::gelu_tanh) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
      out[e] = v;
    }
  return out;
}

// ---- the limit and one shape -------------------------------------------------------------------------

// Every step, and the limit, is timed after running back to back for this long: at the GPU's power
// limit (reached during a run of large GEMMs) its clock drops, and each step is measured
// at the clock it sustains, not at the one the previous step left behind.
constexpr double kWarmupMs = 500;

// The driver's measure_limits hook: cuBLAS's f16 GEMM of 8192³ in this run, sustained, the tensor-core
// rate every % of limit is of.
inline void measure_limits(kl::Limits& limits, const kl::DeviceInfo&) {
  limits.peak_tflops = kl::measure_tensor_tflops(kWarmupMs);
}

// The legend under the limits: what the limit is and how the error column is measured.
inline std::string legend(const kl::Args&) {
  char line[320];
  std::snprintf(line, sizeof line,
                "limit:  a cuBLAS f16 GEMM of 8192^3, sustained, is the rate every %% of limit is of\n"
                "error:  max |d - ref| / (|ref| + 1) against an f32 reference of all of D, passes at <= %.0e;"
                "  [g] = CUDA-graph replay",
                kRel);
  return line;
}

inline std::vector<kl::Row> run_shape(const Shape& shape, kl::Context<Launcher>& cx) {
  Inputs in(shape);
  const Problem p = in.problem();
  std::optional<GpuReference> ref;
  if (cx.check) ref.emplace(p);
  std::printf("\nM x N x K = %d x %d x %d, %s%s: %.1f GFLOP; at the tensor-core limit = %.4f ms\n", p.m, p.n, p.k,
              dtype_name(p.dtype), p.epilogue() ? ", with an epilogue" : "", flops(p) / 1e9,
              flops(p) / (cx.limits.peak_tflops * 1e12) * 1e3);
  Workspace ws;
  kl::Row proto{"", "", dtype_name(p.dtype), shape_text(shape)};
  proto.flops = flops(p);
  const std::size_t d_bytes = static_cast<std::size_t>(p.m) * p.n * 2;
  const kl::Trial trial{proto, [&] { CUDA_CHECK(cudaMemset(p.d, 0xFF, d_bytes)); },  // all NaN
                        [&] { return ref->max_error(p); }, kRel};
  return kl::run_steps(cx, trial, [&](const Step& st, cudaStream_t s) { run_step(st, p, ws, s); });
}

// ---- the lesson --------------------------------------------------------------------------------------

inline kl::Lesson<Launcher, Shape> lesson() {
  using kl::Option;
  kl::Lesson<Launcher, Shape> l;
  l.id = "08";
  l.title = "the tensor-core GEMM on Hopper: D = act(alpha A B + beta C + bias), bf16/f16 in, f32 accumulation";
  l.steps = kSteps;
  l.options = {
      {"m", Option::size, "rows of A and D (default 8192); N or 2^E"},
      {"n", Option::size, "columns of B and D (default 8192)"},
      {"k", Option::size, "columns of A, rows of B (default 8192)"},
      {"alpha", Option::text, "D = alpha A B + ... (default 1)", false},
      {"beta", Option::text, "... + beta C (default 0: C is not read)", false},
      {"act", Option::text, "activation after the bias: none, relu, gelu_tanh (default none)"},
      {"bias", Option::flag, "add a bias per column of D (f32) before the activation"},
  };
  l.dtypes = {"bf16", "f16"};
  l.sweep_help = "squares 512 ... 16384, bias + gelu_tanh at 8192^3, M = 8192 with (N, K) of a language model";
  l.notes =
      "A, B, C uniform in [-1, 1), rounded to the dtype; accumulation f32; D in the dtype. Checked against an\n"
      "f32 reference of all of D. FLOPs counted: 2 M N K. Steps marked sm_90a run on sm_90 GPUs only (H100,\n"
      "H200); elsewhere they are n/a. Unfused steps and cuBLAS run a second kernel for the bias and activation.\n"
      "Each step runs back to back for 0.5 s before it is timed: times are at the clock the GPU sustains.\n";
  l.warmup_ms = kWarmupMs;
  l.shapes = shapes;
  l.device_bytes = [](const Shape& sh, const kl::Args&) { return device_bytes(sh); };
  l.measure_limits = measure_limits;
  l.legend = legend;
  l.run = run_shape;
  return l;
}

}  // namespace lesson08
