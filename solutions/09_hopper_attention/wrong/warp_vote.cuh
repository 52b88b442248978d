// A wrong technique for exercise 09.4, kept to test the grader: each warp votes on its own (__all_sync),
// so a warp whose 32 threads all saw true goes one way while another warp of the same group goes the other.
// In step 8 that splits the warpgroup across two paths that both issue wgmma. It must fail the check.
#pragma once

__device__ inline bool group_all(bool pred, int group) { return __all_sync(0xffffffffu, pred); }
