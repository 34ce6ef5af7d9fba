"""What notebook 03 shows, section by section: results that `runtime.Session.present` shows and records."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .. import check, plots
from .. import reference as ref
from ..runtime import ShownSection
from ..units import format_bytes, format_time
from . import figures, measure, timelines

#: The efficiency table's columns: the ratio asked for and the one measured, the three times, η and its spread.
EFFICIENCY_COLUMNS = [
    "compute_to_copy",
    "measured_ratio",
    "t_copy_s",
    "t_compute_s",
    "t_both_s",
    "efficiency",
    "efficiency_q1",
    "efficiency_q3",
]
#: η outside this range is noise or contention; the efficiency table shows every value.
ETA_SHOWN = (-1.0, 1.5)
DUPLEX_COLUMNS = ["title", "direction", "gpu", "alone_GBps", "while_other_runs_GBps", "retained"]


def load_average() -> float | None:
    """This machine's 1-minute load average, or None where the OS keeps none (Windows has no os.getloadavg)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _serial_vs_overlapped(serial, overlapped, whats, height: float):
    """Two Gantt charts on one time axis: `whats` name them, each title ends with its time per batch."""
    fig, axes = plots.figure(2, 1, width=10, height=height)
    for ax, tl, what in zip(axes, (serial, overlapped), whats):
        title = what.format(format_time(tl.step_s()))
        figures.draw_gantt(ax, tl, title=title, xmax_s=serial.makespan_s)
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class PipelineModel:
    """Section 1: batches copied then computed, serial and double-buffered; copy time from an α-β fit (a model)."""

    link: object  # the reference Dataset the α-β fit comes from
    fit: object  # models.AlphaBetaFit
    batch_bytes: int
    t_copy_s: float
    t_compute_s: float
    batches: int = 6
    experiment = "overlap_model"

    @property
    def source(self) -> str:
        return f"model: α-β fit to {self.link.label}"

    @property
    def datasets(self):
        return (self.link.name,)

    def timeline(self, overlapped: bool, **kw):
        return timelines.pipeline_timeline(
            self.batches, self.t_copy_s, self.t_compute_s, overlapped=overlapped, source=self.source, **kw
        )

    @cached_property
    def serial(self):
        return self.timeline(False)

    @cached_property
    def overlapped(self):
        return self.timeline(True)

    def figure(self):
        whats = ("serial: copy, then compute, one stream — {} per batch",)
        whats += ("overlapped: copies on a side stream, 2 buffers — {} per batch",)
        return _serial_vs_overlapped(self.serial, self.overlapped, whats, height=2.6)

    def report(self) -> str:
        m, f = self.link.meta, self.fit
        return (
            f"link: {m['title']} (quality {m['quality']}): α = {f.latency_s * 1e6:.1f} µs, "
            f"β = {f.bandwidth_GBps:.2f} GB/s → one {format_bytes(self.batch_bytes)} batch copies in "
            f"{format_time(self.t_copy_s)}"
        )

    def numbers(self) -> dict:
        return {"model_step_serial_s": self.serial.step_s(), "model_step_overlapped_s": self.overlapped.step_s()}

    def checks(self) -> dict:
        return {"model_overlapped_faster": self.overlapped.makespan_s < self.serial.makespan_s}

    def notes(self) -> dict:
        return {
            "source": self.source,
            "link": self.link.name,
            "alpha_us": self.fit.latency_s * 1e6,
            "beta_GBps": self.fit.bandwidth_GBps,
            "t_copy_s": self.t_copy_s,
            "t_compute_s": self.t_compute_s,
        }

    def view(self, batch_bytes, compute_ms):
        """The widget of section 7: a batch size and a compute time → serial vs overlapped step (the model)."""
        tc, tk = self.fit.predict(batch_bytes), compute_ms / 1e3
        s = timelines.pipeline_timeline(5, tc, tk, overlapped=False, source=self.source)
        d = timelines.pipeline_timeline(5, tc, tk, overlapped=True, source=self.source)
        _serial_vs_overlapped(s, d, ("serial: {} per batch", "overlapped, 2 buffers: {} per batch"), height=2.4)
        bound = "copy" if tc > tk else "compute"
        print(
            f"{format_bytes(batch_bytes)}: copy {format_time(tc)}, compute {format_time(tk)} → serial "
            f"{format_time(s.step_s())}, overlapped {format_time(d.step_s())} per batch "
            f"({s.step_s() / d.step_s():.2f}× faster; {bound}-bound)"
        )
        return {"serial_step_s": s.step_s(), "overlapped_step_s": d.step_s(), "bound": bound}


@dataclass(frozen=True)
class Loader:
    """A loader run's serial and double-buffered timelines (measured), and the speed-up per batch."""

    timelines: dict
    key: str  # the results JSON number: host_loader_speedup / gpu_loader_speedup
    note: str = ""  # added to each chart's title, e.g. " (CUDA events)"
    says: str = ""  # the report line after the speed-up

    @property
    def speedup(self) -> float:
        return self.timelines[timelines.LOADER_SERIAL].step_s() / self.timelines[timelines.LOADER_DOUBLE].step_s()

    def figure(self):
        return figures.loader_gantt(self.timelines, self.note)

    def report(self) -> str:
        return self.says.format(speedup=self.speedup)

    def numbers(self) -> dict:
        return {self.key: self.speedup}


@dataclass(frozen=True)
class HostOverlap:
    """Section 2: copy and compute on two host threads, timed here: η per compute/copy ratio."""

    frame: object  # the overlap_run frame (measure.host_run_here)
    load_before: float | None  # the 1-minute load average before the run (a busy machine blurs η); None: unknown
    experiment = "host_overlap"

    @classmethod
    def run_here(cls, quick: bool) -> HostOverlap:
        """Read the load average, then run copy and compute on two host threads (measure.host_run_here)."""
        load = load_average()
        return cls(measure.host_run_here(quick), load)

    @property
    def source(self) -> str:
        return self.frame.attrs["source"]

    @cached_property
    def table(self):
        return timelines.efficiency_table(self.frame)

    @cached_property
    def at_1(self):
        """The row whose compute/copy ratio is nearest 1, where overlap is hardest to reach."""
        eff = self.table
        return eff.iloc[int((eff.compute_to_copy - 1).abs().argmin())]

    @property
    def bucket(self) -> str:
        """η at compute/copy ≈ 1 in words, as the prediction asks for it."""
        e = self.at_1.efficiency
        return "high" if e > 0.7 else "partial" if e >= 0.3 else "low"

    def report(self) -> list:
        load = "not kept by this OS" if self.load_before is None else f"{self.load_before:.2f}"
        line = f"{self.source}; {os.cpu_count()} CPUs; 1-minute load average before the run: {load}"
        return [line, self.table[EFFICIENCY_COLUMNS + ["repeats"]].round(4)]

    def numbers(self) -> dict:
        return {"host_efficiency_at_ratio_1": self.at_1.efficiency}

    def notes(self) -> dict:
        return {
            "source": self.source,
            "cpus": os.cpu_count(),
            "load_average_1min": self.load_before,
            "batch_bytes": int(self.frame.nbytes.iloc[0]),
            "efficiency": self.table.efficiency.round(3).tolist(),
        }

    def loader(self) -> Loader:
        says = "double-buffered loader vs serial on host threads: {speedup:.2f}x per batch "
        says += f"(η at compute/copy ≈ 1: {self.at_1.efficiency:.2f}) — {self.source}"
        return Loader(timelines.loader_timelines(self.frame, self.source), "host_loader_speedup", says=says)


@dataclass(frozen=True)
class GpuOverlap(ShownSection):
    """Section 3: the GPU run `session.show` found (measured here or recorded); empty when there is none. The
    Shown's note already said where the run came from."""

    @cached_property
    def table(self):
        return None if self.frame is None else timelines.efficiency_table(self.frame)

    @cached_property
    def by_memory(self) -> dict:
        """Median η per memory kind (pinned, pageable); empty without a GPU run."""
        return {} if self.frame is None else dict(self.table.groupby("memory").efficiency.median())

    @cached_property
    def duplex(self):
        """H2D and D2H at once, from the run (one row), or an empty table."""
        import pandas as pd

        return pd.DataFrame() if self.frame is None else timelines.duplex_table(self.frame)

    @cached_property
    def loader(self) -> Loader | None:
        """The run's serial and double-buffered loader timelines (CUDA events); None without a run."""
        if self.frame is None:
            return None
        return Loader(timelines.loader_timelines(self.frame, self.source), "gpu_loader_speedup", " (CUDA events)")

    def figure(self):
        return None if self.frame is None else self.loader.figure()

    def report(self):
        return None if self.frame is None else self.table[["memory"] + EFFICIENCY_COLUMNS].round(4)

    def numbers(self) -> dict:
        if self.frame is None:
            return {}
        return {f"gpu_efficiency_{m}": e for m, e in self.by_memory.items()} | self.loader.numbers()


@dataclass(frozen=True)
class Efficiency:
    """η against the measured compute/copy ratio: host threads, the GPU run if any, and the two model limits."""

    host: HostOverlap
    gpu: GpuOverlap

    def figure(self):
        host_eff = self.host.table
        fig, ax = plots.figure(width=8.5, height=5)
        figures.draw_efficiency(ax, host_eff, self.host.source)
        if self.gpu.frame is not None:
            for memory, g in self.gpu.table.groupby("memory"):
                figures.draw_efficiency(ax, g, f"{self.gpu.source} — {memory}", how=self.gpu.shown.kind)
        xs = np.array([min(host_eff.measured_ratio.min(), 0.2), max(host_eff.measured_ratio.max(), 5)])
        plots.line(ax, xs, [1, 1], "model: ideal engines, nothing shared", how=plots.MODEL, color="tab:green")
        plots.line(ax, xs, [0, 0], "model: one stream, or pageable memory", how=plots.MODEL, color="tab:red")
        ax.set_xscale("log", base=2)
        ax.set_ylim(*ETA_SHOWN)
        plots.finish(
            ax,
            "Overlap efficiency η vs compute/copy time ratio",
            "T_compute ÷ T_copy (ratio, log2)",
            "η (fraction of the shorter job hidden)",
            source="sources in the legend; bars = quartiles of the repeats",
        )
        return fig

    def report(self) -> str:
        eff = self.host.table
        if ((eff.efficiency_q1 < ETA_SHOWN[0]) | (eff.efficiency_q3 > ETA_SHOWN[1])).any():
            return "some repeats fall outside the plotted range — the machine was busy (see the load average above)"
        return ""


@dataclass(frozen=True)
class Duplex:
    """Section 4: recorded full duplex (nvbandwidth), and the GPU run's own H2D + D2H at once when there is one."""

    table: object  # recorded.recorded_duplex rows
    gpu: GpuOverlap
    experiment = "full_duplex"

    @property
    def datasets(self):
        return tuple(self.table.dataset.unique())

    def figure(self):
        fig, ax = plots.figure(width=10, height=5)
        figures.draw_duplex(ax, self.table)
        return fig

    def report(self) -> list:
        live = self.gpu.duplex
        return [self.table[DUPLEX_COLUMNS].round(3)] + ([live.round(3)] if len(live) else [])

    def numbers(self) -> dict:
        n = {"duplex_retained_min": self.table.retained.min(), "duplex_retained_max": self.table.retained.max()}
        live = self.gpu.duplex
        return n | ({"gpu_duplex_efficiency": live.efficiency.iloc[0]} if len(live) else {})

    def notes(self) -> dict:
        return {"recorded": sorted(self.table.dataset.unique()), "rows": len(self.table)}

    def gpu0_h2d_retained(self) -> float | None:
        """H2D kept while D2H runs on GPU 0 of the nvbandwidth README's system (exercise 4), or None."""
        t = self.table
        rows = t[(t.gpu == 0) & (t.direction == "h2d") & t.dataset.str.contains("readme")]
        return float(rows.retained.iloc[0]) if len(rows) else None

    def check_gpu0_h2d_retained(self, answer) -> check.CheckResult:
        """Exercise 4 checked against `gpu0_h2d_retained`, or why this run cannot check it."""
        name, kept = "H2D kept while D2H runs", self.gpu0_h2d_retained()
        if kept is None:
            why = "the full-duplex points shown leave out the nvbandwidth README's GPU 0: reference=None shows it"
            return check.unavailable(name, why)
        return check.numeric(name, answer, kept, hint="while-both ÷ alone")


@dataclass(frozen=True)
class PageableOverlap:
    """Section 5: η with pageable memory from the GPU run; without one, the model (pageable copies cannot overlap)."""

    gpu: GpuOverlap
    model: PipelineModel
    experiment = "pageable_overlap"

    @property
    def measured(self) -> bool:
        return self.gpu.frame is not None and "pageable" in set(self.gpu.table.memory)

    def report(self) -> str:
        if self.measured:  # a run may hold pageable rows only (a profile recorded that way): no pinned η then
            m = self.gpu.by_memory
            pinned = f"pinned {m['pinned']:.2f}" if "pinned" in m else "pinned: not in this run"
            return f"{self.gpu.source}: median η {pinned}, pageable {m['pageable']:.2f}"
        return (
            f"{self.model.source}: pinned + side stream {format_time(self.model.overlapped.step_s())} per batch; "
            f"pageable {format_time(self._pageable().step_s())} per batch (= serial) — and a real pageable copy is "
            "slower as well (notebook 02: 2.4× to 7.6× slower at large sizes on the recorded systems)"
        )

    def _pageable(self):
        return timelines.pipeline_timeline(
            self.model.batches,
            self.model.t_copy_s,
            self.model.t_compute_s,
            overlapped=False,
            scenario="pageable: the host blocks in each copy",
            source=self.model.source + " (pageable: copies cannot overlap)",
        )

    def notes(self) -> dict:
        if not self.measured:
            return {
                "source": self.model.source,
                "pinned_step_s": self.model.overlapped.step_s(),
                "pageable_step_s": self._pageable().step_s(),
            }
        m, t = self.gpu.by_memory, self.gpu.table
        pg = t[t.memory == "pageable"]
        return {
            "source": self.gpu.source,
            "pinned": m.get("pinned"),
            "pageable": m.get("pageable"),
            "pageable_min": float(pg.efficiency.min()),
            "pageable_max": float(pg.efficiency.max()),
            "ratio_min": float(pg.measured_ratio.min()),
            "ratio_max": float(pg.measured_ratio.max()),
        }


@dataclass(frozen=True)
class LoaderSelfTest:
    """Section 6: `double_buffered` with tagged batches, slow copies and a slow consumer (measure.loader_self_test)."""

    test: dict
    experiment = "loader_self_test"

    def report(self) -> str:
        t = self.test
        return (
            f"batches seen in order: {t['seen']}\n\n"
            f"every batch once, in order: {t['in_order_once']}; "
            f"buffers complete and untouched while held: {t['intact']}"
        )

    def checks(self) -> dict:
        return {
            "loader_every_batch_once_in_order": self.test["in_order_once"],
            "loader_buffers_intact": self.test["intact"],
        }

    def notes(self) -> dict:
        return dict(self.test)


@dataclass(frozen=True)
class Interview:
    """The interview's numbers from this run: η on host threads, and the GPU run's η and full duplex."""

    host: HostOverlap
    gpu: GpuOverlap
    recorded: Duplex
    model: PipelineModel
    experiment = "interview"

    def _gpu_lines(self) -> tuple[list[str], dict]:
        if self.gpu.frame is None:
            return [f"Q1/Q3/Q4: no GPU run measured or recorded — see the model of section 1 ({self.model.source})"], {}
        by_mem, src = self.gpu.by_memory, self.gpu.source
        lines, iv = [], {"gpu_source": src, **{f"gpu_eta_{m}": float(e) for m, e in by_mem.items()}}
        for memory, g in sorted(self.gpu.table.groupby("memory"), reverse=True):  # pinned, then pageable
            etas = ", ".join(f"{x:g}: {e:.2f}" for x, e in zip(g.compute_to_copy, g.efficiency))
            lines.append(f"Q1/Q3: GPU, {memory}: η by compute/copy {etas} (median {by_mem[memory]:.2f}) — {src}")
        live = self.gpu.duplex
        if len(live):
            d = live.iloc[0]
            iv["gpu_duplex_retained"] = float(d.bidirectional_GBps / (d.h2d_alone_GBps + d.d2h_alone_GBps))
            lines.append(
                f"Q4: H2D + D2H at once: {d.bidirectional_GBps:.1f} GB/s, {iv['gpu_duplex_retained']:.0%} of "
                f"{d.h2d_alone_GBps:.1f} + {d.d2h_alone_GBps:.1f} GB/s alone — {src}"
            )
        return lines, iv

    def report(self) -> str:
        eta = self.host.at_1.efficiency
        lines = [f"Q3: η at compute/copy ≈ 1, host threads: {eta:.2f} — {self.host.source}"]
        lines += self._gpu_lines()[0]
        r = self.recorded.table.retained
        lines.append(
            f"Q4: recorded nvbandwidth runs keep {r.min():.0%} to {r.max():.0%} per direction "
            "while the other runs (table of section 4)"
        )
        return "\n\n".join(lines)

    def notes(self) -> dict:
        iv = {"host_source": self.host.source, "host_eta_at_ratio_1": float(self.host.at_1.efficiency)}
        return iv | self._gpu_lines()[1]


def sources(names, reference) -> str:
    """One Markdown line per dataset shown (`session.datasets`): its title, quality grade and source."""
    known = {}
    for kind in ("copy_sweep", "point", "overlap_run"):
        known |= {d.name: d for d in ref.select(reference, kind)[0] + ref.load_all(kind=kind)}
    return "\n".join(
        f"- {known[n].meta['title']} (quality {known[n].meta['quality']}): {known[n].meta['source']}" for n in names
    )
