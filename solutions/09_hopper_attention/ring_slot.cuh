// Exercise 09.1, solved (see exercises/09_hopper_attention for the task).
//
// Slot t % stages has been filled t / stages times before tile t, so tile t is the full barrier's
// phase t / stages: its parity (t / stages) % 2. The producer refills the slot after the consumers'
// (t / stages - 1)-th completion of the empty barrier, parity (t / stages + 1) % 2; for the first round
// that is parity 1, "the phase before phase 0", which a fresh barrier reports complete, so the ring
// starts without a special case. Two bits of state per slot are enough because a slot cannot run two
// phases ahead: the producer waits for the consumers and the consumers for the producer.
#pragma once

struct Slot {
  int stage, full_parity, empty_parity;
};

__host__ __device__ inline Slot ring_slot(int t, int stages) {
  const int round = t / stages;
  return {t % stages, round % 2, (round + 1) % 2};
}
