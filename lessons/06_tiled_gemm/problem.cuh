// Lesson 06 — the problem: D = act(alpha · A·B + beta · C + bias), A [M, K], B [K, N], C and D [M, N],
// float32, row-major with leading dimensions. Here: the problem as the kernels see it, its limits and
// its checks. The float64 reference, the error measure and its tolerance, the shapes the executable
// runs and their inputs are in host.cuh; the steps in steps/, the product in gemm.cuh.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/check.cuh"

namespace lesson06 {

// ---- the problem ----------------------------------------------------------------------------------

enum class Bias { none, m, n, full };  // bias[m], bias[n], or a full [M, N] matrix (leading dimension N)
enum class Act { none, relu, leaky, gelu_tanh, gelu_erf };

inline const char* bias_name(Bias b) {
  const char* names[] = {"none", "m", "n", "full"};
  return names[static_cast<int>(b)];
}
inline const char* act_name(Act a) {
  const char* names[] = {"none", "relu", "leaky", "gelu_tanh", "gelu_erf"};
  return names[static_cast<int>(a)];
}

// One call. C is read only when beta != 0 (it may then be nullptr), and may be D itself (in place,
// with ldc == ldd). M, N or K = 0 is a no-op: nothing is launched and D is left as it was.
struct Problem {
  const float* a = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  float* d = nullptr;
  const float* bias = nullptr;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0, ldd = 0;
  float alpha = 1.f, beta = 0.f;
  Bias bias_kind = Bias::none;
  Act act = Act::none;
  float slope = 0.01f;  // LeakyReLU's slope for x < 0
};

// The GEMM part only (what steps 1-6 and cuBLAS compute): the same problem without bias and activation.
inline Problem plain(Problem p) {
  p.bias_kind = Bias::none;
  p.act = Act::none;
  return p;
}

constexpr int kMaxRows = 1 << 19;  // grid.y of the naive kernel stays below 65536 blocks
// N and K are indexed in int and run up to 255 past their end: a tile up to 256 wide (tile_grid rounds N
// up to it), and split-K's slices rounded up to whole tiles (launch_split_k: 16 x 16 deep in gemm(),
// 8 x 32 in --tune).
constexpr int kMaxNK = INT_MAX - 255;  // 2^31 - 256

// Refuses what no step can do, before anything is launched.
inline void validate(const Problem& p) {
  const auto fail = [](const std::string& why) { throw kl::UsageError(why); };
  if (p.m < 0 || p.n < 0 || p.k < 0) fail("M, N and K must not be negative");
  if (p.m > kMaxRows) fail("M = " + std::to_string(p.m) + " is too large (at most 2^19)");
  if (p.n > kMaxNK || p.k > kMaxNK)
    fail("N = " + std::to_string(p.n) + ", K = " + std::to_string(p.k) +
         ": too large (at most 2^31 - 256: columns and k are indexed in int)");
  if (p.lda < std::max(p.k, 1)) fail("lda = " + std::to_string(p.lda) + " is smaller than K = " + std::to_string(p.k));
  if (p.ldb < std::max(p.n, 1)) fail("ldb = " + std::to_string(p.ldb) + " is smaller than N = " + std::to_string(p.n));
  if (p.ldd < std::max(p.n, 1)) fail("ldd = " + std::to_string(p.ldd) + " is smaller than N = " + std::to_string(p.n));
  if (p.beta != 0.f && p.ldc < std::max(p.n, 1)) fail("ldc = " + std::to_string(p.ldc) + " is smaller than N");
  if (p.m == 0 || p.n == 0 || p.k == 0) return;
  if (!p.a || !p.b || !p.d) fail("A, B and D must not be null");
  if (p.beta != 0.f && !p.c) fail("beta != 0 needs C");
  if (p.bias_kind != Bias::none && !p.bias)
    fail(std::string("bias ") + bias_name(p.bias_kind) + " needs a bias vector");
  if (p.c == p.d && p.beta != 0.f && p.ldc != p.ldd) fail("C aliasing D (in place) needs ldc == ldd");
}

}  // namespace lesson06
