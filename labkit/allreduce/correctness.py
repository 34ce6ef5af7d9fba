"""Hand-written all-reduces checked against `dist.all_reduce`, inside the ranks: bit for bit on integers, within the summation tolerance on floats.

- integer-valued inputs: the results must be bit-identical, and equal to the exact sum;
- random floats: |impl − library| ≤ `labkit.collectives.summation_tolerance` (summation order differs);
- the ring (and `simulate`): equal to `labkit.allreduce.simulation`'s prediction bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..collectives import ring_bytes_sent, within_summation_tolerance
from ..launch import rank_info
from .ring import IMPLEMENTATIONS, _group_info
from .simulation import simulate_ring_allreduce

#: Integer-valued test inputs lie in [-r, r) with r per dtype, small enough that every partial sum
#: over up to 64 ranks is an exactly representable integer (float32: 24-bit significand, float16:
#: 11, bfloat16: 8), so every summation order gives the same bits.
INT_RANGE = {"float64": 1000, "float32": 1000, "float16": 32, "bfloat16": 4}


def test_input(rank: int, count: int, kind: str, seed: int = 0, dtype: str = "float32"):
    """The deterministic input rank `rank` uses in checks: 'integer' (exact) or 'random' (N(0,1))."""
    import torch

    g = torch.Generator().manual_seed(seed * 100_003 + rank)
    if kind == "integer":
        r = INT_RANGE[dtype]
        x = torch.randint(-r, r, (count,), generator=g)
    elif kind == "random":
        x = torch.randn(count, generator=g, dtype=torch.float64)
    else:
        raise ValueError(f"kind must be 'integer' or 'random', got {kind!r}")
    return x.to(getattr(torch, dtype))


def compare_with_library(
    impl: str,
    count: int,
    group=None,
    *,
    seed: int = 0,
    dtype: str = "float32",
    device: str = "cpu",
    simulate: bool = True,
    options: dict | None = None,
) -> dict:
    """Run `impl` and dist.all_reduce on the same inputs in this group; report how they compare.

    - integer-valued inputs: the results must be bit-identical, and equal to the exact sum;
    - random floats: |impl − library| ≤ collectives.summation_tolerance (summation order differs);
    - ring only (and `simulate`): the result must equal labkit.allreduce.simulation's prediction bit for bit,
      since both add in the same order (each rank regenerates every rank's input to simulate).
    `options` are passed to the implementation (e.g. {"segment_bytes": 64} for the ring).
    Every member of `group` must call this with the same arguments.
    """
    import torch
    import torch.distributed as dist

    impl_fn, options = IMPLEMENTATIONS[impl], dict(options or {})
    fn = lambda t, g: impl_fn(t, g, **options)  # noqa: E731
    rank, n, glob = _group_info(group)
    itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    out = {
        "impl": impl,
        "options": options,
        "world_size": n,
        "count": count,
        "dtype": dtype,
        "nbytes": count * itemsize,
    }
    # 1. integer-valued: bit-identical, and exact
    x = test_input(glob(rank), count, "integer", seed, dtype).to(device)
    ref = x.clone()
    sent = fn(x, group)
    dist.all_reduce(ref, group=group)
    exact = sum(test_input(glob(r), count, "integer", seed, dtype).double() for r in range(n)).to(getattr(torch, dtype))
    out["integer_bit_identical"] = bool(torch.equal(x.cpu(), ref.cpu()))
    out["integer_exact"] = bool(torch.equal(x.cpu(), exact))
    out["bytes_sent"] = int(sent)
    out["ring_bytes_sent"] = ring_bytes_sent(count, n, itemsize)[rank]
    # 2. random floats: within the summation-order tolerance
    x = test_input(glob(rank), count, "random", seed, dtype).to(device)
    ref, abs_sum = x.clone(), x.abs()
    fn(x, group)
    dist.all_reduce(ref, group=group)
    dist.all_reduce(abs_sum, group=group)
    out["random_within_tolerance"], out["random_max_abs_diff"] = within_summation_tolerance(x, ref, abs_sum, n, dtype)
    out["random_bit_identical"] = bool(torch.equal(x.cpu(), ref.cpu()))
    # 3. the ring against its simulation
    if impl in ("ring", "ring_simple") and simulate and dtype != "bfloat16":  # numpy has no bfloat16
        inputs = [test_input(glob(r), count, "random", seed, dtype).numpy() for r in range(n)]
        predicted = simulate_ring_allreduce(inputs).result[rank]
        out["matches_simulation"] = bool(np.array_equal(x.cpu().numpy(), predicted))
    return out


def check_worker(
    rank: int, world_size: int, impls, counts, group_sizes=None, seed: int = 0, dtypes=("float32",)
) -> list[dict]:
    """Launch target: compare every impl with the library for each count and dtype, on groups of the
    first k ranks.

    `impls` holds names or (name, options) pairs. group_sizes=None checks the whole world only.
    Returns this rank's reports (with the group size).
    """
    import torch.distributed as dist

    device = rank_info().device
    reports = []
    for k in group_sizes or [world_size]:
        if k > world_size:
            raise ValueError(f"group size {k} is larger than the world ({world_size} ranks)")
        group = None if k == world_size else dist.new_group(list(range(k)))  # every rank must call new_group
        if rank >= k:
            continue
        for spec in impls:
            impl, options = (spec, None) if isinstance(spec, str) else spec
            for count in counts:
                for dtype in dtypes:
                    reports.append(
                        {
                            "group_size": k,
                            **compare_with_library(
                                impl, count, group, seed=seed, dtype=dtype, device=device, options=options
                            ),
                        }
                    )
    return reports


# --------------------------------------------------------------------------- notebook 05's gloo check
class GlooChecks:
    """Every rank's `check_worker` reports, summarised per implementation and group size, and checked."""

    experiment = "ring_gloo"

    def __init__(self, per_rank, counts, group_sizes):
        import pandas as pd

        self.counts, self.group_sizes = list(counts), list(group_sizes)
        self.frame = pd.DataFrame([r for reports in per_rank for r in reports])

    def report(self):
        """One row per (implementation, group size): every size checked, all bit-identical / within tolerance?"""
        return self.frame.groupby(["impl", "group_size"]).agg(
            sizes=("count", "nunique"),
            integer_bit_identical=("integer_bit_identical", "all"),
            integer_exact=("integer_exact", "all"),
            random_within_tolerance=("random_within_tolerance", "all"),
            random_max_abs_diff=("random_max_abs_diff", "max"),
            random_bit_identical=("random_bit_identical", "all"),
        )

    def checks(self) -> dict:
        f = self.frame
        rings = f[f.impl.isin(["ring", "ring_simple"])]
        return {
            "gloo_bit_identical_on_integer_inputs": bool(f.integer_bit_identical.all() and f.integer_exact.all()),
            "gloo_random_floats_within_tolerance": bool(f.random_within_tolerance.all()),
            "gloo_ring_matches_simulation": bool(rings.matches_simulation.all()),
            "gloo_ring_bytes_match_schedule": bool((rings.bytes_sent == rings.ring_bytes_sent).all()),
        }

    def notes(self) -> dict:
        return {"backend": "gloo", "checked_group_sizes": self.group_sizes, "checked_counts": self.counts}
