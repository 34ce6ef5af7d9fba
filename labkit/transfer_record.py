"""Recorder for copy sweeps: host memory always, H2D/D2H pinned and pageable where a GPU exists."""

from __future__ import annotations

from . import transfer
from .provenance import measured_meta
from .reference import write_dataset
from .units import pow2_sizes


def record(folder, quick: bool, env: dict) -> list[str]:
    import pandas as pd

    names = []
    host_max = transfer.HOST_QUICK_MAX_BYTES if quick else transfer.HOST_MAX_BYTES
    host = transfer.host_copy_sweep(pow2_sizes(transfer.HOST_MIN_BYTES, host_max), progress=True)
    write_dataset(folder, "host_copy_sweep", host.to_frame(), measured_meta(
        env, kind="copy_sweep", title="host memory copy (numpy copyto)", bandwidth_direction="unidirectional",
        method="labkit.transfer.host_copy_sweep: numpy.copyto timed on the host, median of 10 samples",
        caveats="host memory, not PCIe: copies between two buffers of this machine's RAM/caches"))
    names.append("host_copy_sweep")
    if env.get("cuda_available"):
        top = transfer.QUICK_MAX_BYTES if quick else transfer.SWEEP_MAX_BYTES
        sizes = pow2_sizes(transfer.SWEEP_MIN_BYTES, top)
        frames, skipped = [], []
        for direction in ("h2d", "d2h"):
            for memory in ("pinned", "pageable"):
                s = transfer.gpu_copy_sweep(sizes, direction, memory, progress=True)
                frames.append(s.to_frame())
                skipped += list(s.skipped)
        d2d = transfer.gpu_copy_sweep(sizes, "d2d", "pinned", progress=True)
        frames.append(d2d.to_frame())
        write_dataset(folder, "gpu_copy_sweep", pd.concat(frames, ignore_index=True), measured_meta(
            env, kind="copy_sweep", title="H2D/D2H/D2D copy sweep", bandwidth_direction="unidirectional",
            method=("labkit.transfer.gpu_copy_sweep: pinned and D2D = batches of copy_(non_blocking=True) between "
                    "CUDA events on one stream; pageable = host-timed synchronous copies; median of 10 samples"),
            caveats="; ".join(["D2D bandwidth counts bytes copied once (read + write traffic is twice that)"]
                              + ([f"skipped: {', '.join(skipped)}"] if skipped else []))))
        names.append("gpu_copy_sweep")
    return names
