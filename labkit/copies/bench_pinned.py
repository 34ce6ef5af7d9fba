"""`labkit bench pinned` and the `pinned` part of `labkit record`: pin cost, DataLoader and the pitfall (GPU only)."""

from __future__ import annotations

import dataclasses
import math

from ..provenance import write_measured
from ..reference import write_dataset
from ..runtime import require_cuda
from ..units import chosen_sizes, format_bytes, pow2_sizes
from .dataloader import (
    BATCH_SIZE,
    LOADER_BATCHES,
    LOADER_WORKERS,
    QUICK_LOADER_BATCHES,
    SAMPLE_SHAPE,
    measure_dataloader,
    measure_stages,
    stages_as_points,
    stages_meta,
)
from .pin_cost import PIN_MAX_BYTES, PIN_MIN_BYTES, PIN_QUICK_MAX_BYTES, PIN_REPEATS, measure_pin_cost
from .pinned import NO_GPU_HINT, can_pin
from .pitfall import nonblocking_pitfall_gpu
from .sweeps import gpu_copy_sweep

#: What `labkit bench pinned --what` can run.
WHATS = ("sweep", "pin_cost", "dataloader", "pitfall")


def add_arguments(parser) -> None:
    parser.add_argument("--what", default=",".join(WHATS), help=f"comma-separated subset of {', '.join(WHATS)}")
    parser.add_argument(
        "--sizes", help="sweep / pin-cost sizes, e.g. 64KiB,4MiB,256MiB (default: 64 KiB .. 256 MiB every 4x)"
    )
    parser.add_argument("--repeats", type=int, default=PIN_REPEATS)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--quick", action="store_true")


def bench(args):
    """Records: pinned/pageable sweep with ratios, pin cost with break-even, DataLoader, pitfall."""
    whats = [w.strip() for w in args.what.split(",") if w.strip()]
    unknown = set(whats) - set(WHATS)
    if unknown:
        raise ValueError(f"unknown --what {sorted(unknown)}; choose from {', '.join(WHATS)}")
    require_cuda("labkit bench pinned", hint=NO_GPU_HINT)
    sizes = chosen_sizes(args.sizes, PIN_MIN_BYTES, PIN_QUICK_MAX_BYTES if args.quick else PIN_MAX_BYTES, step=2)
    base = {"experiment": "pinned"}
    if "sweep" in whats:
        for direction in ("h2d", "d2h"):
            sw = {
                m: gpu_copy_sweep(sizes, direction, m, repeats=args.repeats, device=args.device)
                for m in ("pinned", "pageable")
            }
            pageable = {q.nbytes: q for q in sw["pageable"].measurements}  # a size skipped (out of memory) in one
            for p in sw["pinned"].measurements:  # kind has no ratio
                q = pageable.get(p.nbytes)
                if q is None:
                    continue
                yield {
                    **base,
                    "test": "sweep",
                    "direction": direction,
                    "device": sw["pinned"].device,
                    "nbytes": p.nbytes,
                    "size": format_bytes(p.nbytes),
                    "pinned_GBps": p.bandwidth_GBps,
                    "pageable_GBps": q.bandwidth_GBps,
                    "ratio": p.bandwidth_GBps / q.bandwidth_GBps,
                    "bandwidth_direction": "unidirectional",
                }
    if "pin_cost" in whats:
        for c in measure_pin_cost(sizes, repeats=args.repeats, device=args.device):
            saved = c.pageable_copy.median_s - c.pinned_copy.median_s
            yield {
                **base,
                "test": "pin_cost",
                "nbytes": c.nbytes,
                "size": format_bytes(c.nbytes),
                "pin_cold_s": c.pin.median_s,
                "pin_warm_s": c.pin_warm.median_s,
                "pinned_copy_s": c.pinned_copy.median_s,
                "pageable_copy_s": c.pageable_copy.median_s,
                "saved_per_copy_s": saved,
                "break_even_copies": c.pin.median_s / saved if saved > 0 else math.inf,
            }
    if "dataloader" in whats:
        for pm in (False, True):
            r = measure_dataloader(
                pm, batches=QUICK_LOADER_BATCHES if args.quick else LOADER_BATCHES, device=args.device
            )
            yield {**base, "test": "dataloader", **r, "bandwidth_direction": "unidirectional"}
        stages = measure_stages(batches=QUICK_LOADER_BATCHES if args.quick else LOADER_BATCHES, device=args.device)
        for r in stages.to_dict("records"):
            yield {**base, "test": "dataloader_stage", **r, "bandwidth_direction": "unidirectional"}
    if "pitfall" in whats:
        r = nonblocking_pitfall_gpu(device=args.device)
        yield {**base, "test": "nonblocking_pitfall", **dataclasses.asdict(r)}


def record(folder, quick: bool, env: dict) -> list[str]:
    """GPU only: `pin_cost`, `dataloader_throughput` and `nonblocking_pitfall` point datasets; [] without a GPU.

    The pinned/pageable bandwidth sweep itself is recorded by the `copy` recorder (gpu_copy_sweep).
    """
    if not env.get("cuda_available") or not can_pin():
        return []
    _record_pin_cost(folder, quick, env)
    _record_dataloader(folder, quick, env)
    _record_pitfall(folder, env)
    return ["pin_cost", "dataloader_throughput", "dataloader_stages", "nonblocking_pitfall"]


def _record_pin_cost(folder, quick: bool, env: dict) -> None:
    """pin_cost: pin_memory() cold and warm vs the H2D time it saves, per size."""
    import pandas as pd

    sizes = pow2_sizes(PIN_MIN_BYTES, PIN_QUICK_MAX_BYTES if quick else PIN_MAX_BYTES, step=2)
    rows = [r for c in measure_pin_cost(sizes) for r in c.to_rows()]
    write_measured(
        folder,
        "pin_cost",
        pd.DataFrame(rows),
        env,
        kind="point",
        title="cost of pin_memory() vs the H2D time it saves",
        bandwidth_direction="none",
        method=(
            "labkit.copies.pin_cost.measure_pin_cost: tensor.pin_memory() host-timed (cold: torch pinned cache emptied "
            "before each sample; warm: cache reused); H2D copies by labkit.copies.sweeps.gpu_copy_sweep; median of "
            f"{PIN_REPEATS} samples"
        ),
        caveats="times in seconds per call (value column, unit s); samples_s keeps the raw samples",
    )


def _record_dataloader(folder, quick: bool, env: dict) -> None:
    """dataloader_throughput (pin_memory False and True) and dataloader_stages."""
    import pandas as pd

    loader = [measure_dataloader(pm, batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES) for pm in (False, True)]
    write_measured(
        folder,
        "dataloader_throughput",
        pd.DataFrame(
            [
                {
                    "quantity": f"DataLoader(pin_memory={r['pin_memory']}) → .to(cuda, non_blocking=True) throughput",
                    "value": r["throughput_GBps"],
                    "unit": "GB/s",
                    "bandwidth_direction": "unidirectional",
                    "memory": "pinned" if r["pin_memory"] else "pageable",
                    "batches_per_s": r["batches_per_s"],
                    "batch_bytes": r["batch_bytes"],
                    "workers": r["workers"],
                    "batches": r["batches"],
                }
                for r in loader
            ]
        ),
        env,
        kind="point",
        title="DataLoader pin_memory=True vs False, synthetic images",
        bandwidth_direction="unidirectional",
        method=(
            f"labkit.copies.dataloader.measure_dataloader: {BATCH_SIZE} x {SAMPLE_SHAPE} uint8 per batch, "
            f"{LOADER_WORKERS} workers, one untimed pass, then a host-timed pass ending in one synchronize"
        ),
        caveats="in-memory synthetic data: no decoding or disk, so the copy path dominates",
    )
    stages = measure_stages(batches=QUICK_LOADER_BATCHES if quick else LOADER_BATCHES)
    write_dataset(
        folder,
        "dataloader_stages",
        stages_as_points(stages),
        stages_meta(env),
    )


def _record_pitfall(folder, env: dict) -> None:
    """nonblocking_pitfall: wrong bytes read before vs after synchronize."""
    import pandas as pd

    r = nonblocking_pitfall_gpu()
    write_measured(
        folder,
        "nonblocking_pitfall",
        pd.DataFrame(
            [
                {
                    "quantity": "fraction of wrong bytes read before synchronize",
                    "value": r.wrong_before_sync,
                    "unit": "fraction",
                    "bandwidth_direction": "none",
                    "nbytes": r.nbytes,
                },
                {
                    "quantity": "fraction of wrong bytes read after synchronize",
                    "value": r.wrong_after_sync,
                    "unit": "fraction",
                    "bandwidth_direction": "none",
                    "nbytes": r.nbytes,
                },
            ]
        ),
        env,
        kind="point",
        title="non_blocking D2H read before vs after synchronize",
        bandwidth_direction="none",
        method="labkit.copies.pitfall.nonblocking_pitfall_gpu: torch.cuda._sleep, then copy_(non_blocking=True) into pinned memory",
    )
