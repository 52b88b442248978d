// Exercise 10.1 — the ring's schedule (lesson 10, step 4 `ring`).
//
// G GPUs in a ring, each sending to the next (GPU me to GPU (me + 1) mod G) and receiving from the
// previous. The vector is cut into G chunks. The all-reduce takes 2 (G-1) steps: at each step every
// GPU sends one chunk, and what it sends is either its own input (the first step), its input added to
// the partial sum the previous GPU sent it at the step before, that same sum once it holds every GPU's
// input (it keeps it too), or a full sum it received at the step before (passed on).
//
// Fill in the two functions below. Step 4's kernel calls them, on every GPU, for every step t.
#pragma once

struct RingSchedule {
  // TODO 1: the chunk (0 .. G-1) that GPU `me` sends at step t (0 <= t < 2 (G-1)). At t = 0 a GPU sends
  // its own chunk; at every later step, the chunk its predecessor sent it at step t - 1.
  __host__ __device__ static int chunk(int me, int t, int gpus) { return 0; }

  // TODO 2: what every GPU does at step t: lesson10::Role::send_own, add_send, add_keep or forward
  // (lessons/10_across_gpus/parts.cuh). The chunk a GPU adds at step t holds t + 1 inputs afterwards.
  __host__ __device__ static lesson10::Role role(int t, int gpus) { return lesson10::Role::send_own; }
};
