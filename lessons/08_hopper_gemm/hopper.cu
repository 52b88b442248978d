// Lesson 08, the lesson08_hopper target: this file, and every step file it includes, is compiled for
// sm_90a alone (-gencode=arch=compute_90a,code=sm_90a; see CMakeLists.txt), whatever architectures the
// rest of the build targets. A Hopper step is one file in steps/ (its kernel and launcher) and one entry
// in the table hopper_steps() returns; gemm.cuh puts that table between step 1 and the library rows.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/check.cuh"
#include "lessons/08_hopper_gemm/gemm.cuh"
#include "lessons/08_hopper_gemm/hopper.cuh"
#include "lessons/08_hopper_gemm/steps/02_wgmma.cuh"
#include "lessons/08_hopper_gemm/steps/03_tma_ring.cuh"
#include "lessons/08_hopper_gemm/steps/04_warp_specialized.cuh"
#include "lessons/08_hopper_gemm/steps/05_persistent.cuh"
#include "lessons/08_hopper_gemm/steps/06_cluster.cuh"
#include "lessons/08_hopper_gemm/steps/07_fused_epilogue.cuh"
#include "lessons/08_hopper_gemm/steps/08_tma_store.cuh"

namespace lesson08 {

namespace {

// Does nothing: it is there to be looked up. Like every kernel of this file it exists only as sm_90a
// SASS, so the CUDA runtime has an image of it for an sm_90 GPU and for no other.
__global__ void hopper_probe() {}

}  // namespace

// Asked once per process (the first call is a step's untimed check run, never inside a graph capture).
std::string hopper_missing() {
  static const std::string why = kl::arch_specific_missing(hopper_probe, "sm_90a", "wgmma and setmaxnreg");
  return why;
}

void launch_hopper_gemm(const Problem& p, cudaStream_t s) { launch_tma_store(p, s); }

const std::vector<Step>& hopper_steps() {
  static const std::vector<Step> steps = {
      kl::step("wgmma", "one warpgroup, 128 x 128 tiles: wgmma m64n128k16 from shared memory, TMA loads, one stage",
               then_epilogue<launch_wgmma>)
          .needs(90)
          .arch_specific(),
      kl::step("tma_ring", "3 TMA stages on full mbarriers, one wgmma group in flight; two blocks a SM",
               then_epilogue<launch_tma_ring>)
          .needs(90)
          .arch_specific(),
      kl::step("warp_specialized",
               "producer warpgroup + 2 consumers (m64n256k16), full/empty mbarriers, setmaxnreg 40/232",
               then_epilogue<launch_warp_specialized>)
          .needs(90)
          .arch_specific(),
      kl::step("persistent", "one block a SM walks the tiles in grouped order; the ring runs on across tiles",
               then_epilogue<launch_persistent>)
          .needs(90)
          .arch_specific(),
      kl::step("cluster", "clusters of 2 blocks: each loads half of B and TMA multicasts it to both",
               then_epilogue<launch_cluster>)
          .needs(90)
          .arch_specific(),
      kl::step("fused_epilogue", "bias and activation applied on the accumulators before the one store; tanh.approx",
               fused<launch_fused_epilogue>)
          .needs(90)
          .arch_specific(),
      kl::step("tma_store", "the finished tile through shared memory and a TMA store (64 x 64 boxes), asynchronously",
               fused<launch_tma_store>)
          .needs(90)
          .arch_specific(),
  };
  return steps;
}

}  // namespace lesson08
