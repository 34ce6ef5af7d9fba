"""Hierarchical vs flat all-reduce over a slow link between groups of processes, and the straggler, measured here.

- `run_live(...)`: the hand-written hierarchical all-reduce (labkit.hierarchy.hierarchical) against a flat
  ring and gloo's own all_reduce, on real processes (labkit.launch) whose groups are joined by a genuinely
  slower link — network namespaces shaped with tc when running as root (labkit.hierarchy.slowlink),
  otherwise an emulated token-bucket uplink, labelled as such; in the same launch, where asked, the
  ladder's process level and the straggler (one rank arrives late, and every rank waits for it).
- `compare_model`: the same runs predicted by the cluster model (labkit.cluster, rates as given).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path
from typing import Sequence

from .. import plots
from ..cluster import given_rates, predict
from ..cluster.views import slow_link_bytes
from ..launch import launch
from ..units import MiB, format_bytes
from . import ladder, slowlink
from .hierarchical import Layout, SharedUplink
from .worker import run_tasks

#: Default rate of the slow link between groups: 0.025 GB/s (200 Mb/s) per direction. gloo over
#: this machine's loopback moves ~1 GB/s, so the link between groups is ~40× slower than inside
#: one. It models a group behind a single shared uplink (like a node with one NIC), not a DGX/HGX-class
#: node: those have a NIC per GPU, and NCCL's rings leave on all of them (notebook 6, Part 4).
SLOW_LINK_GBPS = 0.025
#: Sizes for the hierarchical comparison: big enough that the slow link, not per-message
#: overheads, sets the time; small enough to run in seconds at SLOW_LINK_GBPS.
COMPARE_SIZES_QUICK = (1 * MiB,)
COMPARE_SIZES_FULL = (1 * MiB, 4 * MiB, 16 * MiB)
SLOW_LINK_KINDS = ("auto", "netns", "emulated", "none")


# --------------------------------------------------------------------------- CLI: labkit bench ladder


# --------------------------------------------------------------------------- labkit record


# --------------------------------------------------------------------------- hierarchical vs flat
def choose_slow_link(kind: str = "auto") -> tuple[str, str]:
    """'netns' where this machine can build namespaces (root, ip, tc), else 'emulated'; with the reason."""
    if kind not in SLOW_LINK_KINDS:
        raise ValueError(f"slow_link must be one of {SLOW_LINK_KINDS}, got {kind!r}")
    ok, why = slowlink.available()
    if kind == "netns" and not ok:
        raise RuntimeError(f"slow_link='netns' is not possible here: {why}. Use slow_link='emulated'.")
    if kind == "auto":
        return ("netns", why) if ok else ("emulated", why)
    return kind, why


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Records of library / flat ring / hierarchical runs, and what the slow link was."""

    records: tuple[dict, ...]
    slow_link: str  # netns / emulated / none
    slow_link_text: str
    world_size: int
    group_size: int
    rate_GBps: float

    @property
    def groups(self) -> int:
        return self.world_size // self.group_size

    @property
    def short_link_text(self) -> str:
        """One line for figure titles."""
        return {
            "netns": f"real — network namespaces + tc tbf, {self.rate_GBps:g} GB/s per direction per group uplink",
            "emulated": f"emulated — token bucket, {self.rate_GBps:g} GB/s per direction per group uplink",
            "none": "none — loopback only",
        }[self.slow_link]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items() if k != "samples_s"} for r in self.records])

    def bytes_table(self):
        """Bytes over the slow link per algorithm and size: computed, counted by the Link, seen on the wire."""
        import pandas as pd

        rows = []
        for r in self.records:
            if r["impl"] == "library":
                continue
            calc = slow_link_bytes(r["nbytes"], self.group_size, self.groups)
            key = "flat" if r["impl"] == "flat_ring" else "hier"
            counted = sum(r["counted_inter_bytes_per_rank"])
            wire = r.get("wire_tx_bytes_per_group")
            resent = r.get("wire_retransmitted_segments_per_group")
            frames = r.get("wire_tx_frames_per_group")
            rows.append(
                {
                    "impl": r["impl"],
                    "nbytes": r["nbytes"],
                    "computed_per_sending_rank": calc[f"{key}_per_{'crossing_rank' if key == 'flat' else 'rank'}"],
                    "counted_max_per_rank": max(r["counted_inter_bytes_per_rank"]),
                    "computed_total": calc[f"{key}_total"],
                    "counted_total": counted,
                    "wire_total": sum(wire) if wire else None,
                    # each retransmitted segment crossed the wire again, in at most one full frame
                    "wire_resent_at_most": sum(resent) * slowlink.FRAME_BYTES if resent is not None else None,
                    # every frame (data, ACKs, barriers) carries its headers: at most MAX_HEADER_BYTES each
                    "wire_headers_at_most": sum(frames) * slowlink.MAX_HEADER_BYTES if frames is not None else None,
                }
            )
        return pd.DataFrame(rows)

    def speedup(self, nbytes: int | None = None) -> float:
        """Flat ring time ÷ hierarchical time (at the largest size unless given)."""
        df = self.to_frame()
        n = df["nbytes"].max() if nbytes is None else nbytes
        t = df[df["nbytes"] == n].set_index("impl")["seconds"]
        return float(t["flat_ring"] / t["hierarchical"])


@contextlib.contextmanager
def _slow_link(kind: str, why: str, groups: int, rate_GBps: float):
    """Build the slow link between groups; yield (the `slow` dict for the ranks, a description)."""
    if kind == "netns":
        slowlink.remove_stale()
        with slowlink.NetnsCluster(groups, rate_GBps) as cl:
            yield (
                {"kind": "netns", "namespaces": cl.nodes, "iface": slowlink.IFACE, "rate_GBps": rate_GBps},
                f"real: {cl.describe()}",
            )
    elif kind == "emulated":
        with tempfile.TemporaryDirectory(prefix="labkit-uplinks-") as d:
            paths = [str(Path(d) / f"group{i}.link") for i in range(groups)]
            for p in paths:
                SharedUplink.create(p)
            yield (
                {"kind": "emulated", "uplinks": paths, "rate_GBps": rate_GBps},
                f"emulated: each group's uplink is a token bucket of {rate_GBps:g} GB/s per direction applied to "
                f"the hand-written algorithms' sends between groups (gloo's own all_reduce is not slowed) — {why}",
            )
    else:
        yield {"kind": "none"}, "none: every process on the host's loopback"


@dataclasses.dataclass(frozen=True)
class LiveRuns:
    """What one launch of notebook 6's process experiments measured."""

    comparison: Comparison
    processes: ladder.LevelSweep | None = None  # the ladder's "between processes" level
    straggler: object = None  # DataFrame, one row per rank
    straggler_delay: tuple | None = None  # (rank, seconds)


def run_live(
    world_size: int = 4,
    group_size: int = 2,
    *,
    compare_sizes: Sequence[int] = COMPARE_SIZES_QUICK,
    ladder_sizes: Sequence[int] | None = None,
    straggler_delay: tuple | None = None,
    slow_link: str = "auto",
    rate_GBps: float = SLOW_LINK_GBPS,
    repeats: int = 3,
    ladder_repeats: int = 5,
    timeout_s: float = 300.0,
) -> LiveRuns:
    """All of notebook 6's multi-process experiments in ONE launch (process start-up is the slow part).

    In order: the ladder's process level where `ladder_sizes` are given (gloo sendrecv between ranks 0
    and 1, on loopback), the straggler where `straggler_delay=(R, S)` is given (rank R sleeps S seconds
    before an all_reduce), then, always, hierarchical vs flat ring vs gloo over the slow link (which,
    for namespaces, moves every rank into its group's namespace).
    """

    layout = Layout(world_size, group_size)
    kind, why = choose_slow_link(slow_link)
    if kind != "none" and layout.groups < 2:
        raise ValueError("a slow link between groups needs at least two groups")
    tasks = []
    if ladder_sizes:
        tasks.append(("sendrecv", dict(sizes=list(ladder_sizes), repeats=ladder_repeats, ranks=[0, 1])))
    if straggler_delay:
        r, d = straggler_delay
        if not 0 <= r < world_size:
            raise ValueError(f"straggler rank must be in 0..{world_size - 1}, got {r}")
        tasks.append(("straggler", dict(delay_rank=int(r), delay_s=float(d), nbytes=1 * MiB)))
    with _slow_link(kind, why, layout.groups, rate_GBps) as (slow, text):
        tasks.append(
            (
                "bench",
                dict(group_size=group_size, sizes=list(compare_sizes), repeats=repeats, timeout_s=timeout_s, slow=slow),
            )
        )
        results = launch(run_tasks, world_size, "gloo", timeout_s=timeout_s, kwargs=dict(tasks=tasks))
    out = dict(zip([t[0] for t in tasks], zip(*results)))  # task name -> results by rank
    cmp = Comparison(tuple(out["bench"][0]), kind, text, world_size, group_size, rate_GBps)
    proc = ladder.processes_sweep(out["sendrecv"][0]) if "sendrecv" in out else None
    strag = straggler_frame(list(out["straggler"])) if "straggler" in out else None
    return LiveRuns(cmp, proc, strag, straggler_delay)


def compare_model(cmp: Comparison, intra_GBps: float, intra_latency_s: float = 0.0, inter_latency_s: float = 0.0):
    """model: the same runs predicted by labkit.cluster with the rates as given (the plain alpha-beta model): the
    measured gloo rate inside a group, the slow link's rate across, one uplink per group (nics_per_node = 1)."""
    import pandas as pd

    system = given_rates(
        gpus_per_node=cmp.group_size,
        intra_GBps=intra_GBps,
        nics_per_node=1,
        nic_GBps=cmp.rate_GBps,
        alpha_intra_s=intra_latency_s,
        alpha_inter_s=inter_latency_s,
        name="this experiment",
        source="measured gloo rate inside a group; slow-link rate as set",
    )
    sizes = sorted({r["nbytes"] for r in cmp.records})
    return pd.DataFrame(
        [
            {
                "nbytes": n,
                "flat_ring_s": predict(system, cmp.groups, n, algorithm="ring").seconds,
                "hierarchical_s": predict(system, cmp.groups, n, algorithm="hierarchical").seconds,
            }
            for n in sizes
        ]
    )


def plot_compare(cmp: Comparison, model=None):
    """Measured time per algorithm and size (bars), with the model's prediction where given."""
    import numpy as np

    df = cmp.to_frame()
    sizes = sorted(df["nbytes"].unique())
    impls = ["library", "flat_ring", "hierarchical"]
    fig, ax = plots.figure(width=8.5, height=4.5)
    w = 0.25
    for j, impl in enumerate(impls):
        t = [float(df[(df["nbytes"] == n) & (df["impl"] == impl)]["seconds"].iloc[0]) * 1e3 for n in sizes]
        name = {
            "library": "gloo dist.all_reduce",
            "flat_ring": "flat ring (hand-written)",
            "hierarchical": "hierarchical (hand-written)",
        }[impl]
        if impl == "library" and cmp.slow_link == "emulated":
            name += " — not slowed by the emulated link"
        ax.bar(np.arange(len(sizes)) + (j - 1) * w, t, w, label=f"measured here: {name}", color=f"C{j}")
    if model is not None:
        for j, col in ((1, "flat_ring_s"), (2, "hierarchical_s")):
            ax.plot(
                np.arange(len(sizes)) + (j - 1) * w,
                model[col] * 1e3,
                "k_",
                ms=18,
                mew=2,
                label="model: labkit.cluster (rates as given)" if j == 1 else None,
            )
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([format_bytes(n) for n in sizes])
    plots.finish(
        ax,
        f"All-reduce over {cmp.world_size} processes in {cmp.groups} groups of {cmp.group_size}",
        "message size (bytes)",
        "time per all-reduce (ms)",
        source=f"measured here; slow link between groups: {cmp.short_link_text}",
    )
    return fig


# --------------------------------------------------------------------------- the straggler
def straggler_frame(rows):
    """One row per rank; `left_early` counts the repeats in which this rank left the all_reduce
    before the late rank had entered it (on the machine's monotonic clock). It is 0 for every rank
    of a blocking collective: nobody can finish a sum that lacks one rank's contribution, however
    the scheduler delays the waiting ranks (which can shorten their `in_collective_s`)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    late = df[df["delayed"]]
    if len(late) != 1:
        raise ValueError(f"a straggler run has exactly one late rank; these rows have {len(late)}")
    entered = late.iloc[0]["entered_s"]
    df["left_early"] = [sum(lv < en for lv, en in zip(left, entered)) for left in df["left_s"]]
    return df.drop(columns=["entered_s", "left_s"])


def plot_straggler(df, delay_s: float):
    fig, ax = plots.figure(width=7, height=3.8)
    colors = ["C3" if d else "C0" for d in df["delayed"]]
    ax.bar(df["rank"] - 0.2, df["total_s"] * 1e3, 0.4, color=colors, label="measured here: barrier → end of all_reduce")
    ax.bar(
        df["rank"] + 0.2,
        df["in_collective_s"] * 1e3,
        0.4,
        color=colors,
        alpha=0.45,
        label="measured here: time inside the all_reduce call",
    )
    ax.axhline(delay_s * 1e3, ls=":", color="0.3", label=f"the straggler's delay ({delay_s * 1e3:g} ms)")
    ax.set_xticks(list(df["rank"]))
    plots.finish(
        ax,
        "One late rank: everybody waits inside the collective",
        "rank (index)",
        "time (ms)",
        source="measured here: gloo all_reduce, red = the delayed rank",
    )
    return fig


# --------------------------------------------------------------------------- across machines: torchrun


# --------------------------------------------------------------------------- notebook 06's results
class CompareView:
    """Flat ring vs hierarchical vs dist.all_reduce as measured, against the model at the gloo rate measured here."""

    experiment = "hierarchical_gloo"

    def __init__(self, cmp: Comparison, intra_GBps: float, mode: str):
        self.cmp, self.mode = cmp, mode
        self.frame = cmp.to_frame()
        self.model = compare_model(cmp, intra_GBps=intra_GBps)
        self.n_top = int(self.frame["nbytes"].max())
        top = self.model[self.model["nbytes"] == self.n_top].iloc[0]
        self.model_speedup = float(top["flat_ring_s"] / top["hierarchical_s"])

    def figure(self):
        return plot_compare(self.cmp, self.model)

    def report(self):
        return self.frame[["impl", "nbytes", "seconds", "algbw_GBps", "busbw_GBps", "correct"]]

    def numbers(self) -> dict:
        return {
            "measured_speedup_flat_over_hierarchical": self.cmp.speedup(),
            "model_speedup_flat_over_hierarchical": self.model_speedup,
        }

    def checks(self) -> dict:
        return {"hand_written_equal_dist_all_reduce": bool(self.frame["correct"].all())}

    def notes(self) -> dict:
        c = self.cmp
        return {"mode": self.mode, "slow_link": c.slow_link, "world_size": c.world_size, "group_size": c.group_size,
                "rate_GBps": c.rate_GBps, "sizes": sorted(set(self.frame["nbytes"]))}  # fmt: skip

    def speedup_line(self) -> str:
        return (
            f"flat ring ÷ hierarchical at {format_bytes(self.n_top)}: measured ×{self.cmp.speedup():.2f}, "
            f"model ×{self.model_speedup:.2f}"
        )


class StragglerView:
    """One late rank: how long every rank spent inside the all-reduce."""

    def __init__(self, frame, delay_s: float):
        self.frame, self.delay_s = frame, delay_s

    def figure(self):
        return plot_straggler(self.frame, self.delay_s)

    def report(self):
        return self.frame

    def numbers(self) -> dict:
        return {"straggler_min_wait_s": float(self.frame[~self.frame["delayed"]]["in_collective_s"].min())}

    def checks(self) -> dict:
        # nobody leaves the sum before the late rank has entered it (the wait itself shrinks if the
        # scheduler also delays a waiting rank on a busy machine)
        return {"straggler_everyone_waits": bool((self.frame["left_early"] == 0).all())}
