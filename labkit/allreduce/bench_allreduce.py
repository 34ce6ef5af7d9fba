"""`labkit bench allreduce` and the `allreduce` part of `labkit record`: hand-written all-reduces against dist.all_reduce."""

from __future__ import annotations

import argparse
import math
import sys

from ..provenance import write_measured
from ..units import parse_sizes, pow2_sizes
from . import bench_collectives
from .measure import DEFAULT_REPEATS, DEFAULT_TIMEOUT_S, DEFAULT_WARMUP, run_allreduce_bench

DEFAULT_SIZES = "4MiB,16MiB,64MiB"


DEFAULT_IMPLS = "ring,library"


#: Sizes `labkit record` sweeps (gloo, CPU): 4 KiB … 64 MiB, every other power of two.
RECORD_MIN, RECORD_MAX, RECORD_QUICK_MAX = "4KiB", "64MiB", "4MiB"


#: Ranks for the recorded gloo sweep (the notebook's default too).
RECORD_RANKS = 4


def add_arguments(parser) -> None:
    parser.add_argument(
        "--backend", default="gloo", choices=["gloo", "nccl"], help="gloo (CPU) or nccl (one GPU per rank)"
    )
    parser.add_argument(
        "--ranks", type=int, default=4, help="processes on this machine (default 4, at most labkit.launch.MAX_RANKS)"
    )
    parser.add_argument(
        "--sizes", default=DEFAULT_SIZES, help=f"buffer sizes S, e.g. 4MiB,64MiB (default {DEFAULT_SIZES})"
    )
    parser.add_argument(
        "--impl",
        default=DEFAULT_IMPLS,
        help="comma-separated: ring, ring_simple, library, naive, tree, recursive_doubling (default ring,library)",
    )
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed repetitions (median reported)")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="untimed calls first")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "bfloat16"])
    parser.add_argument("--no-check", action="store_true", help="skip the correctness check against dist.all_reduce")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="give up after this many seconds (start-up included)",
    )
    parser.add_argument(
        "--fail-rank", type=int, metavar="R", help="rank R raises in the middle of the first timed collective"
    )
    parser.add_argument(
        "--straggler", type=_straggler, metavar="R:SECONDS", help="rank R sleeps SECONDS before every timed collective"
    )


def _straggler(text: str) -> tuple[int, float]:
    """--straggler R:SECONDS as (rank, seconds): a whole rank >= 0 and a finite delay >= 0 (which ranks exist is
    checked once the ranks are known)."""
    rank, sep, seconds = text.partition(":")
    try:
        value = int(rank), float(seconds)
    except ValueError:
        value = None
    if not sep or value is None or value[0] < 0 or not 0 <= value[1] < math.inf:
        raise argparse.ArgumentTypeError(f"takes R:SECONDS, a rank >= 0 and seconds >= 0, e.g. 1:0.5, got {text!r}")
    return value


def bench(args):
    if bench_collectives.torchrun_env() is not None:
        yield from _under_torchrun(args)
        return
    impls = [i.strip() for i in args.impl.split(",") if i.strip()]
    records = run_allreduce_bench(
        args.ranks,
        parse_sizes(args.sizes),
        impls,
        args.backend,
        repeats=args.repeats,
        warmup=args.warmup,
        dtype=args.dtype,
        check=not args.no_check,
        timeout_s=args.timeout,
        fail_rank=args.fail_rank,
        straggler=args.straggler,
    )
    for rec in records:
        if rec["correct"] is False:
            print(f"warning: {rec['impl']} at {rec['size']} does not match dist.all_reduce", file=sys.stderr)
        if rec["seconds"] > 0 and rec["iqr_s"] / rec["seconds"] > 0.10:
            print(
                f"warning: {rec['impl']} at {rec['size']}: IQR is {100 * rec['iqr_s'] / rec['seconds']:.0f}% of the "
                "median — the machine was busy; rerun with more --repeats",
                file=sys.stderr,
            )
        yield rec


def _under_torchrun(args):
    """Started by torchrun: this process is one rank of many machines' group; dist.all_reduce in nccl-tests' table."""
    if bench_collectives.torchrun_env()["rank"] == 0 and args.impl != DEFAULT_IMPLS:
        print(
            "labkit bench allreduce: under torchrun only the library's all_reduce is timed (labkit bench collectives); "
            "--impl is ignored",
            file=sys.stderr,
        )
    yield from bench_collectives.bench(
        bench_collectives.argparse_defaults(
            collective="all_reduce",
            size_list=parse_sizes(args.sizes),
            iters=args.repeats,
            warmup_iters=args.warmup,
            dtype=args.dtype,
            backend=args.backend,
            timeout=args.timeout,
            check=0 if args.no_check else 1,
            json=args.json,
        )
    )


def text(record) -> str:
    """A row of nccl-tests' table under torchrun; elsewhere what `labkit bench` prints for a flat record."""
    if "oop_time_us" in record:
        return bench_collectives.text(record)
    return "  ".join(
        f"{k}={f'{v:.4g}' if isinstance(v, float) else v}" for k, v in record.items() if not isinstance(v, (list, dict))
    )


def record(folder, quick: bool, env: dict) -> list[str]:
    """Record a gloo sweep (always) and an NCCL sweep (two or more GPUs) as `allreduce_sweep` datasets."""
    import pandas as pd

    names = []
    sizes = pow2_sizes(RECORD_MIN, RECORD_QUICK_MAX if quick else RECORD_MAX, step=2)
    runs = [("gloo", RECORD_RANKS)]
    if len(env.get("gpus") or []) >= 2:
        runs.append(("nccl", len(env["gpus"])))
    for backend, ranks in runs:
        records = run_allreduce_bench(
            ranks, sizes, ("library", "ring"), backend, repeats=5 if quick else DEFAULT_REPEATS
        )
        frame = pd.DataFrame(
            [
                {
                    "nbytes": r["nbytes"],
                    "world_size": r["world_size"],
                    "nodes": 1,
                    # the config names the series `labkit compare` pairs across profiles: keep it as recorded before
                    "config": f"{backend} {'dist.all_reduce' if r['impl'] == 'library' else 'ring by hand (labkit.ring)'}",
                    "placement": "in-place",
                    "count": r["count"],
                    "dtype": r["dtype"],
                    "time_us": r["seconds"] * 1e6,
                    "algbw_GBps": r["algbw_GBps"],
                    "busbw_GBps": r["busbw_GBps"],
                }
                for r in records
            ]
        )
        name = f"allreduce_{backend}_sweep"
        write_measured(
            folder,
            name,
            frame,
            env,
            kind="allreduce_sweep",
            title=f"all_reduce on {ranks} local {backend} ranks",
            bandwidth_direction="unidirectional",
            gpu_count=ranks if backend == "nccl" else 0,
            interconnect="loopback TCP between processes (gloo)" if backend == "gloo" else None,
            method=(
                f"labkit.allreduce.measure.run_allreduce_bench: {ranks} ranks, {backend}, float32, in place; "
                f"median over {5 if quick else DEFAULT_REPEATS} repetitions of the slowest rank's time, "
                "after warm-up and a barrier; busbw = algbw x 2(n-1)/n"
            ),
            caveats=(
                "busbw is nccl-tests' bus bandwidth (per-rank link traffic), not a spec figure"
                + (
                    "; gloo on one machine: processes exchange data through the kernel's TCP loopback, "
                    "so this measures memory copies and the CPU, not a network"
                    if backend == "gloo"
                    else ""
                )
            ),
        )
        names.append(name)
    return names
