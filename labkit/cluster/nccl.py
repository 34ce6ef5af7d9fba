"""NCCL's own tuning model, re-stated in Python: what NCCL thinks each algorithm and protocol costs.

Everything here follows NVIDIA/nccl at commit 5067397c (master, 2026-06-11, NCCL 2.30.7 by
makefiles/version.mk) — cited below as tuning.cc:LINE, search.cc:LINE, topo.h:LINE, init.cc:LINE,
device.h:LINE. Two stages, as in NCCL:

1. **The graph search** (search.cc `ncclTopoCompute`) decides, per algorithm, how many channels it
   builds and at what bandwidth per channel (`bwIntra` inside the node, `bwInter` on the network).
   NCCL runs a real search over the node's topology; `graph()` below is labkit's *emulation* of its
   outcome from what a user knows (GPUs per node, NVLink per GPU, NICs and their speed), using NCCL's
   own speed tables and the rules that decide the result — not a port of the search:
   * speeds are tried from NCCL's per-architecture arrays (search.cc:1051-1065), starting at the
     first that fits the best GPU->NIC path (`maxBw`) and the GPU's NVLink total (`totalBw`,
     search.cc:1164-1174; ×g/(g-1) for non-ring patterns, :1168);
   * a channel takes `bwInter` on one NIC (search.cc:739, :750) and the PCIe path to it, and
     `bwIntra` on the NVLink of every GPU that forwards it: g-1 of the g GPUs for a ring or chain
     through an NVSwitch (the last one hands the data to the NIC), every GPU once and the channel's
     head twice for NVLS (search.cc:410-443);
   * every channel enters and leaves the node over a GPU's own PCIe link, which the search charges
     bwInter per channel (followPath, search.cc:85-123): with one GPU per node, at most
     floor(PCIe / bwInter) channels;
   * pass 1 keeps the graph with the most channels × bandwidth (search.cc:445-466), stops early once
     nChannels × bwInter reaches totalBw (:1198); ncclTopoDupChannels then doubles the channels and
     halves their bandwidth (:1036-1049, called at :1258; not for NVLS, bwIntra < 25, or ccMin > 80 with
     bwIntra < 50 and more than 4 channels); pass 2 raises the ring's bandwidth at that channel count
     (:1255-1273), raises `bwIntra` of trees and CollNet up to 2 × bwInter (:1279-1282, "increase
     bwIntra for trees (2 nodes or collnet)"), and raises NVLS's `bwInter` up to 2 × bwIntra
     (:1274-1278); trees and CollNet chains are searched at exactly the ring's channel count
     (init.cc:1184-1185, :1193-1194), so they take the fastest speed at which that many fit;
   * with one GPU per node the tree is NCCL_TOPO_PATTERN_TREE (search.cc:1133), which NCCL's tuning
     costs at 0.85 (tuning.cc:336).
   NCCL's PCIe path rate is width × GT/s-class / 80 (topo.cc kvDictPciGen: Gen4 x16 = 24, Gen5 x16 =
   48 GB/s); a NIC's rate is its line rate, Mb/s / 8000 (topo.cc:418).
2. **The tuning model** (tuning.cc `ncclTopoTuneModel`, :243-618) turns each graph into a bus
   bandwidth and a latency per (collective, algorithm, protocol); `ncclTopoGetAlgoTime` (:630-655)
   gives time = latency + bytes / bandwidth, and NCCL runs the (algorithm, protocol) with the lowest
   time. `algo_bandwidth`, `algo_latency_us` and `algo_time_us` below are line-by-line transcriptions.

NCCL's numbers are a *model* NCCL uses to choose; they are not measurements. labkit's validation
(`labkit.cluster.validation`) says how close they come to published runs.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .system import System
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


# --------------------------------------------------------------------------- the node, as NCCL's search sees it
@dataclasses.dataclass(frozen=True)
class Topo:
    """A `System` on `nodes` nodes as NCCL's graph search and tuning model see it (NCCL's units: GB/s per direction).

    The facts (GPUs per node, architecture, NVSwitch, PCIe generation, NICs and their line rate, NVLS, a SHARP
    fabric with NCCL_COLLNET_ENABLE=1, the host CPU) are the System's, read from it (`t.system.nics_per_node`);
    what NCCL makes of them is derived here: its NVLink total and PCIe rate (topo.h, topo.cc), getTotalBw and
    getMaxBw (search.cc). A NIC's rate is its line rate, Mb/s / 8000 (topo.cc:418): the System's nic_GBps.
    """

    system: System
    nodes: int

    def __post_init__(self):
        if self.system.rates != "nccl":
            raise ValueError(
                f"{self.system.name}: a System of given rates is costed by the plain alpha-beta model "
                "(labkit.cluster.predict), not by NCCL's tuning model"
            )

    @property
    def ranks(self) -> int:
        """nRanks: GPUs per node x nodes."""
        return self.system.gpus_per_node * self.nodes

    @property
    def nvlink_total(self) -> float:
        """The GPU's NVLink total as NCCL counts it: links x topo.h per-link rate (H100: 18 x 20.6 = 370.8); 0 for
        PCIe only."""
        return self.system.nvlink_links * NVLINK_PER_LINK_GBPS[self.system.arch]

    @property
    def pcie(self) -> float:
        """NCCL's rate of the GPU's and NICs' PCIe x16 links for the System's PCIe generation (Gen5 = 48)."""
        return PCIE_X16_GBPS[self.system.pcie_gen]

    @property
    def intra_total(self) -> float:
        """getTotalBw (search.cc:30-38): max(PCI link, NVLink sum) of a GPU."""
        return max(self.pcie, self.nvlink_total)

    @property
    def intra_path(self) -> float:
        """Best GPU->GPU path bandwidth inside the node (getMaxBw over GPUs, search.cc:20-29)."""
        g = self.system.gpus_per_node
        if self.nvlink_total <= 0:
            return self.pcie
        if self.system.nvswitch or g <= 2:
            return self.nvlink_total
        return self.nvlink_total / (g - 1)  # direct links: one pair's share

    @property
    def net_path(self) -> float:
        """Best GPU->NIC path bandwidth: the NIC's rate, capped by the PCIe link it hangs off."""
        return min(self.system.nic_GBps, self.pcie)


@dataclasses.dataclass(frozen=True)
class Graph:
    """One algorithm's graph: channels and per-channel bandwidth (what NCCL_DEBUG_SUBSYS=GRAPH prints)."""

    pattern: str
    channels: int
    bw_intra: float
    bw_inter: float

    @property
    def ok(self) -> bool:
        return self.channels > 0


def _speeds(t: Topo) -> tuple[float, ...]:
    return SPEEDS_INTER[t.system.arch] if t.nodes > 1 else SPEEDS_INTRA[t.system.arch]


def _chain_channels(t: Topo, s_intra: float, s_inter: float) -> int:
    """Channels of a ring or chain that fit: one NIC per channel at s_inter (NICs shared when fewer),
    and s_intra on the NVLink of the g-1 GPUs that forward each channel (spread over the g GPUs)."""
    g = t.system.gpus_per_node
    cap = RING_MAX_CHANNELS
    if t.nodes > 1:
        cap = min(cap, t.system.nics_per_node * int(math.floor(t.net_path / s_inter + 1e-9)))
        # Each channel enters the node from a NIC into a GPU, and leaves from a GPU to a NIC, over that GPU's own PCIe
        # link (topo.cc:613-614, width x GT/s / 80 at :657); followPath deducts bwInter from every link of the path
        # (search.cc:117) and refuses a link with less left (:113-115). With one GPU per node every channel
        # crosses the same GPU link both ways: at most floor(PCIe / bwInter) channels.
        cap = min(cap, g * int(math.floor(t.pcie / s_inter + 1e-9)))
    if g > 1:
        fwd = (g - 1) / g if t.nodes > 1 else 1.0  # one node: every GPU forwards (closed ring)
        if t.nvlink_total > 0 and not t.system.nvswitch and g > 2:
            per_gpu = t.nvlink_total  # direct links: a ring uses one link per hop, all links over the channels
        else:
            per_gpu = t.intra_total
        cap = min(cap, int(math.floor(per_gpu / (fwd * s_intra) + 1e-9)))
    return max(cap, 0)


def _nvls_channels(t: Topo, s: float) -> int:
    """NVLS: every GPU pulls s from the switch per channel, the channel's head twice (search.cc:410-443)."""
    g = t.system.gpus_per_node
    want = min(NVLS_MAX_ARITY, g) if t.nodes == 1 else min(t.system.nics_per_node, g)
    n = want
    while n > 0 and (n + 1) * s > t.nvlink_total + 1e-9:
        n -= 1
    if t.nodes > 1 and t.net_path + 1e-9 < s:
        return 0
    return n if (t.nodes > 1 or n == want) else 0  # one node: minChannels = maxChannels (search.cc:1135-1138)


def graph(t: Topo, pattern: str) -> Graph:
    """Emulated outcome of search.cc ncclTopoCompute for `pattern` "ring" or "nvls" (trees and CollNet chains:
    `_fixed_channels`)."""
    node, g = t.system, t.system.gpus_per_node
    speeds = _speeds(t)
    total = t.intra_total
    max_bw = t.net_path if t.nodes > 1 else (t.intra_path if g > 1 else 5000.0)
    if pattern == "nvls":
        if not (node.nvls and node.nvswitch and COMPCAP[node.arch] >= 90 and g > 1):
            return Graph("nvls", 0, 0.0, 0.0)  # search.cc:1124
        min_ch = min(NVLS_MAX_ARITY, g) if t.nodes == 1 else 1
        start = [s for s in speeds if s <= max_bw and s * min_ch <= t.intra_total * g / (g - 1)]
        best = None
        for s in start:
            n = _nvls_channels(t, s)
            if n and (best is None or n > best[0]):
                best = (n, s)
            if best and s / best[1] <= 0.49:
                break
        if best is None:
            return Graph("nvls", 0, 0.0, 0.0)
        n, s = best
        inter = s
        i = speeds.index(s)
        # pass 2: raise bwInter while bwInter < 2 bwIntra and the NICs carry it (search.cc:1274-1278)
        while i > 0 and inter < 2 * s and (t.nodes == 1 or speeds[i - 1] <= t.net_path + 1e-9):
            i -= 1
            inter = speeds[i]
        return Graph("nvls", n, s, inter)
    # ring: pass 1 keeps the most channels x bandwidth
    start = [s for s in speeds if s <= max_bw + 1e-9 and s <= total + 1e-9]
    best = None  # (channels, speed)
    for s in start:
        n = _chain_channels(t, s, s)
        if n <= 0:
            continue
        if best is None or n * s > best[0] * best[1]:
            best = (n, s)
        if n * s >= t.intra_total - 1e-9:  # search.cc:1198
            break
        if s / best[1] <= 0.49:  # search.cc:1245
            break
    if best is None:
        return Graph(pattern, 1, 0.1, 0.1)  # search.cc:1289-1311: the fall-back graph
    n, s = _dup_channels(t, *best, RING_MAX_CHANNELS)
    # pass 2: from the duplicated graph, raise both at its channel count (search.cc:1255-1273)
    i = next((k for k, v in enumerate(speeds) if v <= s + 1e-9), len(speeds) - 1)
    while i > 0 and _chain_channels(t, speeds[i - 1], speeds[i - 1]) >= n:
        i -= 1
        s = max(s, speeds[i])
    return Graph(pattern, n, s, s)


def _dup_channels(t: Topo, n: int, s: float, max_channels: int) -> tuple[int, float]:
    """ncclTopoDupChannels (search.cc:1036-1049), run on pass 1's graph (:1258): channels doubled (up to
    maxChannels) and each one's bandwidth divided by DIVUP(new, old), unless bwIntra < 25, or ccMin > 80 (Hopper and
    later among labkit's GPUs) with bwIntra < 50 and more than 4 channels. Below maxChannels, channels x bandwidth
    stays the same; NCCL's per-channel caps (tuning.cc:328-335) see more channels."""
    if s < 25.0 or (COMPCAP[t.system.arch] > 80 and s < 50.0 and n > 4):
        return n, s
    dup = min(2 * n, max_channels)
    k = -(-dup // n)  # DIVUP
    return dup, s / k


def _fixed_channels(t: Topo, pattern: str, n: int) -> Graph:
    """A tree or CollNet chain: NCCL searches it with minChannels = maxChannels = the ring's nChannels (init.cc:1184-1185,
    :1193-1194), so pass 1 keeps the fastest speed at which n channels fit (a graph of fewer is not kept,
    search.cc:448; n channels end the search, :635) and duplication cannot add any (search.cc:1042). The start speed
    also needs speed x n <= totalBw (search.cc:1170-1173), totalBw x g/(g-1) for these patterns (:1168). Pass 2
    raises bwIntra up to 2 x bwInter while the n channels still fit (:1279-1282): with one GPU per node nothing
    inside the node carries bwIntra, so it reaches 2 x bwInter."""
    g = t.system.gpus_per_node
    speeds = _speeds(t)
    total = t.intra_total * (g / (g - 1) if g > 1 else 1.0)
    fits = [s for s in speeds if s <= t.net_path + 1e-9 and s * n <= total + 1e-9 and _chain_channels(t, s, s) >= n]
    if not fits:
        return Graph(pattern, 1, 0.1, 0.1)  # search.cc:1289-1311: the fall-back graph
    inter = intra = fits[0]
    i = speeds.index(inter)
    while i > 0 and intra < 2 * inter and _chain_channels(t, speeds[i - 1], inter) >= n:
        i -= 1
        intra = speeds[i]
    return Graph(pattern, n, intra, inter)


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


@functools.lru_cache(maxsize=1024)
def _graphs(t: Topo) -> tuple:
    return tuple(_graphs_for(t).items())


def graphs_for(t: Topo) -> dict[str, Graph]:
    """Every algorithm's graph for this node and node count (memoised: Topo is frozen)."""
    return dict(_graphs(t))


def _graphs_for(t: Topo) -> dict[str, Graph]:
    ring = graph(t, "ring")
    out = {"ring": ring}
    if t.nodes > 1:
        out["tree"] = _fixed_channels(t, "tree", ring.channels)
        out["collnet"] = (
            _fixed_channels(t, "collnet", ring.channels) if t.system.sharp else Graph("collnet", 0, 0.0, 0.0)
        )
    else:
        out["tree"] = dataclasses.replace(ring, pattern="tree")  # one node: the tree is a chain over the ring's links
        out["collnet"] = Graph("collnet", 0, 0.0, 0.0)
    out["nvls"] = graph(t, "nvls")
    return out


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
