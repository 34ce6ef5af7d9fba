"""NCCL's graph search as labkit emulates it: how many channels each algorithm builds, and at what bandwidth.

Follows NVIDIA/nccl at commit 5067397c (NCCL 2.30.7), cited as search.cc:LINE, topo.h:LINE, topo.cc:LINE,
init.cc:LINE, tuning.cc:LINE. The tuning model that costs these graphs is `labkit.cluster.nccl`.

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
"""

from __future__ import annotations

import dataclasses
import functools
import math

from .system import System
from .tables import (
    COMPCAP,
    NVLINK_PER_LINK_GBPS,
    NVLS_MAX_ARITY,
    PCIE_X16_GBPS,
    RING_MAX_CHANNELS,
    SPEEDS_INTER,
    SPEEDS_INTRA,
)


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
