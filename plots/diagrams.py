"""diagrams.py [ROOT]: the figures that ASCII cannot draw well, drawn from the kernels' index formulas
(not from measurements), written as PNG into ROOT/lessons/NN_name/figures/ (ROOT: the repository).

- lessons/06_tiled_gemm/figures/tiling.png: step 6's block tile -> warp tile -> thread's outputs
  (Config<128, 256, 16>, Q = 2: wm = warp / 4 * 32 + lane / 8 * 4 + 16 q, wn = warp % 4 * 64 +
  lane % 8 * 4 + {0, 32}, steps/06_warp_tiled.cuh);
- lessons/07_wmma_attention/figures/mma_fragments.png: which lane holds which element of the
  mma.sync m16n8k16 accumulator C and operand A (the PTX ISA's layouts), and why two C tiles of S,
  packed to f16, are the A fragment of P·V without a shuffle (step 6);
- lessons/09_hopper_attention/figures/swizzle_descriptor.png: the 128-byte swizzle (16-byte chunk c
  of row r stored at chunk c ^ (r % 8)) and the fields of the wgmma shared-memory descriptor
  (wgmma.cuh: smem_desc);
- lessons/09_hopper_attention/figures/pipelines.png: schematic timelines (not to scale) of the
  pipelining ideas of lessons 06, 07 and 09: no overlap, double buffering, cp.async stages, the TMA
  ring with a producer warpgroup, and the softmax under the P·V GEMM;
- lessons/09_hopper_attention/figures/wide_tiles_timeline.png: step 6's schedule, schematic: the
  producer thread, the stage barriers and what each consumer group runs on which tile;
- lessons/09_hopper_attention/figures/persistent_timeline.png: two query tiles on one SM in step 6 (a
  block each) and in step 7 (one block walking both), schematic: where step 7's loads of the next tile
  go under the end of the current one;
- lessons/09_hopper_attention/figures/next_s_timeline.png: the boundary between two query tiles of a
  consumer group in step 7 and in step 8, schematic: step 8 issues the next tile's first S before this
  tile's store when the next Q has landed (tested without waiting), and keeps step 7's order when not.

Every function takes the output path and returns it; main() draws them all."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANE_COLOURS = plt.get_cmap("tab20")
_LANES = [plt.get_cmap("tab20")(i) for i in range(20)] + [plt.get_cmap("tab20b")(i) for i in range(0, 20, 2)] + \
    [plt.get_cmap("Set2")(i) for i in range(2)]


def lane_colour(lane):
    """One colour for each of a warp's 32 lanes."""
    return _LANES[lane % 32]


def save(fig, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def grid(ax, rows, cols, x0=0.0, y0=0.0, cell=1.0, colour="0.85", lw=0.5):
    for r in range(rows + 1):
        ax.plot([x0, x0 + cols * cell], [y0 + r * cell] * 2, color=colour, lw=lw)
    for c in range(cols + 1):
        ax.plot([x0 + c * cell] * 2, [y0, y0 + rows * cell], color=colour, lw=lw)


# --- lesson 06: block -> warp -> thread ------------------------------------------------------------

def thread_cells(warp, lane, q_count=2, warps_n=4):
    """The (row, col) of each output of `lane` of `warp` in step 6's block tile (Q = 2, BN = 256)."""
    wm = warp // warps_n * 16 * q_count + lane // 8 * 4
    wn = warp % warps_n * 64 + lane % 8 * 4
    return [(wm + 16 * q + i, wn + 32 * h + j) for q in range(q_count) for h in range(2) for i in range(4)
            for j in range(4)]


def tiling(path):
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.6), gridspec_kw={"width_ratios": [2.0, 1.6, 1.6], "wspace": 0.25})
    # the block tile: 128 x 256 outputs, 4 x 4 warps of 32 x 64
    ax = axes[0]
    for w in range(16):
        r, c = w // 4 * 32, w % 4 * 64
        ax.add_patch(Rectangle((c, r), 64, 32, facecolor="#fdae6b" if w == 0 else "#deebf7", edgecolor="k", lw=1))
        ax.text(c + 32, r + 16, f"warp {w}", ha="center", va="center", fontsize=9)
    ax.set_xlim(0, 256)
    ax.set_ylim(128, 0)
    ax.set_aspect("equal")
    ax.set_title("1. the block: 128 × 256 outputs of D", fontsize=11)
    ax.set_xlabel("16 warps of 32 × 64 each; warp w sits at\nrow w / 4, column w % 4 (BK = 16 deep in k)", fontsize=9)
    # one warp tile: 32 x 64, each 4 x 4 quadrant labelled with its lane
    ax = axes[1]
    for lane in range(32):
        for q in range(2):
            for h in range(2):
                r, c = lane // 8 * 4 + 16 * q, lane % 8 * 4 + 32 * h
                ax.add_patch(Rectangle((c, r), 4, 4, facecolor="#fdae6b" if lane == 9 else "#deebf7",
                                       edgecolor="0.4", lw=0.5))
                ax.text(c + 2, r + 2, str(lane), ha="center", va="center", fontsize=6.5)
    ax.set_xlim(0, 64)
    ax.set_ylim(32, 0)
    ax.set_aspect("equal")
    ax.set_title("2. warp 0's 32 × 64 tile: the lane of each 4 × 4 quadrant", fontsize=11)
    ax.set_xlabel("lane (lm, ln) = (lane / 8, lane % 8) owns the quadrants at\nrows lm·4 + {0, 16} and columns ln·4 + {0, 32}", fontsize=9)
    # one thread: its 8 x 8 outputs as four 4 x 4 quadrants
    ax = axes[2]
    for (r, c) in thread_cells(0, 9):
        ax.add_patch(Rectangle((c, r), 1, 1, facecolor="#fdae6b", edgecolor="k", lw=0.3))
    grid(ax, 32, 64, colour="0.9", lw=0.3)
    ax.set_xlim(0, 64)
    ax.set_ylim(32, 0)
    ax.set_aspect("equal")
    ax.set_title("3. lane 9 (lm = 1, ln = 1): 8 × 8 = 64 accumulators", fontsize=11)
    ax.set_xlabel("for each k: 2 float4 of A (its rows) and 2 float4 of B (its columns),\n"
                  "then 64 FMAs; a warp's 16-byte shared reads are conflict-free", fontsize=9)
    fig.suptitle("Lesson 06, step 6: block → warp → thread (Config<128, 256, 16>, Q = 2)", fontsize=12)
    return save(fig, path)


# --- lesson 07: mma.sync fragments and the C -> A reuse ---------------------------------------------

def c_owner(row, col):
    """(lane, register) holding C[row][col] of an m16n8 f32 accumulator (PTX ISA layout)."""
    g, t = row % 8, col // 2
    return 4 * g + t, (2 if row >= 8 else 0) + col % 2


def a_owner(row, col):
    """(lane, register) holding A[row][col] of an m16k16 f16 operand (PTX ISA layout)."""
    g, t = row % 8, (col % 8) // 2
    return 4 * g + t, (4 if col >= 8 else 0) + (2 if row >= 8 else 0) + col % 2


def mma_fragments(path):
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), gridspec_kw={"width_ratios": [1, 1, 2]})
    for ax, j in zip(axes[:2], (0, 1)):
        for r in range(16):
            for c in range(8):
                lane, reg = c_owner(r, c)
                ax.add_patch(Rectangle((c, r), 1, 1, facecolor=lane_colour(lane), edgecolor="w", lw=0.5))
                ax.text(c + 0.5, r + 0.5, f"{lane}\nc{reg}", ha="center", va="center", fontsize=5.5)
        ax.set_xlim(0, 8)
        ax.set_ylim(16, 0)
        ax.set_aspect("equal")
        ax.set_xticks(range(0, 9, 2))
        ax.set_title(f"S, key columns {8 * j}–{8 * j + 7}:\nC of mma #{j + 1} (16 × 8, f32)", fontsize=10)
    ax = axes[2]
    for r in range(16):
        for c in range(16):
            lane, reg = a_owner(r, c)
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=lane_colour(lane), edgecolor="w", lw=0.5))
            ax.text(c + 0.5, r + 0.5, f"{lane}\na{reg}", ha="center", va="center", fontsize=5.5)
    ax.plot([8, 8], [0, 16], color="k", lw=2)
    ax.set_xlim(0, 16)
    ax.set_ylim(16, 0)
    ax.set_aspect("equal")
    ax.set_title("P as the A operand of the next mma (16 × 16, f16):\nleft half = C #1 packed, right half = C #2 packed", fontsize=10)
    fig.text(0.5, 0.01, "Each cell: the lane (g = lane / 4 picks the row, t = lane % 4 the column pair) and its register. "
             "Lane 4g + t holds C rows g and g + 8, columns 2t and 2t + 1 of each 8-column tile; packed to f16 pairs, "
             "c0c1 → a0a1, c2c3 → a2a3 (tile 1) and → a4a5, a6a7 (tile 2):\nthe same lane already holds what A needs, "
             "so P goes from S's registers into O += P·V with no shuffle and no trip through shared memory.",
             ha="center", fontsize=8.5, wrap=True)
    fig.suptitle("Lesson 07, step 6: mma.sync.m16n8k16 fragments, the accumulator reused as the next A", fontsize=12, y=1.03)
    return save(fig, path)


# --- lesson 09: the 128-byte swizzle and the descriptor ---------------------------------------------

def swizzled_chunk(row, chunk):
    """Where the 128-byte swizzle puts 16-byte chunk `chunk` of row `row`: chunk ^ (row % 8)."""
    return chunk ^ (row % 8)


DESCRIPTOR_FIELDS = [  # (first bit, width, name), wgmma.cuh's smem_desc
    (0, 14, "start address >> 4"), (14, 2, "0"), (16, 14, "leading byte offset >> 4"), (30, 2, "0"),
    (32, 14, "stride byte offset >> 4"), (46, 3, "0"), (49, 3, "base offset (0)"), (52, 10, "0"),
    (62, 2, "swizzle: 1 = 128 B")]


def swizzle_descriptor(path):
    fig = plt.figure(figsize=(14, 7.5))
    ax = fig.add_axes([0.03, 0.32, 0.42, 0.56])
    for r in range(8):
        for c in range(8):
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=LANE_COLOURS(c * 2), edgecolor="w", lw=1))
            ax.text(c + 0.5, r + 0.5, f"{c}", ha="center", va="center", fontsize=9)
    ax.set_xlim(0, 8)
    ax.set_ylim(8, 0)
    ax.set_aspect("equal")
    ax.set_xticks([i + 0.5 for i in range(8)], [str(i) for i in range(8)])
    ax.set_yticks([i + 0.5 for i in range(8)], [str(i) for i in range(8)])
    ax.set_xlabel("16-byte chunk in the row (8 f16 each)")
    ax.set_ylabel("row (64 f16 = 128 bytes)")
    ax.set_title("logical: row r, chunk c (a K-major tile of 8 rows × 64 f16)", fontsize=10)
    ax = fig.add_axes([0.55, 0.32, 0.42, 0.56])
    for r in range(8):
        for c in range(8):
            p = swizzled_chunk(r, c)
            ax.add_patch(Rectangle((p, r), 1, 1, facecolor=LANE_COLOURS(c * 2), edgecolor="w", lw=1))
            ax.text(p + 0.5, r + 0.5, f"{c}", ha="center", va="center", fontsize=9)
    ax.set_xlim(0, 8)
    ax.set_ylim(8, 0)
    ax.set_aspect("equal")
    ax.set_xticks([i + 0.5 for i in range(8)], [str(i) for i in range(8)])
    ax.set_yticks([i + 0.5 for i in range(8)], [str(i) for i in range(8)])
    ax.set_xlabel("16-byte slot in shared memory (slot = c ^ (r % 8))")
    ax.set_title("in shared memory, 128-byte swizzle: a column of chunks (same c)\nlands in 8 different slots, so 8 rows read "
                 "together hit all 32 banks", fontsize=10)
    ax = fig.add_axes([0.03, 0.03, 0.94, 0.2])
    for first, width, name in DESCRIPTOR_FIELDS:
        x = 63 - (first + width - 1)
        ax.add_patch(Rectangle((x, 0), width, 1, facecolor="0.9" if name == "0" else "#9ecae1", edgecolor="k"))
        if width > 4:
            ax.text(x + width / 2, 0.5, name, ha="center", va="center", fontsize=8)
        elif name != "0":  # a narrow field: its name above the box
            ax.text(x + width / 2, 1.25, name, ha="center", va="bottom", fontsize=8)
        else:
            ax.text(x + width / 2, 0.5, name, ha="center", va="center", fontsize=7)
        ax.text(x + width - 0.5, -0.35, str(first), ha="center", va="center", fontsize=7)
    ax.set_xlim(0, 64)
    ax.set_ylim(-0.6, 1.8)
    ax.axis("off")
    ax.set_title("the 64-bit wgmma shared-memory descriptor (bit 63 left, bit 0 right; numbers: each field's first bit). "
                 "K-major Q and K: stride offset 1024 (8 rows); V through the transpose bit: leading offset = the bytes "
                 "between its 64-column panels", fontsize=9)
    fig.suptitle("Lesson 09: the 128-byte swizzle and the wgmma descriptor", fontsize=12, y=1.0)
    return save(fig, path)


# --- the pipelines: schematic timelines ----------------------------------------------------------

def bars(ax, y, items, height=0.6):
    for start, length, label, colour in items:
        ax.add_patch(Rectangle((start, y - height / 2), length, height, facecolor=colour, edgecolor="k", lw=0.6))
        ax.text(start + length / 2, y, label, ha="center", va="center", fontsize=7)


def timeline(path, rows, x_end, xlabel, title, note=None):
    """Draws rows of (label, bars) top to bottom on a schematic time axis from 0 to x_end, with an
    optional note under the last row."""
    fig, ax = plt.subplots(figsize=(14, 0.62 * len(rows) + (1.6 if note else 1.2)))
    for y, (label, items) in enumerate(rows):
        bars(ax, -y, items)
        ax.text(-0.3, -y, label, ha="right", va="center", fontsize=8.5)
    if note:
        ax.text(5.0, -len(rows) + 0.15, note, ha="center", fontsize=8)
    ax.set_xlim(-0.2, x_end)
    ax.set_ylim(-len(rows) - 0.1 if note else -len(rows) + 0.4, 0.6)
    ax.set_yticks([])
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=12)
    for s in ("top", "right", "left"):
        ax.spines[s].set_visible(False)
    return save(fig, path)


def pipelines(path):
    load, landing, comp, soft, gemm = "#fdae6b", "#fee6ce", "#9ecae1", "#a1d99b", "#bcbddc"
    rows = []
    # 1. no overlap: load tile k, barrier, compute tile k, barrier
    rows.append(("no overlap (06 steps 2–4)", [(i * 3, 1.4, f"load {i}", load) for i in range(4)]
                 + [(i * 3 + 1.5, 1.4, f"FMA {i}", comp) for i in range(3)]))
    # 2. double buffering: tile k + 1 is loaded into the other buffer while tile k is computed
    rows.append(("double buffering (06 step 5): loads", [(i * 1.5, 1.4, f"load {i} → buf {i % 2}", load) for i in range(7)]))
    rows.append(("double buffering: FMAs", [(1.5 + i * 1.5, 1.4, f"FMA {i} (buf {i % 2})", comp) for i in range(6)]))
    # 3. cp.async with 3 stages: each copy is issued and left in flight; three are on their way at once
    for stage in range(3):
        rows.append((f"cp.async, 3 stages (06/07 step 6): stage {stage}",
                     [(i * 1.5, 3.0, f"tile {i} in flight", load) for i in range(stage, 7, 3)]))
    rows.append(("cp.async, 3 stages: math", [(3.1 + i * 1.5, 1.4, f"mma on tile {i}", comp) for i in range(5)]))
    # 4. the TMA ring: one producer thread issues a box; it lands and completes full[s]; the consumers
    # release empty[s] when done, which lets the producer refill the slot
    rows.append(("TMA ring (09 steps 3–4): producer issues", [(i * 1.5, 0.35, f"{i}", load) for i in range(7)]))
    rows.append(("TMA ring: boxes landing", [(i * 1.5 + 0.35, 1.1, f"tile {i} → full[{i % 3}]", landing) for i in range(7)]))
    rows.append(("TMA ring: consumer warpgroups", [(1.5 + i * 1.5, 1.4, f"tile {i}, then empty[{i % 3}]", comp)
                                                  for i in range(6)]))
    # 5. the softmax of tile j under the P·V GEMM of tile j - 1
    rows.append(("softmax under P·V, as step 5's source asks: tensor cores",
                 [(i * 2.4, 1.0, f"S{i}", gemm) for i in range(5)] + [(i * 2.4 + 1.0, 1.2, f"P{i - 1}·V", gemm)
                                                                    for i in range(1, 4)]))
    rows.append(("CUDA cores (source order; ptxas waits for P·V first)", [(i * 2.4 + 1.05, 1.1, f"softmax S{i}", soft) for i in range(4)]))
    return timeline(path, rows, 11, "time (schematic, not to scale: the lessons' tables give the measured times)",
                    "Pipelining: what overlaps what")


def wide_tiles_timeline(path, tiles=6, stages=3):
    """Step 6 of lesson 09 (steps/06_wide_tiles.cuh): who works on which 128-key tile when. The producer
    thread waits for empty[s], then issues tile t's K and V into stage s = t % stages (full[s] counts
    the bytes); each consumer group waits for full[s], issues S_t with P_(t-1)·V_(t-1), runs the softmax
    of S_t under that GEMM, then rescales O and arrives on empty[s of t - 1] (the order of the source; ptxas
    moves the wait for P·V above the softmax, lesson 09's NOTES.md)."""
    load, landing, gemm, soft, bar = "#fdae6b", "#fee6ce", "#bcbddc", "#a1d99b", "0.75"
    tile, start0 = 2.0, 1.4  # a consumer group's time per tile, and when tile 0's S starts (schematic)
    # tile t < stages goes out at once; later ones when the stage's previous tile (t - stages) was
    # released, i.e. after P·V of that tile, which runs in the consumers' iteration t - stages + 1
    issue = [0.42 * t if t < stages else start0 + 0.1 + (t - stages + 1) * tile + 1.98 for t in range(tiles)]
    rows = [("producer (1 thread of warpgroup 0)",
             [(issue[t], 0.4, f"{t}→s{t % stages}", load) for t in range(tiles)]),
            ("TMA boxes landing: full[s] completes",
             [(issue[t] + 0.4, 0.9, f"tile {t}", landing) for t in range(tiles)])]
    for g in range(2):
        start = start0 + 0.1 * g
        rows.append((f"consumer group {g}: tensor cores",
                     [(start + t * tile, 0.8, f"S{t}", gemm) for t in range(tiles - 1)]
                     + [(start + t * tile + 0.8, 1.0, f"P{t - 1}·V{t - 1}", gemm) for t in range(1, tiles - 1)]))
        rows.append((f"consumer group {g}: CUDA cores",
                     [(start + t * tile + 0.85, 0.9, f"softmax S{t}", soft) for t in range(tiles - 1)]
                     + [(start + t * tile + 1.8, 0.18, "", bar) for t in range(1, tiles - 1)]))
    return timeline(path, rows, 12.5, "time (schematic, not to scale); tiles of 128 keys, 3 stages of K and V",
                    "Lesson 09, step 6: the producer, the consumer groups and the stage barriers",
                    note="grey: O *= α, then arrive on empty[s] of the tile P·V has read (its stage may be "
                    "refilled).  D = 64: a third consumer group, the same as these two.\nThe order of the source: "
                    "in the SASS the wait for P·V comes before the softmax, which then runs after P·V (NOTES.md).")


def persistent_timeline(path):
    """Steps 6 and 7 of lesson 09 on one SM, two query tiles of 4 key tiles each (schematic). Step 6: a
    block per tile, so the second block's start (launch, barriers, Q's and the first K/V's loads) waits
    for the first block's end (the last P·V, O's store). Step 7 (steps/07_persistent.cuh): the producer
    draws the next tile once this one's loads are issued and loads its first K/V as soon as a stage is
    free; the groups arrive on Q's empty barrier after their last S and the next Q loads, so tile 1's data
    has landed when the groups finish tile 0's store."""
    load, landing, gemm, soft, fixed, store = "#fdae6b", "#fee6ce", "#bcbddc", "#a1d99b", "0.75", "#9ecae1"
    k = 4  # key tiles a query tile

    def query_tile(t, b):
        """Query tile b's k key tiles from time t, then its store: the bars and the time they end."""
        bars_b = [(t + i, 0.95, f"tile {b}.{i}", gemm) for i in range(k)] + [(t + k, 0.9, f"store O{b}", store)]
        return bars_b, t + k + 0.9

    # step 6: a block per query tile (start, Q and the first K/V land, the tiles, the store), one after the other
    t, lands, items = 0.0, [], []
    for b in range(2):
        items.append((t, 0.6, f"start {b}", fixed))
        lands.append((t + 0.6, 0.9, f"Q{b}, K/V{b},0 land", landing))
        bars_b, t = query_tile(t + 1.5, b)
        items += bars_b
    rows = [("step 6, one block a tile: TMA", lands), ("step 6: consumer groups", items)]
    # step 7: one block; tile 1's first K/V loads as a stage frees, its Q once the groups' last S of tile 0
    # is done, its other K/V as stages free
    last_s = 1.5 + (k - 1) + 0.45
    tile0, t = query_tile(1.5, 0)
    tile1, _ = query_tile(t, 1)
    rows += [("step 7, one block walking tiles: producer",
              [(0.0, 0.6, "start", fixed), (0.6, 0.3, "Q0", load)]
              + [(0.9 + 0.2 * i, 0.2, f"{i}", load) for i in range(3)]
              + [(2.5, 0.2, "3", load), (3.5, 0.3, "1.0", load), (last_s, 0.3, "Q1", load),
                 (last_s + 0.3, 0.3, "1.1", load)]),
             ("step 7: TMA", [(0.6, 0.9, "Q0, K/V0,0 land", landing), (3.5, 0.9, "K/V1,0 lands", landing),
                              (last_s, 0.9, "Q1 lands", landing)]),
             ("step 7: consumer groups", tile0 + tile1),
             ("step 7: Q's empty barrier", [(last_s - 0.05, 0.1, "", soft), (last_s + k + 0.85, 0.1, "", soft)])]
    return timeline(path, rows, 13.5,
                    "time (schematic, not to scale); 4 key tiles a query tile; store: the last P·V, then O",
                    "Lesson 09, step 7: the next tile's loads under the end of this one",
                    note="green tick: the groups' last S = Q·Kᵀ of a tile is done; they arrive on Q's empty "
                    "barrier, and the producer loads the next tile's Q (its first K/V went when a stage freed).")


def next_s_timeline(path):
    """Step 8 of lesson 09 (steps/08_next_s.cuh) against step 7, one consumer group at the end of query
    tile 0 and the start of tile 1 (schematic). Step 7: the last P·V, O's store (shuffles and global
    stores: no tensor core), the wait for Q1's barrier, then S1.0 = Q1·K1.0ᵀ alone on the tensor cores,
    then its softmax. Step 8: after the last P·V the group tests Q1's barrier without waiting
    (mbarrier_ready in every thread, ANDed over the group); if Q1 is in, S1.0 is issued first and O0 is stored while
    it computes, so the softmax of S1.0 starts and ends earlier; if not, O0 is stored first, as in step 7."""
    landing, gemm, soft, fixed, store, saved = "#fee6ce", "#bcbddc", "#a1d99b", "0.75", "#9ecae1", "white"
    pv = (0.0, 2.0, "last P0·V", gemm)  # the last GEMM of tile 0, the same in every case
    s_len, soft_len, store_len, tick = 1.6, 1.8, 2.2, 0.15

    def in_order(label, test):
        """Step 7's order (and step 8's when Q1 has not landed): store O0, wait for Q1's barrier, S1.0,
        its softmax; `test`: step 8's readiness test after the last P·V."""
        wait = 2.15 + store_len
        s0 = wait + tick + 0.05
        cuda = [(2.15, store_len, "store O0", store), (wait, tick, "", fixed), (s0 + s_len + 0.1, soft_len,
                                                                                 "softmax S1.0", soft)]
        return [(f"{label}: tensor cores", [pv, (s0, s_len, "S1.0", gemm), (s0 + s_len + soft_len + 0.2, 1.4,
                                                                          "S1.1, …", gemm)]),
                (f"{label}: CUDA cores", cuda + ([(2.0, tick, "", fixed)] if test else []))], s0 + s_len + 0.1

    step7, soft7 = in_order("step 7", False)
    # step 8, Q1 landed: S1.0 issued at once, O0 stored under it, the softmax once both are done
    s8 = 2.0 + tick + 0.05
    soft8 = max(s8 + s_len, s8 + store_len) + 0.1
    landed = [("step 8, Q1 landed: TMA", [(0.3, 1.4, "Q1 lands", landing)]),
              ("step 8, Q1 landed: tensor cores", [pv, (s8, s_len, "S1.0", gemm),
                                                   (soft8 + soft_len + 0.2, 1.4, "S1.1, …", gemm)]),
              ("step 8, Q1 landed: CUDA cores", [(2.0, tick, "", fixed),
                                                 (s8, store_len, "store O0 (under S1.0)", store),
                                                 (soft8, soft_len, "softmax S1.0", soft),
                                                 (soft8 + soft_len, soft7 - soft8, "time saved vs step 7", saved)])]
    not_landed, _ = in_order("step 8, Q1 not landed", True)
    rows = step7 + landed + [("step 8, Q1 not landed: TMA", [(1.2, 2.2, "Q1 lands", landing)])] + not_landed
    return timeline(path, rows, 10.5,
                    "time (schematic, not to scale); one consumer group, the end of query tile 0 and the start "
                    "of tile 1",
                    "Lesson 09, step 8: the next tile's first S under this tile's store",
                    note="grey: Q1's barrier. Step 7 waits on it after the store; step 8 tests it after the last "
                    "P·V without waiting (mbarrier_ready, ANDed over the group by bar.red).\nLanded: S1.0 is issued, "
                    "then O0 is stored while it computes. Not landed: O0 first, as in step 7 (S first would hold "
                    "the store behind the wait for Q1).")


FIGURES = [("06_tiled_gemm", "tiling.png", tiling), ("07_wmma_attention", "mma_fragments.png", mma_fragments),
           ("09_hopper_attention", "swizzle_descriptor.png", swizzle_descriptor),
           ("09_hopper_attention", "pipelines.png", pipelines),
           ("09_hopper_attention", "wide_tiles_timeline.png", wide_tiles_timeline),
           ("09_hopper_attention", "persistent_timeline.png", persistent_timeline),
           ("09_hopper_attention", "next_s_timeline.png", next_s_timeline)]


def main(root=ROOT):
    out = []
    for lesson, name, draw in FIGURES:
        out.append(draw(os.path.join(root, "lessons", lesson, "figures", name)))
        print(out[-1])
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ROOT)
