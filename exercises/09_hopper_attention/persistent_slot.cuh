// Exercise 09.3: the ring of step 7's persistent kernel — which slot and which phases the kt-th key
// tile of a block's n-th query tile uses.
//
// A block of step 7 no longer ends with its query tile: its producer draws query tile after query
// tile from a counter, and their key tiles go through the same ring of `stages` slots, one after
// another, with no pause between query tiles. The query tiles have different numbers of key tiles (in
// causal attention, the diagonal decides), so a query tile can start anywhere in the ring. `before` is
// the number of key tiles the block has put through the ring for its earlier query tiles (n of them).
// As written, persistent_slot starts every query tile afresh at slot 0, round 0: right for the block's
// first query tile only.
//
// TODO: return, for key tile kt of the current query tile,
//   1. stage: its slot in the ring;
//   2. full_parity: the parity of the full barrier's phase that delivers it (how many times was its
//      slot filled before it?);
//   3. empty_parity: the parity the producer waits for on the empty barrier before refilling the slot
//      (the consumers' release of the slot's previous tile; on a fresh barrier, parity 1 returns at once).
// Exercise 09.1's ring_slot is the one-query-tile case.
// Grade it: scripts/grade.sh 09.3
#pragma once

struct Turn {
  int stage, full_parity, empty_parity;
};

__host__ __device__ inline Turn persistent_slot(int n, int before, int kt, int stages) {
  const int round = kt / stages;
  return {kt % stages, round % 2, (round + 1) % 2};
}
