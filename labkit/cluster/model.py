"""predict(): what NCCL would run for a collective on a cluster, and what it would reach — the one cluster model.

`predict(system, nodes, nbytes)` asks NCCL's own tuning model (`labkit.cluster.nccl`) for every
(algorithm, protocol), keeps the lowest time — NCCL's rule (src/enqueue.cc:2032-2041 at 5067397c keeps the
(algorithm, protocol) of least ncclTopoGetAlgoTime) — and reports it in nccl-tests' terms: algbw = S / t,
busbw = algbw × the op's bus factor (`labkit.collectives.bus_factor`). A named `algorithm` forces it
(NCCL_ALGO=...), with the fastest protocol for it. `hierarchical` is labkit's hand-written algorithm of
notebook 06 (NCCL has none), costed from the same NCCL rates.

Systems built with `system.given_rates` skip NCCL: rates as given, a plain per-step alpha — the
alpha-beta model of `labkit.models` (`models.allreduce_time(..., "ring")` gives the same number).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .. import collectives
from ..collectives import bus_factor
from . import nccl, search
from .system import System, system_from_facts

GB = 1e9
#: The collectives NCCL's tuning model covers: labkit.collectives.OPS less those NCCL runs as point-to-point sends
#: and receives grouped (alltoall, sendrecv: NVIDIA/nccl#316, nccl-tests src/alltoall.cu), with no algorithm to tune.
OPS = tuple(op for op in collectives.OPS if op not in ("alltoall", "sendrecv"))
#: labkit's names -> NCCL's
ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet_chain", "collnet_direct", "pat", "hierarchical")
_ALIASES = {
    "collnet": ("collnet_chain", "collnet_direct"),
    "nvlstree": ("nvls_tree",),
    "collnetchain": ("collnet_chain",),
    "collnetdirect": ("collnet_direct",),
}


@dataclasses.dataclass(frozen=True)
class Prediction:
    """One modelled collective (a model, not a measurement). Rates in GB/s per rank, nccl-tests semantics."""

    op: str
    nbytes: float
    nodes: int
    world_size: int
    algorithm: str
    protocol: str
    seconds: float
    algbw_GBps: float
    busbw_GBps: float
    bound: str
    ring_busbw_GBps: float
    notes: tuple[str, ...]
    source: str
    latency_s: float = 0.0
    peak_busbw_GBps: float = 0.0
    channels: int = 0
    nccl_pick: bool = True

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _check(system: System, nodes, nbytes, op: str) -> tuple[int, float]:
    if not isinstance(system, System):
        raise ValueError(f"system must be a labkit.cluster.System, got {type(system).__name__}")
    if isinstance(nodes, bool) or not isinstance(nodes, (int, float)) or nodes < 1 or float(nodes) != int(nodes):
        raise ValueError(f"--nodes must be a whole number >= 1, got {nodes!r}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or not math.isfinite(nbytes) or nbytes <= 0:
        raise ValueError(f"--size must be a positive number of bytes, got {nbytes!r}")
    if op not in OPS:
        raise ValueError(
            f"--op {op!r} is not modelled; choose one of {', '.join(OPS)} (NCCL's tuning model covers these)"
        )
    m = int(nodes)
    if m > 1 and system.nics_per_node < 1:
        raise ValueError("--nics-per-node and --nic-bandwidth are needed for more than one node")
    if system.gpus_per_node * m < 2:
        raise ValueError("a collective needs at least 2 GPUs: raise --gpus-per-node or --nodes")
    return m, float(nbytes)


def _network_bound(t: search.Topo, g: search.Graph) -> str | None:
    """What holds a multi-node graph's channels x bwInter, where the network path does: the NICs, or the GPUs' own
    PCIe links every channel enters and leaves by (None: neither, the inside of the node)."""
    system = t.system
    nic_cap = system.nics_per_node * math.floor(t.net_path / g.bw_inter + 1e-9) * g.bw_inter
    if g.channels * g.bw_inter >= nic_cap - 1e-6:
        return "one NIC" if system.nics_per_node == 1 else "NIC sum"
    gpu_pcie = system.gpus_per_node * math.floor(t.pcie / g.bw_inter + 1e-9) * g.bw_inter
    if g.channels * g.bw_inter >= gpu_pcie - 1e-6:  # every channel enters and leaves over a GPU's PCIe link
        return "the GPU's PCIe link" if system.gpus_per_node == 1 else "the GPUs' PCIe links"
    return None


def _bound(t: search.Topo, algo: str, g: search.Graph) -> tuple[str, list[str]]:
    """What limits `algo` on this topology, in words, and notes. NVLSTree and CollNet never reach here on one node:
    NCCL turns them off there (tuning.cc:502; init.cc:1469-1476), and so does `nccl.enabled`."""
    system, m = t.system, t.nodes
    notes: list[str] = []
    inside = "NVLink" if system.nvlink_GBps else "PCIe"
    if algo in ("nvls_tree", "collnet_direct", "collnet_chain"):
        assert m > 1, f"{algo} on one node: nccl.enabled lets it through"
    if algo == "ring":
        return (_network_bound(t, g) or inside) if m > 1 else inside, notes
    if algo == "tree":
        if m == 1:  # no network: the tree is a chain through the node's GPUs
            return f"intra-node chain ({inside})", notes
        if system.gpus_per_node == 1:
            notes.append(
                "one GPU per node: every channel crosses the GPU's PCIe link, NCCL's search makes the tree a plain "
                "TREE (search.cc:1133) and its tuning costs that at 0.85 (tuning.cc:336)"
            )
            return _network_bound(t, g) or "the GPU's PCIe link", notes
        if m == 2:
            notes.append(
                "the 2-node tree: each node sends S (not 2(N-1)/N S) into the network, so busbw can read up to "
                "2(N-1)/N x the NIC sum; that ceiling is an upper bound, NCCL's model puts it at "
                "nChannels x bwIntra x 0.92 (tuning.cc:306, :330-331)"
            )
            return "intra-node chain (bwIntra, 2-node tree)", notes
        return "NIC sum (tree: 2S per node across)", notes
    if algo == "nvls":
        return ("NVLink (NVSwitch reduction)" if m == 1 else "NVLS + IB SHARP"), notes
    if algo == "nvls_tree":
        if m == 2:
            notes.append("NVLSTree at 2 nodes: NCCL doubles its network bandwidth (tuning.cc:319-320)")
        return "NVLS inside, tree across (NCCL's per-channel cap)", notes
    if algo.startswith("collnet"):
        return "intra-node chain (CollNet: S per node into the fabric)", notes
    return algo, notes


def _given(system: System, m: int, S: float, op: str, algorithm: str | None) -> Prediction:
    """The plain alpha-beta model (rates as given, efficiency 1): ring and hierarchical."""
    g = system.gpus_per_node
    N = g * m
    algo = algorithm or "ring"
    if op != "all_reduce" or algo not in ("ring", "hierarchical"):
        raise ValueError("a system of given rates models all_reduce with ring or hierarchical only")
    ring_bus = system.nvlink_GBps if m == 1 else min(system.nvlink_GBps, system.nics_per_node * system.nic_GBps)
    ring_lat = 2 * (N - m) * system.alpha_intra_s + 2 * (m - 1) * system.alpha_inter_s
    ring_t = ring_lat + bus_factor("all_reduce", N) * S / (ring_bus * GB)
    if algo == "ring":
        t, lat, bound = (
            ring_t,
            ring_lat,
            ("intra-node links" if m == 1 or ring_bus == system.nvlink_GBps else "NIC sum"),
        )
    else:
        inter = system.nics_per_node * system.nic_GBps / g  # each rank's share of the node's uplinks
        t_in = (g - 1) * system.alpha_intra_s + bus_factor("reduce_scatter", g) * S / (system.nvlink_GBps * GB)
        t_x = (
            2 * (m - 1) * system.alpha_inter_s + bus_factor("all_reduce", m) * (S / g) / (inter * GB) if m > 1 else 0.0
        )
        t, lat, bound = (
            2 * t_in + t_x,
            2 * (g - 1) * system.alpha_intra_s + 2 * (m - 1) * system.alpha_inter_s,
            "phases",
        )
    f = bus_factor(op, N)
    return Prediction(
        op,
        S,
        m,
        N,
        algo,
        "given",
        t,
        S / t / GB,
        S / t / GB * f,
        bound,
        S / ring_t / GB * f,
        ("rates as given (efficiency 1), plain per-step alpha",),
        "labkit alpha-beta model (labkit.models.allreduce_time)",
        lat,
        ring_bus if algo == "ring" else 0.0,
        0,
    )


def _hierarchical(system: System, m: int, S: float, graphs: dict, one: dict) -> tuple[float, float, str]:
    """labkit's hierarchical all-reduce from NCCL's rates: reduce-scatter and all-gather inside at the one-node
    ring's rate, a ring all-reduce of S/g across the m nodes over the node's channels, one after another."""
    g = system.gpus_per_node
    B = one["ring"].channels * one["ring"].bw_intra  # one node's ring busBw (e.g. H100: 6 x 60 = 360)
    Nn = graphs["ring"].channels * graphs["ring"].bw_inter if m > 1 else math.inf
    hw = "nvlink" if system.nvlink_GBps else "pci"
    lat_us = (
        nccl.BASE_LAT["ring"][2]
        + 2 * (g - 1) * nccl.HW_LAT[hw]["ring"][2]
        + 2 * (m - 1) * nccl.HW_LAT["net"]["ring"][2]
    )
    ar = functools.partial(bus_factor, "all_reduce")
    t_bw = ar(g) * S / (B * GB) + (ar(m) * S / (Nn * GB) if m > 1 else 0.0)
    bound = "network (middle phase)" if m > 1 and ar(m) / Nn >= ar(g) / B else "intra-node phases"
    return lat_us * 1e-6 + t_bw, lat_us * 1e-6, bound


def _candidates(system: System, m: int, S: float, op: str):
    t = search.Topo(system, m)
    graphs = search.graphs_for(t)
    return t, graphs, nccl.table(t, op, S, graphs)


def predict(
    system: System, nodes: int, nbytes: float, *, op: str = "all_reduce", algorithm: str | None = None
) -> Prediction:
    """What NCCL would run (algorithm=None) or a forced algorithm (NCCL_ALGO), modelled at `nbytes` on `nodes` nodes."""
    m, S = _check(system, nodes, nbytes, op)
    if system.rates == "given":
        return _given(system, m, S, op, algorithm)
    N = system.gpus_per_node * m
    f = bus_factor(op, N)
    t, graphs, cands = _candidates(system, m, S, op)
    ring = [c for c in cands if c.algo == "ring"]
    ring_best = min(ring, key=lambda c: c.time_us)
    ring_busbw = S / (ring_best.time_us * 1e-6) / GB * f
    src = f"NCCL's tuning model, {nccl.SOURCE}; graph search emulated by labkit (labkit.cluster.nccl)"
    if algorithm == "hierarchical":
        if op != "all_reduce":
            raise ValueError("the hierarchical algorithm is an all_reduce")
        one = search.graphs_for(search.Topo(system, 1))
        sec, lat, bound = _hierarchical(system, m, S, graphs, one)
        return Prediction(
            op,
            S,
            m,
            N,
            "hierarchical",
            "simple",
            sec,
            S / sec / GB,
            S / sec / GB * f,
            bound,
            ring_busbw,
            ("labkit's hand-written hierarchical all-reduce (NCCL has none), phases one after another",),
            src,
            lat,
            0.0,
            graphs["ring"].channels,
            nccl_pick=False,
        )
    pick = min(cands, key=lambda c: c.time_us)
    chosen = pick
    if algorithm is not None:
        want = _ALIASES.get(algorithm.lower().replace("-", "_"), (algorithm.lower(),))
        if not set(want) & set(ALGORITHMS):
            raise ValueError(f"--algorithm {algorithm!r} is not known; choose one of {', '.join(ALGORITHMS)}")
        forced = [c for c in cands if c.algo in want]
        if not forced:
            raise ValueError(
                f"NCCL would not run {algorithm} for {op} on {system.name} at {m} node(s): "
                + _why_not(system, m, want[0], op)
            )
        chosen = min(forced, key=lambda c: c.time_us)
    sec = chosen.time_us * 1e-6
    gname = {"collnet_direct": "collnet", "collnet_chain": "collnet", "nvls_tree": "nvls", "pat": "ring"}.get(
        chosen.algo, chosen.algo
    )
    bound, notes = _bound(t, chosen.algo, graphs[gname])
    g = graphs[gname]
    notes = [f"graph: {g.channels} channels x {g.bw_intra:g}/{g.bw_inter:g} GB/s (bwIntra/bwInter)"] + notes
    if chosen.algo != pick.algo:
        notes.append(f"forced; NCCL's own pick here is {pick.algo}/{pick.proto}")
    return Prediction(
        op,
        S,
        m,
        N,
        chosen.algo,
        chosen.proto,
        sec,
        S / sec / GB,
        S / sec / GB * f,
        bound,
        ring_busbw,
        tuple(notes),
        src,
        chosen.latency_us * 1e-6,
        chosen.bw_GBps * f,
        g.channels,
        nccl_pick=chosen == pick,
    )


def _why_not(system: System, m: int, algo: str, op: str) -> str:
    if algo in ("nvls", "nvls_tree") and not system.nvls:
        return "the node has no NVLink SHARP (give --nvls for an NVSwitch node of Hopper or later)"
    if algo == "nvls_tree" and m == 1:
        return "NVLSTree is multi-node (tuning.cc:502)"
    if algo == "nvls" and m > 1:
        return "multi-node NVLS needs CollNet/SHARP (give --sharp; tuning.cc:504-506)"
    if algo.startswith("collnet") and m < nccl.COLLNET_NODE_THRESHOLD:
        return "CollNet is multi-node: NCCL turns it off below 2 nodes (NCCL_COLLNET_NODE_THRESHOLD, init.cc:1469-1476)"
    if algo.startswith("collnet"):
        return "CollNet needs a SHARP fabric with NCCL_COLLNET_ENABLE=1 (give --sharp)"
    if algo == "pat":
        return "PAT runs all_gather/reduce_scatter with one GPU per node (tuning.cc:216-223, :298)"
    if algo == "tree" and op != "all_reduce":
        return "NCCL's tree runs all_reduce only (tuning.cc:294-297)"
    return "not in NCCL's tuning model for this case"


def alternatives(system: System, nodes: int, nbytes: float, *, op: str = "all_reduce") -> list[Prediction]:
    """Every algorithm NCCL would consider here (each at its fastest protocol), plus labkit's hierarchical."""
    m, S = _check(system, nodes, nbytes, op)
    if system.rates == "given":
        return [predict(system, m, S, op=op, algorithm=a) for a in ("ring", "hierarchical") if m > 1 or a == "ring"]
    _, _, cands = _candidates(system, m, S, op)
    algos = [a for a in nccl.ALGOS if any(c.algo == a for c in cands)]
    out = [predict(system, m, S, op=op, algorithm=a) for a in algos]
    if op == "all_reduce" and m > 1:
        out.append(predict(system, m, S, op=op, algorithm="hierarchical"))
    return out


# --------------------------------------------------------------------------- the command line
def cli_records(
    nbytes: float,
    gpus: int,
    nodes: int,
    bandwidth_GBps: float,
    nic_bandwidth_GBps: float | None,
    nics_per_node: int | None,
    gpus_per_node: int | None = None,
    *,
    nvls: bool = False,
    sharp: bool = False,
) -> list[dict]:
    """`labkit model --nodes ...`: one record per algorithm that applies, NCCL's pick marked. `--bandwidth` is the
    GPU's NVLink line rate per direction (450 for H100); NCCL's own rates are derived from it (labkit.cluster.nccl)."""
    for flag, v in (("--gpus", gpus), ("--nodes", nodes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{flag} must be a whole number >= 1, got {v!r}")
    if gpus % nodes:
        raise ValueError(f"--nodes ({nodes}) must divide --gpus ({gpus}): every node holds the same number of GPUs")
    g = gpus // nodes
    if gpus_per_node is not None and gpus_per_node != g:
        raise ValueError(f"--gpus-per-node ({gpus_per_node}) must equal --gpus / --nodes ({gpus}/{nodes} = {g})")
    if nodes > 1 and (nic_bandwidth_GBps is None or nics_per_node is None):
        raise ValueError("--nic-bandwidth and --nics-per-node are needed when --nodes is above 1")
    system = system_from_facts(
        gpus_per_node=g,
        nvlink_GBps=bandwidth_GBps,
        nics_per_node=nics_per_node or 0,
        nic_GBps=nic_bandwidth_GBps or 0.0,
        nvls=nvls,
        sharp=sharp,
    )
    pick = predict(system, nodes, nbytes)
    rows = []
    for p in alternatives(system, nodes, nbytes):
        rows.append(
            {
                "algorithm": p.algorithm,
                "protocol": p.protocol,
                "seconds": p.seconds,
                "algbw_GBps": p.algbw_GBps,
                "busbw_GBps": p.busbw_GBps,
                "nbytes": nbytes,
                "gpus": gpus,
                "nodes": nodes,
                "gpus_per_node": g,
                "latency_s": p.latency_s,
                "bound": p.bound,
                "nccl_would_pick": p.algorithm == pick.algorithm and p.protocol == pick.protocol,
                "model": f"labkit.cluster (NCCL {nccl.NCCL_VERSION} tuning model; a model, not a measurement)",
            }
        )
    return rows
