"""`labkit bench copy` (host↔GPU copy sweeps) and the `copy` part of `labkit record` (host memory, and the GPU's copies)."""

from __future__ import annotations

from ..provenance import write_measured
from ..units import chosen_sizes, pow2_sizes
from .bench_host import records
from .sweeps import (
    HOST_MAX_BYTES,
    HOST_MIN_BYTES,
    HOST_QUICK_MAX_BYTES,
    QUICK_MAX_BYTES,
    SWEEP_MAX_BYTES,
    SWEEP_MIN_BYTES,
    gpu_copy_sweep,
    host_copy_sweep,
)


def add_arguments(parser) -> None:
    parser.add_argument("--direction", default="h2d,d2h", help="h2d, d2h, d2d (comma-separated)")
    parser.add_argument("--memory", default="pinned", help="pinned, pageable (comma-separated)")
    parser.add_argument("--sizes", help="e.g. 4B,64KiB,1GiB (default: powers of two 4 B .. 1 GiB)")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true")


def bench(args):
    """One record per (direction, memory, size); raises CudaUnavailable without a GPU."""
    sizes = chosen_sizes(args.sizes, SWEEP_MIN_BYTES, QUICK_MAX_BYTES if args.quick else SWEEP_MAX_BYTES, step=2)
    for d in args.direction.split(","):
        for mem in args.memory.split(","):
            sweep = gpu_copy_sweep(
                sizes, d.strip(), mem.strip(), repeats=args.repeats, device=args.device, progress=not args.json
            )
            yield from records(sweep, "copy")


def record(folder, quick: bool, env: dict) -> list[str]:
    """Host memory always (`host_copy_sweep`); H2D/D2H pinned and pageable and D2D where a GPU exists (`gpu_copy_sweep`)."""
    import pandas as pd

    names = []
    host_max = HOST_QUICK_MAX_BYTES if quick else HOST_MAX_BYTES
    host = host_copy_sweep(pow2_sizes(HOST_MIN_BYTES, host_max), progress=True)
    write_measured(
        folder,
        "host_copy_sweep",
        host.to_frame(),
        env,
        kind="copy_sweep",
        title="host memory copy (numpy copyto)",
        bandwidth_direction="unidirectional",
        method="labkit.copies.sweeps.host_copy_sweep: numpy.copyto timed on the host, median of 10 samples",
        caveats="host memory, not PCIe: copies between two buffers of this machine's RAM/caches",
    )
    names.append("host_copy_sweep")
    if env.get("cuda_available"):
        sizes = pow2_sizes(SWEEP_MIN_BYTES, QUICK_MAX_BYTES if quick else SWEEP_MAX_BYTES)
        frames, skipped = [], []
        for direction in ("h2d", "d2h"):
            for memory in ("pinned", "pageable"):
                s = gpu_copy_sweep(sizes, direction, memory, progress=True)
                frames.append(s.to_frame())
                skipped += list(s.skipped)
        d2d = gpu_copy_sweep(sizes, "d2d", "pinned", progress=True)
        frames.append(d2d.to_frame())
        write_measured(
            folder,
            "gpu_copy_sweep",
            pd.concat(frames, ignore_index=True),
            env,
            kind="copy_sweep",
            title="H2D/D2H/D2D copy sweep",
            bandwidth_direction="unidirectional",
            method=(
                "labkit.copies.sweeps.gpu_copy_sweep: pinned and D2D = batches of copy_(non_blocking=True) between "
                "CUDA events on one stream; pageable = host-timed synchronous copies; median of 10 samples"
            ),
            caveats="; ".join(
                ["D2D bandwidth counts bytes copied once (read + write traffic is twice that)"]
                + ([f"skipped: {', '.join(skipped)}"] if skipped else [])
            ),
        )
        names.append("gpu_copy_sweep")
    return names
