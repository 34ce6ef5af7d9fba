"""A node type and its fabric, from what a user knows: GPUs per node, GPU model or NVLink rate, NICs.

Every rate is **per direction**, GB/s = 1e9 B/s. Line rates come from `labkit.specs` (cited there);
what NCCL's tuning model makes of them (links × topo.h per-link rate, PCIe per generation) is
`labkit.cluster.search.Topo`, a view of a System at a node count: each fact is stated here, once.
"""

from __future__ import annotations

import dataclasses
import difflib
import math

from ..specs import spec
from .tables import ARCHS, COMPCAP

#: What a GPU model fixes: (architecture, NVLink links per GPU, spec name of its NVLink, PCIe generation,
#: NVSwitch in its usual node). NVLink 2-4 carry 25 GB/s per link per direction, NVLink 5 50 GB/s.
GPUS = {
    "V100": ("volta", 6, "NVLink 2", 3, True),
    "A100": ("ampere", 12, "NVLink 3", 4, True),
    "A800": ("ampere", 8, None, 4, True),
    "H100": ("hopper", 18, "NVLink 4", 5, True),
    "H200": ("hopper", 18, "NVLink 4", 5, True),
    "H800": ("hopper", 8, "H800 SXM NVLink", 5, True),
    "GH200": ("hopper", 18, "NVLink 4", 5, False),  # a 4-GPU GH200 node (CSCS Alps): direct NVLinks, no NVSwitch
    "B200": ("blackwell", 18, "NVLink 5", 5, True),
    "GB200": ("blackwell", 18, "NVLink 5", 5, True),
}
LINE_PER_LINK_GBPS = {"volta": 25.0, "ampere": 25.0, "hopper": 25.0, "blackwell": 50.0}


def _num(flag: str, value, *, integer: bool = False, allow_zero: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{flag} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{flag} must be finite, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{flag} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise ValueError(f"{flag} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


@dataclasses.dataclass(frozen=True)
class System:
    """One kind of node and how nodes are joined (build it with `system_from_facts` or `preset`).

    nvlink_GBps   the GPU's NVLink line rate per direction (0: PCIe only); nvlink_links its link count;
    nvswitch      GPUs meet in an NVSwitch (False: direct NVLinks, or PCIe);
    nic_GBps      one NIC's line rate per direction (400 Gb/s -> 50);
    nvls, sharp   NVLink SHARP in the NVSwitch; a SHARP fabric with NCCL's CollNet enabled;
    cpu           "intel", "amd" or "arm": NCCL's model costs network steps and LL by it (tuning.cc:228-233, :269-271);
    rates         "nccl": NCCL's tuning model decides (labkit.cluster.nccl); "given": the rates are taken
                  as given and every step costs alpha_intra_s / alpha_inter_s (the plain alpha-beta model,
                  for links that are not NCCL's, e.g. notebook 06's gloo processes).
    """

    name: str
    gpus_per_node: int
    arch: str
    nvlink_GBps: float
    nvlink_links: int
    nvswitch: bool
    pcie_gen: int
    nics_per_node: int
    nic_GBps: float
    nvls: bool = False
    sharp: bool = False
    cpu: str = "intel"
    gpu: str | None = None
    rates: str = "nccl"
    alpha_intra_s: float = 0.0
    alpha_inter_s: float = 0.0
    source: str = "given"

    def __post_init__(self):
        _num("--gpus-per-node", self.gpus_per_node, integer=True)
        _num("--nics-per-node", self.nics_per_node, integer=True, allow_zero=True)
        if self.nics_per_node:
            _num("--nic-bandwidth", self.nic_GBps)
        if self.arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, got {self.arch!r}")
        if self.rates not in ("nccl", "given"):
            raise ValueError(f"rates must be 'nccl' or 'given', got {self.rates!r}")
        if self.cpu not in ("intel", "amd", "arm"):
            raise ValueError(f"cpu must be 'intel', 'amd' or 'arm', got {self.cpu!r}")
        if self.nvls and (not self.nvswitch or COMPCAP[self.arch] < 90):
            raise ValueError(f"{self.name}: --nvls needs an NVSwitch node of Hopper or later (NVLink SHARP)")

    def describe(self) -> str:
        inside = f"NVLink {self.nvlink_GBps:g} GB/s per GPU per direction" if self.nvlink_GBps else "PCIe only"
        return (
            f"{self.name}: {self.gpus_per_node} GPUs/node ({inside}), {self.nics_per_node} x {self.nic_GBps:g} GB/s "
            f"NICs per direction{', NVLS' if self.nvls else ''}{', SHARP (CollNet)' if self.sharp else ''}"
        )


def _arch_from_rate(nvlink_GBps: float) -> str:
    """A GPU generation from its NVLink rate when the model is not named: NVLink 5 (>= 600 per direction)
    Blackwell, NVLink 4 (>= 400) Hopper, else Ampere."""
    return "blackwell" if nvlink_GBps >= 600 else ("hopper" if nvlink_GBps >= 400 else "ampere")


def system_from_facts(
    *,
    gpus_per_node: int,
    gpu: str | None = None,
    nvlink_GBps: float | None = None,
    nics_per_node: int,
    nic_GBps: float,
    nvls: bool = False,
    sharp: bool = False,
    pcie_only: bool = False,
    cpu: str = "intel",
    name: str | None = None,
    source: str = "given",
) -> System:
    """A System from what a user knows. `gpu` ("H100", "A100", ...) fixes the NVLink (links, rate), PCIe
    generation and NCCL's tables; without it `nvlink_GBps` (line rate per GPU per direction, 450 for H100)
    does, and the generation is inferred from it. Errors name the command-line flag."""
    g = _num("--gpus-per-node", gpus_per_node, integer=True)
    k = _num("--nics-per-node", nics_per_node, integer=True, allow_zero=True)
    nic = _num("--nic-bandwidth", nic_GBps) if k else float(nic_GBps or 0.0)
    if gpu is not None:
        key = str(gpu).upper().replace("NVIDIA", "").strip().split()[0].split("-")[0]
        if key not in GPUS:
            close = difflib.get_close_matches(key, list(GPUS), n=3, cutoff=0.3)
            raise ValueError(
                f"--gpu {gpu!r} is not known; known: {', '.join(GPUS)}"
                + (f" (closest: {', '.join(close)})" if close else "")
            )
        arch, links, spec_name, gen, nvswitch = GPUS[key]
        rate = spec(spec_name).per_direction_GBps() if spec_name else links * LINE_PER_LINK_GBPS[arch]
        if nvlink_GBps is not None:
            rate = _num("--bandwidth", nvlink_GBps)
            links = max(1, round(rate / LINE_PER_LINK_GBPS[arch]))
        if key == "GH200" and g > 4:
            nvswitch = True
    else:
        if nvlink_GBps is None and not pcie_only:
            raise ValueError(
                "give --gpu (e.g. H100) or --bandwidth (NVLink GB/s per GPU per direction), or say the node is PCIe only"
            )
        rate = 0.0 if pcie_only else _num("--bandwidth", nvlink_GBps)
        arch = _arch_from_rate(rate) if rate else ("hopper" if nvls else "ampere")
        if nvls and arch == "ampere":
            arch = "hopper"
        links = max(1, round(rate / LINE_PER_LINK_GBPS[arch])) if rate else 0
        gen, nvswitch, key = (5 if arch in ("hopper", "blackwell") else 4), bool(rate), None
    if pcie_only:
        rate, links, nvswitch = 0.0, 0, False
    label = name or f"{g}x {key or 'GPU'}" + (f" ({rate:g} GB/s NVLink)" if rate else " (PCIe)") + (
        f", {k}x {nic:g} GB/s NICs" if k else ""
    )
    return System(
        label,
        g,
        arch,
        float(rate),
        int(links),
        bool(nvswitch),
        int(gen),
        k,
        nic,
        nvls=bool(nvls),
        sharp=bool(sharp),
        cpu=cpu,
        gpu=key,
        source=source,
    )


def given_rates(
    *,
    gpus_per_node: int,
    intra_GBps: float,
    nics_per_node: int,
    nic_GBps: float,
    alpha_intra_s: float = 0.0,
    alpha_inter_s: float = 0.0,
    name: str = "given rates",
    source: str = "given",
) -> System:
    """A System whose rates are taken as given (efficiency 1) with a plain per-step alpha: the alpha-beta model
    of `labkit.models` on a cluster (notebook 06 Part 2's gloo processes and their slow link)."""
    return System(
        name,
        _num("gpus_per_node", gpus_per_node, integer=True),
        "ampere",
        _num("intra_GBps", intra_GBps),
        0,
        True,
        4,
        _num("nics_per_node", nics_per_node, integer=True),
        _num("nic_GBps", nic_GBps),
        rates="given",
        alpha_intra_s=_num("alpha_intra_s", alpha_intra_s, allow_zero=True),
        alpha_inter_s=_num("alpha_inter_s", alpha_inter_s, allow_zero=True),
        source=source,
    )
