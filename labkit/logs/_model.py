"""What a log reader returns: `LogDataset` (one tidy table + what the log says about it) and
`ParsedLog` (every dataset of one input, plus the lines that could not be read).

Numbers stay exactly as printed: numeric cells hold the printed text ('46.80', '2e-07', 'N/A' is
never a number), byte counts and GPU indices are ints. Writing the frame with pandas' `to_csv`
keeps those digits; `labkit.reference.load` turns them into floats only when a dataset is read.
"""

from __future__ import annotations

import dataclasses

from ._text import Skipped

#: Required columns of each kind a reader produces. Mirrors labkit.schema.KINDS (data/README.md);
#: this core package may not import labkit.reference, so tests/test_logs_api.py asserts they agree.
REQUIRED_COLUMNS = {
    "copy_sweep": ("direction", "memory", "nbytes", "bandwidth_GBps"),
    "p2p_matrix": ("matrix", "p2p", "src", "dst"),
    "allreduce_sweep": ("nbytes", "world_size", "nodes", "config"),
    "collective_sweep": ("op", "nbytes", "world_size", "nodes", "config"),
    "point": ("quantity", "value", "unit", "bandwidth_direction"),
}
#: Meta fields of data/README.md that a log can state; the rest (system, source, quality, ...)
#: come from whoever imports it.
STATED_META = ("title", "gpu", "gpu_count", "nodes", "software", "date", "method", "caveats", "bandwidth_direction")
#: Values that mean "the log did not say" in a cell.
EMPTY = (None, "", "unspecified")


def _empty(v) -> bool:
    try:
        return v in EMPTY or v != v  # NaN
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass(frozen=True)
class LogDataset:
    """One table a log holds (a run, a matrix, a sweep) in the data/README.md schema of `kind`.

    `kind` is None when the log does not say what decides it (nccl-tests output that never names
    its collective). `lines` are the first and last input lines it was read from.
    """

    tool: str
    kind: str | None
    frame: "object"  # pandas.DataFrame
    meta: dict
    lines: tuple[int, int]
    label: str

    @property
    def missing(self) -> tuple[str, ...]:
        """Required columns (and 'kind') the log left empty: the importer must supply them."""
        if self.kind is None:
            return ("kind",) + tuple(c for c in ("op",) if c not in self.frame or self.frame[c].map(_empty).all())
        return tuple(
            c for c in REQUIRED_COLUMNS[self.kind] if c not in self.frame.columns or self.frame[c].map(_empty).any()
        )

    def filled(self, **columns) -> "LogDataset":
        """A copy with constant values in columns the log left empty (e.g. world_size=16).

        A value the log printed is never replaced: a different constant raises ValueError.
        Filling `op` also settles the kind (all_reduce → allreduce_sweep, others → collective_sweep).
        """
        frame = self.frame.copy()
        for col, value in columns.items():
            if col in frame.columns:
                printed = {str(v) for v in frame[col] if not _empty(v)}
                if printed and printed != {str(value)}:
                    raise ValueError(
                        f"{self.label}: column {col!r} is printed as {sorted(printed)}, "
                        f"not {value!r}; a log value is never overwritten"
                    )
                frame[col] = [value if _empty(v) else v for v in frame[col]]
            else:
                frame[col] = value
        kind = self.kind
        if "op" in columns and kind is None:
            kind = "allreduce_sweep" if columns["op"] == "all_reduce" else "collective_sweep"
        return dataclasses.replace(self, frame=frame, kind=kind)

    def dataset_meta(self, **given) -> dict:
        """Meta for `labkit.reference.write_dataset`: what the log states, then `given` (system,
        source, quality, ...) over it. Fields neither gives stay empty so writing names them."""
        meta = {k: self.meta.get(k, "") for k in STATED_META}
        meta["software"] = meta["software"] or "not recorded"  # data/README.md's word for an absent one
        meta.update({k: v for k, v in self.meta.items() if k not in meta and k in ("topology", "nbytes")})
        meta.setdefault("provenance", "recorded")
        meta["kind"] = self.kind or ""
        meta["log"] = {k: v for k, v in self.meta.items() if k not in STATED_META and k != "topology"}
        meta.update({k: v for k, v in given.items() if v not in (None, "")})
        return meta


@dataclasses.dataclass(frozen=True)
class ParsedLog:
    """Every dataset read from one input, in input order, and what was skipped (line, text, why)."""

    source: str
    formats: tuple[str, ...]
    datasets: tuple[LogDataset, ...]
    skipped: tuple[Skipped, ...]

    def __iter__(self):
        return iter(self.datasets)

    def __len__(self) -> int:
        return len(self.datasets)

    def __getitem__(self, i) -> LogDataset:
        return self.datasets[i]

    def of(self, tool: str) -> list[LogDataset]:
        return [d for d in self.datasets if d.tool == tool]
