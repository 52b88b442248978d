// cuBLAS as the lessons use it: a status check that names the call, and the tensor-core limit the
// tensor-core lessons (07, 08, 09) measure in the same run as their steps.
#pragma once
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "common/buffer.cuh"
#include "common/check.cuh"
#include "common/device.cuh"

namespace kl {

inline void cublas_check(cublasStatus_t st, const char* call) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: cuBLAS status " + std::to_string(st));
}

// A cuBLAS f16 GEMM (f32 accumulation, as the steps use) of 8192³, median of 10 after 3 warm-ups,
// in TFLOP/s; with warmup_ms, after running it back to back that long first (the clock it sustains
// at the power limit, as TimingOptions::warmup_ms).
inline double measure_tensor_tflops(double warmup_ms = 0) {
  const int n = 8192;
  kl::DeviceBuffer<__half> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
  CUDA_CHECK(cudaMemset(a.data(), 0, a.size() * 2));
  CUDA_CHECK(cudaMemset(b.data(), 0, b.size() * 2));
  cublasHandle_t h;
  cublas_check(cublasCreate(&h), "cublasCreate");
  const float one = 1.f, zero = 0.f;
  const auto gemm = [&] {
    cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16F, n, b.data(), CUDA_R_16F,
                              n, &zero, c.data(), CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  if (warmup_ms > 0) kl::median_ms(0, static_cast<int>(warmup_ms / 1.2) + 1, gemm);  // ~1.2 ms a GEMM on an H100
  const double ms = kl::median_ms(3, 10, gemm);
  cublasDestroy(h);
  return 2.0 * n * n * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

}  // namespace kl
