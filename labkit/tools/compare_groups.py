"""One comparison group of `labkit compare`: like series of several sources, summarised on the points all measured.

A sweep is summarised by its plateau and its n½ from the α-β fit; a matrix or table by its median, min and max.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..models import MIN_POINTS_FOR_FIT, fit_alpha_beta_from_bandwidth
from ..units import GB, format_bytes
from .compare_inputs import QUANTITIES, RULES, CompareError, Rule, Series, key_text

#: The plateau is the median over this many of the largest common sizes: one size alone is one
#: sample (noisy); reaching further down takes in the ramp, where α still lowers the bandwidth.
PLATEAU_SIZES = 3
#: At n = 4·n½ a link delivers 4/5 of β; a plateau read below that size understates the link.
PLATEAU_MIN_N_HALF = 4
#: A fit whose typical point misses by more than this does not describe the curve (notebook 01 uses
#: the same bound); n½ is still printed, with a note, since the reader may want it anyway.
FIT_MEDIAN_RESIDUAL_WARN = 0.15


@dataclasses.dataclass(frozen=True)
class Group:
    """Series of several sources with equal key columns and direction, summarised on common points."""

    kind: str
    slot: str  # the dataset name (profiles) or the kind that paired them
    key: tuple
    direction: str
    value_column: str
    common: tuple  # the x tuples every series has, sorted
    series: tuple[Series, ...]
    rows: tuple[dict, ...]  # one summary per series, in source order

    @property
    def rule(self) -> Rule:
        return RULES[self.kind]

    @property
    def title(self) -> str:
        return f"{self.kind}: {key_text(self.rule, self.key)}"

    @property
    def shown(self) -> tuple:
        """The points summarised and drawn for matrices: off-diagonal pairs where there are any."""
        if self.kind != "p2p_matrix":
            return self.common
        off = tuple(c for c in self.common if c[0] != c[1])
        return off or self.common

    @property
    def quantity(self) -> tuple[str, str]:
        if self.kind == "point":
            return "value", str(self.key[1])
        if self.value_column == "time_us":
            return ("algbw = S / time", "GB/s") if self.rule.sweep else ("time", "µs")
        return QUANTITIES.get(self.value_column, (self.value_column, "?"))


def bandwidths(series: Series, column: str, sizes) -> np.ndarray:
    """Bandwidth (GB/s) at the given sizes; a time column becomes algbw = S / t (nccl-tests)."""
    pts = series.points(column)
    v = np.array([pts[(n,)] for n in sizes], dtype=float)
    if column == "time_us":
        return np.asarray(sizes, dtype=float) / (v * 1e-6) / GB
    return v


def _sweep_summary(s: Series, column: str, sizes: list[int]) -> dict:
    bw = bandwidths(s, column, sizes)
    top = sizes[-PLATEAU_SIZES:]
    plateau = float(np.median(bw[-PLATEAU_SIZES:]))
    notes, n_half = [], None
    if len(sizes) >= MIN_POINTS_FOR_FIT:
        try:
            fit = fit_alpha_beta_from_bandwidth(sizes, bw)
        except ValueError as e:
            notes.append(f"no α-β fit: {e}")
        else:
            n_half = fit.n_half_bytes
            miss = float(np.median(np.abs(fit.residuals)))
            if miss > FIT_MEDIAN_RESIDUAL_WARN:
                notes.append(f"the α-β law fits poorly (median residual {100 * miss:.0f}%): n½ is a rough guide only")
    else:
        notes.append(
            f"{len(sizes)} common size{'s' if len(sizes) != 1 else ''}: too few for an α-β fit "
            f"(needs {MIN_POINTS_FOR_FIT})"
        )
    if n_half is not None and sizes[-1] < PLATEAU_MIN_N_HALF * n_half:
        notes.append(
            f"largest common size {format_bytes(sizes[-1])} is below {PLATEAU_MIN_N_HALF}·n½: "
            "not yet on the plateau, the plateau value understates the link"
        )
    where = format_bytes(top[0]) if len(top) == 1 else f"{format_bytes(top[0])} – {format_bytes(top[-1])}"
    return {
        "plateau": plateau,
        "plateau_sizes": where,
        "n_half_bytes": n_half,
        "n_half": format_bytes(n_half) if n_half is not None else None,
        "notes": notes,
    }


def _table_summary(s: Series, column: str, cells: list[tuple]) -> dict:
    pts = s.points(column)
    v = np.array([pts[c] for c in cells], dtype=float)
    return {
        "median": float(np.median(v)),
        "min": float(v.min()),
        "max": float(v.max()),
        "cells": len(cells),
        "notes": [],
    }


def _describe_x(rule: Rule, xs) -> str:
    xs = sorted(xs)
    if rule.sweep:
        if len(xs) == 1:
            return f"1 size, {format_bytes(xs[0][0])}"
        return f"{len(xs)} sizes, {format_bytes(xs[0][0])} – {format_bytes(xs[-1][0])}"
    if rule is RULES["point"]:
        return f"{len(xs)} point{'s' if len(xs) != 1 else ''}"
    return f"{len(xs)} {'/'.join(rule.x)} cell{'s' if len(xs) != 1 else ''}"


def _first_pair_without(series, test):
    """The first two series (of different sources) for which test(a, b) is true, for error messages."""
    for i, a in enumerate(series):
        for b in series[i + 1 :]:
            if test(a, b):
                return a, b
    return series[0], series[1]


def compare_group(kind: str, slot: str, key: tuple, direction: str, series: list[Series]) -> Group:
    """Summarise series that passed the key and direction checks; refuse unlike columns or points."""
    rule = RULES[kind]
    columns = [c for c in rule.values if all(c in s.filled(rule.values) for s in series)]
    if not columns:
        a, b = _first_pair_without(series, lambda a, b: not set(a.filled(rule.values)) & set(b.filled(rule.values)))
        raise CompareError(
            f"cannot compare {key_text(rule, key)} ({kind}): {a.where} has {a.filled(rule.values) or 'no values'} "
            f"but {b.where} has {b.filled(rule.values) or 'no values'} — no value column with the same unit in both"
        )
    column = columns[0]
    xsets = [set(s.points(column)) for s in series]
    common = set.intersection(*xsets)
    if not common:
        i, j = next(
            ((i, j) for i in range(len(series)) for j in range(i + 1, len(series)) if not xsets[i] & xsets[j]), (0, 1)
        )
        a, b = series[i], series[j]
        what = "message size" if rule.sweep else "/".join(rule.x)
        raise CompareError(
            f"cannot compare {key_text(rule, key)} ({kind}, {column}): {a.where} and {b.where} have no "
            f"{what} in common ({_describe_x(rule, xsets[i])} vs {_describe_x(rule, xsets[j])}); "
            "labkit compares numbers only at points both measured"
        )
    common = tuple(sorted(common))
    shown = Group(kind, slot, key, direction, column, common, (), ()).shown
    rows = []
    for s in series:
        if rule.sweep:
            summary = _sweep_summary(s, column, [x[0] for x in common])
        else:
            summary = _table_summary(s, column, list(shown))
        rows.append(
            {
                "kind": kind,
                "slot": slot,
                "group": key_text(rule, key),
                "bandwidth_direction": direction,
                "value_column": column,
                "source": s.source.name,
                "host": s.source.host,
                "date": s.source.date,
                "path": s.source.path,
                "dataset": s.dataset.name,
                "series": s.split_text,
                "provenance": s.dataset.meta["provenance"],
                "common": _describe_x(rule, shown),
                **summary,
            }
        )
        if kind == "p2p_matrix" and shown != common:
            rows[-1]["notes"].append("off-diagonal pairs only (the diagonal is a GPU's own memory)")
    ref_key = "plateau" if rule.sweep else "median"
    first = rows[0][ref_key]
    for r in rows:
        r["vs_first_pct"] = None if r is rows[0] or not first else 100.0 * (r[ref_key] / first - 1.0)
    return Group(kind, slot, key, direction, column, tuple(common), tuple(series), tuple(rows))
