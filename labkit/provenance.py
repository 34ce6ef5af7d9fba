"""Provenance: the metadata a dataset measured by labkit carries — where, on what, how, with which software.

Every recorder (`labkit record`, an experiment's `record(folder, quick, env)`) writes its datasets with
`measured_meta(env, ...)`: the machine's environment (`labkit.system.environment()`: host, GPUs and
their PCIe links, driver, CUDA, torch, NCCL, topology, date, command and parameters) goes into the
metadata whole, and the fields `labkit.reference` requires (system, gpu, interconnect, software, date,
method, source, caveats, quality, bandwidth direction) are filled from it. `provenance` is
"measured": `Dataset.label` then reads "measured here: …".
"""

from __future__ import annotations

from .reference import write_dataset
from .system import describe_gpu


def measured_meta(
    env: dict,
    *,
    kind: str,
    title: str,
    method: str,
    bandwidth_direction: str,
    caveats: str = "",
    gpu_count: int | None = None,
    nodes: int = 1,
    interconnect: str | None = None,
) -> dict:
    """Provenance for a dataset measured by labkit on this machine, filled from `system.environment()`."""
    gpus = env.get("gpus") or []
    g0 = gpus[0] if gpus else {}
    link = (
        (
            f"PCIe Gen{g0.get('pcie_gen_current')}/{g0.get('pcie_gen_max')} x{g0.get('pcie_width_current')}/"
            f"{g0.get('pcie_width_max')} (current/max at record time)"
        )
        if g0
        else "none (host only)"
    )
    return {
        "kind": kind,
        "title": f"{title} — {describe_gpu(env) if gpus or env.get('cuda_available') else env.get('cpu')}",
        "system": f"{env.get('host')}: {env.get('cpu')}, {env.get('cpu_count')} CPUs",
        "gpu": describe_gpu(env) if (gpus or env.get("cuda_available")) else "none",
        "gpu_count": len(gpus) if gpu_count is None else gpu_count,
        "nodes": nodes,
        "interconnect": interconnect or link,
        "software": (
            f"labkit {env.get('labkit')}, torch {env.get('torch')}, CUDA {env.get('cuda_build')}, "
            f"NCCL {env.get('nccl')}, driver {g0.get('driver')}, python {env.get('python')}"
        ),
        "date": env.get("date"),
        "method": method,
        "source": f"labkit record on {env.get('host')}",
        "source_file": "labkit record",
        "caveats": caveats or "measured by labkit; see environment for the full context",
        "quality": "A",
        "bandwidth_direction": bandwidth_direction,
        "provenance": "measured",
        "environment": env,
    }


def write_measured(folder, name: str, frame, env: dict, **fields) -> str:
    """Write a dataset labkit measured on this machine (provenance: `measured_meta(env, **fields)`); returns its name."""
    write_dataset(folder, name, frame, measured_meta(env, **fields))
    return name
