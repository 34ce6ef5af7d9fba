"""NCCL's own tuning model, re-stated in Python: what NCCL thinks each algorithm and protocol costs.

Everything here follows NVIDIA/nccl at commit 5067397c (master, 2026-06-11, NCCL 2.30.7 by
makefiles/version.mk) — cited below as tuning.cc:LINE, search.cc:LINE, topo.h:LINE, init.cc:LINE,
device.h:LINE. Two stages, as in NCCL:

1. **The graph search** (search.cc `ncclTopoCompute`): how many channels each algorithm builds and at what
   bandwidth per channel — labkit's emulation of its outcome, in `labkit.cluster.search`.
2. **The tuning model** (tuning.cc `ncclTopoTuneModel`, :243-618) turns each graph into a bus
   bandwidth and a latency per (collective, algorithm, protocol); `ncclTopoGetAlgoTime` (:630-655)
   gives time = latency + bytes / bandwidth, and NCCL runs the (algorithm, protocol) with the lowest
   time. `algo_bandwidth`, `algo_latency_us` and `algo_time_us` below are line-by-line transcriptions.

NCCL's numbers are a *model* NCCL uses to choose; they are not measurements. labkit's validation
(`labkit.cluster.validation`) says how close they come to published runs.
"""

from __future__ import annotations

import dataclasses
import math

from .search import Graph, Topo, graphs_for
from .tables import (  # noqa: F401 (re-exported: nccl.X is the documented place)
    _A,
    _CC,
    _INTER_OLD,
    _P,
    ALGOS,
    ARCHS,
    BASE_LAT,
    COLLNET_NODE_THRESHOLD,
    COMPCAP,
    DIRECT_MAX_ARITY,
    HW_LAT,
    LL_MAX_BWS,
    MAXCHANNELS,
    NCCL_COMMIT,
    NCCL_VERSION,
    NVLINK_PER_LINK_GBPS,
    NVLS_EFFICIENCY,
    NVLS_MAX_ARITY,
    PCIE_X16_GBPS,
    PER_CH_MAX_NVLS_TREE,
    PER_CH_MAX_RING_LL128,
    PER_CH_MAX_TREE,
    PER_CH_MAX_TREE_LL128,
    PROTOS,
    RING_MAX_CHANNELS,
    SOURCE,
    SPEEDS_INTER,
    SPEEDS_INTRA,
    TREE_CORRECTION,
)


# --------------------------------------------------------------------------- tuning.cc, line by line
def _index2(nodes: int) -> int:
    return nodes - 1 if nodes <= 2 else 2  # tuning.cc:267


def _proto_enabled(t: Topo, algo: str, proto: str) -> bool:
    """tuning.cc:301 (NVLS/NVLSTree Simple only), :338-339 (CollNet Simple only), :518-535 (LL128 default)."""
    if algo in ("nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pat") and proto != "simple":
        return False
    if proto == "ll128":
        if t.nvlink_total <= 0:  # typeIntra <= PATH_NVB: LL128 needs NVLink inside the node (:531)
            return False
        # typeInter <= PATH_PXN on SM90+ (:522), <= PATH_PXB before (:525): a NIC under the GPU's PCIe switch
        # (what DGX/HGX-class nodes have) satisfies both; labkit assumes it.
        return COMPCAP[t.system.arch] >= 70
    return True


def algo_bandwidth(t: Topo, coll: str, algo: str, proto: str, graphs: dict[str, Graph]) -> float:
    """comm->bandwidths[coll][algo][proto] of tuning.cc:288-383: the *algorithm* bandwidth, GB/s (0 = not used)."""
    nodes, ranks = t.nodes, t.ranks
    ppn = ranks / nodes
    cc = _CC[t.system.arch]
    i2 = _index2(nodes)
    i1 = cc if nodes == 1 else (1 if t.system.cpu == "amd" else 0)  # :269-271
    ll_max = LL_MAX_BWS[i1][i2]
    nsteps = (
        2 * (ranks - 1) if coll == "all_reduce" else (ranks - 1 if coll in ("all_gather", "reduce_scatter") else ranks)
    )
    if coll in ("broadcast", "reduce") and algo != "ring":  # :294
        return 0.0
    if coll in ("reduce_scatter", "all_gather") and algo not in ("pat", "ring", "nvls", "collnet_direct"):  # :295-297
        return 0.0
    if coll == "all_reduce" and algo == "pat":  # :298
        return 0.0
    if not _proto_enabled(t, algo, proto):
        return 0.0
    if algo == "pat" and not (COMPCAP[t.system.arch] >= 60 and t.system.gpus_per_node == 1):  # ncclPatEnable, :216-223
        return 0.0
    g = graphs[
        {"collnet_direct": "collnet", "collnet_chain": "collnet", "nvls_tree": "nvls", "pat": "ring"}.get(algo, algo)
    ]
    if not g.ok:
        return 0.0
    collnet = algo in ("collnet_direct", "collnet_chain")
    bw = g.bw_intra if (nodes <= 2 or collnet) else g.bw_inter  # :306
    if algo in ("nvls", "nvls_tree"):  # :307-323
        if g.channels < 2:
            return 0.0
        intra = g.bw_intra * NVLS_EFFICIENCY[t.system.arch] * (g.channels - 1) / g.channels
        intra *= 2.0 if coll == "all_reduce" else (ppn - 1) / ppn
        inter = g.bw_inter * (2 if (nodes <= 2 and algo == "nvls_tree") else 1)
        bw = min(intra, inter, PER_CH_MAX_NVLS_TREE[cc][i2] if algo == "nvls_tree" else math.inf)
    bus = g.channels * bw  # :324
    if algo == "ring" and proto == "ll":  # :327
        bus = min(ll_max, bus * 0.5)
    if algo == "ring" and proto == "ll128":  # :328-329
        bus = min(bus * 0.92, g.channels * PER_CH_MAX_RING_LL128[cc][i2])
    if algo == "tree" and coll == "all_reduce":  # :330-331
        bus = min(bus * 0.92, g.channels * PER_CH_MAX_TREE[cc][i2])
    if algo == "tree" and proto == "ll":  # :332
        bus = min(bus / 3.8, ll_max)
    if algo == "tree" and proto == "ll128":  # :333-335
        bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0), g.channels * PER_CH_MAX_TREE_LL128[cc][i2])
    if algo == "tree" and t.system.gpus_per_node == 1:  # :336, maxTreePattern == NCCL_TOPO_PATTERN_TREE
        bus *= 0.85  # one GPU per node: the search turns the balanced tree into a plain TREE (search.cc:1133)
    if algo == "pat":  # :337
        bus *= 0.75
    if algo == "collnet_direct":  # :340-350
        if coll in ("all_gather", "reduce_scatter"):
            bus = ppn * min(g.bw_intra, g.bw_inter * 0.9)
        else:
            factor = ppn / g.channels
            factor -= (factor - 1) / 2
            bus /= factor
            if COMPCAP[t.system.arch] >= 90:
                bus *= 0.85
    if algo in ("nvls", "collnet_direct") and coll in ("all_gather", "reduce_scatter") and nodes > 1:  # :353-374
        bus = 0.0  # needs the CollNet plugin's iallgather/ireducescatter and one head per local rank
    if not (algo != "ring" and coll in ("all_gather", "reduce_scatter")):  # :376-382 bus -> algorithm bandwidth
        bus *= (ranks / nsteps) if algo in ("ring", "nvls", "nvls_tree") else 0.5
    return bus


def algo_latency_us(
    t: Topo, coll: str, algo: str, proto: str, graphs: dict[str, Graph], net_latency_us: float = 0.0
) -> float:
    """comm->latencies[coll][algo][proto] of tuning.cc:384-435, µs. `net_latency_us` is the net plugin's
    graphs[a]->latencyInter (0 for NCCL's IB and socket transports: net_ib/init.cc:558, net_socket.cc:174)."""
    nodes, ranks = t.nodes, t.ranks
    ppn = ranks / nodes
    p = _P[proto]
    intra_hw = "nvlink" if t.nvlink_total > 0 else "pci"  # :284-285
    hw = intra_hw if nodes == 1 else "net"  # :286
    nsteps = (
        2 * (ranks - 1) if coll == "all_reduce" else (ranks - 1 if coll in ("all_gather", "reduce_scatter") else ranks)
    )
    lat = BASE_LAT[algo][p]
    intra = HW_LAT[intra_hw][algo][p]
    inter = HW_LAT["net"]["tree"][p] if ppn == 1 else HW_LAT["net"][algo][p]  # :386-388
    inter += net_latency_us  # :389
    if proto == "simple":
        inter += net_latency_us  # :390-391 flush
    g = ranks // nodes
    lg = int(math.log2(nodes)) if nodes > 1 else 0  # log2i
    if algo == "ring":
        if coll in ("reduce", "broadcast"):
            lat += HW_LAT[hw]["ring"][p]  # sameChannels (:396-397)
        else:
            overhead = 0.0
            if nodes > 1:  # :404-409
                overhead = 2.0 if t.system.cpu == "amd" else 1.0
                if proto == "simple":
                    overhead *= 3
            intra = max(intra, overhead)
            n_inter = 0 if nodes == 1 else (2 * (nodes - 1) if coll == "all_reduce" else nodes - 1)
            lat += (nsteps - n_inter) * intra + n_inter * inter  # :411-412
    elif algo == "tree":
        if coll == "all_reduce":
            lat += 2 * ((g - 1) * intra + lg * inter)  # :416
    elif algo == "collnet_direct":
        lat += 2 * (min(1, g - 1) * intra + (g - 1) * 0.4) + inter  # :419-421
    elif algo == "collnet_chain":
        lat += 2 * (g - 1) * intra + inter  # :423
    elif algo == "nvls":
        lat = intra + (inter if nodes > 1 else 0.0)  # :425-426
    elif algo == "nvls_tree":
        lat += intra + 2 * lg * inter  # :428
    elif algo == "pat" and coll in ("all_gather", "reduce_scatter"):
        lat += lg * (inter / 3.5) + ranks * 2.8  # :431-433
    return lat


def enabled(t: Topo, algo: str) -> bool:
    """tuning.cc:498-512: NVLSTree off on one node; CollNet (and multi-node NVLS) only with CollNet
    enabled; CollNetDirect only on NVSwitch systems. CollNet is also off below NCCL_COLLNET_NODE_THRESHOLD nodes,
    2 by default (init.cc:857, :1469-1476): on one node neither CollNet nor NVLSTree runs."""
    if t.nodes == 1 and algo == "nvls_tree":
        return False
    if not t.system.sharp and (algo in ("collnet_direct", "collnet_chain") or (algo == "nvls" and t.nodes > 1)):
        return False
    if algo == "collnet_direct" and not t.system.nvswitch:
        return False
    if algo in ("collnet_direct", "collnet_chain") and t.nodes < COLLNET_NODE_THRESHOLD:
        return False
    return True


def algo_time_us(
    t: Topo, coll: str, algo: str, proto: str, nbytes: float, bw: float, lat: float, comm_channels: int
) -> float:
    """ncclTopoGetAlgoTime (tuning.cc:630-655) for one operation: -1 where the combination is not used."""
    if bw <= 0:
        return -1.0
    log_size = int(math.log2(int(nbytes) >> 6)) if int(nbytes) >> 6 > 0 else -1
    if algo == "tree" and coll == "all_reduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[_P[proto]][log_size]
    if (
        algo == "nvls_tree"
        and coll == "all_reduce"
        and 0 <= log_size < 24
        and COMPCAP[t.system.arch] >= 100
        and t.system.cpu != "arm"
    ):
        bw *= TREE_CORRECTION[_P[proto]][log_size]
    if algo == "ring" and proto == "simple" and t.nodes > 1 and coll == "all_reduce":
        if nbytes / (comm_channels * t.ranks) >= 64:
            lat *= 1.9 if COMPCAP[t.system.arch] < 80 else 1.4  # :647-650 "Plateau effect of ring"
    return lat + nbytes / (1000 * bw)


@dataclasses.dataclass(frozen=True)
class Choice:
    algo: str
    proto: str
    time_us: float
    bw_GBps: float  # NCCL's algorithm bandwidth for this (algo, proto), GB/s
    latency_us: float


def table(
    t: Topo, coll: str, nbytes: float, graphs: dict[str, Graph] | None = None, net_latency_us: float = 0.0
) -> list[Choice]:
    """Every (algorithm, protocol) NCCL would consider for `coll` at `nbytes`, with its modelled time."""
    graphs = graphs or graphs_for(t)
    comm_channels = max(1, 2 * graphs["ring"].channels)  # channels are doubled after the search (connect.cc:460)
    out = []
    for a in ALGOS:
        if not enabled(t, a):
            continue
        for p in PROTOS:
            bw = algo_bandwidth(t, coll, a, p, graphs)
            if bw <= 0:
                continue
            lat = algo_latency_us(t, coll, a, p, graphs, net_latency_us)
            tm = algo_time_us(t, coll, a, p, nbytes, bw, lat, comm_channels)
            if tm >= 0:
                out.append(Choice(a, p, tm, bw, lat))
    return out
