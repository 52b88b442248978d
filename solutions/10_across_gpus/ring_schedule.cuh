// Exercise 10.1 solved — the ring's schedule (lesson 10, step 4 `ring`).
//
// Why it works: what GPU me - 1 sent at step t - 1 is chunk (me - 1) - (t - 1) = me - t, so GPU me sends
// at step t the chunk that has just landed, and a chunk walks the ring one GPU a step, gaining one input
// each time. Chunk c starts at GPU c (t = 0) and holds all G inputs after the add at step G - 1, at GPU
// c - 1 (= c + G - 1 mod G), which keeps it and starts the all-gather: G - 1 more hops, forwarded.
// Why it is fast: every GPU sends one chunk, 1/G of the vector, at every step, and receives one: all
// links busy in both directions, 2 (G-1)/G of the vector per GPU in all, the least an all-reduce moves.
#pragma once

struct RingSchedule {
  __host__ __device__ static int chunk(int me, int t, int gpus) { return ((me - t) % gpus + gpus) % gpus; }

  __host__ __device__ static lesson10::Role role(int t, int gpus) {
    if (t == 0) return lesson10::Role::send_own;
    if (t < gpus - 1) return lesson10::Role::add_send;
    return t == gpus - 1 ? lesson10::Role::add_keep : lesson10::Role::forward;
  }
};
