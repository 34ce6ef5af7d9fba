"""What is wrong with an nccl-tests run, and what its numbers fix: a sweep cut short, repeated sizes, the rank count.

nccl-tests prints one row per size of the loop `for (size = minBytes; size <= maxBytes; size = size*stepFactor or
size+stepBytes)` (src/common.cu of NVIDIA/nccl-tests, commit a0b82b2, line 936), states minBytes, maxBytes and the step
in its `# nThread ...` line (src/util.cu line 625; `# Reducing maxBytes to N due to memory limitation` when it lowers
maxBytes, common.cu line 1545), and closes every run with `# Out of bounds values : N OK` and `# Avg bus bandwidth : X`
(util.cu lines 777-778). A run whose last row is a whole step short of the loop's last size, or without those closing
lines, did not finish (or was cut when pasted).

busbw = algbw × the collective's bus factor of the communicator's rank count, whatever the algorithm (nccl-tests
src/all_reduce.cu lines 59-65 `AllReduceGetBw`; labkit.collectives.bus_factor, nccl-tests doc/PERFORMANCE.md): for
all_reduce 2(n−1)/n, for all_gather/reduce_scatter/alltoall (n−1)/n, so busbw/algbw fixes the rank count n; for
broadcast/reduce/sendrecv the factor is 1 and fixes nothing. Printed numbers are rounded (2 decimals), so each row gives
an interval of ratios; the rank counts whose factor lies in every row's interval are the candidates: one is "derived",
several "ambiguous". This package may not import labkit.collectives (it is core-only), so the caller passes the factor.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal, InvalidOperation
from typing import Callable

from labkit.units import format_bytes

#: Largest rank count tried when deriving it from busbw/algbw (nccl-tests runs reach a few thousand ranks; beyond
#: that, 2-decimal numbers cannot tell n from n+1 anyway and the answer is "ambiguous").
MAX_RANKS = 65536
#: Most sizes the stated sweep may hold for the completeness check to walk it (a step of 1 byte up to GiB would not).
MAX_SWEEP_STEPS = 100_000


# --------------------------------------------------------------------------- a run cut short
def _int(v) -> int | None:
    try:
        return int(str(v).replace("_", ""))
    except (TypeError, ValueError):
        return None


def stated_sweep(params: dict) -> tuple[int, int, int, str] | None:
    """(minBytes, maxBytes, step, 'factor' or 'bytes') as the `# nThread` line states them; None if it does not."""
    lo, hi, step = _int(params.get("minBytes")), _int(params.get("maxBytes")), str(params.get("step", ""))
    if lo is None or hi is None or "(" not in step:
        return None
    value, how = step.split("(", 1)
    value, how = _int(value), how.rstrip(")")
    if value is None or how not in ("factor", "bytes") or (how == "factor" and value < 2) or value < 1:
        return None
    return lo, hi, value, how


def last_loop_size(lo: int, hi: int, step: int, how: str) -> int | None:
    """The last size nccl-tests' loop runs for this sweep (the largest of lo, lo·f, lo·f², ... or lo, lo+i, ... ≤ hi)."""
    if how == "bytes" and (hi - lo) // step > MAX_SWEEP_STEPS:
        return None
    size, last = lo, None
    while size <= hi:
        last = size
        size = size * step if how == "factor" else size + step
        if size == 0:  # minBytes 0 with a factor never grows
            break
    return last


def completeness(meta: dict, sizes) -> dict:
    """{'status': 'complete' | 'incomplete', 'missing': [what is missing, in words], 'last_size_bytes', ...}."""
    sizes = [int(s) for s in sizes]
    printed_last = max(sizes) if sizes else 0
    missing = []
    sweep = stated_sweep(meta.get("parameters") or {})
    out = {"last_size_bytes": printed_last, "stated_max_bytes": sweep[1] if sweep else None}
    if sweep:
        lo, hi, step, how = sweep
        last = last_loop_size(lo, hi, step, how)
        out["expected_last_size_bytes"] = last
        # nccl-tests prints the size it could split evenly (rounded down), never more than the loop's size; a run that
        # stopped early ends at least one whole step below the loop's last size.
        nxt = printed_last * step if how == "factor" else printed_last + step
        if printed_last > hi:
            out["above_stated_max"] = (
                f"rows up to {format_bytes(printed_last)}, above the maxBytes {format_bytes(hi)} the log states: "
                "the header and the table may come from different runs"
            )
        if last is not None and printed_last < last and nxt <= last:
            missing.append(
                f"the sizes above {format_bytes(printed_last)}: the log states maxBytes {format_bytes(hi)} "
                f"(the sweep's last size is {format_bytes(last)})"
            )
    else:
        out["expected_last_size_bytes"] = None
    if meta.get("out_of_bounds_printed") is None:
        missing.append("the closing '# Out of bounds values' line")
    if meta.get("avg_busbw_printed") is None:
        missing.append("the closing '# Avg bus bandwidth' line")
    out["status"] = "incomplete" if missing else "complete"
    out["missing"] = missing
    if not sweep:
        out["note"] = (
            "the log does not state minBytes/maxBytes (no '# nThread' line): the sweep's end cannot be checked"
        )
    return out


# --------------------------------------------------------------------------- sizes printed more than once
def repeated_sizes(meta: dict, frame) -> dict:
    """Sizes above 0 printed more than once in one run (per placement), which nccl-tests never does with a factor step.

    Sizes of 0 repeat legitimately (a size too small to split over the ranks is printed as 0), and with a byte step
    smaller than that rounding two rows can print the same size: there only rows equal in every column count.
    """
    sweep = stated_sweep(meta.get("parameters") or {})
    whole_rows = bool(sweep and sweep[3] == "bytes")
    sizes = [int(s) for s in frame["nbytes"]]
    if whole_rows:
        keys = [tuple(map(str, row)) for row in frame.itertuples(index=False)]
    else:
        keys = list(zip(sizes, map(str, frame["placement"])))
    counts: dict = {}
    for size, key in zip(sizes, keys):
        if size > 0:
            counts[key] = counts.get(key, 0) + 1
    per_size: dict[int, int] = {}  # a printed line holds the out-of-place and in-place rows: the most of either
    for key, c in counts.items():
        size = int(key[0]) if not whole_rows else int(key[list(frame.columns).index("nbytes")])
        per_size[size] = max(per_size.get(size, 0), c)
    rep = {s: c for s, c in per_size.items() if c > 1}
    return {
        "sizes": len(rep),
        "extra_rows": sum(c - 1 for c in rep.values()),  # printed lines beyond the first of each size
        "most_repeats": max(rep.values(), default=0),
        "examples": sorted(rep)[:3],
    }


# --------------------------------------------------------------------------- what busbw/algbw fixes
@dataclasses.dataclass(frozen=True)
class RankCount:
    """The rank count busbw/algbw gives for one collective. status: 'derived' (one n fits every row), 'ambiguous'
    (several do), 'not fixed' (the factor is the same at every n), 'inconsistent' (no n fits every row: another
    collective, or rows of different runs), 'no data' (no row with a bandwidth above 0), 'unknown factor'."""

    op: str
    status: str
    world_size: int | None = None
    candidates: tuple[int, ...] = ()
    ratio: float | None = None  # median busbw/algbw of the rows used
    closest: int | None = None  # the n whose factor is nearest that ratio
    rows: int = 0

    def describe(self) -> str:
        r = f"busbw/algbw = {self.ratio:.4g}" if self.ratio is not None else "busbw/algbw"
        if self.status == "derived":
            return f"{r} on {self.rows} rows fixes {self.world_size} ranks for {self.op}"
        if self.status == "ambiguous":
            c = self.candidates
            span = f"{c[0]} to {c[-1]}" if len(c) > 3 else ", ".join(map(str, c))
            return f"{r} fits {len(c)} rank counts for {self.op} ({span}) within the printed rounding: ambiguous"
        if self.status == "not fixed":
            return f"busbw = algbw for {self.op} at every rank count: the numbers do not fix it"
        if self.status == "inconsistent":
            near = f" (nearest: {self.closest} ranks)" if self.closest else ""
            return f"{r} fits no rank count of {self.op} on every row{near}: not an {self.op} table, or mixed runs"
        if self.status == "no data":
            return "no row has an algbw above 0: the numbers fix nothing"
        return f"labkit has no bus factor for {self.op}"


def _half_unit(text: str) -> float:
    """Half a unit in the last printed place: '46.80' → 0.005, '2e-07' → 5e-08, '12' → 0.5."""
    try:
        exp = Decimal(str(text).strip()).as_tuple().exponent
    except InvalidOperation:
        return float("nan")
    if not isinstance(exp, int):  # 'nan', 'inf' (a cell the source left empty reads NaN): no printed place
        return float("nan")
    return 0.5 * 10.0**exp


def rank_count(op: str, frame, bus_factor: Callable[[str, int], float], max_ranks: int = MAX_RANKS) -> RankCount:
    """The rank count the printed algbw/busbw columns of `frame` fix for `op` (see the module docstring)."""
    try:
        factors = [bus_factor(op, n) for n in (2, 3)]
    except ValueError:
        return RankCount(op, "unknown factor")
    if factors[0] == factors[1]:
        return RankCount(op, "not fixed")
    lo, hi, ratios = 0.0, float("inf"), []
    for a_txt, b_txt in zip(frame["algbw_GBps"], frame["busbw_GBps"]):
        try:
            a, b = float(a_txt), float(b_txt)
        except (TypeError, ValueError):
            continue
        ha, hb = _half_unit(a_txt), _half_unit(b_txt)
        if not (a - ha > 0) or b < 0 or ha != ha or hb != hb:
            continue  # '0.00' (or '0.01' ± 0.005 ≈ anything) says nothing about the ratio
        lo, hi = max(lo, (b - hb) / (a + ha)), min(hi, (b + hb) / (a - ha))
        ratios.append(b / a)
    if not ratios:
        return RankCount(op, "no data")
    ratios.sort()
    ratio = ratios[len(ratios) // 2]
    eps = 1e-12

    def first_n(pred) -> int:
        """The smallest n in 1..max_ranks with pred(bus_factor(op, n)) (max_ranks + 1 if none): the factor grows
        with n, so a bisection needs about 16 calls instead of one per rank count."""
        a, b = 1, max_ranks + 1
        while a < b:
            mid = (a + b) // 2
            a, b = (a, mid) if pred(bus_factor(op, mid)) else (mid + 1, b)
        return a

    low, high = first_n(lambda f: f >= lo - eps), first_n(lambda f: f > hi + eps)
    fits = list(range(low, high))
    above = first_n(lambda f: f >= ratio)
    closest = min((n for n in (above - 1, above) if 1 <= n <= max_ranks), key=lambda n: abs(bus_factor(op, n) - ratio))
    if not fits:
        return RankCount(op, "inconsistent", ratio=ratio, closest=closest, rows=len(ratios))
    status = "derived" if len(fits) == 1 else "ambiguous"
    world_size = fits[0] if len(fits) == 1 else None
    return RankCount(op, status, world_size, tuple(fits), ratio=ratio, closest=closest, rows=len(ratios))
