#!/usr/bin/env python3
"""A CPU model of lesson 05 step 4's selection (one warp per row, steps/04_warp_select.cuh and
parts.cuh): per row of random normal logits (rounded to f16), it counts how many warp-steps of 32
packs pass the vote, how many logits are marked and appended, and the sorts of the buffer by size,
without and with the lanes' maxima bound (raise_to_maxima: k <= 16). It follows the kernel's order:
packs q = first + u * 32 + lane, 4 in flight, the seed from each lane's two best of its first pack
(k <= 16) or of its first batch of 4 packs (k > 16), a keep of the buffer's k best when fewer than
32 P slots are free (k <= 32) or when the marked keys would take the buffer past KEEP_AT keys (k > 32).
A keep is a sort in the kernel for k <= 16 and a radix select above; the model counts them by the
buffer's size rounded up to a power of two. No timing: a count of the work the selection does.

usage: python3 scripts/topk_selection_model.py [--keep-at N] [V K ...]
       (default: 50257 10, 50257 1, 128256 10; --keep-at: KEEP_AT, e.g. 512 for a keep only at a full buffer)
"""
import sys

import numpy as np

P, CAP, IN_FLIGHT, FULL_SORT_K, MAXIMA_K, KEEP_AT = 8, 512, 4, 32, 16, 192  # f16: 8 logits a pack, 512 keys a warp


def model(vocab, k, bound, rows=10, seed=0, keep_at=KEEP_AT):
    rng = np.random.default_rng(seed)
    passes = marked = 0
    sorts = {}
    for _ in range(rows):
        x = rng.standard_normal(vocab).astype(np.float16).astype(np.float32)
        packs = x[:vocab // P * P].reshape(-1, P)
        lane_max = np.full(32, -np.inf, np.float32)
        buf = []
        state = {"thr": np.nan}

        def keep_best():
            n = 64
            while n < len(buf):
                n *= 2
            sorts[n] = sorts.get(n, 0) + 1
            buf[:] = sorted(buf, reverse=True)[:k]
            if len(buf) == k:
                state["thr"] = buf[-1] if np.isnan(state["thr"]) else max(state["thr"], buf[-1])

        seed_packs = 1 if k <= MAXIMA_K else IN_FLIGHT  # each lane's first pack, or its first batch
        lanes = [packs[[q for q in range(lane, 32 * seed_packs, 32) if q < len(packs)]].ravel() for lane in range(32)]
        first_two = np.concatenate([np.sort(v)[-2:] for v in lanes if len(v)])
        state["thr"] = np.nextafter(np.float32(np.sort(first_two)[::-1][k - 1]), -np.inf)
        for first in range(0, len(packs), IN_FLIGHT * 32):
            for u in range(IN_FLIGHT):
                q = np.arange(first + u * 32, first + u * 32 + 32)
                q = q[q < len(packs)]
                if len(q) == 0:
                    continue
                pk = packs[q]
                lane_max[:len(q)] = np.maximum(lane_max[:len(q)], pk.max(axis=1))
                if not (pk > state["thr"]).any():
                    continue
                if bound and k <= MAXIMA_K:
                    kth = np.sort(lane_max)[::-1][k - 1]
                    if kth > -np.inf:
                        b = np.nextafter(kth, -np.inf)
                        state["thr"] = b if np.isnan(state["thr"]) else max(state["thr"], b)
                    if not (pk > state["thr"]).any():
                        continue
                passes += 1
                m = pk > state["thr"]
                incoming = 32 * P if k <= FULL_SORT_K else int(m.sum())
                if len(buf) + incoming > (min(keep_at, CAP) if k > FULL_SORT_K else CAP):
                    keep_best()
                m = pk > state["thr"]
                marked += int(m.sum())
                buf += list(pk[m])
        keep_best()
    per_row = {n: c / rows for n, c in sorted(sorts.items())}
    return {"warp steps": -(-(vocab // P) // 32), "passing the vote": passes / rows, "logits marked": marked / rows,
            "keeps by buffer size": per_row}


def main(args):
    keep_at = KEEP_AT
    if args[:1] == ["--keep-at"]:
        keep_at, args = int(args[1]), args[2:]
    pairs = [(int(args[i]), int(args[i + 1])) for i in range(0, len(args), 2)] or [(50257, 10), (50257, 1),
                                                                                   (128256, 10)]
    for vocab, k in pairs:
        for bound in (False, True):
            print(f"V = {vocab}, K = {k}, {'with' if bound else 'without'} the lanes' maxima (a row):",
                  model(vocab, k, bound, keep_at=keep_at))


if __name__ == "__main__":
    main(sys.argv[1:])
