"""`labkit compare`: several profiles side by side — plateau bandwidth and n½ of like-for-like series.

What is compared with what
- A *source* is a profile folder written by `labkit record` (profile.json + datasets), or one
  dataset: a shipped reference name (`labkit ref list`) or the path of a `<name>.csv`.
- Profiles alone are paired by dataset name (`labkit record` writes fixed names); as soon as one
  source is a single dataset, datasets are paired by kind.
- Inside a pair, rows are split into *series* by the kind's key columns (copy_sweep: direction,
  memory; allreduce_sweep: world_size, nodes, config; p2p_matrix: matrix, p2p) and matched point by
  point on the size (or the GPU pair) — only sizes every series measured are summarised.
- Numbers are compared only in the same value column (its unit is in its name) and with the same
  bandwidth direction. Anything else is refused with a `CompareError` naming both datasets; a
  series that only one source has is listed under "not compared", never dropped silently.

Summaries follow the design's rule: a sweep is summarised by its plateau (median of the largest
common sizes) and its half-bandwidth size n½ from the α-β fit, never by an average over all sizes.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np

from . import plots, reference
from .models import MIN_POINTS_FOR_FIT, fit_alpha_beta_from_bandwidth
from .reference import Dataset
from .units import GB, format_bytes

#: The plateau is the median over this many of the largest common sizes: one size alone is one
#: sample (noisy); reaching further down takes in the ramp, where α still lowers the bandwidth.
PLATEAU_SIZES = 3
#: At n = 4·n½ a link delivers 4/5 of β; a plateau read below that size understates the link.
PLATEAU_MIN_N_HALF = 4
#: A fit whose typical point misses by more than this does not describe the curve (notebook 01 uses
#: the same bound); n½ is still printed, with a note, since the reader may want it anyway.
FIT_MEDIAN_RESIDUAL_WARN = 0.15


class CompareError(ValueError):
    """Two sources hold numbers that cannot be compared; the message names both and the mismatch."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """How one dataset kind is compared."""

    match: tuple[str, ...]  # key columns: two series are compared only when all of these are equal
    split: tuple[str, ...]  # optional columns that split one dataset into several series (kept in labels)
    x: tuple[str, ...]  # what a point is matched on across series (a size, a GPU pair)
    values: tuple[str, ...]  # value columns in order of preference; units are in the names
    sweep: bool  # x is a message size: summarise by plateau and n½


RULES: dict[str, Rule] = {
    "copy_sweep": Rule(("direction", "memory"), ("run", "copy_engine"), ("nbytes",), ("bandwidth_GBps",), True),
    # busbw first: it is what nccl-tests compares across world sizes; time_us last (turned into algbw = S/t)
    "allreduce_sweep": Rule(
        ("world_size", "nodes", "config"),
        ("placement", "dtype"),
        ("nbytes",),
        ("busbw_GBps", "algbw_GBps", "time_us"),
        True,
    ),
    "p2p_matrix": Rule(("matrix", "p2p"), ("mode",), ("src", "dst"), ("bandwidth_GBps", "latency_us"), False),
    "latency_table": Rule(("op", "config"), ("nbytes",), ("world_size",), ("time_us",), False),
    # isolated values: same quantity in the same unit (a column here); a size, where given, tells rows apart
    "point": Rule(("quantity", "unit"), (), ("nbytes",), ("value",), False),
}

#: value column → (quantity, unit) for table headers and axis labels.
QUANTITIES = {
    "bandwidth_GBps": ("bandwidth", "GB/s"),
    "busbw_GBps": ("busbw", "GB/s"),
    "algbw_GBps": ("algbw", "GB/s"),
    "latency_us": ("latency", "µs"),
}


# --------------------------------------------------------------------------- sources
@dataclasses.dataclass(frozen=True)
class Source:
    """One side of the comparison: a profile folder or a single dataset."""

    name: str
    host: str
    date: str
    path: str
    datasets: tuple[Dataset, ...]
    is_profile: bool

    @property
    def label(self) -> str:
        """Legend and table text: profile name + host + date."""
        return f"{self.name} — {self.host}, {self.date}"


def _short(text: str, limit: int = 48) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_source(spec: str) -> Source:
    """A profile folder, a shipped profile's name, a dataset name (shipped data) or a dataset file's path."""
    p = reference.profile_path(spec) or Path(spec)
    if p.is_dir():
        if p.resolve() == reference.data_dir().resolve():
            raise CompareError(
                f"{spec} is labkit's shipped reference data: many systems, not one. Name the recorded "
                "systems to compare with, e.g. `labkit compare profiles/mynode NAME` "
                "(names: `labkit ref list --kind copy_sweep`)"
            )
        info = reference.check_profile(p)
        names = reference.list_datasets(p)
        if not names:
            raise CompareError(
                f"{spec}: not a profile folder (no <name>.meta.json datasets); "
                f"write one with `labkit record --out {spec}`"
            )
        datasets = tuple(reference.load(n, p) for n in names)
        env = info.get("environment") or datasets[0].meta.get("environment") or {}
        host = info.get("host") or env.get("host") or datasets[0].meta["system"]
        date = info.get("created") or env.get("date") or datasets[0].meta["date"]
        return Source(p.resolve().name, _short(host), str(date)[:10], str(spec), datasets, True)
    if not p.exists() and (os.sep in str(spec) or p.suffix == ".csv"):  # a path, not a dataset's name
        raise CompareError(f"{spec}: no such folder or file (a profile folder, a dataset's CSV, or a dataset name)")
    if p.is_file() and p.suffix != ".csv" and not p.name.endswith(".meta.json"):
        raise CompareError(f"{spec}: not a dataset file (NAME.csv next to NAME.meta.json) nor a profile folder")
    if not p.suffix and (p.parent / f"{p.name}.meta.json").exists():  # data/NAME without extension
        ds = reference.load(p.name, p.parent)
    else:
        ds = reference.load(spec)
    env = ds.meta.get("environment") or {}
    return Source(
        ds.name, _short(env.get("host") or ds.meta["system"]), str(ds.meta["date"])[:10], str(spec), (ds,), False
    )


# --------------------------------------------------------------------------- series
@dataclasses.dataclass(frozen=True)
class Series:
    """The rows of one dataset that share the kind's key columns, split columns and direction."""

    source: Source
    dataset: Dataset
    key: tuple  # values of Rule.match
    split: tuple[tuple[str, str], ...]  # (column, value) of the split columns that are filled
    direction: str  # bandwidth direction of these rows
    rows: object  # pandas.DataFrame

    @property
    def split_text(self) -> str:
        return ", ".join(f"{c}={v}" for c, v in self.split)

    @property
    def where(self) -> str:
        """The dataset and source, for error messages."""
        extra = f" [{self.split_text}]" if self.split else ""
        return f"dataset {self.dataset.name!r}{extra} of {self.source.path!r}"

    def filled(self, columns) -> list[str]:
        return [c for c in columns if c in self.rows.columns and self.rows[c].notna().any()]

    def points(self, column: str):
        """(x tuple → value) for the rows where `column` is filled."""
        rule = RULES[self.dataset.kind]
        f = self.rows[self.rows[column].notna()]
        return {
            tuple(_plain(v) for v in row[:-1]): float(row[-1])
            for row in f[list(rule.x) + [column]].itertuples(index=False, name=None)
        }


def _plain(v):
    """numpy scalars → Python numbers, so keys compare and print the same from every CSV."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return v.item() if hasattr(v, "item") else v


def series_of(source: Source, ds: Dataset) -> list[Series]:
    """Split a dataset into series; refuses a series that has two rows for the same point."""
    rule = RULES[ds.kind]
    f = ds.frame.copy()
    meta_direction = ds.meta["bandwidth_direction"]
    if "bandwidth_direction" in f.columns:  # per-row direction ("mixed" datasets), meta as the default
        f["_direction"] = f["bandwidth_direction"].fillna(meta_direction)
    else:
        f["_direction"] = meta_direction
    for c in rule.x:  # only `point` has an optional x column (nbytes); a row without one is a single point
        f[c] = f[c].astype(object).where(f[c].notna(), "") if c in f.columns else ""
    split = [c for c in rule.split if c in f.columns and f[c].notna().any()]
    for c in split:
        f[c] = f[c].fillna("").astype(str)
    out = []
    for key, g in f.groupby(list(rule.match) + split + ["_direction"], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        n = len(rule.match)
        s = Series(
            source,
            ds,
            tuple(_plain(k) for k in key[:n]),
            tuple((c, v) for c, v in zip(split, key[n:-1]) if v != ""),
            key[-1],
            g,
        )
        dup = g[g.duplicated(list(rule.x), keep=False)]
        if len(dup):
            first = ", ".join(f"{c}={_plain(dup.iloc[0][c])}" for c in rule.x)
            raise CompareError(
                f"{s.where}: several rows for {_key_text(rule, s.key)} at {first}; "
                "cannot tell which one to compare (add a column that tells them apart)"
            )
        out.append(s)
    return out


def _key_text(rule: Rule, key: tuple) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(rule.match, key))


# --------------------------------------------------------------------------- one comparison group
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
        return f"{self.kind}: {_key_text(self.rule, self.key)}"

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


def _bandwidths(series: Series, column: str, sizes) -> np.ndarray:
    """Bandwidth (GB/s) at the given sizes; a time column becomes algbw = S / t (nccl-tests)."""
    pts = series.points(column)
    v = np.array([pts[(n,)] for n in sizes], dtype=float)
    if column == "time_us":
        return np.asarray(sizes, dtype=float) / (v * 1e-6) / GB
    return v


def _sweep_summary(s: Series, column: str, sizes: list[int]) -> dict:
    bw = _bandwidths(s, column, sizes)
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
            f"cannot compare {_key_text(rule, key)} ({kind}): {a.where} has {a.filled(rule.values) or 'no values'} "
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
            f"cannot compare {_key_text(rule, key)} ({kind}, {column}): {a.where} and {b.where} have no "
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
                "group": _key_text(rule, key),
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


# --------------------------------------------------------------------------- the whole comparison
@dataclasses.dataclass(frozen=True)
class Comparison:
    sources: tuple[Source, ...]
    groups: tuple[Group, ...]
    not_compared: tuple[str, ...]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([r for g in self.groups for r in g.rows])

    def to_dict(self) -> dict:
        return {
            "sources": [
                {
                    "name": s.name,
                    "host": s.host,
                    "date": s.date,
                    "path": s.path,
                    "datasets": [d.name for d in s.datasets],
                    "profile": s.is_profile,
                }
                for s in self.sources
            ],
            "method": {
                "plateau": f"median of the {PLATEAU_SIZES} largest sizes every series measured",
                "n_half": "α·β of t = α + n/β fitted (labkit.models.fit_alpha_beta) on the common sizes",
                "vs_first_pct": "plateau (sweeps) or median (matrices, tables) relative to the first source",
            },
            "comparisons": [dict(r) for g in self.groups for r in g.rows],
            "not_compared": list(self.not_compared),
        }

    def table(self) -> str:
        """Plain text: the sources, then one block per group with one line per series."""
        import pandas as pd

        out = (
            ["sources:"]
            + [f"  {s.name} — {s.host}, {s.date}" + (f"  ({s.path})" if s.path != s.name else "") for s in self.sources]
            + [""]
        )
        for g in self.groups:
            q, unit = g.quantity
            head = f"{g.title} · {g.direction} · {g.value_column}"
            out.append(head + (f" · dataset {g.slot}" if g.slot != g.kind else ""))
            first = g.rows[0]
            if g.rule.sweep:
                n_top = min(PLATEAU_SIZES, len(g.common))
                out.append(
                    f"  compared at {first['common']}; plateau = median of the {n_top} largest "
                    f"({first['plateau_sizes']})"
                    if n_top > 1
                    else f"  compared at {first['common']}; plateau = the value there"
                )
                cols = {
                    "source": "source",
                    "dataset": "dataset",
                    "series": "series",
                    "plateau": f"plateau {q} ({unit})",
                    "n_half": "n½",
                    "vs_first_pct": "vs first",
                }
            else:
                out.append(f"  compared at {first['common']}")
                cols = {
                    "source": "source",
                    "dataset": "dataset",
                    "series": "series",
                    "median": f"median {q} ({unit})",
                    "min": "min",
                    "max": "max",
                    "vs_first_pct": "vs first",
                }
            f = pd.DataFrame([{k: r.get(k) for k in cols} for r in g.rows])
            if not f["series"].astype(bool).any():
                f = f.drop(columns="series")
            if (f["dataset"] == f["source"]).all():
                f = f.drop(columns="dataset")
            for c in ("plateau", "median", "min", "max"):
                if c in f:
                    f[c] = f[c].map(lambda v: f"{v:.4g}")
            f["vs_first_pct"] = f["vs_first_pct"].map(lambda v: "—" if v is None or pd.isna(v) else f"{v:+.1f}%")
            if "n_half" in f:
                f["n_half"] = f["n_half"].fillna("—")
            out += ["  " + line for line in f.rename(columns=cols).to_string(index=False).splitlines()]
            notes = [n for r in g.rows for n in r["notes"]]
            for n in dict.fromkeys(notes):
                who = [r["source"] for r in g.rows if n in r["notes"]]
                out.append(f"  note: {n}" + ("" if len(who) == len(g.rows) else f" ({', '.join(who)})"))
            out.append("")
        if self.not_compared:
            out.append("not compared:")
            out += [f"  - {n}" for n in self.not_compared]
        return "\n".join(out).rstrip() + "\n"

    def figures(self) -> dict:
        """kind → matplotlib Figure: one panel per group, one line per source."""
        return {
            kind: plot_kind([g for g in self.groups if g.kind == kind])
            for kind in dict.fromkeys(g.kind for g in self.groups)
        }


def compare(specs, kinds=None) -> Comparison:
    """Compare profiles / datasets (see the module docstring); raises CompareError on unlike numbers."""
    sources = _with_unique_labels([load_source(s) for s in specs])
    if len(sources) < 2:
        raise CompareError(
            "give at least two profiles or datasets to compare (e.g. two `labkit record` folders, "
            "or a profile and a reference name from `labkit ref list`)"
        )
    by_name = all(s.is_profile for s in sources)
    slots: dict[str, list[tuple[Source, Dataset]]] = {}
    for s in sources:
        for ds in s.datasets:
            if kinds and ds.kind not in kinds:
                continue
            slots.setdefault(ds.name if by_name else ds.kind, []).append((s, ds))
    groups, skipped = [], []
    for slot, members in slots.items():
        holders = list(dict.fromkeys(s.label for s, _ in members))
        if len(holders) < 2:
            what = f"dataset {slot!r}" if by_name else f"kind {slot!r}"
            skipped.append(f"{what}: only in {', '.join(holders)}")
            continue
        kinds_here = {ds.kind for _, ds in members}
        if len(kinds_here) > 1:
            (sa, a), (sb, b) = members[0], next(m for m in members if m[1].kind != members[0][1].kind)
            raise CompareError(
                f"cannot compare dataset {a.name!r} of {sa.path!r} (kind {a.kind!r}) with "
                f"{b.name!r} of {sb.path!r} (kind {b.kind!r}): different kinds"
            )
        kind = kinds_here.pop()
        if kind not in RULES:
            skipped.append(f"{slot}: kind {kind!r} has no comparison rule (compare handles {', '.join(RULES)})")
            continue
        groups += _compare_slot(kind, slot, [x for s, ds in members for x in series_of(s, ds)], skipped)
    if not groups:
        have = "".join(f"\n  - {s.label}: {', '.join(sorted({d.kind for d in s.datasets}))}" for s in sources)
        raise CompareError(
            "nothing to compare: no series is held by two sources with the same key columns"
            + "".join(f"\n  - {n}" for n in skipped)
            + f"\nkinds per source:{have}"
        )
    return Comparison(tuple(sources), tuple(groups), tuple(skipped))


def _compare_slot(kind: str, slot: str, series: list[Series], skipped: list[str]) -> list[Group]:
    rule = RULES[kind]
    by_key: dict[tuple, list[Series]] = {}
    for s in series:
        by_key.setdefault(s.key, []).append(s)
    groups = []
    for key, ss in by_key.items():
        labels = list(dict.fromkeys(s.source.label for s in ss))
        if len(labels) < 2:
            skipped.append(f"{kind} {_key_text(rule, key)} ({ss[0].dataset.name}): only in {labels[0]}")
            continue
        # never uni vs bi: two sources whose rows for this key share no bandwidth direction are refused;
        # where they share some, each shared direction is compared and the others are listed
        dirs = {lab: sorted({s.direction for s in ss if s.source.label == lab}) for lab in labels}
        for i, la in enumerate(labels):
            for lb in labels[i + 1 :]:
                if not set(dirs[la]) & set(dirs[lb]):
                    a = next(s for s in ss if s.source.label == la)
                    b = next(s for s in ss if s.source.label == lb)
                    raise CompareError(
                        f"cannot compare {_key_text(rule, key)} ({kind}): {a.where} is {' + '.join(dirs[la])} "
                        f"but {b.where} is {' + '.join(dirs[lb])} — bandwidths of different directions "
                        "(unidirectional; bidirectional = both directions summed; aggregate = several links "
                        "summed) are not the same quantity"
                    )
        for direction in dict.fromkeys(d for lab in labels for d in dirs[lab]):
            sub = [s for s in ss if s.direction == direction]
            holders = list(dict.fromkeys(s.source.label for s in sub))
            if len(holders) < 2:
                skipped.append(
                    f"{kind} {_key_text(rule, key)} ({direction}, {sub[0].dataset.name}): only in {holders[0]}"
                )
                continue
            groups.append(compare_group(kind, slot, key, direction, sub))
    return groups


def _with_unique_labels(sources: list[Source]) -> list[Source]:
    out, seen = [], set()
    for i, s in enumerate(sources):
        if s.label in seen:
            s = dataclasses.replace(s, name=s.path)
        if s.label in seen:
            s = dataclasses.replace(s, name=f"{s.path} (#{i + 1})")
        seen.add(s.label)
        out.append(s)
    return out


# --------------------------------------------------------------------------- figures
def plot_kind(groups: list[Group]):
    """One figure for one kind: a panel per group, each source a line, the source in the legend."""
    ncols = 1 if len(groups) == 1 else 2
    nrows = math.ceil(len(groups) / ncols)
    fig, axes = plots.figure(nrows, ncols, width=7.0, height=5.4)
    axes = [axes] if len(groups) == 1 else list(axes)
    for ax, g in zip(axes, groups):
        _plot_group(ax, g)
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _legend_labels(g: Group) -> list[str]:
    labels = [s.source.label for s in g.series]
    return [
        lab if labels.count(lab) == 1 else f"{lab} · {s.dataset.name}{' [' + s.split_text + ']' if s.split else ''}"
        for lab, s in zip(labels, g.series)
    ]


def _plot_group(ax, g: Group) -> None:
    q, unit = g.quantity
    direction = "" if g.direction == "none" else f", {g.direction}"
    for s, label in zip(g.series, _legend_labels(g)):
        how = plots.MEASURED if s.dataset.meta["provenance"] == "measured" else plots.RECORDED
        pts = s.points(g.value_column)
        if g.rule.sweep:  # the whole curve; the common sizes that make the plateau are shaded
            sizes = sorted(x[0] for x in pts)
            plots.line(ax, sizes, _bandwidths(s, g.value_column, sizes), label, how)
        else:
            plots.line(ax, range(len(g.shown)), [pts[c] for c in g.shown], label, how)
    if g.rule.sweep:
        top = [x[0] for x in g.common[-PLATEAU_SIZES:]]
        ax.axvspan(top[0] / 1.2, top[-1] * 1.2, color="0.88", zorder=0, label="plateau: largest common sizes")
        ax.set_yscale("log")
        plots.size_axis(ax)
        xlabel = "message size (bytes, log2)"
    else:
        ax.set_xticks(range(len(g.shown)))
        ax.set_xticklabels([_tick(g.kind, c) for c in g.shown], rotation=90, fontsize=6 if len(g.shown) > 16 else 8)
        ax.set_ylim(bottom=0)
        xlabel = {"p2p_matrix": "GPU pair (src → dst index)", "point": "message size (bytes, where given)"}.get(
            g.kind, f"{', '.join(g.rule.x)} (ranks)"
        )
    plots.finish(ax, f"{g.title}\n{q} ({g.value_column}){direction}", xlabel, f"{q} ({unit}{direction})", legend=False)
    # under the panel, so that long source names never cover the data
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)


def _tick(kind: str, x: tuple) -> str:
    if kind == "point":
        return format_bytes(x[0]) if x[0] != "" else "—"
    return "→".join(str(v) for v in x)


def save_figures(result: Comparison, path) -> list[Path]:
    """Write one PNG per kind: `path` itself for one kind, else `<stem>_<kind><suffix>` next to it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    figs = result.figures()
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, fig in figs.items():
        out = path if len(figs) == 1 else path.with_name(f"{path.stem}_{kind}{path.suffix or '.png'}")
        fig.savefig(out, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(out)
    return written
