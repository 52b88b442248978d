// The element types a lesson may read and write (float, __half, __nv_bfloat16), their conversion
// to and from float (the type all arithmetic is done in), and packs: N elements moved by one
// vector load or store (16 bytes = 4 floats or 8 halves is the widest a thread can issue at once).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/check.cuh"

namespace kl {

// Conversions work on the host too, so tests can round their inputs to the type the GPU reads.
__host__ __device__ inline float to_float(float v) { return v; }
__host__ __device__ inline float to_float(__half v) { return __half2float(v); }
__host__ __device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round to nearest even, as a store of a float result into the narrow type should.
template <class T>
__host__ __device__ inline T from_float(float v);
template <>
__host__ __device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__host__ __device__ inline __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N elements aligned to their total size: the compiler turns one copy of it into one vector
// instruction (LDG.128 / STG.128 for 16 bytes).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// One vector load of N elements (p aligned to N elements), kept in the input type.
template <int N, class T>
__device__ __forceinline__ Pack<T, N> load_raw(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <int N, class T>
__device__ __forceinline__ void store_raw(T* p, const Pack<T, N>& pk) {
  *reinterpret_cast<Pack<T, N>*>(p) = pk;
}

template <int N, class T>
__device__ __forceinline__ void to_floats(const Pack<T, N>& pk, float (&out)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_float(pk.v[i]);
}

// Loads N elements with one vector load and widens them to float.
template <int N, class T>
__device__ __forceinline__ void load_pack(const T* p, float (&out)[N]) {
  to_floats(load_raw<N>(p), out);
}

// Narrows N floats to T and stores them with one vector store.
template <int N, class T>
__device__ __forceinline__ void store_pack(T* p, const float (&in)[N]) {
  Pack<T, N> pk;
#pragma unroll
  for (int i = 0; i < N; ++i) pk.v[i] = from_float<T>(in[i]);
  store_raw(p, pk);
}

// The NaN-keeping max (or, for Max = false, min) of a pack of 16-bit values, taken in pairs in their
// own type: for 8 halves on sm_90 one HMNMX2 and one three-input VHMNMX, where widening each element
// first costs 8 conversions and 8 compare-selects. Returns the two last candidates widened to float.
template <bool Max, int N, class T>
__device__ __forceinline__ void pack_extreme(const kl::Pack<T, N>& raw, float& a, float& b) {
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  T2 p[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) p[i] = T2(raw.v[2 * i], raw.v[2 * i + 1]);
#pragma unroll
  for (int w = N / 2; w > 1; w /= 2)
#pragma unroll
    for (int i = 0; i < w / 2; ++i) p[i] = Max ? __hmax2_nan(p[i], p[i + w / 2]) : __hmin2_nan(p[i], p[i + w / 2]);
  a = kl::to_float(p[0].x);
  b = kl::to_float(p[0].y);
}

// The widest pack (in elements: 8, 4, 2 or 1, at most 16 bytes) that every row of an [M, K] matrix
// at x and at y can use: both pointers aligned to it and K a multiple of it (so each row starts aligned).
inline int widest_pack(const void* x, const void* y, std::int64_t K, int elem_bytes) {
  for (int n = 16 / elem_bytes; n > 1; n /= 2) {
    const auto bytes = static_cast<std::uintptr_t>(n * elem_bytes);
    if (K % n == 0 && reinterpret_cast<std::uintptr_t>(x) % bytes == 0 &&
        reinterpret_cast<std::uintptr_t>(y) % bytes == 0)
      return n;
  }
  return 1;
}

// [0, n) of an array that may start anywhere, seen as packs of P elements: `head` elements up to the
// first P * sizeof(T)-byte boundary, then `packs` aligned packs, then `tail` elements (head, tail < P).
// Index is the lesson's index type (std::size_t for flat arrays, int for rows).
template <int P, class T, class Index>
struct PackSplit {
  Index head, packs, tail;
  __host__ __device__ PackSplit(const T* x, Index n) {
    const auto misaligned = static_cast<Index>(reinterpret_cast<std::uintptr_t>(x) / sizeof(T) % P);
    head = misaligned == 0 ? 0 : (P - misaligned < n ? P - misaligned : n);
    packs = (n - head) / P;
    tail = n - head - P * packs;
  }
  // The aligned middle, as packs.
  __host__ __device__ const Pack<T, P>* body(const T* x) const { return reinterpret_cast<const Pack<T, P>*>(x + head); }
  // The i-th of the head + tail elements (i < head + tail), as an index into x.
  __host__ __device__ Index edge(Index i) const { return i < head ? i : head + P * packs + (i - head); }
};

// ---- the element types of the lessons that take --dtype --------------------------------------------

enum class Dtype { f32, f16, bf16 };

inline const char* dtype_name(Dtype d) { return d == Dtype::f32 ? "f32" : d == Dtype::f16 ? "f16" : "bf16"; }
inline int dtype_bytes(Dtype d) { return d == Dtype::f32 ? 4 : 2; }

inline Dtype parse_dtype(const std::string& s) {
  if (s == "f32") return Dtype::f32;
  if (s == "f16") return Dtype::f16;
  if (s == "bf16") return Dtype::bf16;
  throw kl::UsageError("--dtype must be one of f32, f16, bf16 (got '" + s + "')");
}

template <class T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>) return Dtype::f32;
  else if constexpr (std::is_same_v<T, __half>) return Dtype::f16;
  else return Dtype::bf16;
}

// Calls f(T{}) with T the C++ type of the dtype, so a generic lambda can instantiate templates on it.
template <class F>
void with_type(Dtype d, F&& f) {
  if (d == Dtype::f32) f(float{});
  else if (d == Dtype::f16) f(__half{});
  else f(__nv_bfloat16{});
}

// The element types by the names lessons 04 and 05 use, for a lesson's namespace:
// `using namespace kl::dtypes;` brings Dtype, dtype_bytes, dtype_name, dtype_of, parse_dtype, with_type.
namespace dtypes {
using kl::Dtype;
using kl::dtype_bytes;
using kl::dtype_name;
using kl::dtype_of;
using kl::parse_dtype;
using kl::with_type;
}  // namespace dtypes

}  // namespace kl
