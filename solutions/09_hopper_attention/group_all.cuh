// Exercise 09.4, solved (see exercises/09_hopper_attention for the task).
//
// A named barrier synchronises a subset of the block: `bar.sync id, n` waits until n threads (whole warps)
// have arrived at barrier id (0 is __syncthreads'; a block has 16). Its reduction form, `bar.red.and.pred`
// (kl::named_barrier_all in common/tma.cuh), also returns to every one of them the AND of the predicates
// they brought. Each consumer group takes a barrier of its own, 1 + group, with a count of 128, so groups
// never wait for or mix with one another, and the producer warpgroup, which never arrives, is not counted.
// One instruction a call, no shared memory.
#pragma once

__device__ inline bool group_all(bool pred, int group) { return kl::named_barrier_all(1 + group, 128, pred); }
