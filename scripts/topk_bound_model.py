#!/usr/bin/env python3
"""A CPU model of lesson 05 step 7's bound (bounded_topk in lessons/05_topk_fusion/parts.cuh): per row of
normal(0, 2) logits in f32 (the lesson's inputs), each of a group's G lanes holds 8 logits; the bound is the
K-th largest of the lanes' maxima, counted with repeats, and the candidates are the logits at or above it.
It prints, per V x K, the group width, the mean number of candidates a row, their 99th percentile, and the
share of rows that would fall back to the full sort (more than 32 candidates, or a bound of -inf). No timing:
a count of the keys the bound leaves.

usage: python3 scripts/topk_bound_model.py [V K ...]   (default: the sweep's MoE cells 64 6, 128 8, 256 8, 200 4)
"""
import sys

import numpy as np


def group_width(vocab):
    g = 1
    while g < 32 and g * 8 < vocab:
        g *= 2
    return g


def bounds(x, g, k):
    """Per row of x (rows x 8 g, -inf past the row): the K-th largest lane max, -inf when k > g (none)."""
    lane_max = x.reshape(x.shape[0], g, 8).max(axis=2)
    if k > g:
        return np.full(x.shape[0], -np.inf, np.float32)
    return -np.sort(-lane_max, axis=1)[:, k - 1]


def model(vocab, k, rows=20000, seed=0):
    rng = np.random.default_rng(seed)
    g = group_width(vocab)
    x = np.full((rows, g * 8), -np.inf, np.float32)
    x[:, :vocab] = rng.normal(0.0, 2.0, (rows, vocab)).astype(np.float32)
    bound = bounds(x, g, k)
    listed = (x >= bound[:, None]).sum(axis=1)
    falls_back = (listed > 32) | ~np.isfinite(bound)
    return g, listed.mean(), np.percentile(listed, 99), falls_back.mean()


def main(argv):
    pairs = [int(a) for a in argv] or [64, 6, 128, 8, 256, 8, 200, 4]
    if len(pairs) % 2 or any(v < 1 for v in pairs):
        sys.exit("usage: topk_bound_model.py [V K ...] (positive V and K)")
    print(f"{'V':>6} {'K':>3} {'G':>3} {'mean listed':>12} {'p99':>5} {'falls back':>11}")
    for vocab, k in zip(pairs[::2], pairs[1::2]):
        g, mean, p99, back = model(vocab, k)
        print(f"{vocab:>6} {k:>3} {g:>3} {mean:>12.1f} {p99:>5.0f} {back:>10.2%}")


if __name__ == "__main__":
    main(sys.argv[1:])
