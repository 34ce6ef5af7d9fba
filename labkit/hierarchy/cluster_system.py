"""What a cluster is to the model: NCCL's constants, a System (GPUs, links, NICs), an Estimate, the latency terms.

The model itself, its assumptions and sources: labkit.hierarchy.cluster_model.
"""

from __future__ import annotations

import dataclasses
import math

GB = 1e9

# --------------------------------------------------------------------------- NCCL's own constants
#: NCCL src/graph/tuning.cc @ 5067397c (master, 2026-06): baseLatencies and hwLatencies, microseconds.
#: Keys (algorithm, protocol). "Simple" is NCCL's bandwidth protocol, "LL" its low-latency one.
NCCL_BASE_LAT_US = {
    ("tree", "ll"): 6.8,
    ("tree", "simple"): 8.4,
    ("ring", "ll"): 6.6,
    ("ring", "simple"): 8.4,
    ("collnet", "simple"): 0.0,
    ("nvls", "simple"): 0.0,
    ("nvls_tree", "simple"): 0.0,
}
NCCL_HW_LAT_US = {
    "nvlink": {
        ("tree", "ll"): 0.6,
        ("tree", "simple"): 4.0,
        ("ring", "ll"): 0.6,
        ("ring", "simple"): 3.4,
        ("collnet", "simple"): 2.8,
        ("nvls", "simple"): 25.0,
        ("nvls_tree", "simple"): 25.0,
    },
    "pci": {
        ("tree", "ll"): 1.0,
        ("tree", "simple"): 4.0,
        ("ring", "ll"): 1.0,
        ("ring", "simple"): 5.7,
        ("collnet", "simple"): 2.8,
        ("nvls", "simple"): 0.0,
        ("nvls_tree", "simple"): 0.0,
    },
    "net": {
        ("tree", "ll"): 5.0,
        ("tree", "simple"): 14.0,
        ("ring", "ll"): 2.7,
        ("ring", "simple"): 14.0,
        ("collnet", "simple"): 30.0,
        ("nvls", "simple"): 18.0,
        ("nvls_tree", "simple"): 20.9,
    },
}
#: tuning.cc: "Inter-node rings still have to launch nsteps * net overhead": 1 us on Intel, 2 us on
#: AMD, x3 for Simple; it is a floor under every intra-node ring step once the ring leaves the node.
NCCL_NET_OVERHEAD_US = 1.0

#: tuning.cc nvlsEfficiency: the share of NVLink bandwidth NCCL's model gives NVLS (Hopper, Blackwell).
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
#: NCCL src/graph/topo.h: the per-link NVLink rate NCCL assumes, GB/s per direction
#: (SM80 20.0, SM90 20.6, SM100 40.1) against a line rate of 25 (NVLink 3/4) or 50 (NVLink 5).
NCCL_NVLINK_GBPS_PER_LINK = {"ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
#: What NCCL reaches per NIC, as maintainers state it: 12.2 of 12.5 GB/s (100 Gb/s, sjeaugey
#: nccl-tests#29), 24 of 25 (200 Gb/s, sjeaugey nccl-tests#119), 46-48 of 50 (400 Gb/s,
#: AddyLaddy nccl-tests#290, #319). 0.94 = 47/50, the middle of the NDR range. An assumption for
#: EFA and Slingshot, where no maintainer figure was found.
NET_EFFICIENCY = 0.94
#: Smallest GPU count at which NCCL chose NVLS on 8x H200 (ml-engineering, measured: Ring at 4,
#: NVLS from 5); on p6-b200 it was 6. NVIDIA's GB200 partition guide: <= 4 GPUs gain nothing from
#: multicast. A per-system fact: `System.nvls_min_gpus`.
NVLS_MIN_GPUS_DEFAULT = 5

ALGORITHMS = ("ring", "tree", "hierarchical", "nvls", "nvls_tree", "collnet")
#: The ones NCCL itself runs (the hand-written hierarchical algorithm is labkit's, for teaching).
NCCL_ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet")
PROTOCOLS = ("simple", "ll")


# --------------------------------------------------------------------------- validation helpers
def _positive(name: str, value, *, integer: bool = False, allow_zero: bool = False):
    """Refuse 0 (unless allowed), negatives, NaN, inf and non-numbers, naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else 'positive'}, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def _fraction(name: str, value) -> float:
    v = _positive(name, value)
    if v > 1:
        raise ValueError(f"{name} is a fraction in (0, 1], got {value!r}")
    return v


# --------------------------------------------------------------------------- the system
@dataclasses.dataclass(frozen=True)
class System:
    """One kind of node and how nodes are joined. Every rate is per direction, GB/s.

    intra_GBps       line rate one GPU has into the node's GPU fabric (NVLink 4: 900 GB/s
                     "bidirectional" on the datasheet -> 450 per direction).
    intra_efficiency share of it NCCL moves (topo.h: H100 18 x 20.6 = 370.8 of 450 -> 0.824).
    nics_per_node    NICs the collectives can use (GPU-facing "rails", not storage/front-end NICs).
    nic_GBps         line rate per NIC per direction (400 Gb/s -> 50).
    nic_efficiency   share of it NCCL moves (NET_EFFICIENCY, from maintainers' statements).
    nvls             NVSwitch with NVLink SHARP (Hopper and later; not A100, not GH200 quad nodes).
    nvls_efficiency  tuning.cc nvlsEfficiency (Hopper 0.85, Blackwell 0.74).
    sharp            SHARP-capable IB fabric with the CollNet plugin (NCCL_COLLNET_ENABLE=1 is off
                     by default, so `nccl_choice` only considers it when asked).
    rail_aligned     rings/trees enter and leave every node on the same NIC index (NCCL_CROSS_NIC=0
                     or the default 2 on a rail-optimised fabric). When False, traffic crosses rails
                     and gets `cross_rail_fraction` of the NIC rate (1.0 on a non-blocking fat tree,
                     below 1 where the spine between rails is oversubscribed).
    ring_channels    rings that cross the network per node; each crossing uses one NIC. None means
                     "at least one per NIC" (what NCCL builds on 8-GPU/8-NIC nodes). Fewer channels
                     than NICs leave NICs idle.
    intra_kind       "nvlink" or "pci": which of NCCL's latency rows applies inside the node.
    """

    name: str
    gpus_per_node: int
    intra_GBps: float
    nics_per_node: int
    nic_GBps: float
    intra_efficiency: float = 1.0
    nic_efficiency: float = 1.0
    nvls: bool = False
    nvls_efficiency: float = NVLS_EFFICIENCY["hopper"]
    nvls_min_gpus: int = NVLS_MIN_GPUS_DEFAULT
    sharp: bool = False
    rail_aligned: bool = True
    cross_rail_fraction: float = 1.0
    ring_channels: int | None = None
    intra_kind: str = "nvlink"
    source: str = "given"

    def __post_init__(self):
        _positive("gpus_per_node", self.gpus_per_node, integer=True)
        _positive("intra_GBps", self.intra_GBps)
        _positive("nics_per_node", self.nics_per_node, integer=True)
        _positive("nic_GBps", self.nic_GBps)
        _fraction("intra_efficiency", self.intra_efficiency)
        _fraction("nic_efficiency", self.nic_efficiency)
        _fraction("nvls_efficiency", self.nvls_efficiency)
        _fraction("cross_rail_fraction", self.cross_rail_fraction)
        _positive("nvls_min_gpus", self.nvls_min_gpus, integer=True)
        if self.ring_channels is not None:
            _positive("ring_channels", self.ring_channels, integer=True)
        if self.intra_kind not in ("nvlink", "pci"):
            raise ValueError(f"intra_kind must be 'nvlink' or 'pci', got {self.intra_kind!r}")

    # per-direction rates, bytes/s
    @property
    def intra_Bps(self) -> float:
        """B: what one GPU moves inside the node at NCCL's efficiency, B/s per direction."""
        return self.intra_GBps * self.intra_efficiency * GB

    @property
    def nic_Bps(self) -> float:
        return self.nic_GBps * self.nic_efficiency * GB

    def rail_factor(self) -> float:
        return 1.0 if self.rail_aligned else self.cross_rail_fraction

    def ring_nics(self) -> int:
        """NICs a flat ring uses per node: one per channel that crosses the network, at most all."""
        return self.nics_per_node if self.ring_channels is None else min(self.nics_per_node, self.ring_channels)

    def node_net_Bps(self, nics: int | None = None) -> float:
        """Nn: what a node pushes into the network per direction over `nics` NICs (default all)."""
        k = self.nics_per_node if nics is None else nics
        return k * self.nic_Bps * self.rail_factor()

    def node_net_line_GBps(self) -> float:
        """The node's NIC sum at line rate, per direction: the physical network cap."""
        return self.nics_per_node * self.nic_GBps

    def describe(self) -> str:
        return (
            f"{self.name}: {self.gpus_per_node} GPUs/node, {self.intra_GBps:g} GB/s per GPU per direction inside "
            f"(x{self.intra_efficiency:.3g}), {self.nics_per_node} x {self.nic_GBps:g} GB/s NICs per direction "
            f"(x{self.nic_efficiency:.3g}){', NVLS' if self.nvls else ''}{', IB SHARP' if self.sharp else ''}"
        )


def simple_system(
    gpus_per_node: int,
    bandwidth_GBps: float,
    nic_bandwidth_GBps: float,
    nics_per_node: int,
    *,
    name: str = "given",
    **kw,
) -> System:
    """The CLI's system: rates taken as given (efficiency 1), so line rates give an upper bound and
    NCCL-level rates (370 per H100, 47 per NDR NIC) give a prediction. Argument names are the CLI's."""
    for arg, v in (("--gpus-per-node", gpus_per_node), ("--nics-per-node", nics_per_node)):
        _positive(arg, v, integer=True)
    for arg, v in (("--bandwidth", bandwidth_GBps), ("--nic-bandwidth", nic_bandwidth_GBps)):
        _positive(arg, v)
    return System(name, int(gpus_per_node), float(bandwidth_GBps), int(nics_per_node), float(nic_bandwidth_GBps), **kw)


def check_layout(
    gpus: int, nodes: int, gpus_per_node: int | None = None, *, names: tuple[str, str, str] | None = None
) -> tuple[int, int, int]:
    """Validate a (gpus, nodes[, gpus per node]) layout; returns (N, m, g). Errors name the argument, or the
    command-line flags in `names` (e.g. ("--gpus", "--nodes", "--gpus-per-node"))."""
    ng, nn, ngp = names or ("gpus", "nodes", "gpus_per_node")
    N = _positive(ng, gpus, integer=True)
    m = _positive(nn, nodes, integer=True)
    if N % m:
        raise ValueError(f"{nn} ({m}) must divide {ng} ({N}): every node holds the same number of GPUs")
    g = N // m
    if gpus_per_node is not None:
        gp = _positive(ngp, gpus_per_node, integer=True)
        if gp != g:
            raise ValueError(f"{ngp} ({gp}) must equal {ng} / {nn} ({N}/{m} = {g})")
    if N < 2:
        raise ValueError(f"{ng} must be at least 2 for an all-reduce to move data, got {N}")
    return N, m, g


# --------------------------------------------------------------------------- results
@dataclasses.dataclass(frozen=True)
class Estimate:
    """One algorithm's modelled all-reduce of `nbytes` on `nodes` nodes (nccl-tests semantics).

    seconds = latency_s + nbytes / (peak_algbw_GBps * 1e9); algbw = nbytes / seconds;
    busbw = algbw * 2(N-1)/N. cap_busbw_GBps is the busbw the algorithm could not exceed even at
    line rate on every link (the physical cap the model states). bound names the resource that
    sets the peak. Byte counts are per direction.
    """

    algorithm: str
    nbytes: float
    nodes: int
    gpus: int
    seconds: float
    latency_s: float
    peak_algbw_GBps: float
    cap_busbw_GBps: float
    bound: str
    intra_bytes_per_gpu: float
    network_bytes_per_node: float
    to_switch_bytes_per_gpu: float = 0.0  # in-network reduction: what each GPU sends into the adders
    note: str = ""

    @property
    def bus_factor(self) -> float:
        return 2 * (self.gpus - 1) / self.gpus

    @property
    def algbw_GBps(self) -> float:
        return self.nbytes / self.seconds / GB

    @property
    def busbw_GBps(self) -> float:
        return self.algbw_GBps * self.bus_factor

    @property
    def peak_busbw_GBps(self) -> float:
        """busbw as the size grows without bound (latency hidden)."""
        return self.peak_algbw_GBps * self.bus_factor

    def to_dict(self) -> dict:
        return {
            "algorithm": self.algorithm,
            "nbytes": self.nbytes,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "seconds": self.seconds,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "latency_s": self.latency_s,
            "peak_busbw_GBps": self.peak_busbw_GBps,
            "cap_busbw_GBps": self.cap_busbw_GBps,
            "bound": self.bound,
            "intra_bytes_per_gpu": self.intra_bytes_per_gpu,
            "network_bytes_per_node": self.network_bytes_per_node,
            "to_switch_bytes_per_gpu": self.to_switch_bytes_per_gpu,
            "note": self.note,
        }


def _layout(nbytes, nodes, system: System) -> tuple[float, int, int, int]:
    if not isinstance(system, System):
        raise ValueError(f"system must be a System, got {type(system).__name__}")
    S = _positive("nbytes", nbytes)
    m = _positive("nodes", nodes, integer=True)
    g = system.gpus_per_node
    N, m, g = check_layout(g * m, m, g)
    return S, m, g, N


def _protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    return protocol


def _lat(kind: str, algorithm: str, protocol: str) -> float:
    """NCCL hwLatencies entry in seconds (0 where NCCL has none for that protocol)."""
    return NCCL_HW_LAT_US[kind].get((algorithm, protocol), NCCL_HW_LAT_US[kind].get((algorithm, "simple"), 0.0)) * 1e-6


def _base(algorithm: str, protocol: str) -> float:
    return NCCL_BASE_LAT_US.get((algorithm, protocol), NCCL_BASE_LAT_US.get((algorithm, "simple"), 0.0)) * 1e-6


def _log2_floor(m: int) -> int:
    """NCCL's log2i: floor(log2(m)), 0 for m = 1."""
    return int(math.floor(math.log2(m))) if m > 1 else 0


def _estimate(
    name, S, m, N, peak_alg_Bps, cap_busbw_GBps, bound, latency, intra_bytes, net_bytes, to_switch=0.0, note=""
) -> Estimate:
    seconds = latency + S / peak_alg_Bps
    return Estimate(
        name,
        S,
        m,
        N,
        seconds,
        latency,
        peak_alg_Bps / GB,
        cap_busbw_GBps,
        bound,
        intra_bytes,
        net_bytes,
        to_switch,
        note,
    )


# --------------------------------------------------------------------------- latency terms
def ring_latency_s(N: int, m: int, system: System, protocol: str = "simple") -> float:
    """alpha of a flat ring over N GPUs in m nodes (NCCL's form): base + 2(N-m) intra steps + 2(m-1) inter steps.

    Intra steps cost max(NCCL's NVLink/PCI ring latency, its per-step network overhead once the ring
    leaves the node). Grows with the GPU count N.
    """
    protocol = _protocol(protocol)
    intra = _lat(system.intra_kind, "ring", protocol)
    if m > 1:
        intra = max(intra, NCCL_NET_OVERHEAD_US * (3 if protocol == "simple" else 1) * 1e-6)
    inter = _lat("net", "ring", protocol)
    return _base("ring", protocol) + (2 * (N - 1) - 2 * (m - 1)) * intra + 2 * (m - 1) * inter


def tree_latency_s(g: int, m: int, system: System, protocol: str = "simple") -> float:
    """alpha of NCCL's tree: base + 2*((g-1) chain steps inside + floor(log2 m) tree levels across)."""
    protocol = _protocol(protocol)
    return _base("tree", protocol) + 2 * (
        (g - 1) * _lat(system.intra_kind, "tree", protocol) + _log2_floor(m) * _lat("net", "tree", protocol)
    )


def hierarchical_latency_s(g: int, m: int, system: System, protocol: str = "simple") -> float:
    """alpha of reduce-scatter + all-gather inside (2(g-1) steps) and a ring of m nodes across (2(m-1)).

    Grows with the node count m at fixed g; a flat ring's grows with N = g*m. The difference is
    exactly 2(g-1)(m-1) intra-node step latencies (the modelled gain), not a factor g.
    """
    protocol = _protocol(protocol)
    intra = _lat(system.intra_kind, "ring", protocol)
    return _base("ring", protocol) + 2 * (g - 1) * intra + 2 * (m - 1) * _lat("net", "ring", protocol)
