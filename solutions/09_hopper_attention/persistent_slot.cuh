// Exercise 09.3, solved (see exercises/09_hopper_attention for the task).
//
// The ring does not know where one query tile ends and the next begins: the slots are filled in one
// sequence, so key tile kt of the current query tile is the block's (before + kt)-th tile through the
// ring, and exercise 09.1's answer applies to that position. Step 7 keeps the count in `it`, advanced
// by each query tile's number of key tiles in the producer and in the consumer groups alike.
#pragma once

struct Turn {
  int stage, full_parity, empty_parity;
};

__host__ __device__ inline Turn persistent_slot(int, int before, int kt, int stages) {
  const int t = before + kt, round = t / stages;
  return {t % stages, round % 2, (round + 1) % 2};
}
