"""What the cluster model expects of a run, as `labkit explain` asks it: a system from the user's facts, a prediction.

`labkit.cluster` (the one cluster model, issue 24) answers when it is installed; until then this file maps the same
contract (docs: /work/coord/CLUSTER_API.md: `system_from_facts`, `preset`, `predict`) onto
`labkit.hierarchy.cluster_model`. Every number that comes out is a model, and says so.
"""

from __future__ import annotations

import dataclasses
import difflib
import re

from ..hierarchy import cluster_model as _cm
from ..hierarchy import cluster_presets as _cp
from ..hierarchy.cluster_system import NCCL_NVLINK_GBPS_PER_LINK, NET_EFFICIENCY, System

try:  # the one cluster model (issue 24) once it lands; the old one until then
    from .. import cluster as _cluster
except ImportError:  # pragma: no cover - depends on which helper's work is in the tree
    _cluster = None
if not all(hasattr(_cluster, f) for f in ("PRESETS", "preset", "predict", "system_from_facts")):
    _cluster = None  # a package still being written (no contract yet)

#: GPU → (NVLink line rate per GPU per direction, GB/s; NCCL's per-link rate key in topo.h; links per GPU).
#: Line rates from labkit.specs (NVLink 3/4/5); links: A100 12, H100/H200 18, B200/GB200 18 (datasheets).
NVLINK_BY_GPU = {
    "A100": (_cp.NVLINK3, "ampere", 12),
    "H100": (_cp.NVLINK4, "hopper", 18),
    "H200": (_cp.NVLINK4, "hopper", 18),
    "B200": (_cp.NVLINK5, "blackwell", 18),
    "GB200": (_cp.NVLINK5, "blackwell", 18),
}
#: GPU names as NVIDIA prints them contain one of these (GB200 before B200 and GH200 before H200: word boundaries).
_GPU = re.compile(r"\b(GB200|GH200|B200|B100|H200|H100|H800|H20|A100|A800|L40S|V100)\b")


def gpu_token(name: str | None) -> str | None:
    """The GPU model a name states ('NVIDIA H100 80GB HBM3' → 'H100'), or None."""
    m = _GPU.search(name or "")
    return m.group(1) if m else None


#: NCCL_ALGO values (case-insensitive) → the model's algorithm names.
NCCL_ALGO_NAMES = {
    "ring": "ring",
    "tree": "tree",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "collnet": "collnet",
    "collnetchain": "collnet",
    "collnetdirect": "collnet",
}


@dataclasses.dataclass(frozen=True)
class Facts:
    """The hardware of one node type, per direction, as the model was given it (line rates)."""

    gpus_per_node: int
    nics_per_node: int
    nic_GBps: float  # line rate per NIC per direction (NDR 400 Gb/s → 50)
    nic_nccl_GBps: float  # what NCCL moves per NIC (the model's efficiency × line rate)
    intra_GBps: float  # NVLink/PCIe line rate per GPU per direction
    gpu: str | None
    nvls: bool
    sharp: bool
    name: str


@dataclasses.dataclass(frozen=True)
class Expected:
    """The model's busbw for one run at one size (nccl-tests semantics), and the ring's at the same size."""

    algorithm: str
    busbw_GBps: float
    algbw_GBps: float
    ring_busbw_GBps: float
    bound: str
    notes: tuple[str, ...]
    source: str


def preset_names() -> list[str]:
    return sorted(_cluster.PRESETS) if _cluster else sorted(_cp.PRESETS)


def _facts_of(system, name: str, gpu: str | None) -> Facts:
    g = lambda k, d=None: getattr(system, k, d)  # noqa: E731 (field names shared by both models' System)
    eff = g("nic_efficiency", NET_EFFICIENCY)
    return Facts(
        int(g("gpus_per_node")),
        int(g("nics_per_node")),
        float(g("nic_GBps")),
        float(g("nic_GBps")) * float(eff),
        float(g("intra_GBps", g("nvlink_GBps", 0.0)) or 0.0),
        gpu,
        bool(g("nvls", False)),
        bool(g("sharp", False)),
        name,
    )


def preset(name: str):
    """(system, Facts) of a known system; an unknown name lists the three closest."""
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.0)
        raise ValueError(f"--system {name!r} is not a known system; closest: {', '.join(close)} (all: {names})")
    system = _cluster.preset(name) if _cluster else _cp.preset(name)
    return system, _facts_of(system, name, gpu_token(str(getattr(system, "name", ""))))


def system_from_facts(
    *,
    gpus_per_node: int,
    gpu: str | None,
    nvlink_GBps: float | None,
    nics_per_node: int,
    nic_GBps: float,
    nvls: bool = False,
    sharp: bool = False,
):
    """(system, Facts) from what the user knows; errors name the command-line flag."""
    for flag, v in (("--gpus-per-node", gpus_per_node), ("--nics-per-node", nics_per_node)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{flag} must be a whole number >= 1, got {v!r}")
    if not nic_GBps > 0:
        raise ValueError(
            f"--nic-bandwidth must be > 0 (GB/s per NIC per direction, e.g. 50 for NDR 400), got {nic_GBps}"
        )
    if _cluster:
        system = _cluster.system_from_facts(
            gpus_per_node=gpus_per_node,
            gpu=gpu if nvlink_GBps is None else None,
            nvlink_GBps=nvlink_GBps,
            nics_per_node=nics_per_node,
            nic_GBps=nic_GBps,
            nvls=nvls,
            sharp=sharp,
        )
        return system, _facts_of(system, "given", gpu)
    if nvlink_GBps is not None:
        if not nvlink_GBps > 0:
            raise ValueError(f"--nvlink-bandwidth must be > 0 (GB/s per GPU per direction), got {nvlink_GBps}")
        intra, eff = float(nvlink_GBps), 1.0
    elif gpu in NVLINK_BY_GPU:
        line, arch, links = NVLINK_BY_GPU[gpu]
        intra, eff = line, NCCL_NVLINK_GBPS_PER_LINK[arch] * links / line
    else:
        raise ValueError(
            f"the model does not know the NVLink rate of {gpu or 'a GPU the log does not name'}: give --nvlink-bandwidth GB/s per GPU per "
            f"direction, --gpu one of {', '.join(NVLINK_BY_GPU)}, or --system NAME"
        )
    system = System(
        "given",
        gpus_per_node,
        intra,
        nics_per_node,
        float(nic_GBps),
        intra_efficiency=eff,
        nic_efficiency=NET_EFFICIENCY,
        nvls=nvls,
        sharp=sharp,
    )
    return system, _facts_of(system, "given", gpu)


def predict(system, nodes: int, nbytes: float, *, op: str = "all_reduce", algorithm: str | None = None) -> Expected:
    """The model's busbw at `nbytes` for `algorithm` (None: what NCCL would pick) and the forced ring's."""
    if _cluster:
        p = _cluster.predict(system, nodes, nbytes, op=op, algorithm=algorithm)
        return Expected(
            p.algorithm,
            p.busbw_GBps,
            p.algbw_GBps,
            p.ring_busbw_GBps,
            p.bound,
            tuple(p.notes),
            f"labkit.cluster: {p.source}",
        )
    if op != "all_reduce":
        raise ValueError(f"the cluster model here covers all_reduce only, not {op}; give an all_reduce_perf log")
    ring = _cm.ring_allreduce(nbytes, nodes, system)
    if algorithm is None:
        e = _cm.nccl_choice(system, nbytes, nodes, collnet_enabled=False)
    elif algorithm == "collnet":
        e = _cm.collnet_allreduce(nbytes, nodes, system, intra="chain")
    else:
        fn = {
            "ring": _cm.ring_allreduce,
            "tree": _cm.tree_allreduce,
            "nvls": _cm.nvls_allreduce,
            "nvls_tree": _cm.nvls_tree_allreduce,
        }
        e = fn[algorithm](nbytes, nodes, system)
    notes = (e.note,) if e.note else ()
    source = "labkit.hierarchy.cluster_model (a model, not a measurement: NCCL's tuning.cc latencies, topo.h rates)"
    return Expected(e.algorithm, e.busbw_GBps, e.algbw_GBps, ring.busbw_GBps, e.bound, notes, source)
