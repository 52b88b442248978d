// A wrong technique for exercise 09.1, kept to test the grader: the producer waits on the empty
// barrier with the same parity as the consumers' full one. Its first wait is for phase 0 of a fresh
// barrier, which only the consumers can complete, and they are waiting for the tile: the pipeline
// stalls (the grader's bounded waits report it). It must fail the check.
#pragma once

struct Slot {
  int stage, full_parity, empty_parity;
};

__host__ __device__ inline Slot ring_slot(int t, int stages) {
  const int round = t / stages;
  return {t % stages, round % 2, round % 2};
}
