"""What `labkit compare` compares: sources (profiles or datasets), each kind's rule, and the series a dataset splits into."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from .. import reference
from ..schema import Dataset


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
                + (
                    f"write one with `labkit record --out {spec}`"
                    if not any(p.iterdir())
                    else "name a folder that `labkit record --out` wrote"
                )
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
                f"{s.where}: several rows for {key_text(rule, s.key)} at {first}; "
                "cannot tell which one to compare (add a column that tells them apart)"
            )
        out.append(s)
    return out


def key_text(rule: Rule, key: tuple) -> str:
    return ", ".join(f"{c}={v}" for c, v in zip(rule.match, key))
