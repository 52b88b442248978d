// Lesson 06, the problem as the executable and the tests see it: the float64 reference (on the CPU, or
// with cublasDgemm for shapes too large for it), the error measure and its tolerance, the shapes the
// executable runs and their inputs. The problem as the kernels see it is problem.cuh.
#pragma once
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/buffer.cuh"
#include "common/check.cuh"
#include "common/ladder.hpp"
#include "common/parallel.hpp"
#include "common/random.hpp"
#include "common/reference.hpp"
#include "lessons/06_tiled_gemm/problem.cuh"

namespace lesson06 {

// ---- the float64 reference ------------------------------------------------------------------------

// A*B and |A|*|B| in float64 (the second scales the error: a float32 dot product of K terms can be
// off by up to ~K eps of sum |a b|).
struct Reference {
  std::vector<double> ab, abs_ab;
};

inline Reference reference_cpu(const float* a, int lda, const float* b, int ldb, int m, int n, int k) {
  Reference r{std::vector<double>(std::size_t(m) * n), std::vector<double>(std::size_t(m) * n)};
  kl::parallel_for(m, [&](std::size_t i0, std::size_t i1) {
    std::vector<double> row(n), abs_row(n);
    for (std::size_t i = i0; i < i1; ++i) {
      std::fill(row.begin(), row.end(), 0.0);
      std::fill(abs_row.begin(), abs_row.end(), 0.0);
      for (int kk = 0; kk < k; ++kk) {
        const double av = a[i * lda + kk];
        const float* brow = b + std::size_t(kk) * ldb;
        for (int j = 0; j < n; ++j) {
          row[j] += av * brow[j];
          abs_row[j] += std::fabs(av * brow[j]);
        }
      }
      std::copy(row.begin(), row.end(), r.ab.begin() + i * n);
      std::copy(abs_row.begin(), abs_row.end(), r.abs_ab.begin() + i * n);
    }
  });
  return r;
}

inline void blas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(st));
}

// The same on the GPU with cublasDgemm (handle h, on the default stream), for shapes too large for the CPU.
inline Reference reference_gpu(const float* a, int lda, const float* b, int ldb, int m, int n, int k,
                               cublasHandle_t h) {
  const auto widen = [](const float* x, int rows, int cols, int ld, bool absolute) {
    std::vector<double> v(std::size_t(rows) * cols);
    kl::parallel_for(rows, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r)
        for (int c = 0; c < cols; ++c) {
          const double x64 = x[r * ld + c];
          v[r * cols + c] = absolute ? std::fabs(x64) : x64;
        }
    });
    return v;
  };
  blas_check(cublasSetStream(h, nullptr), "cublasSetStream");
  Reference r;
  kl::DeviceBuffer<double> out(std::size_t(m) * n);
  for (bool absolute : {false, true}) {
    const kl::DeviceBuffer<double> da(widen(a, m, k, lda, absolute)), db(widen(b, k, n, ldb, absolute));
    const double one = 1.0, zero = 0.0;
    blas_check(
        cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, db.data(), n, da.data(), k, &zero, out.data(), n),
        "cublasDgemm");
    (absolute ? r.abs_ab : r.ab) = out.download(std::size_t(m) * n);
  }
  return r;
}

constexpr double kCpuReferenceBelow = 1 << 25;  // M*N*K: above this the float64 product runs on the GPU

inline double activate_ref(Act act, double x, double slope) {
  switch (act) {
    case Act::relu:
      return x < 0 ? 0.0 : x;
    case Act::leaky:
      return x < 0 ? slope * x : x;
    case Act::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case Act::gelu_erf:
      return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
    default:
      return x;
  }
}

// The host inputs of one check (C and bias may be empty when unused), laid out as p says.
struct HostInputs {
  std::vector<float> c, bias;
};

// Largest error of d (rows of p.ldd) against the reference, each element relative to the scale of
// its terms, |alpha| sum|a b| + |beta c| + |bias|; NaN and inf must match exactly.
inline double max_error(const std::vector<float>& d, const Problem& p, const Reference& ref, const HostInputs& in) {
  std::vector<double> worst(std::max(p.m, 1), 0.0);
  kl::parallel_for(p.m, [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      for (int j = 0; j < p.n; ++j) {
        const std::size_t e = i * p.n + j;
        double v = double(p.alpha) * ref.ab[e], scale = std::fabs(double(p.alpha)) * ref.abs_ab[e];
        if (p.beta != 0.f) {
          const double c = double(p.beta) * in.c[i * p.ldc + j];
          v += c;
          scale += std::fabs(c);
        }
        double bias = 0;
        if (p.bias_kind == Bias::m) bias = in.bias[i];
        else if (p.bias_kind == Bias::n) bias = in.bias[j];
        else if (p.bias_kind == Bias::full) bias = in.bias[e];
        v += bias;
        scale += std::fabs(bias);
        const double want = activate_ref(p.act, v, p.slope);
        worst[i] = std::max(worst[i], kl::scaled_error(d[i * p.ldd + j], want, scale + 1e-30));
      }
    }
  });
  return *std::max_element(worst.begin(), worst.end());
}

// Rounding errors of a float32 dot product of K terms: at most ~K eps of sum|a b| in the worst case;
// in practice they grow like sqrt(K) (see kl::sum_tolerance), so we allow min(K, 16 sqrt(K)) eps, plus
// a few eps for alpha, beta, the bias and the activation.
inline double tolerance(int k) {
  const double eps = 1.1920928955078125e-07;
  return (std::min<double>(k, 16.0 * std::sqrt(static_cast<double>(k))) + 8.0) * eps;
}

// ---- the shapes and the epilogue the executable runs ----------------------------------------------

// --alpha, --beta, --bias, --act, --slope: the epilogue of a run (bias n and gelu_tanh by default).
struct Epilogue {
  float alpha = 1.f, beta = 0.f, slope = 0.01f;
  Bias bias = Bias::n;
  Act act = Act::gelu_tanh;
};

// A shape of the run and its epilogue (--alpha ... --slope, parsed once, by shapes()).
struct Shape {
  int m, n, k;
  Epilogue epilogue{};
};

constexpr Shape kDefaultShape{4096, 4096, 4096};

inline std::string shape_text(const Shape& sh) {
  return "MxNxK=" + std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k);
}

// --sweep: squares 256 ... 8192 and the awkward shapes (odd sizes, a skinny N).
inline std::vector<Shape> sweep_shapes() {
  std::vector<Shape> v;
  for (int s = 256; s <= 8192; s *= 2) v.push_back({s, s, s});
  v.push_back({4097, 4097, 4097});
  v.push_back({1000, 3000, 777});
  v.push_back({8192, 64, 8192});
  return v;
}

// Device memory of one shape: A, B, C, D and bias in float, split-K's slices, the float64 reference's
// operands, and 64 MiB for cuBLAS and the workspace.
inline double device_bytes(const Shape& sh) {
  const double mk = double(sh.m) * sh.k, kn = double(sh.k) * sh.n, mn = double(sh.m) * sh.n;
  return 4.0 * (mk + kn + 3 * mn) + 4.0 * 16 * mn * (sh.n <= 1024) + 8.0 * (mk + kn + mn) + (64 << 20);
}

inline Bias parse_bias(const std::string& s) {
  for (Bias b : {Bias::none, Bias::m, Bias::n, Bias::full})
    if (s == bias_name(b)) return b;
  throw kl::UsageError("--bias must be one of none, m, n, full (got '" + kl::escaped(s) + "')");
}

inline Act parse_act(const std::string& s) {
  for (Act a : {Act::none, Act::relu, Act::leaky, Act::gelu_tanh, Act::gelu_erf})
    if (s == act_name(a)) return a;
  throw kl::UsageError("--act must be one of none, relu, leaky, gelu_tanh, gelu_erf (got '" + kl::escaped(s) + "')");
}

inline Epilogue epilogue(const kl::Args& args) {
  Epilogue e;
  if (auto v = args.text("alpha")) e.alpha = kl::Cli::parse_float("--alpha", *v);
  if (auto v = args.text("beta")) e.beta = kl::Cli::parse_float("--beta", *v);
  if (auto v = args.text("slope")) e.slope = kl::Cli::parse_float("--slope", *v);
  e.bias = parse_bias(args.text("bias").value_or("n"));
  e.act = parse_act(args.text("act").value_or("gelu_tanh"));
  return e;
}

// The shape from --size or --m, --n, --k (defaults where not given), or the sweep's; refused, never
// clamped, when M is above kMaxRows or N or K above kMaxNK.
inline std::vector<Shape> shapes(const kl::Args& args) {
  const Epilogue e = epilogue(args);  // refuses a bad --alpha, --beta, --slope, --bias or --act before any GPU work
  if (args.sweep) {
    std::vector<Shape> v = sweep_shapes();
    for (Shape& sh : v) sh.epilogue = e;
    return v;
  }
  const auto size = args.size("size");
  if (size && (args.given("m") || args.given("n") || args.given("k")))
    throw kl::UsageError("--size sets M, N and K: give either --size or --m/--n/--k");
  const auto dim = [&](const char* what, int fallback) {
    const auto v = size ? size : args.size(what);
    if (!v) return fallback;
    if (*v > kMaxNK)
      throw kl::UsageError(std::string("--") + (size ? "size" : what) + ": " + std::to_string(*v) +
                           " is too large (at most 2^31 - 256: columns and k are indexed in int)");
    return static_cast<int>(*v);
  };
  const Shape sh{dim("m", kDefaultShape.m), dim("n", kDefaultShape.n), dim("k", kDefaultShape.k), e};
  if (sh.m > kMaxRows) throw kl::UsageError("--m: M = " + std::to_string(sh.m) + " is too large (at most 2^19)");
  return {sh};
}

// ---- the inputs of one shape ----------------------------------------------------------------------

// One shape's inputs on the host and the device (normal(0, 1), seeded by the shape), and the problem.
struct Inputs {
  std::vector<float> a, b;
  HostInputs host;
  kl::DeviceBuffer<float> da, db, dc, dbias, dd;
  Problem p;
};

// The seed of a shape's inputs, in 64 bits: no shape can overflow it.
inline std::uint64_t input_seed(const Shape& sh) {
  return static_cast<std::uint64_t>(sh.m) * 7919 + static_cast<std::uint64_t>(sh.n) * 131 + sh.k;
}

inline void make_inputs(Inputs& in, const Shape& sh, const Epilogue& e) {
  const std::uint64_t seed = kl::seed_for(input_seed(sh));
  const auto mk = static_cast<std::size_t>(sh.m) * sh.k, kn = static_cast<std::size_t>(sh.k) * sh.n,
             mn = static_cast<std::size_t>(sh.m) * sh.n;
  in.a = kl::normal_floats(mk, 0, 1, seed);
  in.b = kl::normal_floats(kn, 0, 1, seed + 1);
  if (e.beta != 0.f) in.host.c = kl::normal_floats(mn, 0, 1, seed + 2);
  const std::size_t nbias = e.bias == Bias::m ? sh.m : e.bias == Bias::n ? sh.n : mn;
  if (e.bias != Bias::none) in.host.bias = kl::normal_floats(nbias, 0, 1, seed + 3);
  in.da.upload(in.a);
  in.db.upload(in.b);
  if (!in.host.c.empty()) in.dc.upload(in.host.c);
  if (!in.host.bias.empty()) in.dbias.upload(in.host.bias);
  in.dd.resize(mn);
  Problem& p = in.p;
  p = Problem{in.da.data(),
              in.db.data(),
              in.host.c.empty() ? nullptr : in.dc.data(),
              in.dd.data(),
              in.host.bias.empty() ? nullptr : in.dbias.data(),
              sh.m,
              sh.n,
              sh.k,
              sh.k,
              sh.n,
              sh.n,
              sh.n};
  p.alpha = e.alpha;
  p.beta = e.beta;
  p.bias_kind = e.bias;
  p.act = e.act;
  p.slope = e.slope;
}

}  // namespace lesson06
