"""allreduce_model.py [--csv results/h200/lesson10.csv] [--step NAME] [--out DIR]: lesson 10 beyond
two GPUs, on paper. An alpha-beta cost model of the all-reduce of n bytes over G GPUs (ring, double
binary tree, two-level), drawn for G = 2 ... 1024 into DIR/lesson10_model.png (default results/h200).

Every link costs alpha seconds a message plus bytes / beta. The links are the assumptions of LINKS
below. With --csv, the NVLink link is fitted to the measured 2-GPU times of one step of lesson 10
(t = alpha_eff + n / beta_eff, read as a 2-GPU ring: alpha_eff = 2 alpha, beta_eff = beta); the
network link stays an assumption. Without the CSV, every link is an assumption and the figure's title
and stderr say so. Nothing in the figure is a measurement: it is the model's prediction.

The formulas, n bytes per GPU, G GPUs, g GPUs a node, N = G / g nodes:
  ring          2 (G - 1) (alpha + n / (G beta))            = 2 (G-1) alpha + 2 (G-1)/G * n / beta
  tree          2 ceil(log2 G) alpha + 2 n / beta            (reduce up, broadcast down, pipelined)
  two-level     reduce-scatter in the node, ring across nodes on n / g bytes, all-gather in the node:
                2 (g - 1) (alpha_nv + n / (g beta_nv)) + 2 (N - 1) (alpha_net + n / (g N beta_net'))
  bus bandwidth busbw = algbw * 2 (G - 1) / G with algbw = n / t (NCCL's definition)
"""
import argparse
import collections
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klplot  # noqa: E402
import numpy as np  # noqa: E402  (matplotlib's own dependency)

Link = collections.namedtuple("Link", "name alpha beta source")

# The assumptions, one table. alpha in seconds per message (one step of an algorithm), beta in bytes
# per second one way, per GPU. Change them here or pass other Link values to the functions.
LINKS = {
    # NVLink 4 on H100 SXM: the data sheet gives 900 GB/s per GPU, both directions together, so
    # 450 GB/s each way (NVIDIA H100 Tensor Core GPU data sheet, "NVLink: 900GB/s",
    # https://www.nvidia.com/en-us/data-center/h100/).
    # alpha: an assumption of 2 us a step. NCCL's own tuning model (table hwLat in
    # https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc) charges a ring step on NVLink
    # from about 0.5 us (LL protocol) to several us (Simple protocol); a launch adds a few us a call.
    "nvlink": Link("NVLink 4", 2e-6, 450e9,
                   "H100 data sheet: 900 GB/s bidirectional per GPU; alpha assumed (NCCL tuning.cc order)"),
    # InfiniBand NDR: 400 Gb/s a port = 50 GB/s each way (NVIDIA ConnectX-7 NDR adapter data sheet;
    # the DGX H100 User Guide lists 8 such ports for the compute fabric, one next to each GPU).
    # alpha: an assumption of 5 us a step (NIC, switch and the proxy thread that drives the NIC;
    # NCCL's hwLat charges the network no less than NVLink for every protocol).
    "net": Link("InfiniBand NDR", 5e-6, 50e9,
                "ConnectX-7 NDR: 400 Gb/s per port per direction; alpha assumed"),
}
GPUS_PER_NODE = 8  # an HGX/DGX H100 node: 8 GPUs on NVSwitch (assumption)
NICS_PER_NODE = 8  # DGX H100: 8 ConnectX-7 ports of 400 Gb/s for the compute fabric, one per GPU (assumption)

SIZES = {"1 MiB": 1 << 20, "64 MiB": 64 << 20, "1 GiB": 1 << 30}
GPU_COUNTS = [2 ** k for k in range(1, 11)]  # 2 ... 1024
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8}
DEFAULT_CSV = os.path.join(klplot.ROOT, "results", "h200", "lesson10.csv")


# --- one level: G GPUs on one kind of link ----------------------------------------------------------

def ring(n, G, alpha, beta):
    """Ring all-reduce: G - 1 reduce-scatter steps and G - 1 all-gather steps, each moving n / G
    bytes a GPU. Bandwidth-optimal (2 (G-1)/G * n / beta), latency linear in G."""
    if G < 2:
        return 0.0
    return 2 * (G - 1) * (alpha + n / (G * beta))


def tree(n, G, alpha, beta):
    """Double binary tree (NCCL's): reduce up, broadcast down, about log2 G hops each way; the data is
    pipelined in chunks, and each GPU sends about n up and n down (half in each of the two trees),
    so the bandwidth term is 2 n / beta whatever G. Pipeline fill is left out."""
    if G < 2:
        return 0.0
    return 2 * math.ceil(math.log2(G)) * alpha + 2 * n / beta


# --- two levels: nodes of g GPUs on NVLink, joined by the network -----------------------------------

def _split(G, g):
    if G <= g:
        return G, 1
    if G % g:
        raise ValueError(f"G = {G} is not a multiple of {g} GPUs a node")
    return g, G // g


def _net_beta(links, g, nics):
    """Bandwidth of the network a GPU can use when every GPU of a node sends at once: the node's
    NICs shared by its g GPUs."""
    return links["net"].beta * min(nics, g) / g


def flat_ring(n, G, links=LINKS, g=GPUS_PER_NODE, nics=NICS_PER_NODE):
    """One ring over all G GPUs (as many rings as NICs, NCCL's channels, each crossing the node
    boundary on its own NIC). Within a node: the NVLink ring. Across nodes every step waits for the
    slowest hop (alpha of the network), and its bytes go through NVLink and through the node's NICs,
    whichever is slower."""
    nv, net = links["nvlink"], links["net"]
    local, nodes = _split(G, g)
    if nodes == 1:
        return ring(n, G, nv.alpha, nv.beta)
    return ring(n, G, max(nv.alpha, net.alpha), min(nv.beta, net.beta * nics))


def flat_tree(n, G, links=LINKS, g=GPUS_PER_NODE, nics=NICS_PER_NODE):
    """NCCL's tree across nodes: log2 g hops inside the node on NVLink and log2 N hops between nodes
    on the network, each way (NCCL chains the GPUs of a node; the model counts a binary tree there
    too); the bandwidth term 2 n over the slower of NVLink and the node's NICs."""
    nv, net = links["nvlink"], links["net"]
    local, nodes = _split(G, g)
    if nodes == 1:
        return tree(n, G, nv.alpha, nv.beta)
    hops = 2 * math.ceil(math.log2(local)) * nv.alpha + 2 * math.ceil(math.log2(nodes)) * net.alpha
    return hops + 2 * n / min(nv.beta, net.beta * nics)


def two_level(n, G, links=LINKS, g=GPUS_PER_NODE, nics=NICS_PER_NODE):
    """Hierarchical all-reduce: a ring reduce-scatter inside each node (each GPU ends with n / g
    bytes summed over its node), then g rings across the N nodes at once, one per local rank, each on
    n / g bytes, then a ring all-gather inside the node (the broadcast of each GPU's part). The phases
    follow one another; nothing overlaps."""
    nv = links["nvlink"]
    local, nodes = _split(G, g)
    if nodes == 1:
        return ring(n, G, nv.alpha, nv.beta)
    inside = 2 * (local - 1) * (nv.alpha + n / (local * nv.beta))
    return inside + ring(n / local, nodes, links["net"].alpha, _net_beta(links, local, nics))


ALGORITHMS = {"ring": flat_ring, "tree": flat_tree, "two-level": two_level}


def algbw(n, t):
    return n / t


def busbw(n, G, t):
    """NCCL's bus bandwidth of an all-reduce: algbw * 2 (G - 1) / G (nccl-tests, doc/PERFORMANCE.md)."""
    return algbw(n, t) * 2 * (G - 1) / G


# --- the fit to the measured 2-GPU numbers ----------------------------------------------------------

def fit(sizes, seconds):
    """Least squares on t = alpha_eff + n / beta_eff: (alpha_eff in s, beta_eff in bytes/s), on the
    relative residuals (model - t) / t, so that every size weighs alike: sizes from 4 KiB to 1 GiB span
    five orders of magnitude of time, and plain residuals would let the largest set alpha too.
    Needs two sizes at least; a fit whose slope is not positive has no bandwidth and is refused."""
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if len(set(n.tolist())) < 2:
        raise ValueError("fit needs times at two sizes at least")
    slope, intercept = np.polyfit(n, t, 1, w=1 / t)
    if slope <= 0:
        raise ValueError(f"fit: time does not grow with size (slope {slope:.3g} s/B)")
    return max(float(intercept), 0.0), float(1 / slope)


def measured(rows, step):
    """(bytes, seconds) of one step's rows: those whose step column is `step` or whose name holds it
    (case-insensitive), FAILED rows left out. The shape's first number is the element count."""
    key = step.lower()
    pts = []
    for r in klplot.latest(rows):
        if klplot.failed(r) or r["step"] == "copy":
            continue
        if r["step"].lower() != key and key not in (r["name"] or "").lower():
            continue
        pts.append((klplot.shape_value(r["shape"]) * DTYPE_BYTES.get(r["dtype"], 4), r["ms_median"] / 1e3))
    return sorted(pts)


def links_from_csv(path, step, links=LINKS):
    """LINKS with NVLink replaced by the fit to `step`'s 2-GPU times in `path` (a 2-GPU ring:
    t = 2 alpha + n / beta), and a line saying what was fitted. None when the file has no such rows."""
    pts = measured(klplot.read_rows(path), step)
    if len({n for n, _ in pts}) < 2:
        return None
    alpha_eff, beta_eff = fit(*zip(*pts))
    fitted = dict(links)
    fitted["nvlink"] = Link("NVLink (fitted)", alpha_eff / 2, beta_eff,
                            f"fitted to {len(pts)} sizes of step '{step}' in {os.path.relpath(path, klplot.ROOT)}")
    return fitted


# --- the figure -------------------------------------------------------------------------------------

STYLES = {"ring": "-", "tree": "--", "two-level": ":"}
COLORS = {"1 MiB": "tab:blue", "64 MiB": "tab:orange", "1 GiB": "tab:green"}


def _describe(link):
    return f"{link.name}: alpha {link.alpha * 1e6:.3g} µs, beta {link.beta / 1e9:.3g} GB/s"


def draw(out_dir, links=LINKS, note="all links from the stated assumptions (no 2-GPU CSV)",
         g=GPUS_PER_NODE, nics=NICS_PER_NODE):
    """The model's bus bandwidth and time vs G, one colour per size, one line style per algorithm.
    Returns the path of the PNG."""
    import matplotlib.pyplot as plt  # klplot chose the Agg backend
    from matplotlib.lines import Line2D

    fig, (ax_bw, ax_t) = plt.subplots(1, 2, figsize=(13, 5.2))
    for label, n in SIZES.items():
        for algo, f in ALGORITHMS.items():
            Gs = [G for G in GPU_COUNTS if algo != "two-level" or G >= g]  # two-level is the ring in a node
            ts = [f(n, G, links, g, nics) for G in Gs]
            ax_bw.plot(Gs, [busbw(n, G, t) / 1e9 for G, t in zip(Gs, ts)], STYLES[algo], color=COLORS[label],
                       marker="o", markersize=2.5)
            ax_t.plot(Gs, [t * 1e3 for t in ts], STYLES[algo], color=COLORS[label], marker="o", markersize=2.5)
    for ax in (ax_bw, ax_t):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"GPUs G ({g} a node on NVLink; nodes joined by {links['net'].name}, {nics} NICs a node)")
        ax.set_xticks(GPU_COUNTS, [str(G) for G in GPU_COUNTS])
        ax.axvline(g, color="grey", linewidth=0.8)
        ax.grid(True, which="major", alpha=0.3)
    ax_bw.text(g * 0.93, 0.5, "one node", ha="right", va="center", rotation=90, fontsize=8, color="grey",
               transform=ax_bw.get_xaxis_transform())
    ax_bw.text(g * 1.08, 0.5, "across nodes", ha="left", va="center", rotation=90, fontsize=8, color="grey",
               transform=ax_bw.get_xaxis_transform())
    ax_bw.set_ylabel("predicted bus bandwidth, GB/s (algbw x 2(G-1)/G)")
    ax_t.set_ylabel("predicted time, ms")
    sizes = [Line2D([], [], color=c, label=k) for k, c in COLORS.items()]
    algos = [Line2D([], [], color="black", linestyle=s, label=k) for k, s in STYLES.items()]
    ax_bw.legend(handles=sizes + algos, fontsize=8, loc="lower left")
    ax_t.legend(handles=sizes + algos, fontsize=8, loc="upper left")
    fig.suptitle("Lesson 10, beyond two GPUs: the alpha-beta model's all-reduce (predicted, not measured)\n"
                 f"{note}\n{_describe(links['nvlink'])}; {_describe(links['net'])}", fontsize=10)
    os.makedirs(out_dir, exist_ok=True)
    return klplot.save(fig, os.path.join(out_dir, "lesson10_model.png"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--csv", default=DEFAULT_CSV, help="lesson 10's CSV of a 2-GPU run (default %(default)s)")
    parser.add_argument("--step", default="nccl", help="the step whose times are fitted: its step column or "
                        "a part of its name (default %(default)s, the library row)")
    parser.add_argument("--out", default=os.path.join(klplot.ROOT, "results", "h200"), help="folder of the PNG")
    args = parser.parse_args(argv)
    links, note = LINKS, None
    if os.path.exists(args.csv):
        fitted = links_from_csv(args.csv, args.step)
        if fitted:
            links = fitted
            note = f"NVLink {fitted['nvlink'].source}; the network from the stated assumptions"
        else:
            print(f"{args.csv}: no rows of step '{args.step}' at two sizes or more; "
                  "using the stated assumptions for every link", file=sys.stderr)
    else:
        print(f"{args.csv} does not exist: using the stated assumptions for every link (no measured 2-GPU numbers)",
              file=sys.stderr)
    if note is None:
        note = "all links from the stated assumptions (no measured 2-GPU fit)"
    print("wrote", draw(args.out, links, note))


if __name__ == "__main__":
    main()
