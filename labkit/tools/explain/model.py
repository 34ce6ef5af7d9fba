"""What the cluster model expects of a run, as `labkit explain` asks it: a system from the user's facts, a prediction.

The model is `labkit.cluster` (issue 24's one cluster model: NCCL's tuning model at a named commit); this file
only turns the command line's facts into its `System` (the one description of the hardware the rules read) and
derives from it what the rules need. Every number it returns is a model, and says so.
"""

from __future__ import annotations

import dataclasses
import difflib
import re

from ... import cluster

#: What NCCL reaches per NIC, as a share of the line rate, as NVIDIA's maintainers state it: 46-48 of 50 GB/s
#: for NDR 400 (AddyLaddy, nccl-tests#290), 24 of 25 for HDR 200 (sjeaugey, nccl#412). 0.94 = 47/50.
NIC_REACH = 0.94
#: NCCL_ALGO values (case-insensitive) -> labkit.cluster's algorithm names.
NCCL_ALGO_NAMES = {
    "ring": "ring",
    "tree": "tree",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "collnetchain": "collnet_chain",
    "collnetdirect": "collnet_direct",
    "pat": "pat",
}

#: GPU names as NVIDIA prints them contain one of these (GB200 before B200 and GH200 before H200: word boundaries).
_GPU = re.compile(r"\b(GB200|GH200|B200|B100|H200|H100|H800|H20|A100|A800|L40S|V100)\b")


def gpu_token(name: str | None) -> str | None:
    """The GPU model a name states ('NVIDIA H100 80GB HBM3' → 'H100'), or None."""
    m = _GPU.search(name or "")
    return m.group(1) if m else None


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
    return sorted(cluster.PRESETS)


def nic_nccl_GBps(system: cluster.System) -> float:
    """What NCCL reaches per NIC, per direction: NIC_REACH x the NIC's line rate."""
    return system.nic_GBps * NIC_REACH


def record(system: cluster.System, name: str) -> dict:
    """The hardware the model was given, as `labkit explain --json` prints it under "system" (line rates per
    direction; nic_nccl_GBps derived); `name` is how the user named it (a --system key, or "given")."""
    return {
        "gpus_per_node": system.gpus_per_node,
        "nics_per_node": system.nics_per_node,
        "nic_GBps": system.nic_GBps,
        "nic_nccl_GBps": nic_nccl_GBps(system),
        "intra_GBps": system.nvlink_GBps,
        "gpu": system.gpu,
        "nvls": system.nvls,
        "sharp": system.sharp,
        "name": name,
    }


def preset(name: str) -> cluster.System:
    """A known system; an unknown name lists the three closest."""
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.0)
        raise ValueError(f"--system {name!r} is not a known system; closest: {', '.join(close)} (all: {names})")
    return cluster.preset(name)


def subset(system: cluster.System, gpus: int) -> cluster.System:
    """The same node type running on `gpus` of its GPUs (one node: the NVLink/NVSwitch per GPU is unchanged)."""
    return dataclasses.replace(system, gpus_per_node=gpus)


def switched_on(system: cluster.System, *, nvls: bool, sharp: bool) -> cluster.System:
    """A known system with NVLS and/or SHARP (CollNet) on, as --nvls / --sharp say."""
    return dataclasses.replace(system, nvls=system.nvls or nvls, sharp=system.sharp or sharp)


def without_nvls(system: cluster.System) -> cluster.System:
    """The system with NVLink SHARP off (NCCL_NVLS_ENABLE=0)."""
    return dataclasses.replace(system, nvls=False)


def system_from_facts(*, gpu_printed: str = "", **facts) -> cluster.System:
    """A System from what the user knows: `facts` are labkit.cluster.system_from_facts's keywords, checked
    first so that errors name explain's own flags; `gpu_printed` is the GPU the log names."""
    gpu, nvlink_GBps, pcie_only = facts.get("gpu"), facts.get("nvlink_GBps"), facts.get("pcie_only", False)
    if nvlink_GBps is not None and not nvlink_GBps > 0:
        raise ValueError(f"--nvlink-bandwidth must be > 0 (GB/s per GPU per direction), got {nvlink_GBps}")
    if pcie_only and nvlink_GBps is not None:
        raise ValueError(
            "give --pcie-only (GPUs joined by PCIe only) or --nvlink-bandwidth (GB/s of NVLink per GPU per "
            "direction), not both"
        )
    if gpu is not None and gpu not in cluster.GPUS:
        gpu = None if nvlink_GBps is not None or pcie_only else gpu
    if gpu is None and nvlink_GBps is None and not pcie_only:
        raise ValueError(
            f"the model needs the GPU: the log names {gpu_printed or 'none'}; give --gpu (one of "
            f"{', '.join(cluster.GPUS)}), --nvlink-bandwidth GB/s per GPU per direction, --pcie-only, or --system NAME"
        )
    return cluster.system_from_facts(**{**facts, "gpu": gpu})


def predict(system, nodes: int, nbytes: float, *, op: str = "all_reduce", algorithm: str | None = None) -> Expected:
    """The model's busbw at `nbytes` for `algorithm` (None: what NCCL would pick) and the forced ring's."""
    if op not in cluster.OPS:
        raise ValueError(f"the cluster model covers {', '.join(cluster.OPS)}, not {op}: give --op one of those")
    p = cluster.predict(system, nodes, nbytes, op=op, algorithm=algorithm)
    return Expected(
        p.algorithm,
        p.busbw_GBps,
        p.algbw_GBps,
        p.ring_busbw_GBps,
        p.bound,
        tuple(p.notes),
        f"labkit.cluster, {p.source}",
    )
