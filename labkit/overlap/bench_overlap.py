"""`labkit bench overlap` and the `overlap` part of `labkit record`: efficiency, full duplex and loader timelines."""

from __future__ import annotations

from ..provenance import measured_meta, write_measured
from ..reference import write_dataset
from ..runtime import gpu_count, require_cuda
from ..system import cpu_model
from ..units import format_bytes, parse_size
from .measure import (
    DEFAULT_RATIOS,
    DEFAULT_REPEATS,
    GPU_BATCH_BYTES,
    GPU_MATRIX,
    GPU_QUICK_BATCH_BYTES,
    HOST_BATCH_BYTES,
    HOST_QUICK_BATCH_BYTES,
    LOADER_BATCHES,
    QUICK_LOADER_BATCHES,
    QUICK_RATIOS,
    QUICK_REPEATS,
    measure_gpu_overlap,
    measure_host_overlap,
)
from .timelines import duplex_table, efficiency_table, loader_timelines


def add_arguments(parser) -> None:
    parser.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "cuda", "host"],
        help="cuda: streams on a GPU; host: threads on this CPU; auto: cuda if a GPU is visible",
    )
    parser.add_argument(
        "--size",
        help=f"bytes per batch (default {format_bytes(GPU_BATCH_BYTES)} on a GPU, "
        f"{format_bytes(HOST_BATCH_BYTES)} on the host)",
    )
    parser.add_argument("--ratios", help="compute/copy time ratios, e.g. 0.25,1,4")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--no-pageable", action="store_true", help="GPU: skip the pageable-memory runs")
    parser.add_argument("--quick", action="store_true")


def _backend(choice: str) -> str:
    if choice == "auto":
        return "cuda" if gpu_count() else "host"
    if choice == "cuda":
        require_cuda("labkit bench overlap --backend cuda", hint=", or `labkit bench overlap --backend host`")
    return choice


def bench(args):
    """One record per (memory, ratio) with the efficiency, one per loader scenario, one for duplex."""
    backend = _backend(args.backend)
    ratios = (
        [float(r) for r in args.ratios.split(",")]
        if args.ratios
        else list(QUICK_RATIOS if args.quick else DEFAULT_RATIOS)
    )
    if any(r <= 0 for r in ratios):
        raise ValueError("compute/copy ratios must be positive")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if backend == "cuda":
        size = parse_size(args.size) if args.size else (GPU_QUICK_BATCH_BYTES if args.quick else GPU_BATCH_BYTES)
        frame = measure_gpu_overlap(
            size, ratios, repeats=args.repeats, device=args.device, pageable=not args.no_pageable
        )
        import torch

        where = torch.cuda.get_device_name(args.device)
    else:
        size = parse_size(args.size) if args.size else (HOST_QUICK_BATCH_BYTES if args.quick else HOST_BATCH_BYTES)
        frame = measure_host_overlap(size, ratios, repeats=args.repeats)
        where = f"host threads ({cpu_model()})"
    yield from summary_records(frame, backend, where)


def summary_records(frame, backend: str, where: str):
    """JSON-able records summarising an `overlap_run` frame (what `labkit bench overlap` prints)."""
    base = {"experiment": "overlap", "backend": backend, "device": where}
    for r in efficiency_table(frame).to_dict("records"):
        yield {
            **base,
            "test": "efficiency",
            "memory": r["memory"],
            "nbytes": int(frame["nbytes"].iloc[0]),
            "compute_to_copy": r["compute_to_copy"],
            "measured_ratio": r["measured_ratio"],
            "t_copy_s": r["t_copy_s"],
            "t_compute_s": r["t_compute_s"],
            "t_both_s": r["t_both_s"],
            "efficiency": r["efficiency"],
            "efficiency_q1": r["efficiency_q1"],
            "efficiency_q3": r["efficiency_q3"],
            "repeats": r["repeats"],
        }
    d = duplex_table(frame)
    for r in d.to_dict("records"):
        yield {**base, "test": "full_duplex", **r, "bandwidth_direction": "bidirectional"}
    for scenario, tl in loader_timelines(frame, where).items():
        yield {
            **base,
            "test": "loader",
            "scenario": scenario,
            "batches": len(tl.on("compute")),
            "step_s": tl.step_s("compute"),
            "makespan_s": tl.makespan_s,
        }


def record(folder, quick: bool, env: dict) -> list[str]:
    """Write `host_overlap_run` (always) and `gpu_overlap_run` (when a GPU is visible)."""
    names = []
    frame = measure_host_overlap(
        HOST_QUICK_BATCH_BYTES if quick else HOST_BATCH_BYTES,
        QUICK_RATIOS if quick else DEFAULT_RATIOS,
        repeats=QUICK_REPEATS if quick else DEFAULT_REPEATS,
        loader_batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES,
    )
    meta = measured_meta(
        env,
        kind="overlap_run",
        title="copy/compute overlap between host threads",
        bandwidth_direction="none",
        method=(
            "labkit.overlap.measure.measure_host_overlap: numpy.copyto on a worker thread (HostStream) while "
            "torch matmuls (1 intra-op thread) run on the main thread; copy alone, compute alone, "
            "both, interleaved per repeat; perf_counter timestamps; plus serial vs double-buffered "
            "loader timelines"
        ),
        caveats="host threads, not a GPU: shows overlap on this CPU's cores, limited by cores, "
        "memory bandwidth and the GIL; other load on the machine lowers the efficiency",
    )
    meta["gpu"], meta["gpu_count"] = "none", 0  # the host experiment uses no GPU even on a GPU machine
    write_dataset(folder, "host_overlap_run", frame, meta)
    names.append("host_overlap_run")
    if env.get("cuda_available"):
        frame = measure_gpu_overlap(
            GPU_QUICK_BATCH_BYTES if quick else GPU_BATCH_BYTES,
            QUICK_RATIOS if quick else DEFAULT_RATIOS,
            repeats=QUICK_REPEATS if quick else DEFAULT_REPEATS,
            loader_batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES,
        )
        write_measured(
            folder,
            "gpu_overlap_run",
            frame,
            env,
            kind="overlap_run",
            title="copy/compute overlap and full duplex on CUDA streams",
            bandwidth_direction="none",
            method=(
                "labkit.overlap.measure.measure_gpu_overlap: H2D copy_(non_blocking=True) on a side stream, "
                f"{GPU_MATRIX}x{GPU_MATRIX} float32 matmuls on the current stream; pinned and pageable sources; "
                "H2D + D2H on two streams (full duplex); serial vs double-buffered loader; CUDA event timestamps"
            ),
            caveats="times are CUDA event timestamps relative to an origin event on the compute stream",
        )
        names.append("gpu_overlap_run")
    return names
