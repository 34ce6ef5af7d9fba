"""Notebook 06's cluster tables and figures, all from `labkit.cluster.predict` (every number is a model unless
it says recorded): the healthy-cluster table, the validation figure, tensor-parallel placement, the scaling
widget's view, and the bytes a flat ring and the hierarchical algorithm send across groups."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from .. import plots, reference, widgets
from ..collectives import bus_factor
from ..units import format_bytes, format_time
from .model import predict
from .presets import preset
from .system import System, system_from_facts
from .validation import BAND, runs, summary

GiB = 1 << 30


# --------------------------------------------------------------------------- bytes across the slow link
def slow_link_bytes(nbytes: float, group_size: int, groups: int) -> dict:
    """Bytes that cross the slow (between-group) links, for a flat ring and for the hierarchical algorithm.

    Ranks are numbered group by group (as torchrun numbers them node by node), so a *single* flat ring
    (one channel) over N = g·m ranks crosses a group boundary m times; each crossing edge carries what
    one rank sends in a ring, 2(N−1)/N·S. In the hierarchical algorithm every rank sends 2(m−1)/m·S/g across.
    """
    g, m = int(group_size), int(groups)
    if g < 1 or m < 1:
        raise ValueError("group_size and groups must be >= 1")
    N, S = g * m, float(nbytes)
    if m == 1:
        return dict.fromkeys(
            (
                "flat_per_crossing_rank",
                "hier_per_rank",
                "flat_per_group_uplink",
                "hier_per_group_uplink",
                "flat_total",
                "hier_total",
            ),
            0.0,
        )
    flat_rank = bus_factor("all_reduce", N) * S
    hier_rank = bus_factor("all_reduce", m) * S / g
    return {
        "flat_per_crossing_rank": flat_rank,
        "hier_per_rank": hier_rank,
        "flat_per_group_uplink": flat_rank,
        "hier_per_group_uplink": g * hier_rank,
        "flat_total": m * flat_rank,
        "hier_total": N * hier_rank,
    }


# --------------------------------------------------------------------------- recorded points and the healthy table
def recorded_points(dataset: str, nbytes: int, placement: str = "out-of-place"):
    """busbw at one size for every (nodes, config) of a recorded sweep: (DataFrame, dataset)."""
    ds = reference.load(dataset)
    f = ds.frame
    if "placement" in f:
        f = f[f["placement"] == placement]
    f = f[f["nbytes"] == nbytes]
    return f[["nodes", "world_size", "config", "nbytes", "busbw_GBps"]].reset_index(drop=True), ds


#: The healthy-cluster exercise: five systems with recorded multi-node runs, predicted at 1, 2 and 8 nodes.
HEALTHY_SYSTEMS = ("h100_ndr_8nic", "alps_gh200", "oci_bm_gpu4_8", "p4d_efa", "p6_b200_efa")
_SAME_NODE = {"h100_ndr_8nic_sharp": "h100_ndr_8nic"}


def healthy(nbytes: float = 4 * GiB, node_counts: Sequence[int] = (1, 2, 8)) -> list[dict]:
    """Per system and node count: NCCL's pick and its busbw, the forced ring beside it, and the recorded runs on that
    system (at their largest size) with measured ÷ model for the algorithm that ran."""
    rec = runs()
    out = []
    for name in HEALTHY_SYSTEMS:
        s = preset(name)
        mine = [r for r in rec if r["scope"] == "multi-node" and _SAME_NODE.get(r["system"], r["system"]) == name]
        for m in sorted(set(node_counts) | {r["nodes"] for r in mine}):
            pick = predict(s, m, nbytes)
            here = [r for r in mine if r["nodes"] == m]
            out.append(
                {
                    "system": s.name,
                    "preset": name,
                    "size": format_bytes(nbytes),
                    "nodes": m,
                    "nccl_pick": pick.algorithm,
                    "pick_busbw_GBps": pick.busbw_GBps,
                    "ring_busbw_GBps": pick.ring_busbw_GBps,
                    "recorded": "; ".join(
                        f"{r['run']} ({r['algorithm']}{', forced' if r['forced'] else ''}, {r['size']}): "
                        f"{r['measured_busbw_GBps']:g}, ×{r['ratio']:.2f} of model"
                        + ("" if r["status"] == "healthy" else f" [{r['status']}]")
                        for r in here
                    )
                    or "-",
                }
            )
    return out


def plot_validation(frame):
    """Recorded busbw against the model's busbw for the algorithm that ran, one point per run (log-log)."""
    fig, ax = plots.figure(width=7.5, height=5.2)
    top = float(max(frame["measured_busbw_GBps"].max(), frame["predicted_busbw_GBps"].max())) * 1.3
    xs = [20.0, top]
    ax.plot(xs, xs, color="0.3", lw=1, label="recorded = model")
    ax.fill_between(xs, [x * BAND[0] for x in xs], [x * BAND[1] for x in xs], color="0.85", label="±10%")
    marks = {"healthy": "o", "misconfigured": "X", "facts unpublished": "s", "reported slow": "v"}
    marks.update({"user report": "P", "user report, approximate": "D"})
    for i, algo in enumerate(sorted(frame["algorithm"].unique())):
        for status, mk in marks.items():
            sel = frame[(frame["algorithm"] == algo) & (frame["status"] == status)]
            if len(sel):
                ax.scatter(
                    sel["predicted_busbw_GBps"],
                    sel["measured_busbw_GBps"],
                    marker=mk,
                    s=40,
                    color=f"C{i}",
                    label=f"recorded: {algo}" + ("" if status == "healthy" else f" ({status})"),
                )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plots.finish(
        ax,
        "Recorded all-reduce busbw vs NCCL's tuning model (largest size of each run)",
        "model busbw for the algorithm that ran (GB/s per rank)",
        "recorded busbw (GB/s per rank)",
        source="recorded: data/ (labkit ref show NAME); model: labkit.cluster (NCCL 2.30.7 tuning.cc)",
    )
    ax.legend(fontsize=6, loc="upper left")
    return fig


# --------------------------------------------------------------------------- tensor parallelism
#: Megatron-style tensor parallelism without sequence parallelism: two all-reduces per layer forward and two
#: backward (Shoeybi et al. 2019, "Megatron-LM", §3 and Fig. 4).
TP_ALLREDUCES_PER_LAYER = 4


def tp_placement(
    system: System,
    *,
    hidden: int,
    seq_len: int,
    micro_batch: int,
    layers: int,
    dtype_bytes: int = 2,
    tp_degrees: Sequence[int] = (1, 2, 4, 8, 16, 32),
):
    """model: the tensor-parallel all-reduce cost of one micro-batch, TP inside one node vs across nodes, at the
    algorithm NCCL would pick (labkit.cluster.predict), and labkit's hierarchical algorithm across nodes."""
    import pandas as pd

    S = micro_batch * seq_len * hidden * dtype_bytes
    g = system.gpus_per_node
    rows = []
    for tp in tp_degrees:
        if tp > g and tp % g:
            raise ValueError(f"TP degree {tp} is above {g} GPUs per node but not a multiple of it")
        n_ar = TP_ALLREDUCES_PER_LAYER * layers if tp > 1 else 0
        if tp == 1:
            p = h = None
            where, t, th, algo, bus = "no TP", 0.0, 0.0, "-", float("nan")
        elif tp <= g:
            sub = dataclasses.replace(system, gpus_per_node=tp, nvls=system.nvls and tp > 2)
            p = predict(sub, 1, S)
            where, t, th, algo, bus = "inside the NVLink domain", p.seconds, p.seconds, p.algorithm, p.busbw_GBps
        else:
            p, h = predict(system, tp // g, S), predict(system, tp // g, S, algorithm="hierarchical")
            where, t, th, algo, bus = f"across {tp // g} nodes", p.seconds, h.seconds, p.algorithm, p.busbw_GBps
        rows.append(
            {
                "tp": tp,
                "placement": where,
                "bytes_per_allreduce": S,
                "nccl_pick": algo,
                "busbw_GBps": bus,
                "allreduce_s": t,
                "allreduce_hierarchical_s": th,
                "allreduces_per_microbatch": n_ar,
                "comm_s": n_ar * t,
                "comm_hierarchical_s": n_ar * th,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the scaling widget
def node_sweep(system: System, nbytes: float, node_counts: Sequence[int]):
    """model: NCCL's pick, the forced ring and the hierarchical algorithm for each node count (a DataFrame)."""
    import pandas as pd

    rows = []
    for m in node_counts:
        p = predict(system, m, nbytes)
        r = predict(system, m, nbytes, algorithm="ring")
        h = predict(system, m, nbytes, algorithm="hierarchical") if m > 1 else r
        rows.append(
            {
                "nodes": m,
                "gpus": m * system.gpus_per_node,
                "nccl_pick": p.algorithm,
                "pick_s": p.seconds,
                "ring_s": r.seconds,
                "hierarchical_s": h.seconds,
                "pick_busbw_GBps": p.busbw_GBps,
                "ring_busbw_GBps": r.busbw_GBps,
                "hierarchical_busbw_GBps": h.busbw_GBps,
            }
        )
    return pd.DataFrame(rows)


def scaling_view(
    gpus_per_node: int,
    max_nodes: int,
    intra_GBps: float,
    nic_GBps: float,
    nics_per_node: int,
    nbytes: int,
    nvls: bool = True,
):
    """The widget's view: a system from the controls (NVLink line rate per GPU, NICs), drawn by `plot_scaling`."""
    system = system_from_facts(
        gpus_per_node=int(gpus_per_node),
        nvlink_GBps=float(intra_GBps),
        nics_per_node=int(nics_per_node),
        nic_GBps=float(nic_GBps),
        nvls=bool(nvls) and float(intra_GBps) >= 400,
        name="your cluster",
    )
    _, out = plot_scaling(system, nbytes, max_nodes=int(max_nodes))
    return out


def plot_scaling(system: System, nbytes: float, max_nodes: int = 64):
    """model: all-reduce time against GPU count — NCCL's pick, a forced ring, the hierarchical algorithm."""
    nodes = [1]
    while nodes[-1] * 2 <= max_nodes:
        nodes.append(nodes[-1] * 2)
    df = node_sweep(system, nbytes, nodes)
    fig, ax = plots.figure(width=7.5, height=4.2)
    plots.line(ax, df["gpus"], df["pick_s"] * 1e3, "model: NCCL's pick", how=plots.MODEL, color="C0", marker="o")
    plots.line(
        ax, df["gpus"], df["ring_s"] * 1e3, "model: ring (NCCL_ALGO=Ring)", how=plots.MODEL, color="C3", marker="v"
    )
    plots.line(
        ax,
        df["gpus"],
        df["hierarchical_s"] * 1e3,
        "model: hierarchical (labkit's)",
        how=plots.MODEL,
        color="C2",
        marker="s",
    )
    g = system.gpus_per_node
    ax.axvspan(g, 2 * g, color="0.85", alpha=0.6, label=f"the cliff: leaving the {g}-GPU node")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    plots.finish(
        ax,
        f"All-reduce of {format_bytes(nbytes)}: {system.describe()}",
        "GPUs (count)",
        "time per all-reduce (ms)",
        source="model: labkit.cluster (NCCL 2.30.7 tuning model; per-direction rates)",
    )
    out = {
        "nbytes": nbytes,
        "one_node_s": float(df["pick_s"].iloc[0]),
        "pick_s_max": float(df["pick_s"].iloc[-1]),
        "hierarchical_s_max": float(df["hierarchical_s"].iloc[-1]),
    }
    if len(df) > 1:
        one, two = df.iloc[0], df.iloc[1]
        out.update(
            pick_drop=one["pick_busbw_GBps"] / two["pick_busbw_GBps"],
            flat_drop=one["pick_busbw_GBps"] / two["ring_busbw_GBps"],
            hierarchical_drop=one["pick_busbw_GBps"] / two["hierarchical_busbw_GBps"],
            pick_2_nodes=two["nccl_pick"],
        )
        ax.text(
            0.02,
            0.96,
            f"1 → 2 nodes: busbw ÷{out['pick_drop']:.3g} with NCCL's pick ({two['nccl_pick']}), "
            f"÷{out['flat_drop']:.3g} with a ring; 1 node: {format_time(out['one_node_s'])}",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
        )
    return fig, out


# --------------------------------------------------------------------------- notebook 06's results
class ValidationView:
    """Every recorded multi-node run against NCCL's tuning model (`validation()` rows), drawn and counted."""

    def __init__(self, frame):
        self.frame, self.summary = frame, summary(frame)
        self.datasets = sorted(set(frame["dataset"]))

    def figure(self):
        return plot_validation(self.frame)

    def report(self):
        columns = ["run", "size", "algorithm", "forced", "measured_busbw_GBps", "predicted_busbw_GBps", "ratio",
                   "nccl_pick", "ring_busbw_GBps", "status"]  # fmt: skip
        return self.frame[self.frame["scope"] == "multi-node"][columns].round(2)

    def numbers(self) -> dict:
        return {
            "healthy_runs_within_10pct": self.summary["healthy_within_10pct"],
            "healthy_multi_node_runs": self.summary["healthy_multi_node"],
        }

    def checks(self) -> dict:
        s = self.summary
        return {"model_explains_most_recorded_points": s["healthy_within_10pct"] == s["healthy_multi_node"]}

    def summary_line(self) -> str:
        s = self.summary
        return (
            f"{s['healthy_within_10pct']} of {s['healthy_multi_node']} healthy multi-node runs within ±10% of the "
            f"model. Outside ±10%: {s['outside']}; NCCL ran another algorithm than the model's pick: "
            f"{s['pick_differs_from_stated']}. Each row's basis (cluster.validation()['basis']) says what ran and, "
            "where a run is off the model, what NCCL's source gives as the cause or that none is known."
        )


#: nccl-tests#290: 8× H100 at 4 GiB, one node (NVLS) and two nodes over eight NDR NICs each (a misconfigured cluster).
H290 = "nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290"


@dataclasses.dataclass(frozen=True)
class H100Cliff:
    """The recorded 1 → 2 node drop of nccl-tests#290 beside the model's healthy one (`h100_cliff`)."""

    one: float  # recorded busbw, one node (GB/s)
    two: float  # recorded busbw, two nodes, NCCL's default (GB/s)
    label: str  # the recorded dataset's label
    healthy_ring: float  # model: NCCL_ALGO=Ring on two healthy nodes (GB/s)
    pick: object  # model: NCCL's default at two nodes (a cluster.Prediction)

    @property
    def recorded_cliff(self) -> float:
        return self.one / self.two

    @property
    def healthy_cliff(self) -> float:
        return self.one / self.healthy_ring

    @property
    def pick_cliff(self) -> float:
        return self.one / self.pick.busbw_GBps

    def report(self) -> str:
        return (
            f"8×H100, 4 GiB: recorded {self.one:g} → {self.two:g} GB/s busbw (÷{self.recorded_cliff:.2f}); healthy "
            f"2 nodes, model: {self.pick.algorithm} {self.pick.busbw_GBps:.0f} GB/s (÷{self.pick_cliff:.2f}), "
            f"ring {self.healthy_ring:.0f} GB/s (÷{self.healthy_cliff:.2f})"
        )

    def numbers(self) -> dict:
        return {
            "recorded_h100_cliff_1_to_2_nodes": self.recorded_cliff,
            "model_h100_cliff_healthy_ring": self.healthy_cliff,
            "model_h100_cliff_nccl_pick": self.pick_cliff,
        }

    def checks(self) -> dict:
        return {"recorded_2node_h100_below_healthy": self.two < 0.7 * self.healthy_ring}


def h100_cliff(system: System, nbytes: int = 4 * GiB) -> H100Cliff:
    """nccl-tests#290's recorded busbw at `nbytes` on 1 and 2 nodes, and the model's two healthy nodes of `system`."""
    points, ds = recorded_points(H290, nbytes)
    one = float(points[points["nodes"] == 1]["busbw_GBps"].iloc[0])
    two = float(points[(points["nodes"] == 2) & (points["config"] == "default")]["busbw_GBps"].iloc[0])
    ring = predict(system, 2, nbytes, algorithm="ring").busbw_GBps  # NCCL_ALGO=Ring: a channel per NIC
    return H100Cliff(one, two, ds.label, ring, predict(system, 2, nbytes))


class HealthyTable:
    """`healthy()` as notebook 06's table: five systems predicted at 1, 2 and 8 nodes, recorded runs beside."""

    experiment = "healthy_cluster"

    def __init__(self):
        import pandas as pd

        self.frame = pd.DataFrame(healthy())

    def report(self):
        columns = ["system", "size", "nodes", "nccl_pick", "pick_busbw_GBps", "ring_busbw_GBps", "recorded"]
        return self.frame[columns].round(0)

    def notes(self) -> dict:
        return {"rows": len(self.frame), "systems": int(self.frame["system"].nunique())}


class TpView:
    """`tp_placement` as notebook 06's table, and how much more TP=16 across two nodes communicates than TP=8."""

    def __init__(self, system: System, **workload):
        self.frame = tp_placement(system, **workload)
        self.inside, self.across = (self.frame[self.frame["tp"] == tp].iloc[0] for tp in (8, 16))

    def report(self):
        tp = self.frame
        show = tp.assign(size=tp["bytes_per_allreduce"].map(format_bytes), per_allreduce=tp["allreduce_s"].map(format_time),
                         per_microbatch=tp["comm_s"].map(format_time),
                         per_microbatch_hierarchical=tp["comm_hierarchical_s"].map(format_time))  # fmt: skip
        columns = ["tp", "placement", "size", "nccl_pick", "busbw_GBps", "allreduces_per_microbatch", "per_allreduce",
                   "per_microbatch", "per_microbatch_hierarchical"]  # fmt: skip
        return show[columns].round(1)

    def numbers(self) -> dict:
        return {"tp8_comm_s": self.inside["comm_s"], "tp16_comm_flat_s": self.across["comm_s"]}

    def verdict(self) -> str:
        i, a = self.inside, self.across
        return (
            f"TP=16 across 2 nodes spends ×{a['comm_s'] / i['comm_s']:.1f} the TP=8 communication at NCCL's pick "
            f"({a['nccl_pick']} vs {i['nccl_pick']}); ×{a['comm_hierarchical_s'] / i['comm_s']:.1f} hierarchically"
        )


def scaling_controls() -> dict:
    """The scaling widget's controls, at an 8× H100 node with eight 400 Gb/s NICs and a 1 GiB message."""
    return {
        "gpus_per_node": widgets.int_slider(8, 1, 16, 1, "GPUs per node"),
        "max_nodes": widgets.int_slider(64, 2, 512, 2, "up to nodes"),
        "intra_GBps": widgets.float_slider(450.0, 100.0, 900.0, 50.0, "NVLink GB/s per GPU per direction"),
        "nic_GBps": widgets.float_slider(50.0, 1.0, 100.0, 0.5, "NIC GB/s per direction"),
        "nics_per_node": widgets.int_slider(8, 1, 16, 1, "NICs per node"),
        "nbytes": widgets.log2_size_slider(10, 34, 30, "message size"),
    }


class ScalingDefaults:
    """What the scaling widget predicts at its default settings (nothing where the widget returned nothing)."""

    def __init__(self, shown):
        self.shown = shown

    def numbers(self) -> dict:
        if not self.shown:
            return {}
        return {
            "widget_default_flat_drop": self.shown["flat_drop"],
            "widget_default_hierarchical_drop": self.shown["hierarchical_drop"],
        }
