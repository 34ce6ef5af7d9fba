"""Hand-written all-reduces timed against dist.all_reduce on local ranks, with nccl-tests' algbw and busbw.

The method (nccl-tests' conventions: docs/design.md, "Measurement conventions", Collectives):

1. start the ranks (labkit.launch) and, per size, allocate every buffer once — set-up is never timed;
2. check correctness apart from timing: each hand-written implementation must give the library's
   bits on integer-valued inputs (labkit.allreduce.correctness.compare_with_library);
3. warm up: the first call(s) pay for connections and page faults and are not timed;
4. per repetition and implementation: restore the input (untimed), barrier, time one call on every
   rank; implementations take turns inside each repetition, so a busy moment of the machine
   hits them alike (labkit.timing.time_collectives: the loop every busbw in labkit comes from);
5. a repetition lasts as long as its slowest rank (the collective is done when the last rank is):
   seconds = median over repetitions of the max over ranks (labkit.collectives.slowest_rank). algbw = S / seconds, busbw = algbw ×
   2(N−1)/N (labkit.collectives.busbw), S = bytes of the buffer.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time

import numpy as np

from ..collectives import busbw, slowest_rank
from ..launch import check_world_size, launch, rank_info
from ..models import allreduce_time
from ..runtime import Found
from ..specs import spec
from ..system import cpu_model
from ..timing import time_collectives
from ..units import format_bytes, pow2_sizes
from . import views
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


# --------------------------------------------------------------------------- notebook 05's results
#: The size the notebook scores prediction 2 at (and the interview quotes): 4 MiB, or the largest timed.
SCORED_NBYTES = 4 << 20


def gloo_label(ranks: int) -> str:
    """Where and when a gloo run happened, for every figure and table that shows it."""
    return f"measured here: {cpu_model()}, {datetime.date.today()} — gloo, {ranks} processes"


class GlooBench:
    """One `run_allreduce_bench` on gloo: busbw per implementation and size, and the ring ÷ library ratio."""

    def __init__(self, records, label: str):
        self.records, self.label = records, label
        self.frame = to_frame(records)
        self.ratios = ratio_to_library(records, "ring")
        self.at = SCORED_NBYTES if SCORED_NBYTES in self.ratios else max(self.ratios)

    def report(self):
        table = self.frame.pivot_table(index="nbytes", columns="impl", values="busbw_GBps")
        return table.rename(index=format_bytes).round(3).rename_axis(index="S", columns="busbw (GB/s)")

    def checks(self) -> dict:
        return {"bench_results_correct": all(r["correct"] is not False for r in self.records)}

    def numbers(self) -> dict:
        return {f"gloo_ring_over_library_busbw_{format_bytes(n).replace(' ', '')}": r for n, r in self.ratios.items()}

    def ratios_line(self) -> str:
        return ", ".join(f"{format_bytes(n)}: {r:.2f}" for n, r in self.ratios.items())


class GlooFit:
    """dist.all_reduce's times fitted as a ring (α, β), drawn over the measurements; or why no fit exists."""

    experiment = "gloo_fit"

    def __init__(self, bench: GlooBench, link, no_fit: str | None):
        self.bench, self.link, self.no_fit = bench, link, no_fit

    def figure(self):
        return views.measured_vs_model_figure(
            self.bench.records, self.bench.label, self.link, models=self.link is not None
        )

    def report(self) -> str:
        if self.link is not None:
            return (
                f"fitted to dist.all_reduce as a ring: α = {self.link['alpha_s'] * 1e6:.0f} µs per message, "
                f"β = {self.link['beta_GBps']:.2f} GB/s per direction per rank"
            )
        ranks = int(self.bench.frame.world_size.iloc[0])  # a busy machine: report it, draw the measurements alone
        return (
            f"**No α-β fit on this run:** {self.no_fit}. With {ranks} processes on {os.cpu_count()} CPU cores the "
            "scheduler, not the message size, set these times. Rerun the cell above (or use `quick=False`: more "
            "sizes, more repeats) on a quieter machine."
        )

    def numbers(self) -> dict:
        if self.link is None:
            return {}
        return {"gloo_fitted_alpha_us": self.link["alpha_s"] * 1e6, "gloo_fitted_beta_GBps": self.link["beta_GBps"]}

    def notes(self) -> dict:
        return {"fitted": self.link is not None, "reason": self.no_fit}


def straggler_demo(quick: bool) -> str:
    """Three ranks, rank 2 sleeping 0.25 s before each all-reduce: everyone's collective takes that long."""
    if quick:
        return (
            "quick mode: straggler demo skipped (run with quick=False, or: "
            "`labkit bench allreduce --ranks 3 --sizes 64KiB --impl library --straggler 2:0.25`)"
        )
    slow = run_allreduce_bench(3, [64 << 10], ["library"], repeats=3, check=False, straggler=(2, 0.25))[0]
    return (
        f"rank 2 sleeps 0.25 s before each all-reduce: the collective takes {slow['seconds'] * 1e3:.0f} ms "
        "for everyone — the others wait inside it"
    )


class NcclRun:
    """NCCL measured on this machine's GPUs (`nccl_here`), or nothing to show (records None)."""

    experiment = "ring_nccl"

    def __init__(self, records, gpus: int):
        self.records, self.gpus = records, gpus

    def figure(self):
        if self.records is None:
            return None
        source = f"measured here: {datetime.date.today()}"
        return views.nccl_figure(self.records, self.gpus, source=source)

    def report(self):
        if self.records is None:
            return None
        table = to_frame(self.records).pivot_table(index=["setting", "impl"], columns="nbytes", values="busbw_GBps")
        return table.rename(columns=format_bytes).round(1)

    def notes(self) -> dict:
        if self.records is None:
            return {}
        return {"settings": sorted(to_frame(self.records).setting.unique()), "gpus": self.gpus}


class RecordedSweeps:
    """The recorded all-reduce sweeps (and a log given as reference=) with this run's gloo library line on top."""

    def __init__(self, datasets, bench: GlooBench, quick: bool):
        self.bench, self.quick = bench, quick
        self.lines = views.reference_lines(datasets)
        self.datasets = sorted({ln["dataset"].name for ln in self.lines})
        self.table = views.reference_table(self.lines)
        lib = bench.frame[bench.frame.impl == "library"]
        self.own = views.summarize_line(lib.nbytes, lib.busbw_GBps)

    def figure(self):
        return views.references_figure(
            self.lines, self.bench.records, own_label=f"{self.bench.label} (dist.all_reduce)"
        )

    def report(self):
        return self.table

    def numbers(self) -> dict:
        return {"gloo_library_plateau_busbw_GBps": self.own["plateau_busbw_GBps"]}

    def own_span(self) -> str:
        span = (
            f"median of {format_bytes(self.own['plateau_from_bytes'])} … {format_bytes(self.own['plateau_to_bytes'])}"
        )
        return span + (", quick sweep: no plateau yet" if self.quick else "")

    def verdict(self) -> str:
        own, plateaus = self.own["plateau_busbw_GBps"], self.table["plateau busbw (GB/s)"]
        return (
            f"your gloo busbw at the largest sizes ({self.own_span()}): {own:.3g} GB/s — {plateaus.min() / own:.0f}× "
            f"below the slowest recorded GPU system ({plateaus.min():g} GB/s) and {plateaus.max() / own:.0f}× below "
            "the fastest."
        )

    def h100_one_node(self):
        """Plateau busbw of the recorded 8× H100 single-node sweeps."""
        t = self.table
        return t[t.gpu.str.contains("H100", na=False) & (t.nodes == 1) & (t.ranks == 8)]["plateau busbw (GB/s)"]


class Interview:
    """The interview's numbers from this run: gloo ratio and α-β fit, the 7B model on them, recorded NCCL plateaus."""

    experiment = "interview"

    def __init__(self, fit: GlooFit, sweeps: RecordedSweeps, nvls_table, gradient_bytes: float, t_ring_ms: float):
        self.fit, self.sweeps, self.nvls, self.t_ring_ms = fit, sweeps, nvls_table, t_ring_ms
        self.bench, link = fit.bench, fit.link
        self.t7b_here_s = (
            None if link is None else allreduce_time(gradient_bytes, 8, link["beta_GBps"], link["alpha_s"])
        )
        self.h100 = sweeps.h100_one_node()

    def report(self) -> str:
        b, link, own = self.bench, self.fit.link, self.sweeps.own["plateau_busbw_GBps"]
        lines = [
            f"Q2: your ring ÷ dist.all_reduce, busbw: {b.ratios_line()}; library busbw at the largest sizes "
            f"({self.sweeps.own_span()}) {own:.3g} GB/s — {b.label}"
        ]
        if link is None:
            lines.append(f"Q3: no α and β from this run — {self.fit.no_fit}")
        else:
            lines += [
                f"Q3: dist.all_reduce fitted as a ring: α = {link['alpha_s'] * 1e6:.0f} µs per message, "
                f"β = {link['beta_GBps']:.2f} GB/s — model fitted to {b.label}",
                f"7B fp16 gradients, 8 ranks, ring: {self.t7b_here_s:.1f} s with this α and β (model), "
                f"{self.t_ring_ms:.1f} ms at 32 GB/s",
            ]
        if len(self.h100):
            lines.append(
                f"Q6: recorded 8×H100, one node, NVLS: busbw plateau {self.h100.min():g} to {self.h100.max():g} GB/s "
                f"(table of section 5); ring only (8×H200, NVLS off): {self.nvls.loc[8, 'ring']:g} GB/s; "
                f"NVLink 4: {spec('NVLink 4').per_direction_GBps():g} GB/s per direction"
            )
        return "  \n".join(lines)

    def notes(self) -> dict:
        b, link = self.bench, self.fit.link
        return {
            "source": b.label,
            "ring_over_library_busbw": b.ratios[b.at],
            "ratio_nbytes": b.at,
            "alpha_us": link["alpha_s"] * 1e6 if link else None,
            "beta_GBps": link["beta_GBps"] if link else None,
            "ring_7b_8rank_here_s": self.t7b_here_s,
            "recorded_h100_plateau_GBps": float(self.h100.max()) if len(self.h100) else None,
        }
