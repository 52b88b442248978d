// Step 5: a block per row. Its 8 warps each run step 4's selection on a share of the row, then warp 0
// merges their 8 lists with one more selection (select_from_lists). The kernel, topk_block, is in
// parts.cuh, since step 6 splits a row over several of these blocks.
#pragma once
#include <cstdint>

#include "lessons/05_topk_fusion/parts.cuh"

namespace lesson05 {

inline void launch_block_per_row(const Problem& p, Workspace&, cudaStream_t s) {
  with_type(p.dtype, [&](auto t) {
    using T = decltype(t);
    // one slice, the whole row: the block writes the answer, so the slices' buffers are not needed
    with_bound(p.k, [&](auto bound) {
      topk_block<T, bound><<<static_cast<unsigned>(p.rows), kBlockThreads, 0, s>>>(
          static_cast<const T*>(p.x), p.vocab, p.k, 1, p.vocab, p.prob, p.idx, nullptr, nullptr);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace lesson05
