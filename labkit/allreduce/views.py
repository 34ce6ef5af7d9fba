"""Notebook 5's figures, tables and calculators: the ring stepper, bytes per rank, measured vs modelled bandwidth.

Also the recorded nccl-tests sweeps with the learner's run over them, and the cost calculator that
recomputes the source material's all-reduce table.

Every figure has a title, units on both axes and its source in the legend or title (labkit.plots).
"""

from __future__ import annotations

import dataclasses
import functools
import textwrap

import numpy as np

from .. import plots
from ..collectives import RS, bus_factor, busbw, ring_bytes_sent
from ..models import allreduce_time, fit_alpha_beta, fit_alpha_beta_from_bandwidth
from ..runtime import Found
from ..schema import NOT_STATED
from ..specs import spec
from ..units import GB, format_bytes
from .simulation import RingTrace, simulate_ring_allreduce


# --------------------------------------------------------------------------- the stepper
#: Elements per rank in the stepper: 2N+1, so the chunks are uneven (N does not divide it).
def stepper_count(n: int) -> int:
    return 2 * n + 1


@functools.lru_cache(maxsize=16)
def stepper_trace(n: int):
    """The simulated ring the stepper shows: rank r holds 1, 2, … scaled by (r+1)."""
    count = stepper_count(n)
    return simulate_ring_allreduce([np.arange(1, count + 1, dtype=np.float32) * (r + 1) for r in range(n)])


def stepper_view(ranks: int, step: int) -> str:
    """Draw the ring after `step` steps for `ranks` ranks and print what moved; returns the text."""
    trace = stepper_trace(int(ranks))
    k = min(int(step), len(trace.steps))
    ax = draw_ring_state(trace, k)
    ax.figure.tight_layout()
    text = trace.describe_step(k)
    if k < int(step):
        text += f"  (N = {ranks} has only {len(trace.steps)} steps)"
    print(text)
    print(
        f"bytes sent so far by each rank: {[sum(t.nbytes for st in trace.transfers[:k] for t in st if t.src == r) for r in range(trace.world_size)]}"
        f"  (float32, {trace.count} elements = {trace.nbytes} B per rank)"
    )
    return text


def bytes_per_rank_figure(nbytes: int = 1 << 20, max_ranks: int = 16, itemsize: int = 4):
    """Bytes each rank sends vs N: counted from the schedule (min/mean/max over ranks) vs 2(N−1)/N·S."""
    count = nbytes // itemsize
    ns = np.arange(1, max_ranks + 1)
    per = [ring_bytes_sent(count, int(n), itemsize) for n in ns]
    fig, ax = plots.figure()
    plots.line(
        ax, ns, [np.mean(p) / nbytes for p in per], "counted (labkit.allreduce.simulation schedule): mean over ranks"
    )
    ax.fill_between(
        ns,
        [min(p) / nbytes for p in per],
        [max(p) / nbytes for p in per],
        alpha=0.2,
        label="counted: min … max over ranks",
    )
    plots.line(ax, ns, [bus_factor("all_reduce", n) for n in ns], "2(N−1)/N", how=plots.MODEL)
    ax.axhline(2, ls=":", color="0.4", label="limit 2·S: every byte goes out twice")
    plots.finish(
        ax,
        f"Ring all-reduce: bytes each rank sends, S = {format_bytes(nbytes)} ({count} float32)",
        "ranks N (count)",
        "bytes sent per rank / S (ratio)",
        source="source: labkit.allreduce.simulation schedule and model",
    )
    return fig


@dataclasses.dataclass(frozen=True)
class BytesPerRank:
    """Bytes each rank sends for N = 1..max_ranks at one size, as a result `Session.present` draws and checks."""

    nbytes: int
    max_ranks: int = 16

    def figure(self):
        return bytes_per_rank_figure(self.nbytes, self.max_ranks)


# --------------------------------------------------------------------------- measured vs modelled
def records_frame(records):
    import pandas as pd

    return pd.DataFrame([{k: v for k, v in r.items() if k != "samples_s"} for r in records])


def fit_ring_link(records, impl: str = "library"):
    """α (per message) and β (per direction, per rank) from a measured ring-shaped all-reduce.

    A ring takes t = 2(N−1)·α + 2(N−1)/N · S/β; fitting t = a + S/b gives a = 2(N−1)·α and
    b = β / (2(N−1)/N), i.e. b is the algbw plateau and β the busbw plateau.
    """
    df = records_frame(records)
    d = df[df.impl == impl].sort_values("nbytes")
    n = int(d.world_size.iloc[0])
    fit = fit_alpha_beta(d.nbytes.to_numpy(), d.seconds.to_numpy())
    alpha = fit.latency_s / (2 * (n - 1)) if n > 1 else 0.0
    beta = fit.bandwidth_GBps * bus_factor("all_reduce", n)
    return {"alpha_s": alpha, "beta_GBps": beta, "world_size": n, "fit": fit}


def try_fit_ring_link(records, impl: str = "library"):
    """fit_ring_link, or (None, why) when the measured times cannot carry an α-β fit.

    On a small, busy machine (4 gloo ranks on 2 cores) the scheduler can make a small all-reduce as
    slow as a large one; the times then do not grow with size and no bandwidth term exists. That is a
    property of the run, reported as such — never papered over with a made-up β.
    Returns (link, None) or (None, reason).
    """
    try:
        return fit_ring_link(records, impl), None
    except ValueError as e:
        df = records_frame(records)
        d = df[df.impl == impl].sort_values("nbytes")
        times = ", ".join(f"{format_bytes(int(b))}: {t * 1e3:.2f} ms" for b, t in zip(d.nbytes, d.seconds))
        return None, f"{e} (median times of {impl}: {times})"


def measured_vs_model_figure(records, source: str, link=None, *, models: bool = True):
    """busbw vs size for every implementation measured, with the α-β models drawn from the fitted link.

    models=False (or a link of None after a failed fit, see try_fit_ring_link) draws the measurements only.
    """
    df = records_frame(records)
    n = int(df.world_size.iloc[0])
    if models and link is None:
        link = fit_ring_link(records)
    fig, ax = plots.figure(width=8, height=4.8)
    colours = {}
    for impl, d in df.groupby("impl", sort=False):
        d = d.sort_values("nbytes")
        h = plots.line(ax, d.nbytes, d.busbw_GBps, f"measured: {impl}")
        colours[impl] = h.get_color()
    sizes = np.array(sorted(df.nbytes.unique()), dtype=float)
    model_names = {
        "ring": "ring",
        "ring_simple": None,
        "library": None,
        "naive": "naive",
        "tree": "tree",
        "recursive_doubling": "recursive_doubling",
    }
    for impl in df.impl.unique() if models else ():
        algo = model_names.get(impl)
        if algo is None:
            continue
        t = [allreduce_time(s, n, link["beta_GBps"], link["alpha_s"], algo) for s in sizes]
        plots.line(
            ax,
            sizes,
            [busbw("all_reduce", s, tt, n) for s, tt in zip(sizes, t)],
            f"{algo} (α={link['alpha_s'] * 1e6:.0f} µs, β={link['beta_GBps']:.2f} GB/s fitted)",
            how=plots.MODEL,
            color=colours.get(impl),
        )
    plots.size_axis(ax)
    ax.set_yscale("log")
    what = "measured and modelled" if models else "measured (no α-β model: the fit failed on this run)"
    plots.finish(
        ax,
        f"All-reduce on {n} gloo ranks: bus bandwidth, {what}",
        "message size S (bytes, per rank)",
        "busbw = S/t · 2(N−1)/N (GB/s)",
        source=source,
    )
    return fig


# --------------------------------------------------------------------------- recorded references
def reference_lines(datasets, min_points: int = 4):
    """One line per (dataset, config, ranks, nodes): the out-of-place column where there is one."""
    out = []
    for ds in datasets:
        f = ds.frame.dropna(subset=["busbw_GBps"]) if "busbw_GBps" in ds.frame else None
        if f is not None:
            f = f[f.busbw_GBps > 0]  # a printed 0.00 carries no bandwidth (and no place on a log axis)
        if f is None or f.empty:
            continue
        if "placement" in f.columns:
            order = {"out-of-place": 0, "unspecified": 1, "in-place": 2}
            best = min(f.placement.dropna().unique(), key=lambda p: order.get(p, 3), default=None)
            if best is not None:
                f = f[f.placement == best]
        # dropna=False: a log that does not state its rank or node count (empty cells) still gives its line
        for (config, n, nodes), g in f.groupby(["config", "world_size", "nodes"], sort=False, dropna=False):
            g = g.groupby("nbytes", as_index=False).busbw_GBps.median().sort_values("nbytes")
            if len(g) >= min_points:
                out.append(
                    {
                        "dataset": ds,
                        "config": config,
                        "world_size": None if n != n else int(n),
                        "nodes": None if nodes != nodes else int(nodes),
                        "nbytes": g.nbytes.to_numpy(),
                        "busbw_GBps": g.busbw_GBps.to_numpy(),
                    }
                )
    return out


def summarize_line(nbytes, busbw_GBps, top: int = 3) -> dict:
    """Plateau (median busbw of the `top` largest sizes, which plateau_from/to_bytes name) and n½ (α-β fit
    on busbw) of one sweep."""
    nbytes, bw = np.asarray(nbytes, dtype=float), np.asarray(busbw_GBps, dtype=float)
    order = np.argsort(nbytes)
    plateau = float(np.median(bw[order][-top:]))
    plateau_sizes = nbytes[order][-top:]
    keep = bw > 0
    n_half = None
    if keep.sum() >= 2:
        try:
            fit = fit_alpha_beta_from_bandwidth(nbytes[keep], bw[keep])
            n_half = fit.n_half_bytes
        except ValueError:
            n_half = None
    below = n_half is not None and n_half < nbytes.min()
    return {
        "plateau_busbw_GBps": plateau,
        "n_half_bytes": n_half,
        "sweep_starts_above_n_half": bool(below),
        "plateau_from_bytes": int(plateau_sizes[0]),
        "plateau_to_bytes": int(plateau_sizes[-1]),
    }


def reference_table(lines):
    import pandas as pd

    rows = []
    for ln in lines:
        m = ln["dataset"].meta
        s = summarize_line(ln["nbytes"], ln["busbw_GBps"])
        rows.append(
            {
                "dataset": ln["dataset"].name,
                "gpu": m["gpu"],
                "ranks": ln["world_size"],
                "nodes": ln["nodes"],
                "config": str(ln["config"])[:40],
                "interconnect": m["interconnect"][:50],
                "plateau busbw (GB/s)": round(s["plateau_busbw_GBps"], 2),
                "n½": "below the sweep"
                if s["sweep_starts_above_n_half"] or s["n_half_bytes"] is None
                else format_bytes(s["n_half_bytes"]),
                "sizes": f"{format_bytes(ln['nbytes'].min())} … {format_bytes(ln['nbytes'].max())}",
            }
        )
    return pd.DataFrame(rows).sort_values("plateau busbw (GB/s)", ascending=False, ignore_index=True)


#: The colour of the learner's own log (`reference=` a log) in the references figure: in no default colour cycle, and
#: not the black of the gloo run measured here; a recorded line that would get it is drawn grey instead.
YOUR_LOG_COLOUR = "#e6007e"


def references_figure(lines, own_records=None, own_label: str = "", impl: str = "library"):
    """Recorded busbw vs size, single node and multi-node side by side, with the learner's run on both.

    A log given as `reference=` is drawn as "your log: NAME" in YOUR_LOG_COLOUR, on both sides when it does not
    state its node count."""
    from matplotlib.colors import same_color

    fig, axes = plots.figure(1, 2, width=7.5, height=8.5)
    for ax, multi in zip(axes, (False, True)):
        for ln in lines:
            if ln["nodes"] is not None and (ln["nodes"] > 1) != multi:
                continue  # a log that does not state its node count is drawn on both sides
            m = ln["dataset"].meta
            ranks = "?" if ln["world_size"] is None else ln["world_size"]
            nodes = "nodes not stated" if ln["nodes"] is None else f"{ln['nodes']} node(s)"
            gpu = "GPU not stated" if m["gpu"] == NOT_STATED else m["gpu"]
            # the whole configuration (cut at 28 characters, four runs read "ring forced (NCCL_P2P_LEVEL="),
            # wrapped so a long one (NCCL_* variables) stays inside the figure
            what = "\n".join(textwrap.wrap(f"{gpu} ×{ranks}, {nodes}, {ln['config']}", 90, subsequent_indent="  "))
            if m.get("your_log"):
                label = f"your log: {m['your_log']} — {what}"
                plots.line(ax, ln["nbytes"], ln["busbw_GBps"], label, how=plots.RECORDED, lw=2.2, color=YOUR_LOG_COLOUR)
            else:
                line = plots.line(ax, ln["nbytes"], ln["busbw_GBps"], f"recorded: {what}", how=plots.RECORDED, lw=0.9)
                if same_color(line.get_color(), YOUR_LOG_COLOUR):  # a style whose cycle holds it: keep it unique
                    line.set_color("0.5")
        if own_records:
            df = records_frame(own_records)
            d = df[df.impl == impl].sort_values("nbytes")
            plots.line(ax, d.nbytes, d.busbw_GBps, own_label, color="black", lw=2.5)
        plots.size_axis(ax)
        ax.set_yscale("log")
        plots.finish(
            ax,
            ("multi-node" if multi else "single node") + ": all_reduce bus bandwidth vs size",
            "message size S (bytes)",
            "busbw = S/t · 2(N−1)/N (GB/s)",
            source="recorded: nccl-tests / torch sweeps in data/ (see table for sources)",
            legend=False,
        )
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1, frameon=False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- cost calculator
#: The source material's worked example: 7B parameters, fp16 gradients, 8 GPUs, "32 GB/s".
SOURCE_EXAMPLE = {"params": 7e9, "bytes_per_param": 2, "gpus": 8, "bandwidth_GBps": 32.0}


def corrected_source_table():
    """The source material's all-reduce numbers next to the correct ones, with the reason."""
    import pandas as pd

    p, b, n, bw = (SOURCE_EXAMPLE[k] for k in ("params", "bytes_per_param", "gpus", "bandwidth_GBps"))
    S = p * b  # 14 GB of gradients
    nv4 = spec("NVLink 4").per_direction_GBps()
    nv5 = spec("NVLink 5")
    rows = [
        {
            "claim in the source material": f"ring all-reduce of 7B fp16 gradients ({S / GB:g} GB), 8 GPUs, 32 GB/s: 918.8 ms",
            "correct": f"{allreduce_time(S, n, bw) * 1e3:.1f} ms",
            "what is wrong": "each GPU sends 2(N−1)/N·S = 1.75·S; the source's numbers use a factor of 2.1",
        },
        {
            "claim in the source material": "the same over NVLink 4 at '900 GB/s': ≈27 ms",
            "correct": f"{allreduce_time(S, n, nv4) * 1e3:.1f} ms",
            "what is wrong": "900 GB/s is both directions added; a ring sends and receives at once, 450 GB/s each way",
        },
        {
            "claim in the source material": "1 GB takes 0.6 ms over NVLink 5 (used as an all-reduce time)",
            "correct": f"8-GPU ring all-reduce of 1 GB: {allreduce_time(1e9, 8, nv5.per_direction_GBps()) * 1e3:.2f} ms "
            f"(a one-way copy at 900 GB/s per direction: {1e9 / (nv5.per_direction_GBps() * GB) * 1e3:.2f} ms)",
            "what is wrong": "0.56 ms = 1 GB / 1.8 TB/s: a one-way copy at the two-direction figure, not an all-reduce",
        },
        {
            "claim in the source material": "trap: a tree all-reduce (log2 N steps) saves bandwidth",
            "correct": f"tree {allreduce_time(S, n, bw, algorithm='tree') * 1e3:.0f} ms vs ring "
            f"{allreduce_time(S, n, bw) * 1e3:.0f} ms for the 7B example (α = 0)",
            "what is wrong": "a tree still moves ≈2·S per GPU; only its latency term grows as log2 N instead of N",
        },
    ]
    return pd.DataFrame(rows)


#: Interconnects for the calculator: (label, per-direction GB/s, where the number comes from).
def calculator_links():
    out = []
    for name in (
        "PCIe Gen4 x16",
        "PCIe Gen5 x16",
        "NVLink 3",
        "NVLink 4",
        "NVLink 5",
        "InfiniBand NDR 400",
        "Ethernet 100",
    ):
        s = spec(name)
        out.append((f"{s.name}: {s.per_direction_GBps():g} GB/s per direction", s.per_direction_GBps()))
    out.append(("source material's '32 GB/s'", 32.0))
    return out


def cost_view(params_billion: float, bytes_per_param: int, gpus: int, bandwidth_GBps: float, latency_us: float = 0.0):
    """Print the modelled all-reduce time of one gradient sync for each algorithm."""
    S = params_billion * 1e9 * bytes_per_param
    rows = []
    for algo in ("ring", "tree", "recursive_doubling", "naive"):
        t = allreduce_time(S, gpus, bandwidth_GBps, latency_us * 1e-6, algo)
        rows.append(f"  {algo:19s} {t * 1e3:10.1f} ms")
    per_gpu = bus_factor("all_reduce", gpus) * S
    print(
        f"model: {params_billion:g}B parameters × {bytes_per_param} B = {S / GB:g} GB of gradients, {gpus} GPUs, "
        f"{bandwidth_GBps:g} GB/s per direction, α = {latency_us:g} µs\n"
        f"  each GPU sends 2(N−1)/N·S = {per_gpu / GB:.3g} GB in a ring\n" + "\n".join(rows)
    )
    return allreduce_time(S, gpus, bandwidth_GBps, latency_us * 1e-6, "ring")


def draw_ring_state(trace: RingTrace, k: int, ax=None):
    """Draw the partial sums after k steps: rows = ranks, columns = chunks, cells = ranks summed in.

    Cells that just received data are outlined (red: added in, reduce-scatter; blue: copied,
    all-gather); colour depth = how many ranks' inputs the cell holds (dark = complete sum).
    """
    from matplotlib.patches import Rectangle

    n = trace.world_size
    k = max(0, min(int(k), len(trace.steps)))
    state = trace.states[k]
    if ax is None:
        _, ax = plots.figure(width=1.2 * n + 2.5, height=0.7 * n + 1.6)
    fill = np.array([[len(state.contributions[r][c]) for c in range(n)] for r in range(n)], dtype=float)
    ax.imshow(fill, cmap="Greens", vmin=0, vmax=n * 1.25, aspect="auto")
    just = {}
    if k > 0:
        for t in trace.transfers[k - 1]:
            just[(t.dst, t.chunk)] = t
    for r in range(n):
        for c in range(n):
            who = sorted(state.contributions[r][c])
            text = "Σ all" if len(who) == n and n > 1 else "+".join(f"x{w}" for w in who)
            if len(text) > 14:
                text = f"{len(who)} ranks"
            ax.text(
                c,
                r,
                text,
                ha="center",
                va="center",
                fontsize=8,
                color="white" if len(who) > 0.7 * n and n > 1 else "black",
            )
            if (r, c) in just:
                t = just[(r, c)]
                ax.add_patch(
                    Rectangle(
                        (c - 0.46, r - 0.46),
                        0.92,
                        0.92,
                        fill=False,
                        lw=2,
                        ec="tab:red" if t.phase == RS else "tab:blue",
                    )
                )
    ax.set_xticks(range(n), [f"{c}\n{trace.bounds[c][1] - trace.bounds[c][0]} el" for c in range(n)], fontsize=7)
    ax.set_yticks(range(n), [f"rank {r}" for r in range(n)], fontsize=8)
    ax.set_xlabel("chunk (index; elements in it)")
    ax.set_ylabel("rank (process)")
    phase = "start" if k == 0 else f"{trace.steps[k - 1][0]} step {trace.steps[k - 1][1] + 1}"
    ax.set_title(
        f"Ring all-reduce, N = {n}: after step {k} of {len(trace.steps)} ({phase})\n"
        "source: labkit.allreduce.simulation; outline = chunk just received "
        "(red: added in, blue: copied)",
        fontsize=9,
    )
    return ax


def nccl_figure(records, gpus: int, source: str):
    """busbw against size for every (NCCL setting, implementation) measured."""
    frame = records_frame(records)
    fig, ax = plots.figure(width=8)
    for (setting, impl), d in frame.groupby(["setting", "impl"]):
        plots.line(ax, d.nbytes, d.busbw_GBps, f"measured: {impl}, {setting}")
    plots.size_axis(ax)
    plots.finish(
        ax,
        f"All-reduce on {gpus} GPUs over NCCL",
        "message size S (bytes)",
        "busbw = S/t · 2(N−1)/N (GB/s)",
        source=source,
    )
    return fig


def no_nccl_here(mode: str, gpus: int) -> Found:
    """Fewer than two GPUs here (or mode='reference'): nothing measured over NCCL, and where to look instead."""
    return Found(
        None,
        "",
        note=(
            f"**NCCL: {mode} mode** — this machine has {gpus} CUDA GPU(s); the NCCL measurement needs two or more. The "
            "recorded nccl-tests sweeps in section 5 show what NCCL reaches on real systems; run this notebook on a "
            "multi-GPU machine to measure `NCCL_ALGO`/`NCCL_PROTO` live."
        ),
    )
