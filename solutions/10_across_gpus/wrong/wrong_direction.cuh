// A wrong technique for exercise 10.1: the chunks walk the ring against its direction. GPU me sends
// chunk me + t, but what its predecessor sent it at the step before was chunk me - t: it adds its input
// to a chunk that never arrived. With 2 GPUs, me + t and me - t are the same chunk and it passes; from 3
// GPUs on, the sums are wrong. The check plays the ring on paper for G = 2 .. 8, so it fails anywhere.
#pragma once

struct RingSchedule {
  __host__ __device__ static int chunk(int me, int t, int gpus) { return (me + t) % gpus; }

  __host__ __device__ static lesson10::Role role(int t, int gpus) {
    if (t == 0) return lesson10::Role::send_own;
    if (t < gpus - 1) return lesson10::Role::add_send;
    return t == gpus - 1 ? lesson10::Role::add_keep : lesson10::Role::forward;
  }
};
