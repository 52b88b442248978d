// Lesson 08, the product layer: the table of steps main.cu and test.cu walk, the library rows, the
// epilogue kernel the unfused steps finish with, and gemm(), which picks the fastest step this GPU and
// shape can run. A student may skip this file: the ideas are in steps/.
//   step 1 mma_sync          the Ampere tensor-core GEMM (mma.sync, ldmatrix, 4 cp.async stages), sm_80+
//   step 2 wgmma             wgmma from shared memory, TMA loads, one stage, sm_90a
//   step 3 tma_ring          3 TMA stages on mbarriers, one wgmma group in flight
//   step 4 warp_specialized  producer warpgroup + 2 consumers, 128 x 256 tiles, setmaxnreg
//   step 5 persistent        one block a SM walks the tiles; the ring runs on across tiles
//   step 6 cluster           clusters of 2 blocks: B loaded once, TMA multicast to both
//   step 7 fused_epilogue    bias and activation applied to the accumulators before the store
//   step 8 tma_store         the finished tile through shared memory and a TMA store
//   lib    cublas, cublaslt_epilogue
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/arch.cuh"
#include "common/buffer.cuh"
#include "common/cublas.cuh"
#include "common/device.cuh"
#include "common/step.hpp"
#include "lessons/08_hopper_gemm/hopper.cuh"
#include "lessons/08_hopper_gemm/parts.cuh"
#include "lessons/08_hopper_gemm/problem.cuh"
#include "lessons/08_hopper_gemm/steps/01_mma_sync.cuh"

namespace lesson08 {

// ---- the epilogue as a second pass, and a GEMM for any shape ---------------------------------------------

// D = act(D + bias[col]) in place: what the unfused steps and cuBLAS run after their GEMM when a bias or
// an activation is asked (their GEMM stored α·A·B + β·C).
template <class T>
__global__ void epilogue_kernel(Problem p) {
  const std::int64_t total = static_cast<std::int64_t>(p.m) * p.n;
  T* d = static_cast<T*>(p.d);
  for (std::int64_t e = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::int64_t{gridDim.x} * blockDim.x) {
    const float v = Elem<T>::to_float(d[e]) + (p.bias ? p.bias[e % p.n] : 0.f);
    d[e] = Elem<T>::from_float(activate_fast(p.act, v));
  }
}

template <class T>
void launch_epilogue_as(const Problem& p, cudaStream_t s) {
  epilogue_kernel<T><<<kl::sm_count() * 8, 256, 0, s>>>(p);
  CUDA_CHECK_LAUNCH();
}

inline void launch_epilogue(const Problem& p, cudaStream_t s) {
  if (p.dtype == Dtype::bf16) launch_epilogue_as<__nv_bfloat16>(p, s);
  else launch_epilogue_as<__half>(p, s);
}

// D = act(α·A·B + β·C + bias) on CUDA cores, 16 x 16 tiles through shared memory, any M, N, K: gemm()'s
// path for shapes the tensor-core steps refuse, and (Out = float) the f32 reference of the executable.
template <class T, class Out>
__global__ void gemm_simt(Problem p, Out* out) {
  __shared__ float as[16][17], bs[16][17];
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < p.k; k0 += 16) {
    const int ak = k0 + threadIdx.x, bk = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        row < p.m && ak < p.k ? Elem<T>::to_float(a[static_cast<std::int64_t>(row) * p.k + ak]) : 0.f;
    bs[threadIdx.y][threadIdx.x] =
        bk < p.k && col < p.n ? Elem<T>::to_float(b[static_cast<std::int64_t>(bk) * p.n + col]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 16; ++j) acc += as[threadIdx.y][j] * bs[j][threadIdx.x];
    __syncthreads();
  }
  if (row >= p.m || col >= p.n) return;
  const std::int64_t e = static_cast<std::int64_t>(row) * p.n + col;
  float v = p.alpha * acc + (p.beta != 0.f ? p.beta * Elem<T>::to_float(static_cast<const T*>(p.c)[e]) : 0.f);
  v = activate(p.act, v + (p.bias ? p.bias[col] : 0.f));
  if constexpr (std::is_same_v<Out, float>) out[e] = v;
  else out[e] = Elem<T>::from_float(v);
}

template <class T, class Out>
void launch_simt_as(const Problem& p, Out* out, cudaStream_t s) {
  const dim3 grid((p.n + 15) / 16, (p.m + 15) / 16);
  gemm_simt<T, Out><<<grid, dim3(16, 16), 0, s>>>(p, out);
  CUDA_CHECK_LAUNCH();
}

// ---- the library rows ------------------------------------------------------------------------------------

template <class T>
__global__ void round_kernel(const float* x, T* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Elem<T>::from_float(x[i]);
}

template <class T>
void launch_round_as(const float* x, T* out, int n) {
  round_kernel<T><<<(n + 255) / 256, 256>>>(x, out, n);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
}

inline cudaDataType_t cuda_type(Dtype t) { return t == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_16F; }

// cuBLAS and cuBLASLt handles, a 32 MiB workspace, and cuBLASLt's plan (descriptors and chosen algorithm)
// for the last problem, made once per problem so that the timed runs do no host work but the launch.
struct Workspace {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  kl::DeviceBuffer<unsigned char> scratch{std::size_t{32} << 20};
  std::string lt_key;
  kl::DeviceBuffer<std::uint16_t> lt_bias;  // the bias in D's type
  cublasLtMatmulDesc_t lt_op = nullptr;
  cublasLtMatrixLayout_t lt_b = nullptr, lt_a = nullptr, lt_d = nullptr;
  cublasLtMatmulAlgo_t lt_algo{};

  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    drop_plan();
    if (lt) cublasLtDestroy(lt);
    if (blas) cublasDestroy(blas);
  }
  void drop_plan() {
    if (lt_op) cublasLtMatmulDescDestroy(lt_op);
    for (auto* l : {lt_b, lt_a, lt_d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    lt_op = nullptr, lt_b = lt_a = lt_d = nullptr;
    lt_key.clear();
  }
  void ensure_handles() {
    if (!blas) {
      kl::cublas_check(cublasCreate(&blas), "cublasCreate");
      kl::cublas_check(cublasSetWorkspace(blas, scratch.data(), scratch.size()), "cublasSetWorkspace");
    }
    if (!lt) kl::cublas_check(cublasLtCreate(&lt), "cublasLtCreate");
  }
};

// cuBLAS is column-major: row-major D [M, N] is column-major Dᵀ [N, M] = Bᵀ·Aᵀ, so B goes first. It
// writes over its C, so C is first copied into D when β ≠ 0.
inline void launch_cublas(const Problem& p, Workspace& ws, cudaStream_t s) {
  ws.ensure_handles();
  kl::cublas_check(cublasSetStream(ws.blas, s), "cublasSetStream");
  if (p.beta != 0.f)
    CUDA_CHECK(cudaMemcpyAsync(p.d, p.c, static_cast<std::size_t>(p.m) * p.n * 2, cudaMemcpyDeviceToDevice, s));
  const cudaDataType_t t = cuda_type(p.dtype);
  kl::cublas_check(cublasGemmEx(ws.blas, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &p.alpha, p.b, t, p.n, p.a, t, p.k,
                                &p.beta, p.d, t, p.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
  if (p.epilogue()) launch_epilogue(p, s);
}

inline cublasLtEpilogue_t lt_epilogue(const Problem& p) {
  if (p.act == Act::gelu_tanh) return p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  if (p.act == Act::relu) return p.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  return p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// A cuBLASLt refusal is the row's n/a, anything else an error.
inline void lt_check(cublasStatus_t st, const char* call) {
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) throw kl::NotSupported(std::string(call) + ": not supported for this problem");
  kl::cublas_check(st, call);
}

// The plan for p: the bias/activation epilogue (bias per row of Dᵀ = per column of D, f32), layouts as
// launch_cublas's, and the first algorithm the heuristic offers within the workspace.
inline void plan_cublaslt(const Problem& p, Workspace& ws) {
  const std::string key = std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) +
                          dtype_name(p.dtype) + act_name(p.act) + (p.bias ? "b" : "") + (p.beta != 0.f ? "c" : "");
  if (key == ws.lt_key) return;
  ws.drop_plan();
  lt_check(cublasLtMatmulDescCreate(&ws.lt_op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasLtEpilogue_t epi = lt_epilogue(p);
  lt_check(cublasLtMatmulDescSetAttribute(ws.lt_op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "epilogue");
  if (p.bias) {  // cuBLASLt takes the bias in D's type here: rounded once, when the plan is made
    ws.lt_bias.resize(p.n);
    if (p.dtype == Dtype::bf16) launch_round_as(p.bias, reinterpret_cast<__nv_bfloat16*>(ws.lt_bias.data()), p.n);
    else launch_round_as(p.bias, reinterpret_cast<__half*>(ws.lt_bias.data()), p.n);
    const void* bias = ws.lt_bias.data();
    lt_check(cublasLtMatmulDescSetAttribute(ws.lt_op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
             "bias pointer");
  }
  const cudaDataType_t t = cuda_type(p.dtype);
  lt_check(cublasLtMatrixLayoutCreate(&ws.lt_b, t, p.n, p.k, p.n), "layout B");
  lt_check(cublasLtMatrixLayoutCreate(&ws.lt_a, t, p.k, p.m, p.k), "layout A");
  lt_check(cublasLtMatrixLayoutCreate(&ws.lt_d, t, p.n, p.m, p.n), "layout D");
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::size_t bytes = ws.scratch.size();
  lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)),
           "workspace preference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(ws.lt, ws.lt_op, ws.lt_b, ws.lt_a, ws.lt_d, ws.lt_d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  lt_check(st, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0) throw kl::NotSupported("cuBLASLt offers no algorithm for this epilogue and shape");
  ws.lt_algo = result.algo;
  ws.lt_key = key;
}

inline void launch_cublaslt_epilogue(const Problem& p, Workspace& ws, cudaStream_t s) {
  ws.ensure_handles();
  plan_cublaslt(p, ws);
  lt_check(cublasLtMatmul(ws.lt, ws.lt_op, &p.alpha, p.b, ws.lt_b, p.a, ws.lt_a, &p.beta, p.beta != 0.f ? p.c : p.d,
                          ws.lt_d, p.d, ws.lt_d, &ws.lt_algo, ws.scratch.data(), ws.scratch.size(), s),
           "cublasLtMatmul");
}

// ---- the table of steps ----------------------------------------------------------------------------------

// An unfused step's launch, followed by the epilogue kernel when the problem asks for one.
template <void (*Launch)(const Problem&, cudaStream_t)>
void then_epilogue(const Problem& p, Workspace&, cudaStream_t s) {
  Launch(p, s);
  if (p.epilogue()) launch_epilogue(p, s);
}

// A step that applies the bias and the activation itself.
template <void (*Launch)(const Problem&, cudaStream_t)>
void fused(const Problem& p, Workspace&, cudaStream_t s) {
  Launch(p, s);
}

inline std::vector<Step> ladder_steps() {
  std::vector<Step> steps = {
      kl::step("mma_sync", "baseline: mma.sync m16n8k16 + ldmatrix, 128 x 128 tiles, 4 cp.async stages",
               then_epilogue<launch_mma_sync>)
          .needs(80),
  };
  const std::vector<Step>& hopper = hopper_steps();
  steps.insert(steps.end(), hopper.begin(), hopper.end());
  steps.push_back(
      kl::step("cublas", "cublasGemmEx, f32 accumulation (+ the epilogue kernel when asked)", launch_cublas).library());
  steps.push_back(kl::step("cublaslt_epilogue",
                           "cublasLtMatmul with its fused bias (rounded to the dtype) and activation epilogue",
                           launch_cublaslt_epilogue)
                      .library());
  return steps;
}

inline const std::vector<Step> kSteps = ladder_steps();

// Runs a step: validates the problem first (no launch on bad input); a step of sm_90a code is refused
// (n/a) where this process has none for the GPU.
inline void run_step(const Step& st, const Problem& p, Workspace& ws, cudaStream_t s) {
  validate(p);
  if (st.arch_specific) kl::refuse_if(hopper_missing());
  st.launch(p, ws, s);
}

// D = act(α·A·B + β·C + bias) by the fastest path this GPU and shape allow: step 8 on sm_90, else step 1
// and the epilogue kernel on sm_80+, else (and for K or N not a multiple of 8) the CUDA-core kernel.
inline void gemm(const Problem& p, cudaStream_t s) {
  validate(p);
  if (rows_aligned(p) && hopper_available()) return launch_hopper_gemm(p, s);
  const bool tensor_cores = p.dtype == Dtype::bf16 ? kl::arch_missing(gemm_mma_sync<__nv_bfloat16>, 80).empty()
                                                   : kl::arch_missing(gemm_mma_sync<__half>, 80).empty();
  if (rows_aligned(p) && tensor_cores) {
    launch_mma_sync(p, s);
    if (p.epilogue()) launch_epilogue(p, s);
  } else if (p.dtype == Dtype::bf16) {
    launch_simt_as<__nv_bfloat16>(p, static_cast<__nv_bfloat16*>(p.d), s);
  } else {
    launch_simt_as<__half>(p, static_cast<__half*>(p.d), s);
  }
}

}  // namespace lesson08
