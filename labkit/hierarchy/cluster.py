"""Cluster scale: flat ring vs hierarchical all-reduce against node count, and tensor-parallel placement.

Everything here is a *model* built on `labkit.models.allreduce_time` (DESIGN.md cost models);
figures that draw it say "model:". Bandwidths are per direction (a ring sends and receives at
once), in GB/s = 1e9 B/s. A cluster is described by `ClusterLinks`:

- inside a node: every GPU reaches the others at `intra_GBps` per direction (NVLink/NVSwitch:
  NVLink 4's "900 GB/s" is the sum of both directions, so 450 GB/s per direction);
- between nodes: `nics_per_node` NICs of `nic_GBps` each per direction. NCCL runs several rings
  (channels) at once, each leaving the node on its own NIC (rail-aligned), so a *flat ring* pushes
  its 2(N−1)/N·S per node over all the NICs: it runs at min(intra, nics·nic) — not at one NIC's
  rate. The *hierarchical* algorithm sends 2(m−1)/m·S per node over the same NICs: its gains are
  fewer bytes per node and a shorter latency term, not ×g bandwidth.

These are the line-rate ring and hierarchical bounds of `labkit.hierarchy.cluster_model`, which
states the whole model once (tree, NVLS, SHARP, NCCL's efficiencies and latency constants, the
sources) and checks it against every recorded multi-node run (`cluster_validation`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from .. import models, plots
from ..collectives import busbw
from ..reference import DatasetError, load, short_source
from ..units import format_bytes, format_time

#: Per-message latency inside a node assumed by the model: 3 µs. p2pBandwidthLatencyTest
#: measures 2.3-3.4 µs GPU-to-GPU over NVSwitch on 8x H100/A100 (shared/reference-sources INDEX §5).
INTRA_LATENCY_S = 3e-6
#: Per-message latency between nodes assumed by the model: 10 µs (an RDMA hop through a switch plus
#: NCCL's proxy thread). An assumption, not a measurement: the 2-node GH200 all-reduce floor of
#: ~19 µs in the recorded data bounds it from above; change it and watch only small sizes move.
INTER_LATENCY_S = 10e-6


@dataclasses.dataclass(frozen=True)
class ClusterLinks:
    """The links of a cluster of identical nodes, per direction, with where the numbers came from."""

    gpus_per_node: int
    intra_GBps: float  # per GPU, per direction, inside the node
    nic_GBps: float  # per NIC, per direction
    nics_per_node: int
    intra_latency_s: float = INTRA_LATENCY_S
    inter_latency_s: float = INTER_LATENCY_S
    name: str = "cluster"
    source: str = "assumed"

    def __post_init__(self):
        if self.gpus_per_node < 1 or self.nics_per_node < 1:
            raise ValueError("gpus_per_node and nics_per_node must be >= 1")
        if self.intra_GBps <= 0 or self.nic_GBps <= 0:
            raise ValueError("bandwidths must be positive (GB/s per direction)")

    @property
    def inter_per_gpu_GBps(self) -> float:
        """Network bandwidth each GPU gets when all g GPUs of a node send at once (per direction)."""
        return self.nics_per_node * self.nic_GBps / self.gpus_per_node

    @property
    def flat_edge_GBps(self) -> float:
        """What a flat ring's node boundary carries per direction: NCCL's rings (channels) cross it on
        every NIC at once (rail-aligned), so the NIC sum, capped by the GPUs' own links
        (cluster_model.ring_allreduce at line rate; nccl-tests#290, AddyLaddy: 46-48 GB/s per NDR NIC
        x 8 expected for a 2-node ring)."""
        return min(self.intra_GBps, self.nics_per_node * self.nic_GBps)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.gpus_per_node} GPUs/node at {self.intra_GBps:g} GB/s per direction inside, "
            f"{self.nics_per_node}×{self.nic_GBps:g} GB/s NICs per direction between nodes"
        )


def preset(name: str) -> ClusterLinks:
    """Clusters built from `labkit.models.SPECS` (per-direction figures): see PRESETS."""
    s = models.spec
    presets = {
        "H100 NDR": ClusterLinks(
            8,
            s("NVLink 4").per_direction_GBps(),
            s("NDR 400").per_direction_GBps(),
            8,
            name="8×H100 SXM per node, 8× InfiniBand NDR",
            source=f"spec: {s('NVLink 4').name}; {s('NDR 400').name}",
        ),
        "A100 HDR": ClusterLinks(
            8,
            s("NVLink 3").per_direction_GBps(),
            s("HDR").per_direction_GBps(),
            8,
            name="8×A100 SXM per node, 8× InfiniBand HDR",
            source=f"spec: {s('NVLink 3').name}; {s('HDR').name}",
        ),
        # EFA on p4d: 400 Gb/s per node over 4 adapters → 4 × 12.5 GB/s per direction.
        "p4d EFA": ClusterLinks(
            8,
            s("NVLink 3").per_direction_GBps(),
            s("EFA (p4d").per_direction_GBps() / 4,
            4,
            name="p4d.24xlarge: 8×A100, 4×100 Gb/s EFA",
            source=f"spec: {s('NVLink 3').name}; {s('EFA (p4d').name}",
        ),
        # OCI BM.GPU4.8: 16 × 100 Gb/s RoCE ports per node (dataset
        # nccl_allreduce_10gib_oci_bm_gpu4_8_1node_vs_2node_roce, field interconnect).
        "A100 RoCE": ClusterLinks(
            8,
            s("NVLink 3").per_direction_GBps(),
            s("Ethernet 100").per_direction_GBps(),
            16,
            name="OCI BM.GPU4.8: 8×A100, 16×100 Gb/s RoCE",
            source=f"spec: {s('NVLink 3').name}; {s('Ethernet 100').name}",
        ),
        # CSCS Alps: 4 GH200 per node, one Slingshot-11 NIC of 200 Gb/s (25 GB/s per direction) per GPU
        # — the figure is the dataset's own description (nccl_allreduce_gh200_alps_1to16nodes_slingshot11,
        # field interconnect); labkit.models.SPECS has no Slingshot entry. NVLink between the 4 Hoppers
        # is taken at the H100 NVLink 4 figure per direction (an assumption: GH200 nodes wire it differently).
        "GH200 Slingshot": ClusterLinks(
            4,
            s("NVLink 4").per_direction_GBps(),
            200 / 8,
            4,
            name="CSCS Alps: 4×GH200, 4× Slingshot-11 200 Gb/s",
            source=f"spec: {s('NVLink 4').name} (assumed); 200 Gb/s per NIC from the dataset",
        ),
    }
    if name not in presets:
        raise KeyError(f"unknown preset {name!r}; choose one of {sorted(presets)}")
    return presets[name]


# --------------------------------------------------------------------------- time
def flat_time(nbytes: float, nodes: int, links: ClusterLinks) -> float:
    """model: one flat ring over all nodes·g GPUs; across nodes its rings use every NIC (flat_edge_GBps)."""
    N = nodes * links.gpus_per_node
    if nodes == 1:
        return models.allreduce_time(nbytes, N, links.intra_GBps, links.intra_latency_s, "ring")
    # latency in NCCL's form (src/graph/tuning.cc): of the 2(N-1) steps, 2(m-1) cross the network and pay the
    # network's latency, the other 2(N-m) the intra-node one (cluster_system.ring_latency_s, without NCCL's constants)
    alpha = 2 * (N - nodes) * links.intra_latency_s + 2 * (nodes - 1) * links.inter_latency_s
    return alpha + models.allreduce_time(nbytes, N, links.flat_edge_GBps, 0.0, "ring")


def hierarchical_time(nbytes: float, nodes: int, links: ClusterLinks) -> float:
    """model: reduce-scatter inside nodes, ring all-reduce of S/g across nodes, all-gather inside."""
    g = links.gpus_per_node
    return models.allreduce_time(
        nbytes,
        nodes * g,
        links.intra_GBps,
        links.intra_latency_s,
        "hierarchical",
        gpus_per_node=g,
        inter_bandwidth_GBps=links.inter_per_gpu_GBps,
        inter_latency_s=links.inter_latency_s,
    )


def slow_link_bytes(nbytes: float, group_size: int, groups: int) -> dict:
    """Bytes that cross the slow (between-group) links, for a flat ring and for the hierarchical algorithm.

    Ranks are numbered group by group (as torchrun numbers them node by node), so a flat ring over
    N = g·m ranks crosses a group boundary m times; each crossing edge carries what one rank sends
    in a ring, 2(N−1)/N·S. In the hierarchical algorithm every rank sends 2(m−1)/m·S/g across.
    """
    g, m = int(group_size), int(groups)
    if g < 1 or m < 1:
        raise ValueError("group_size and groups must be >= 1")
    N, S = g * m, float(nbytes)
    if m == 1:
        return {
            "flat_per_crossing_rank": 0.0,
            "hier_per_rank": 0.0,
            "flat_per_group_uplink": 0.0,
            "hier_per_group_uplink": 0.0,
            "flat_total": 0.0,
            "hier_total": 0.0,
        }
    flat_rank = 2 * (N - 1) / N * S
    hier_rank = 2 * (m - 1) / m * S / g
    return {
        "flat_per_crossing_rank": flat_rank,  # one rank per group sends this across
        "hier_per_rank": hier_rank,  # every rank sends this across
        "flat_per_group_uplink": flat_rank,  # leaving one group, one direction
        "hier_per_group_uplink": g * hier_rank,  # = 2(m−1)/m·S
        "flat_total": m * flat_rank,
        "hier_total": N * hier_rank,
    }


def node_sweep(nbytes: float, node_counts: Sequence[int], links: ClusterLinks):
    """model: flat vs hierarchical time, busbw and speed-up for each node count (a DataFrame)."""
    import pandas as pd

    rows = []
    for n in node_counts:
        N = n * links.gpus_per_node
        tf, th = flat_time(nbytes, n, links), hierarchical_time(nbytes, n, links)
        rows.append(
            {
                "nodes": n,
                "gpus": N,
                "nbytes": nbytes,
                "flat_s": tf,
                "hierarchical_s": th,
                "flat_busbw_GBps": busbw("all_reduce", nbytes, tf, N) if tf > 0 else math.nan,
                "hierarchical_busbw_GBps": busbw("all_reduce", nbytes, th, N) if th > 0 else math.nan,
                "speedup": tf / th if th > 0 else math.nan,
            }
        )
    return pd.DataFrame(rows)


def cliff(nbytes: float, links: ClusterLinks, nodes: int = 2) -> dict:
    """How much slower per GPU (busbw) the all-reduce gets when it leaves the node: 1 node vs `nodes`."""
    df = node_sweep(nbytes, [1, nodes], links)
    one, many = df.iloc[0], df.iloc[1]
    return {
        "busbw_1node_GBps": one["flat_busbw_GBps"],
        "flat_busbw_GBps": many["flat_busbw_GBps"],
        "hierarchical_busbw_GBps": many["hierarchical_busbw_GBps"],
        "flat_drop": one["flat_busbw_GBps"] / many["flat_busbw_GBps"],
        "hierarchical_drop": one["flat_busbw_GBps"] / many["hierarchical_busbw_GBps"],
    }


# --------------------------------------------------------------------------- tensor parallelism
#: Megatron-style tensor parallelism without sequence parallelism: per transformer layer two
#: all-reduces in the forward pass (after attention and after the MLP) and two in the backward
#: pass (Shoeybi et al. 2019, "Megatron-LM", §3 and Fig. 4).
TP_ALLREDUCES_PER_LAYER = 4


def tp_placement(
    links: ClusterLinks,
    *,
    hidden: int,
    seq_len: int,
    micro_batch: int,
    layers: int,
    dtype_bytes: int = 2,
    tp_degrees: Sequence[int] = (1, 2, 4, 8, 16, 32),
):
    """model: the tensor-parallel all-reduce cost of one micro-batch, for TP inside vs across nodes.

    Each all-reduce moves the activations b·s·h·dtype over the TP group. Inside the NVLink domain
    (tp ≤ g) it is a ring at intra bandwidth; beyond it the TP group spans tp/g nodes and every
    layer pays the network (flat ring, and the best case of the hierarchical algorithm).
    """
    import pandas as pd

    S = micro_batch * seq_len * hidden * dtype_bytes
    g = links.gpus_per_node
    rows = []
    for tp in tp_degrees:
        if tp > g and tp % g:
            raise ValueError(f"TP degree {tp} is above {g} GPUs per node but not a multiple of it")
        n_ar = TP_ALLREDUCES_PER_LAYER * layers
        if tp <= g:
            t_flat = t_hier = models.allreduce_time(S, tp, links.intra_GBps, links.intra_latency_s, "ring")
            where = "inside the NVLink domain" if tp > 1 else "no TP"
        else:
            nodes = tp // g
            t_flat, t_hier = flat_time(S, nodes, links), hierarchical_time(S, nodes, links)
            where = f"across {nodes} nodes"
        rows.append(
            {
                "tp": tp,
                "placement": where,
                "bytes_per_allreduce": S,
                "allreduce_flat_s": t_flat,
                "allreduce_hierarchical_s": t_hier,
                "allreduces_per_microbatch": n_ar if tp > 1 else 0,
                "comm_flat_s": n_ar * t_flat,
                "comm_hierarchical_s": n_ar * t_hier,
            }
        )
    return pd.DataFrame(rows)


PRESETS = ("H100 NDR", "A100 HDR", "p4d EFA", "A100 RoCE", "GH200 Slingshot")


# --------------------------------------------------------------------------- published multi-node results
@dataclasses.dataclass(frozen=True)
class Published:
    """Which recorded all_reduce sweep a preset is compared with, at which size."""

    preset: str
    dataset: str
    nbytes: int
    where: dict = dataclasses.field(default_factory=dict)
    note: str = ""


#: Published multi-node nccl-tests runs (data/) and the model cluster each is compared with.
PUBLISHED = (
    Published(
        "H100 NDR",
        "nccl_allreduce_h100_1node_nvls_2node_ib_ndr_issue290",
        4 << 30,
        {"placement": "out-of-place"},
        "1 node = NVLS; 2 nodes: default and NCCL_ALGO=RING",
    ),
    Published(
        "H100 NDR",
        "nccl_allreduce_64xh100_8node_ib_sharp_coreweave",
        8 << 30,
        {"placement": "out-of-place"},
        "SHARP: the switches add, so busbw can beat the NICs — outside this model",
    ),
    Published(
        "GH200 Slingshot", "nccl_allreduce_gh200_alps_1to16nodes_slingshot11", 1 << 30, {"placement": "out-of-place"}
    ),
    Published("p4d EFA", "nccl_allreduce_16xa100_2node_p4d_efa_awsefaeks", 4 << 30, {"placement": "out-of-place"}),
    Published(
        "A100 RoCE", "nccl_allreduce_10gib_oci_bm_gpu4_8_1node_vs_2node_roce", 10 << 30, {"placement": "out-of-place"}
    ),
)


def published_points(pub: Published):
    """busbw at one size for every (nodes, config) of a recorded sweep, as a DataFrame (+ the dataset)."""
    ds = load(pub.dataset)
    f = ds.frame
    for col, val in pub.where.items():
        f = f[f[col] == val]
    f = f[f["nbytes"] == pub.nbytes]
    return f[["nodes", "world_size", "config", "nbytes", "busbw_GBps"]].reset_index(drop=True), ds


def plot_published(presets=("H100 NDR", "GH200 Slingshot", "p4d EFA", "A100 RoCE"), max_nodes: int = 16):
    """For each cluster: published busbw vs nodes beside the flat and hierarchical models at the same size."""
    fig, axes = plots.figure(2, 2, width=6.2, height=4.2)
    shown, missing = [], []
    for ax, name in zip(axes, presets):
        links = preset(name)
        pubs = [p for p in PUBLISHED if p.preset == name]
        sizes = sorted({p.nbytes for p in pubs}) or [1 << 30]
        nodes = [n for n in (1, 2, 4, 8, 16, 32) if n <= max_nodes]
        for S in sizes[:1]:
            df = node_sweep(S, nodes, links)
            plots.line(
                ax,
                df["nodes"],
                df["flat_busbw_GBps"],
                f"model: flat ring, {_fmt_bytes(S)}",
                how=plots.MODEL,
                color="C3",
            )
            plots.line(
                ax,
                df["nodes"],
                df["hierarchical_busbw_GBps"],
                f"model: hierarchical, {_fmt_bytes(S)}",
                how=plots.MODEL,
                color="C2",
            )
        for i, p in enumerate(pubs):
            try:
                pts, ds = published_points(p)
            except DatasetError as e:
                missing.append(str(e))
                continue
            shown.append(ds.name)
            for j, (cfg, grp) in enumerate(pts.groupby("config", sort=False)):
                label = f"recorded: {cfg[:38]}, {_fmt_bytes(p.nbytes)} — {short_source(ds.meta['source'])}"
                ax.plot(
                    grp["nodes"],
                    grp["busbw_GBps"],
                    marker="osD^v"[(i + j) % 5],
                    ls="-",
                    lw=1,
                    mfc="none",
                    color=f"C{(i * 3 + j) % 10}",
                    label=label,
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_ticks(ax)
        plots.finish(
            ax,
            f"{links.name}",
            "nodes (count)",
            "busbw per GPU (GB/s)",
            source="model: labkit.hierarchy.cluster from spec figures; recorded: nccl-tests",
        )
        ax.legend(fontsize=5.5, loc="lower left")
    fig.suptitle("Leaving the node: published all-reduce busbw against the flat and hierarchical models", fontsize=11)
    fig.tight_layout()
    return fig, shown, missing


def _plain_ticks(ax) -> None:
    """Log axes labelled 2, 4, 50, 300 rather than 2×10⁰ (easier to read off)."""
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(fmt)
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))


def scaling_view(
    gpus_per_node: int, max_nodes: int, intra_GBps: float, nic_GBps: float, nics_per_node: int, nbytes: int
):
    """The widget's view: build the cluster from the controls and draw `plot_scaling`."""
    links = ClusterLinks(
        int(gpus_per_node), float(intra_GBps), float(nic_GBps), int(nics_per_node), name="your cluster", source="widget"
    )
    fig, out = plot_scaling(links, nbytes, max_nodes=int(max_nodes))
    return out


def _fmt_bytes(n) -> str:
    return format_bytes(n)


def plot_scaling(links: ClusterLinks, nbytes: float, max_nodes: int = 64):
    """model: flat vs hierarchical all-reduce time against GPU count, with the cliff where the node ends."""
    nodes = [1]
    while nodes[-1] * 2 <= max_nodes:
        nodes.append(nodes[-1] * 2)
    df = node_sweep(nbytes, nodes, links)
    fig, ax = plots.figure(width=7.5, height=4.2)
    plots.line(ax, df["gpus"], df["flat_s"] * 1e3, "model: flat ring", how=plots.MODEL, color="C3", marker="o")
    plots.line(
        ax, df["gpus"], df["hierarchical_s"] * 1e3, "model: hierarchical", how=plots.MODEL, color="C2", marker="s"
    )
    g = links.gpus_per_node
    ax.axvspan(g, 2 * g, color="0.85", alpha=0.6, label=f"the cliff: leaving the {g}-GPU node")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _plain_ticks(ax)
    c = cliff(nbytes, links) if len(nodes) > 1 else None
    plots.finish(
        ax,
        f"All-reduce of {format_bytes(nbytes)}: {links.describe()}",
        "GPUs (count)",
        "time per all-reduce (ms)",
        source="model: labkit.hierarchy.cluster (per-direction bandwidths)",
    )
    out = {
        "nbytes": nbytes,
        "one_node_s": float(df["flat_s"].iloc[0]),
        "flat_s_max": float(df["flat_s"].iloc[-1]),
        "hierarchical_s_max": float(df["hierarchical_s"].iloc[-1]),
    }
    if c:
        out.update(flat_drop=c["flat_drop"], hierarchical_drop=c["hierarchical_drop"])
        ax.text(
            0.02,
            0.96,
            f"1 → 2 nodes: busbw ÷{c['flat_drop']:.3g} flat, ÷{c['hierarchical_drop']:.3g} hierarchical;"
            f" 1 node: {format_time(out['one_node_s'])}",
            transform=ax.transAxes,
            fontsize=7,
            va="top",
        )
    return fig, out
