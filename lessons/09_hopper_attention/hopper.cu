// Lesson 09, the lesson09_hopper target: this file, and every step file it includes, is compiled for
// sm_90a alone (-gencode=arch=compute_90a,code=sm_90a; see CMakeLists.txt), whatever architectures the
// rest of the build targets. A Hopper step is one file in steps/ (its kernels and an inline launcher of
// type Launcher), included below after the previous step's, and one entry in the table hopper_steps()
// returns. attention.cuh puts that table between step 1 and the library row; main.cu and test.cu walk it.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/check.cuh"
#include "lessons/09_hopper_attention/hopper.cuh"
#include "lessons/09_hopper_attention/steps/02_wgmma.cuh"
#include "lessons/09_hopper_attention/steps/03_tma.cuh"
#include "lessons/09_hopper_attention/steps/04_warp_specialized.cuh"
#include "lessons/09_hopper_attention/steps/05_overlap.cuh"

namespace lesson09 {

namespace {

// Does nothing: it is there to be looked up. Like every kernel of this file it exists only as sm_90a
// SASS, so the CUDA runtime has an image of it for an sm_90 GPU and for no other.
__global__ void hopper_probe() {}

// Why the sm_90a code cannot run on the current GPU ("" when it can).
std::string probe_hopper() {
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, hopper_probe);
  if (e == cudaSuccess) return "";
  if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction) CUDA_CHECK(e);
  (void)cudaGetLastError();  // the failed look-up is the answer, not an error of the run
  return "needs sm_90a (this GPU is sm_" + std::to_string(major * 10 + minor) +
         "; the Hopper steps are compiled for sm_90a alone: wgmma and setmaxnreg run on sm_90 GPUs only)";
}

}  // namespace

// Asked once per process (the first call is a step's untimed check run, never inside a graph capture).
std::string hopper_missing() {
  static const std::string why = probe_hopper();
  return why;
}

const std::vector<Step>& hopper_steps() {
  // Each needs sm_90a: .needs(90).arch_specific().
  static const std::vector<Step> steps = {
      kl::step("wgmma", "a warpgroup's S = QK^T and O += PV by wgmma from shared memory, P from registers; cp.async x2",
               launch_wgmma)
          .needs(90)
          .arch_specific(),
      kl::step("tma", "K, V (and Q) by TMA boxes on mbarriers, 3 stages; one thread issues every load", launch_tma)
          .needs(90)
          .arch_specific(),
      kl::step("warp_specialized", "a producer warpgroup feeds TMA, 2 consumer groups compute; setmaxnreg 24 / 240",
               launch_warp_specialized)
          .needs(90)
          .arch_specific(),
      kl::step("overlap", "S of tile j and PV of tile j-1 in flight together; the softmax runs under the PV GEMM",
               launch_overlap)
          .needs(90)
          .arch_specific(),
  };
  return steps;
}

}  // namespace lesson09
