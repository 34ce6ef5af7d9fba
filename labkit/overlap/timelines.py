"""Timelines of work on streams, the overlap arithmetic, and the serial vs double-buffered loader as a model.

- `Span` / `Timeline`: what ran on which stream and when (the data behind a Gantt chart), stored
  as the `overlap_run` dataset kind (scenario, event, stream, start_s, end_s).
- `overlap_efficiency(t_copy, t_compute, t_both)`: (T_copy + T_compute − T_both) / min(T_copy,
  T_compute) — 1 when the shorter job hides completely under the longer, 0 when they serialise.
- `pipeline_timeline(...)`: the loader's schedule as a model from α-β copy times (labelled "model").
- `efficiency_table`, `duplex_table`, `loader_timelines`: what an `overlap_run` frame (measured or
  recorded) says.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import numpy as np

#: Scenarios of one efficiency measurement: each job alone, then both at once.
COPY_ALONE, COMPUTE_ALONE, BOTH = "copy_alone", "compute_alone", "both"
EFFICIENCY_SCENARIOS = (COPY_ALONE, COMPUTE_ALONE, BOTH)
#: Full-duplex scenarios (GPU only): each direction alone, then both directions at once.
H2D_ALONE, D2H_ALONE, DUPLEX = "h2d_alone", "d2h_alone", "h2d+d2h"
#: Loader scenarios: copy-then-compute on one stream vs the double-buffered loader.
LOADER_SERIAL, LOADER_DOUBLE = "loader_serial", "loader_double_buffered"


# --------------------------------------------------------------------------- spans and timelines
@dataclasses.dataclass(frozen=True)
class Span:
    """One piece of work on one stream: [start_s, end_s) in seconds from the timeline's origin."""

    stream: str  # e.g. "copy (H2D)", "compute"
    name: str  # e.g. "copy 3", "compute 3"
    start_s: float
    end_s: float

    def __post_init__(self):
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)):
            raise ValueError(f"span {self.name!r}: start and end must be finite numbers of seconds")
        if self.end_s < self.start_s:
            raise ValueError(
                f"span {self.name!r} on {self.stream!r} ends ({self.end_s:g} s) before it starts ({self.start_s:g} s)"
            )

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _union_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by a set of intervals (overlaps counted once)."""
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


@dataclasses.dataclass(frozen=True)
class Timeline:
    """The spans of one scenario, and where their times came from (shown on every chart)."""

    scenario: str
    spans: tuple[Span, ...]
    source: str  # "measured here: …", "recorded: …" or "model: …"

    def __post_init__(self):
        if not self.spans:
            raise ValueError(f"timeline {self.scenario!r} has no spans")

    @property
    def start_s(self) -> float:
        return min(s.start_s for s in self.spans)

    @property
    def end_s(self) -> float:
        return max(s.end_s for s in self.spans)

    @property
    def makespan_s(self) -> float:
        """From the first start to the last end: the wall time of the scenario."""
        return self.end_s - self.start_s

    @property
    def streams(self) -> list[str]:
        """Stream names in order of first appearance (the Gantt chart's rows, top to bottom)."""
        return list(dict.fromkeys(s.stream for s in self.spans))

    def on(self, stream: str) -> list[Span]:
        return sorted((s for s in self.spans if s.stream == stream), key=lambda s: s.start_s)

    def busy_s(self, stream: str) -> float:
        """Time during which `stream` had work running (overlapping spans counted once)."""
        return _union_s((s.start_s, s.end_s) for s in self.spans if s.stream == stream)

    @property
    def concurrent_s(self) -> float:
        """Time during which two or more streams were busy at once: the overlap the chart shows."""
        per_stream = sum(self.busy_s(st) for st in self.streams)
        return per_stream - _union_s((s.start_s, s.end_s) for s in self.spans)

    def step_s(self, stream: str = "compute") -> float:
        """Steady-state time per batch: median gap between consecutive starts on `stream`."""
        starts = [s.start_s for s in self.on(stream)]
        if len(starts) < 2:
            raise ValueError(f"timeline {self.scenario!r} has fewer than two spans on {stream!r}: no step time")
        return float(np.median(np.diff(starts)))

    def shifted(self) -> "Timeline":
        """The same timeline with its first start at 0 s."""
        t0 = self.start_s
        return dataclasses.replace(
            self, spans=tuple(dataclasses.replace(s, start_s=s.start_s - t0, end_s=s.end_s - t0) for s in self.spans)
        )

    def to_frame(self, **columns):
        """Rows in the `overlap_run` schema (scenario, event, stream, start_s, end_s), plus `columns`."""
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "scenario": self.scenario,
                    "event": s.name,
                    "stream": s.stream,
                    "start_s": s.start_s,
                    "end_s": s.end_s,
                    **columns,
                }
                for s in self.spans
            ]
        )

    @classmethod
    def from_frame(cls, frame, source: str, scenario: str | None = None) -> "Timeline":
        """Rebuild a timeline from `overlap_run` rows (all rows, or those of one scenario)."""
        rows = frame if scenario is None else frame[frame["scenario"] == scenario]
        if len(rows) == 0:
            raise ValueError(f"no rows for scenario {scenario!r}")
        names = sorted(set(rows["scenario"]))
        spans = tuple(Span(str(r.stream), str(r.event), float(r.start_s), float(r.end_s)) for r in rows.itertuples())
        return cls(scenario or " + ".join(names), spans, source)


# --------------------------------------------------------------------------- the arithmetic
def overlap_efficiency(t_copy_s: float, t_compute_s: float, t_both_s: float) -> float:
    """(T_copy + T_compute − T_both) / min(T_copy, T_compute).

    1.0: the shorter job hid completely under the longer (T_both = max); 0.0: no overlap at all
    (T_both = T_copy + T_compute). Measured values can fall slightly outside [0, 1] through noise;
    well below 0 means running both at once slowed each down (they compete for something — a
    core, memory bandwidth, the GIL, a copy engine).
    """
    for name, v in (("T_copy", t_copy_s), ("T_compute", t_compute_s), ("T_both", t_both_s)):
        if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
    return (t_copy_s + t_compute_s - t_both_s) / min(t_copy_s, t_compute_s)


def step_time_s(copy_s: float, compute_s: float, overlapped: bool, d2h_s: float = 0.0) -> float:
    """Steady-state time per batch of a copy → compute (→ copy back) pipeline.

    Serial: the stages add up. Overlapped (each stage on its own engine, ≥ 2 buffers): the slowest
    stage sets the pace — the others hide under it.
    """
    stages = [copy_s, compute_s] + ([d2h_s] if d2h_s else [])
    if any(s < 0 for s in stages):
        raise ValueError("stage times must be >= 0 s")
    return max(stages) if overlapped else sum(stages)


def pipeline_timeline(
    n_batches: int,
    copy_s: float,
    compute_s: float,
    *,
    overlapped: bool = True,
    buffers: int = 2,
    d2h_s: float = 0.0,
    scenario: str | None = None,
    source: str = "model: ideal streams",
) -> Timeline:
    """Model schedule of `n_batches` through copy (H2D) → compute (→ copy back, D2H).

    Serial: everything on one stream, one stage after the other. Overlapped: the copy stream
    fills `buffers` device buffers ahead; copy i may start once copy i−1 is done (one copy
    engine per direction) *and* compute i−buffers has released its buffer; compute i starts once
    compute i−1 is done and copy i has landed; D2H i (on its own engine: full duplex) follows
    compute i.
    """
    if n_batches < 1:
        raise ValueError(f"n_batches must be >= 1, got {n_batches}")
    if buffers < 1:
        raise ValueError(f"buffers must be >= 1, got {buffers}")
    if min(copy_s, compute_s, d2h_s) < 0:
        raise ValueError("stage times must be >= 0 s")
    scenario = scenario or (LOADER_DOUBLE if overlapped else LOADER_SERIAL)
    spans: list[Span] = []
    if not overlapped:
        t = 0.0
        for i in range(n_batches):
            for stream, dur in (("copy (H2D)", copy_s), ("compute", compute_s), ("copy (D2H)", d2h_s)):
                if dur or stream != "copy (D2H)":
                    spans.append(Span(stream, f"{stream.split()[0]} {i}", t, t + dur))
                    t += dur
        return Timeline(scenario, tuple(spans), source)
    copy_end, comp_end, d2h_end = [], [], []
    for i in range(n_batches):
        start = max(copy_end[i - 1] if i else 0.0, comp_end[i - buffers] if i >= buffers else 0.0)
        copy_end.append(start + copy_s)
        spans.append(Span("copy (H2D)", f"copy {i}", start, copy_end[i]))
        c0 = max(comp_end[i - 1] if i else 0.0, copy_end[i])
        comp_end.append(c0 + compute_s)
        spans.append(Span("compute", f"compute {i}", c0, comp_end[i]))
        if d2h_s:
            d0 = max(d2h_end[i - 1] if i else 0.0, comp_end[i])
            d2h_end.append(d0 + d2h_s)
            spans.append(Span("copy (D2H)", f"copy back {i}", d0, d2h_end[i]))
    return Timeline(scenario, tuple(spans), source)


def efficiency_table(frame):
    """Overlap efficiency per (memory, compute_to_copy) from `overlap_run` rows.

    Needs the columns `compute_to_copy` and `repeat` beside the schema's; uses the scenarios
    copy_alone / compute_alone / both. Times are seconds from the scenario's origin — the moment
    its work was submitted (t = 0, as `Tracer` records them) — to its last end, so a hand-off
    delay (a thread waking up, a launch) counts in every scenario alike. Each repeat gives one
    efficiency (its three scenarios ran back to back, so slow drift cancels); the table reports
    their median and quartiles, and the median times.
    """
    import pandas as pd

    f = frame[frame["scenario"].isin(EFFICIENCY_SCENARIOS)].copy()
    if len(f) == 0:
        raise ValueError("no copy_alone / compute_alone / both rows: not an efficiency measurement")
    if "memory" not in f.columns:
        f["memory"] = "pinned"
    t = f.groupby(["memory", "compute_to_copy", "repeat", "scenario"])["end_s"].max().unstack("scenario")
    missing = [s for s in EFFICIENCY_SCENARIOS if s not in t.columns]
    if missing:
        raise ValueError(f"efficiency needs the scenarios {EFFICIENCY_SCENARIOS}; missing {missing}")
    t = t.dropna()
    t["eff"] = [overlap_efficiency(a, b, c) for a, b, c in zip(t[COPY_ALONE], t[COMPUTE_ALONE], t[BOTH])]
    rows = []
    for (memory, ratio), g in t.groupby(level=["memory", "compute_to_copy"]):
        tc, tk, tb = g[COPY_ALONE].median(), g[COMPUTE_ALONE].median(), g[BOTH].median()
        rows.append(
            {
                "memory": memory,
                "compute_to_copy": ratio,
                "t_copy_s": tc,
                "t_compute_s": tk,
                "t_both_s": tb,
                "measured_ratio": tk / tc,
                "efficiency": float(g["eff"].median()),
                "efficiency_q1": float(g["eff"].quantile(0.25)),
                "efficiency_q3": float(g["eff"].quantile(0.75)),
                "serial_s": tc + tk,
                "ideal_s": max(tc, tk),
                "repeats": len(g),
            }
        )
    return pd.DataFrame(rows)


def duplex_table(frame):
    """Full duplex from `overlap_run` rows: each direction alone vs both at once (GPU runs only).

    Times as in `efficiency_table`: from the scenario's origin to its last end; medians over repeats.
    """
    import pandas as pd

    f = frame[frame["scenario"].isin((H2D_ALONE, D2H_ALONE, DUPLEX))]
    if len(f) == 0:
        return pd.DataFrame()
    g = f.groupby(["repeat", "scenario"]).agg(end=("end_s", "max"), nbytes=("nbytes", "first"))
    t = g["end"].unstack("scenario").median()
    n = float(g["nbytes"].iloc[0])
    return pd.DataFrame(
        [
            {
                "nbytes": n,
                "t_h2d_s": t[H2D_ALONE],
                "t_d2h_s": t[D2H_ALONE],
                "t_both_s": t[DUPLEX],
                "h2d_alone_GBps": n / t[H2D_ALONE] / 1e9,
                "d2h_alone_GBps": n / t[D2H_ALONE] / 1e9,
                "bidirectional_GBps": 2 * n / t[DUPLEX] / 1e9,
                "efficiency": overlap_efficiency(t[H2D_ALONE], t[D2H_ALONE], t[DUPLEX]),
            }
        ]
    )


# --------------------------------------------------------------------------- streams and events


# --------------------------------------------------------------------------- the double-buffered loader


# --------------------------------------------------------------------------- host experiment


# --------------------------------------------------------------------------- GPU experiment


def loader_timelines(frame, source: str) -> dict[str, Timeline]:
    """The loader scenarios of an `overlap_run` frame, each shifted to start at 0 s."""
    out = {}
    for scenario in (LOADER_SERIAL, LOADER_DOUBLE):
        if (frame["scenario"] == scenario).any():
            out[scenario] = Timeline.from_frame(frame, source, scenario).shifted()
    return out


# --------------------------------------------------------------------------- recorded data


# --------------------------------------------------------------------------- figures


# --------------------------------------------------------------------------- bench and record
