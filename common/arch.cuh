// Which steps can run here. A step that needs newer hardware (cp.async, mma.sync m16n8k16,
// __reduce_*_sync: sm_80; thread-block clusters: sm_90) is compiled only for architectures that have
// it (KL_ARCH_AT_LEAST below); whether it can run is decided by what its kernel was compiled for, not
// only by the GPU: a PTX-only build for compute_75, JIT-compiled by the driver on an H100, holds the
// sm_75 code, in which such a step is compiled out.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "common/check.cuh"

// True in device code compiled for sm_<arch> or newer, and in host code (where kernels are only
// launched, never compiled). Wrap a step's kernel body in it; the #else branch is left empty, and the
// launcher refuses the step first (require_arch).
#if defined(__CUDA_ARCH__)
#define KL_ARCH_AT_LEAST(arch) (__CUDA_ARCH__ >= (arch)*10)
#else
#define KL_ARCH_AT_LEAST(arch) 1
#endif

namespace kl {

// The architecture (e.g. 80) whose code of `kernel` this process runs: the virtual architecture its
// PTX was written for, which is what KL_ARCH_AT_LEAST saw when the kernel was compiled.
template <class Kernel>
int compiled_arch(Kernel* kernel) {
  cudaFuncAttributes a{};
  CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(kernel)));
  return a.ptxVersion;
}

// The reason a kernel that needs sm_<needs> cannot run here ("" when it can): the GPU is older, or
// the kernel was compiled for an older architecture.
template <class Kernel>
std::string arch_missing(Kernel* kernel, int needs) {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (major * 10 + minor < needs)
    return "needs sm_" + std::to_string(needs) + " (this GPU is sm_" + std::to_string(major * 10 + minor) + ")";
  const int compiled = compiled_arch(kernel);
  if (compiled < needs)
    return "needs sm_" + std::to_string(needs) + " (this build's code is for compute_" + std::to_string(compiled) +
           "; add " + std::to_string(needs) + " to CMAKE_CUDA_ARCHITECTURES)";
  return "";
}

// What a step's launcher calls first: throws NotSupported (the driver shows the step n/a) with
// arch_missing's reason when `Kernel` cannot run here. Asked once per kernel, on its first launch (the
// untimed check run, so never inside a CUDA-graph capture).
// Throws NotSupported with `why`, the reason some code cannot run here ("" when it can).
inline void refuse_if(const std::string& why) {
  if (!why.empty()) throw NotSupported(why);
}

template <auto Kernel>
void require_arch(int needs) {
  static const std::string why = arch_missing(Kernel, needs);
  refuse_if(why);
}

// The reason arch-specific code (sm_90a: wgmma, setmaxnreg) cannot run here ("" when it can): `probe`
// is a kernel of a target compiled for that architecture alone (SASS, no PTX), which the CUDA runtime
// finds only on a GPU of exactly that architecture. `arch` ("sm_90a") and `what` ("wgmma and
// setmaxnreg") word the answer.
template <class Kernel>
std::string arch_specific_missing(Kernel* probe, const char* arch, const char* what) {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(probe));
  if (e == cudaSuccess) return "";
  if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction) CUDA_CHECK(e);
  (void)cudaGetLastError();  // the failed look-up is the answer, not an error of the run
  return std::string("needs ") + arch + " (this GPU is sm_" + std::to_string(major * 10 + minor) + "; " + what +
         " are compiled for " + arch + " alone and run on that architecture only)";
}

}  // namespace kl
