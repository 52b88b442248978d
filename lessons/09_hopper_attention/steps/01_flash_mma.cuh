// Lesson 09, step 1: the baseline, lesson 07's best flash step (step 6, flash_mma) as it is. The
// FlashAttention-2 recipe on Ampere's instructions: 128 queries per block (8 warps × 16 rows), Q, S, P
// and O in registers, S = Q·Kᵀ and O += P·V by mma.sync m16n8k16 from ldmatrix of swizzled shared
// tiles, the online softmax on the accumulator fragments, K and V streamed in by cp.async (two stages).
// Its kernel and launcher are in lessons/07_wmma_attention/steps/06_flash_mma.cuh, the pieces they use
// in that lesson's parts.cuh; the launcher refuses the step below sm_80 (n/a: needs sm_80), where it
// is compiled out.
//
// What the Hopper steps change: mma.sync is a warp-wide 16×8×16 instruction whose operands all pass
// through registers (ldmatrix first); on the H100 it stays far below the tensor-core peak (lesson 07's
// README). wgmma (step 2) is issued by a warpgroup of 4 warps, reads B (and A, unless A is in
// registers) from shared memory and runs asynchronously, so the tensor cores keep working while the
// warps do other things.
#pragma once
#include "lessons/07_wmma_attention/steps/06_flash_mma.cuh"

namespace lesson09 {

using lesson07::launch_flash_mma;  // (const Problem&, Workspace&, cudaStream_t): no copy of the kernel

}  // namespace lesson09
