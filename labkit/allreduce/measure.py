"""Hand-written all-reduces timed against dist.all_reduce on local ranks, with nccl-tests' algbw and busbw.

The method (nccl-tests' conventions, see DESIGN.md "Collectives"):

1. start the ranks (labkit.launch) and, per size, allocate every buffer once — set-up is never timed;
2. check correctness apart from timing: each hand-written implementation must give the library's
   bits on integer-valued inputs (labkit.allreduce.correctness.compare_with_library);
3. warm up: the first call(s) pay for connections and page faults and are not timed;
4. per repetition and implementation: restore the input (untimed), barrier, time one call on every
   rank; implementations take turns inside each repetition, so a busy moment of the machine
   hits them alike (labkit.collectives.time_collectives: the loop every busbw in labkit comes from);
5. a repetition lasts as long as its slowest rank (the collective is done when the last rank is):
   seconds = median over repetitions of the max over ranks (labkit.collectives.slowest_rank). algbw = S / seconds, busbw = algbw ×
   2(N−1)/N (labkit.collectives.busbw), S = bytes of the buffer.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ..collectives import busbw, slowest_rank, time_collectives
from ..launch import check_world_size, launch, rank_info
from ..runtime import Found
from ..units import format_bytes, pow2_sizes
from .correctness import compare_with_library
from .ring import IMPLEMENTATIONS, InjectedFailure, ring_allreduce_

#: Timed repetitions per (implementation, size); the median of 10 is stable to a few percent here.
DEFAULT_REPEATS = 10
#: Untimed calls before timing (connection set-up, page faults, allocator warm-up).
DEFAULT_WARMUP = 2
#: Wall-clock budget of one bench launch, seconds (start-up of the ranks included).
DEFAULT_TIMEOUT_S = 300.0


def bench_worker(
    rank: int,
    world_size: int,
    impls,
    sizes,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    dtype: str = "float32",
    check: bool = True,
    fail_rank: int | None = None,
    straggler: tuple[int, float] | None = None,
) -> list[dict]:
    """Launch target: per size, check then time every impl; returns this rank's raw per-call times."""
    import torch
    import torch.distributed as dist

    device = rank_info().device
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    tdtype = getattr(torch, dtype)
    itemsize = torch.empty(0, dtype=tdtype).element_size()
    out = []
    for nbytes in sizes:
        if nbytes % itemsize:
            raise ValueError(f"size {nbytes} B is not a whole number of {dtype} elements ({itemsize} B each)")
        count = nbytes // itemsize
        checks = {}
        if check:
            for impl in impls:
                if impl != "library":
                    c = compare_with_library(
                        impl, min(count, 1 << 20), seed=1, dtype=dtype, device=device, simulate=False
                    )
                    checks[impl] = c["integer_bit_identical"] and c["integer_exact"] and c["random_within_tolerance"]
                else:
                    checks[impl] = True
        src = torch.ones(count, dtype=tdtype, device=device) * (rank + 1)
        x = torch.empty_like(src)
        sent = {}

        def call(impl):
            sent[impl] = IMPLEMENTATIONS[impl](x)

        def before(rep, impl):
            if straggler is not None and rank == straggler[0]:
                time.sleep(straggler[1])
            if fail_rank == rank and rep == 0:  # die in the middle of the first timed collective
                try:
                    if impl == "ring":
                        ring_allreduce_(x, fail_after_step=1)
                    raise InjectedFailure(f"before the {impl} all-reduce's first message")
                except InjectedFailure as e:
                    raise InjectedFailure(f"rank {rank} (--fail-rank): {e}") from None

        times = time_collectives(
            {impl: lambda impl=impl: call(impl) for impl in impls},
            repeats=repeats,
            warmup=warmup,
            barrier=dist.barrier,
            sync=sync,
            prepare=lambda impl: x.copy_(src),
            before=before,
        )
        for impl in impls:
            out.append(
                {
                    "impl": impl,
                    "nbytes": nbytes,
                    "count": count,
                    "dtype": dtype,
                    "samples_s": times[impl],
                    "bytes_sent": sent.get(impl),
                    "correct": checks.get(impl),
                }
            )
    return out


def run_allreduce_bench(
    world_size: int = 4,
    sizes=(4 << 20,),
    impls=("ring", "library"),
    backend: str = "gloo",
    *,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    dtype: str = "float32",
    check: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    fail_rank: int | None = None,
    straggler: tuple[int, float] | None = None,
    env: dict | None = None,
) -> list[dict]:
    """Run the bench on `world_size` local ranks; one record per (impl, size), sizes outer.

    Records carry the nccl-tests quantities (seconds, algbw_GBps, busbw_GBps) and the raw samples
    (`samples_s`: per repetition, the slowest rank's time).
    """
    world_size = check_world_size(world_size)  # before anything else: nothing starts for a bad --ranks
    unknown = [i for i in impls if i not in IMPLEMENTATIONS]
    if unknown:
        raise ValueError(f"unknown implementation(s) {unknown}; choose from {list(IMPLEMENTATIONS)}")
    itemsize = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}[dtype]
    for nbytes in sizes:
        if nbytes % itemsize:
            raise ValueError(
                f"size {format_bytes(nbytes)} is not a whole number of {dtype} elements ({itemsize} B each)"
            )
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for r in [fail_rank] + ([straggler[0]] if straggler else []):
        if r is not None and not 0 <= r < world_size:
            raise ValueError(f"rank {r} does not exist with {world_size} ranks (ranks are 0 … {world_size - 1})")
    per_rank = launch(
        bench_worker,
        world_size,
        backend,
        timeout_s=timeout_s,
        env=env,
        args=(list(impls), list(sizes)),
        kwargs=dict(repeats=repeats, warmup=warmup, dtype=dtype, check=check, fail_rank=fail_rank, straggler=straggler),
    )
    records = []
    for i, rec in enumerate(per_rank[0]):
        ranks = [per_rank[r][i] for r in range(world_size)]
        samples = slowest_rank([r["samples_s"] for r in ranks])
        seconds = float(statistics.median(samples))
        q1, q3 = np.percentile(samples, [25, 75])
        nbytes = rec["nbytes"]
        records.append(
            {
                "impl": rec["impl"],
                "backend": backend,
                "world_size": world_size,
                "nbytes": nbytes,
                "size": format_bytes(nbytes),
                "dtype": dtype,
                "count": rec["count"],
                "seconds": seconds,
                "iqr_s": float(q3 - q1),
                "algbw_GBps": nbytes / seconds / 1e9,
                "busbw_GBps": busbw("all_reduce", nbytes, seconds, world_size),
                "correct": all(r["correct"] is not False for r in ranks) if check else None,
                "bytes_sent_max_rank": max(int(r["bytes_sent"] or 0) for r in ranks),
                "repeats": repeats,
                "warmup": warmup,
                "straggler": list(straggler) if straggler else None,
                "samples_s": [float(s) for s in samples],
            }
        )
    return records


#: NCCL settings the notebook compares on GPUs (NCCL reads them when the communicator is created):
#: NCCL_ALGO picks the algorithm (Ring, Tree, NVLS, CollNet…), NCCL_PROTO the protocol — Simple
#: (large messages, full bandwidth), LL128 and LL (low latency: flags travel with the data, so a
#: receiver need not wait for a separate "ready" signal, at the cost of some bandwidth).
NCCL_SETTINGS = (
    {},
    {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"},
    {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"},
    {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"},
    {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"},
)


def nccl_settings_sweep(world_size: int, sizes, settings=NCCL_SETTINGS, impls=("library", "ring"), **kw) -> list[dict]:
    """The bench once per NCCL setting (one launch each: NCCL reads the variables at start-up)."""
    records = []
    for env in settings:
        label = " ".join(f"{k}={v}" for k, v in env.items()) or "NCCL defaults"
        for rec in run_allreduce_bench(world_size, sizes, impls, "nccl", env=dict(env), **kw):
            records.append({**rec, "setting": label})
    return records


def to_frame(records):
    """Bench records as a tidy DataFrame (raw samples dropped)."""
    import pandas as pd

    return pd.DataFrame([{k: v for k, v in r.items() if k != "samples_s"} for r in records])


def ratio_to_library(records, impl: str = "ring") -> dict[int, float]:
    """busbw(impl) / busbw(library) per size, from one run."""
    lib = {r["nbytes"]: r["busbw_GBps"] for r in records if r["impl"] == "library"}
    return {
        r["nbytes"]: r["busbw_GBps"] / lib[r["nbytes"]] for r in records if r["impl"] == impl and r["nbytes"] in lib
    }


# --------------------------------------------------------------------------- command line


# --------------------------------------------------------------------------- recorder


def nccl_here(gpus: int, quick: bool) -> Found:
    """Notebook 05's NCCL measurement: the library and the ring, under each NCCL setting, on this machine's GPUs."""
    sizes = [1 << 20, 16 << 20, 256 << 20] if quick else pow2_sizes("64KiB", "1GiB", step=2)
    records = nccl_settings_sweep(gpus, sizes, repeats=5 if quick else 20)
    return Found(records, f"measured here: {gpus} GPUs, NCCL")
