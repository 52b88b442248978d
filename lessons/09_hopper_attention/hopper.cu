// Lesson 09, the lesson09_hopper target: this file, and every step file it includes, is compiled for
// sm_90a alone (-gencode=arch=compute_90a,code=sm_90a; see CMakeLists.txt), whatever architectures the
// rest of the build targets. A Hopper step is one file in steps/ (its kernels and an inline launcher of
// type Launcher), included below after the previous step's, and one entry in the table hopper_steps()
// returns. attention.cuh puts that table between step 1 and the library row; main.cu and test.cu walk it.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "common/arch.cuh"
#include "common/check.cuh"
#include "lessons/09_hopper_attention/hopper.cuh"
#include "lessons/09_hopper_attention/steps/02_wgmma.cuh"
#include "lessons/09_hopper_attention/steps/03_tma.cuh"
#include "lessons/09_hopper_attention/steps/04_warp_specialized.cuh"
#include "lessons/09_hopper_attention/steps/05_overlap.cuh"
#include "lessons/09_hopper_attention/steps/06_wide_tiles.cuh"
#include "lessons/09_hopper_attention/steps/07_persistent.cuh"
#include "lessons/09_hopper_attention/steps/08_next_s.cuh"

namespace lesson09 {

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
      kl::step("wide_tiles",
               "step 5 on 128-key tiles, 3 stages; 3 consumer groups at D = 64: half the barriers and row reductions "
               "per key",
               launch_wide_tiles)
          .needs(90)
          .arch_specific(),
      kl::step("persistent",
               "step 6 in one block per SM drawing query tiles from a counter: the next tile's loads run under "
               "the last P.V and O's store",
               launch_persistent)
          .needs(90)
          .arch_specific(),
      kl::step("next_s",
               "step 7 with the next tile's first S = QK^T issued before this tile's O store, once its Q has "
               "landed: the store runs under the GEMM",
               launch_next_s)
          .needs(90)
          .arch_specific(),
  };
  return steps;
}

}  // namespace lesson09
