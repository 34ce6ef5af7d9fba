"""The dataset format (data/README.md): kinds and their columns, the meta fields, `Dataset`, and the checks every
dataset passes when it is loaded, imported or written (labkit.reference reads and writes the files)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import logs as _logs

#: 2: kind collective_sweep (nccl-tests sweeps of every collective, with an `op` column) and an
#: optional `op` column on allreduce_sweep (only 'all_reduce'). Files of version 1 load unchanged.
SCHEMA_VERSION = 2

META_FIELDS = (
    "schema_version",
    "name",
    "kind",
    "title",
    "system",
    "gpu",
    "gpu_count",
    "nodes",
    "interconnect",
    "software",
    "date",
    "method",
    "source",
    "source_file",
    "caveats",
    "quality",
    "bandwidth_direction",
    "provenance",
)
#: What an imported log's meta says where the log itself is silent (never a guessed value).
NOT_STATED = "not stated in the log"
QUALITIES = ("A", "B", "C")
PROVENANCES = ("recorded", "measured")
BANDWIDTH_DIRECTIONS = ("unidirectional", "bidirectional", "aggregate", "mixed", "none")

#: Collectives nccl-tests measures (its `<op>_perf` binaries), as labkit.logs names them; labkit.collectives.OPS
#: (those labkit times itself) is a subset.
COLLECTIVE_OPS = _logs.nccl_tests.OPS
_SWEEP_NUMERIC = ("nbytes", "world_size", "nodes", "count", "time_us", "algbw_GBps", "busbw_GBps")

# kind -> (required columns, numeric columns, allowed values for categorical columns)
KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "copy_sweep": (
        ("direction", "memory", "nbytes", "bandwidth_GBps"),
        ("nbytes", "bandwidth_GBps", "time_s"),
        {"direction": ("h2d", "d2h", "d2d", "host"), "memory": ("pinned", "pageable", "device", "host")},
    ),
    "p2p_matrix": (
        ("matrix", "p2p", "src", "dst"),
        ("src", "dst", "bandwidth_GBps", "latency_us"),
        {"matrix": ("bandwidth_uni", "bandwidth_bi", "latency_gpu", "latency_cpu"), "p2p": ("enabled", "disabled")},
    ),
    "allreduce_sweep": (("nbytes", "world_size", "nodes", "config"), _SWEEP_NUMERIC, {"op": ("all_reduce",)}),
    "collective_sweep": (("op", "nbytes", "world_size", "nodes", "config"), _SWEEP_NUMERIC, {"op": COLLECTIVE_OPS}),
    "latency_table": (("op", "world_size", "config", "time_us"), ("world_size", "nbytes", "time_us"), {}),
    "point": (("quantity", "value", "unit", "bandwidth_direction"), ("value",), {}),
    "overlap_run": (("scenario", "event", "stream", "start_s", "end_s"), ("start_s", "end_s"), {}),
}


class DatasetError(ValueError):
    """A dataset or profile that cannot be loaded; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    frame: "object"  # pandas.DataFrame
    meta: dict
    path: Path  # the CSV file

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    @property
    def label(self) -> str:
        """Legend text: what the numbers are and where they come from."""
        how = "measured here" if self.meta.get("provenance") == "measured" else "recorded"
        return f"{how}: {self.meta['title']} — {short_source(self.meta['source'])}"

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, kind={self.kind!r}, rows={len(self.frame)}, quality={self.meta.get('quality')!r})"
        )


def short_source(source: str) -> str:
    """A compact form of a source URL for legends (github.com/owner/repo...)."""
    s = source.replace("https://", "").replace("http://", "")
    parts = s.split("/")
    if parts and parts[0] == "github.com" and len(parts) >= 3:
        return "/".join(parts[:3])
    return s if len(s) <= 60 else s[:57] + "..."


def validate_meta(meta: dict, where: Path) -> None:
    if not isinstance(meta, dict):
        raise DatasetError(f"{where}: metadata must be a JSON object")
    version = meta.get("schema_version")
    if not isinstance(version, int):
        raise DatasetError(f"{where}: field 'schema_version' is missing or not an integer")
    if version > SCHEMA_VERSION:
        raise DatasetError(
            f"{where}: field 'schema_version' is {version}, written by a newer labkit "
            f"(this one reads up to {SCHEMA_VERSION}); upgrade labkit to read it"
        )
    for field in META_FIELDS:
        if field not in meta or meta[field] in (None, ""):
            raise DatasetError(f"{where}: required field {field!r} is missing or empty")
    if meta["kind"] not in KINDS:
        raise DatasetError(f"{where}: field 'kind' is {meta['kind']!r}; expected one of {sorted(KINDS)}")
    if meta["quality"] not in QUALITIES:
        raise DatasetError(f"{where}: field 'quality' is {meta['quality']!r}; expected one of {QUALITIES}")
    if meta["provenance"] not in PROVENANCES:
        raise DatasetError(f"{where}: field 'provenance' is {meta['provenance']!r}; expected one of {PROVENANCES}")
    if meta["bandwidth_direction"] not in BANDWIDTH_DIRECTIONS:
        raise DatasetError(
            f"{where}: field 'bandwidth_direction' is {meta['bandwidth_direction']!r}; "
            f"expected one of {BANDWIDTH_DIRECTIONS}"
        )


#: Sweep columns an imported log may leave empty, each with the meta field that must then read NOT_STATED.
_MAY_BE_UNSTATED = {"world_size": "gpu_count", "nodes": "nodes"}


def validate_frame(frame, meta: dict, where: Path) -> "object":
    import pandas as pd

    required, numeric, allowed = KINDS[meta["kind"]]
    if len(frame) == 0:
        raise DatasetError(f"{where}: no rows")
    for col in required:
        if col not in frame.columns:
            raise DatasetError(f"{where}: required column {col!r} is missing (kind {meta['kind']!r})")
        if frame[col].isna().all() and meta.get(_MAY_BE_UNSTATED.get(col, "")) == NOT_STATED:
            continue  # a log that does not state its rank or node count (the meta says so): empty, never guessed
        if frame[col].isna().any():
            row = int(frame[col].isna().to_numpy().nonzero()[0][0]) + 2  # +1 header, +1 one-based
            raise DatasetError(f"{where}: column {col!r} is empty on line {row}")
    for col in numeric:
        if col in frame.columns:
            try:
                frame[col] = pd.to_numeric(frame[col], errors="raise")
            except (ValueError, TypeError) as e:
                raise DatasetError(f"{where}: column {col!r} holds a value that is not a number ({e})") from None
    for col, values in allowed.items():
        if col not in frame.columns:  # an optional categorical column (allreduce_sweep's op)
            continue
        bad = set(frame[col].dropna().unique()) - set(values)
        if bad:
            raise DatasetError(f"{where}: column {col!r} has {sorted(bad)}; expected one of {values}")
    for col in ("nbytes", "bandwidth_GBps", "time_s", "time_us", "algbw_GBps", "busbw_GBps", "latency_us"):
        if col in frame.columns and (frame[col].dropna() < 0).any():
            raise DatasetError(f"{where}: column {col!r} has a negative value")
    if meta["bandwidth_direction"] == "mixed" and "bandwidth_direction" not in frame.columns:
        raise DatasetError(
            f"{where}: meta says bandwidth_direction 'mixed' but the CSV has no 'bandwidth_direction' column"
        )
    return frame
