"""What notebook 02 shows, section by section: results that `runtime.Session.present` shows and records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .. import check, plots
from .. import reference as ref
from ..runtime import DatasetsTable, ShownSection
from ..units import format_bytes, format_time
from . import dataloader, host_memory, numa, pin_cost, placement
from . import pinned_vs_pageable as pvp

#: The ratio table's columns, as the reader compares them.
RATIO_COLUMNS = ["title", "direction", "run", "nbytes", "pinned_GBps", "pageable_GBps", "ratio"]
PIN_TIMES = ("pin_s", "pageable_copy_s", "pinned_copy_s", "saved_per_copy_s")
#: What to do when the `reference=` chosen leaves out a system an exercise asks about.
SHOW_ALL = "reference=None shows every shipped system"


@dataclass(frozen=True)
class Survey:
    """Experiment 1: pinned and pageable sweeps, both directions, on every recorded system (and this GPU, if live)."""

    sweeps: list  # the copy_sweep datasets the reference selects
    measured: list  # live Sweeps (both memories), or []
    experiment = "pinned_vs_pageable"

    @cached_property
    def _survey(self):
        return pvp.ratio_survey(self.sweeps, measured=self.measured)

    @property
    def ratios(self):
        """Pinned ÷ pageable per (system, direction, size), for every system that measured both kinds."""
        return self._survey[0]

    @property
    def pinned_only(self):
        """The systems whose sources measured pinned memory only: no ratio, and none made up."""
        return self._survey[1]

    @cached_property
    def drawn(self) -> list:
        return pvp.datasets_drawn(self.sweeps, self.ratios, self.pinned_only)

    def figure(self):
        fig, axes = plots.figure(1, 2, width=7.5, height=7)
        for ax, direction in zip(axes, ("h2d", "d2h")):
            pvp.draw_sweeps(ax, self.drawn, direction, measured=self.measured)
        return fig

    def notes(self) -> dict:
        return {
            "measured_sweeps": len(self.measured),
            "recorded_with_both": sorted(set(self.ratios["dataset"]) - {"measured here"}),
        }

    @property
    def datasets(self) -> list:
        """The names of the datasets the figure draws."""
        return [d.name for d in self.drawn]

    def bandwidth(self, name_part: str, direction: str, memory: str) -> float | None:
        """The first recorded `memory` bandwidth (GB/s) of the system whose name holds `name_part`, or None."""
        r = self.ratios
        rows = r[r.dataset.str.contains(name_part) & (r.direction == direction)]
        return float(rows[f"{memory}_GBps"].iloc[0]) if len(rows) else None

    def check_dell_pinned(self, answer) -> check.CheckResult:
        """Exercise 2: the Dell A100 PCIe server's pinned H2D (GB/s), or why this run cannot check it."""
        name, dell = "Dell A100 PCIe pinned H2D", self.bandwidth("a100_80gb_pcie", "h2d", "pinned")
        if dell is None:
            return check.unavailable(name, f"the sweeps shown hold no Dell A100 PCIe H2D ratio: {SHOW_ALL}")
        hint = "it is in the ratio table — far more than 2× the pageable figure"
        return check.numeric(name, answer, dell, unit="GB/s", hint=hint)


@dataclass(frozen=True)
class Ratios:
    """The ratio is not a constant: pinned ÷ pageable against size, and the ratio at each system's largest size."""

    survey: Survey
    reference: object  # the notebook's `reference=`, named when it holds no pageable numbers

    @cached_property
    def at_largest(self):
        return pvp.largest_size_ratios(self.survey.ratios)

    def figure(self):
        """Pinned ÷ pageable against size, shown before the table."""
        fig, ax = plots.figure(width=9, height=7)
        pvp.draw_ratios(ax, self.survey.ratios)
        return fig

    def report(self):
        t = self.at_largest
        if not len(t):
            return (
                f"reference={self.reference!r} holds no pageable numbers, so no ratio can be shown "
                "(pass reference=None for all)"
            )
        table = t[RATIO_COLUMNS].assign(size=lambda t: t.nbytes.map(format_bytes)).drop(columns="nbytes").round(2)
        return [table, f"pinned/pageable at the largest shared size: from {t.ratio.min():.2f}x to {t.ratio.max():.2f}x"]

    def numbers(self) -> dict:
        t = self.at_largest
        return {"ratio_min": t.ratio.min(), "ratio_max": t.ratio.max()} if len(t) else {}

    def checks(self) -> dict:
        t = self.at_largest
        return {"pinned_not_slower_at_largest_size": bool((t.ratio >= 1).all())} if len(t) else {}

    def of(self, name_part: str, direction: str) -> float | None:
        """The ratio at the largest size of the system whose name holds `name_part`, or None (exercise 1)."""
        t = self.at_largest
        rows = t[t.dataset.str.contains(name_part) & (t.direction == direction)] if len(t) else t
        return float(rows.ratio.iloc[0]) if len(rows) else None

    def check_dgx_a100(self, answer) -> check.CheckResult:
        """Exercise 1: the DGX A100's pinned ÷ pageable H2D at 32 MB, or why this run cannot check it."""
        name, dgx = "DGX A100 H2D pinned/pageable", self.of("dgx_a100", "h2d")
        return check.unavailable(name, self._no_dgx) if dgx is None else check.numeric(name, answer, dgx, unit="×")

    def score_dgx_a100(self, guess) -> check.CheckResult:
        """The predict-first guess of the same ratio, scored (within a factor of 2), or why it cannot be."""
        name, dgx = "pinned/pageable at 32 MB (DGX A100, H2D)", self.of("dgx_a100", "h2d")
        return check.unavailable(name, self._no_dgx) if dgx is None else check.predict_score(name, guess, dgx, "×")

    @property
    def _no_dgx(self) -> str:
        return f"reference={self.reference!r} shows no DGX A100 H2D ratio: {SHOW_ALL}"


@dataclass(frozen=True)
class PinnedOnly:
    """The recorded systems with no ratio: their sources measured pinned memory only."""

    survey: Survey
    experiment = "pinned_only"

    def report(self) -> list:
        only = self.survey.pinned_only
        return [
            f"**No ratio for {len(only)} recorded systems**: their sources measured pinned memory only "
            "(bandwidthTest's default `--memory=pinned`), so there is nothing to divide by — and nothing is made up.",
            only,
        ]

    def notes(self) -> dict:
        return {"datasets": list(self.survey.pinned_only["dataset"])}


@dataclass(frozen=True)
class PinCost(pin_cost.BreakEven):
    """Experiment 2: what pinning a fresh tensor costs against the copy time it saves — the break-even table
    (`pin_cost.BreakEven`: table, pin_label, copy_label, what) as the notebook presents it."""

    experiment = "pin_cost"

    @classmethod
    def of(cls, found: pin_cost.BreakEven) -> PinCost:
        """The table that `session.show("pin_cost", ...)` found, presented."""
        return cls(**vars(found))

    def report(self) -> list:
        styled = self.table.drop(columns="nbytes").style.format(
            {c: format_time for c in PIN_TIMES} | {"break_even_copies": "{:.2f}"}
        )
        return [styled, f"pin time: {self.what}"]

    def notes(self) -> dict:
        return {"pin": self.pin_label, "copies": self.copy_label, "what": self.what, "sizes": len(self.table)}

    def break_even(self) -> BreakEven:
        return BreakEven(self)

    def sizes(self) -> list:
        """The widget's choices: (size label, bytes) of every row."""
        return [(s, int(n)) for s, n in zip(self.table["size"], self.table["nbytes"])]

    def default_size(self) -> int:
        """1 MiB when the table has it (the prediction's size), else the largest."""
        return 1 << 20 if (1 << 20) in set(self.table["nbytes"]) else self.sizes()[-1][1]

    def view(self, nbytes: int, copies: int) -> dict:
        """The widget: pin once and copy k times, or copy pageable k times (pin_cost.pin_or_not)."""
        return pin_cost.pin_or_not(self.table, nbytes, copies, pin_label=self.pin_label, copy_label=self.copy_label)

    def pays_for_one_copy(self, nbytes: int) -> bool | None:
        """Whether pinning a fresh tensor of `nbytes` pays for a single copy; None when the table lacks the size."""
        rows = self.table[self.table.nbytes == nbytes]
        return bool(rows.pays_for_one_copy.iloc[0]) if len(rows) else None

    def score_one_copy_pays(self, guess) -> check.CheckResult:
        """The predict-first guess "pinning a fresh 1 MiB tensor for one copy pays", or why it cannot be scored."""
        name, pays = "pinning a fresh 1 MiB tensor for one copy pays", self.pays_for_one_copy(1 << 20)
        if pays is None:
            return check.unavailable(name, f"the break-even table ({self.pin_label}) has no 1 MiB row")
        return check.choice(name, guess, pays, hint=f"see the break-even table ({self.pin_label})")


@dataclass(frozen=True)
class BreakEven:
    """The pin cost and the time one pinned copy saves, against size: where they cross, pinning pays."""

    pin: PinCost

    @property
    def largest(self):
        return self.pin.table.iloc[-1]  # a row (use ["..."]: a Series has its own .nbytes)

    def figure(self):
        import matplotlib.pyplot as plt

        even, pin_label, copy_label = self.pin.table, self.pin.pin_label, self.pin.copy_label
        fig, ax = plots.figure(width=8, height=5.2)
        how = plots.MEASURED if "measured" in pin_label else plots.RECORDED
        plots.line(ax, even.nbytes, even.pin_s * 1e6, f"pin cost — {pin_label}", how=how)
        how = plots.MEASURED if "measured" in copy_label else plots.RECORDED
        label = f"time one pinned copy saves — {copy_label}"
        plots.line(ax, even.nbytes, even.saved_per_copy_s * 1e6, label, how=how, ls="--")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plt.ScalarFormatter())
        plots.size_axis(ax)
        title = "Pinning a fresh tensor: cost vs the copy time it saves (H2D)"
        plots.finish(ax, title, "tensor size (bytes, log2)", "time (µs)", source="sources in the legend")
        pvp.legend_below(ax, fontsize=7)
        return fig

    def report(self) -> str:
        r = self.largest
        return (
            f"at {r['size']}: pinning costs {format_time(r.pin_s)}, each pinned copy saves "
            f"{format_time(r.saved_per_copy_s)} → pays after {r.break_even_copies:.2f} copies"
        )

    def numbers(self) -> dict:
        return {
            "break_even_copies_largest": self.largest["break_even_copies"],
            "break_even_size_bytes": self.largest["nbytes"],
        }

    def checks(self) -> dict:
        even = self.pin.table
        return {"break_even_computed": len(even) > 0 and bool((even.pin_s > 0).all())}


@dataclass(frozen=True)
class Loader(ShownSection):
    """Experiment 3: DataLoader(pin_memory=True) against False, measured here or recorded; says so when neither;
    `shown` is the "dataloader" experiment."""

    def figure(self):
        return None if self.frame is None else dataloader.plot(self.frame, self.source)

    def report(self) -> str:
        if self.frame is None:
            return dataloader.NOTHING_RECORDED
        return f"pin_memory=True moves {dataloader.speedup(self.frame):.2f}x the bytes per second of pin_memory=False"

    def numbers(self) -> dict:
        return {} if self.frame is None else {"dataloader_pinned_speedup": dataloader.speedup(self.frame)}

    def notes(self) -> dict:
        return {"shown": self.frame is not None}


@dataclass(frozen=True)
class Stages(ShownSection):
    """The loader's stages one at a time, read against the pipelines' pace; `shown` is the "dataloader_stages"
    experiment."""

    loader: Loader

    def report(self) -> list:
        pipelines = self.loader
        return [
            self.frame[["what", "seconds_per_batch", "batches_per_s", "GBps"]].round(4),
            dataloader.pace_text(pipelines.frame, self.frame, pipelines.source, self.source),
        ]

    def notes(self) -> dict:
        f = self.frame
        return {"stages": list(f["stage"]), "workers_batches_per_s": round(float(f["batches_per_s"].iloc[0]), 1)}


@dataclass(frozen=True)
class Pitfall:
    """The non_blocking D2H read too early: the bytes wrong before synchronising, and after."""

    result: object  # pitfall.PitfallResult
    experiment = "nonblocking_pitfall"

    def report(self) -> str:
        p = self.result
        return (
            f"{p.source}, {format_bytes(p.nbytes)} copied with non_blocking=True:\n\n"
            f"- read before synchronising: {100 * p.wrong_before_sync:.1f}% of the bytes are wrong\n"
            f"- read after synchronising: {100 * p.wrong_after_sync:.1f}% of the bytes are wrong"
        )

    def notes(self) -> dict:
        return {"wrong_before": self.result.wrong_before_sync, "wrong_after": self.result.wrong_after_sync}

    def checks(self) -> dict:
        p = self.result
        return {
            "pitfall_wrong_before_sync": p.wrong_before_sync > 0,
            "pitfall_right_after_sync": p.wrong_after_sync == 0,
        }


class _WholeCells:
    """A table displayed with every cell whole (no truncated text columns)."""

    def __init__(self, frame):
        self.frame = frame

    def _repr_html_(self):
        import pandas as pd

        with pd.option_context("display.max_colwidth", None):
            return self.frame._repr_html_()

    def __repr__(self):
        import pandas as pd

        with pd.option_context("display.max_colwidth", None):
            return repr(self.frame)


@dataclass(frozen=True)
class HostMemoryKinds:
    """Kinds of host memory a GPU can reach, each with a recorded number and its source (host_memory.kinds)."""

    experiment = "host_memory_kinds"
    datasets = (host_memory.SWEEP, host_memory.PIN_COST, host_memory.ZERO_COPY, host_memory.C2C)

    @cached_property
    def table(self):
        return host_memory.kinds()

    @cached_property
    def recorded(self) -> dict:
        """The numbers the table quotes, by key (host_memory.numbers)."""
        return host_memory.numbers()

    def report(self):
        return _WholeCells(self.table)

    def notes(self) -> dict:
        no_number = int((self.table["number"] == host_memory.NONE_HERE).sum())
        return {"rows": len(self.table), "no_number": no_number, **{k: round(v, 4) for k, v in self.recorded.items()}}


@dataclass(frozen=True)
class Placement(DatasetsTable):
    """Recorded NUMA and shared-root-complex effects on host DMA: each case against the best placement."""

    experiment = "host_placement"
    make = staticmethod(placement.host_placement_table)

    def report(self):
        return self.table.drop(columns="dataset").round(3)

    def notes(self) -> dict:
        return {
            f"{r.system[:10]} {r.case} {r.direction}": round(r.vs_best, 3)
            for r in self.table.itertuples()
            if r.vs_best < 1
        }

    def checks(self) -> dict:
        t = self.table
        return {"remote_and_shared_are_slower": bool((t[t["vs_best"] != 1.0]["vs_best"] < 1).all())}


@dataclass(frozen=True)
class NumaCopy(ShownSection):
    """Host copies with the memory on the thread's own NUMA node vs another, measured here (numa.local_vs_remote);
    `shown` is the "numa_host_copy" experiment."""

    def figure(self):
        fig, ax = plots.figure(width=7, height=3.8)
        numa.plot_local_vs_remote(self.frame, ax)
        return fig

    def report(self) -> list:
        f = self.frame
        table = f[["cpu_node", "memory_node", "placement", "GBps", "vs_local", "verification"]].round(3)
        return [table, "\n\n".join(f.attrs["notes"])]

    def notes(self) -> dict:
        remote = self.frame[self.frame["placement"] == "remote"]
        vs = [round(float(v), 3) for v in remote["vs_local"]]
        return {"rows": len(self.frame), "remote_rows": len(remote), "remote_vs_local": vs}

    def checks(self) -> dict:
        f = self.frame
        return {"numa_local_row_measured": bool((f["placement"] == "local").any() and (f["GBps"] > 0).all())}


@dataclass(frozen=True)
class Interview:
    """The interview's numbers from this run's system: pinned ÷ pageable per direction, and the break-even."""

    ratios: Ratios
    pin: PinCost
    copy_ref: object  # the recorded sweep the break-even's copy times come from
    experiment = "interview"

    @cached_property
    def mine(self):
        """This run's system at its largest size, H2D then D2H: measured here if live, else the recorded sweep."""
        t = self.ratios.at_largest
        mine = t[t.dataset == "measured here"] if len(t) else t
        if not len(mine):  # the recorded sweep the break-even uses (a profile given as reference= comes first)
            mine = pvp.largest_size_ratios(pvp.ratio_frame(self.copy_ref))
        return mine.drop_duplicates("direction").sort_values("direction", ascending=False)  # one run each

    def report(self) -> str:
        t, even, largest = self.ratios.at_largest, self.pin.table, self.pin.break_even().largest
        lines = [
            f"Q1: pinned ÷ pageable at {format_bytes(r.nbytes)}, {r.direction.upper()}: {r.ratio:.2f}× — {r.label}"
            for r in self.mine.itertuples()
        ]
        if len(t):
            lines.append(f"every system shown, at its largest size: {t.ratio.min():.2f}× to {t.ratio.max():.2f}×")
        labels = self.pin.pin_label
        if self.pin.pin_label != self.pin.copy_label:
            labels = f"pin: {self.pin.pin_label}; copies: {self.pin.copy_label}"
        lines.append(
            f"Q2: k* = {even.break_even_copies.iloc[0]:.1f} copies at {even['size'].iloc[0]} … "
            f"{largest.break_even_copies:.1f} at {largest['size']} — {labels}"
        )
        return "\n\n".join(lines)

    def notes(self) -> dict:
        largest = self.pin.break_even().largest
        return {
            "ratio_source": self.mine.label.iloc[0],
            "ratio_nbytes": int(self.mine.nbytes.max()),
            **{f"ratio_{r.direction}": float(r.ratio) for r in self.mine.itertuples()},
            "break_even_copies": float(largest.break_even_copies),
            "break_even_size_bytes": int(largest["nbytes"]),
            "break_even_source": self.pin.pin_label,
        }


def sources(names, datasets) -> str:
    """One Markdown line per dataset shown (`session.datasets`): its title, quality grade and source."""
    known = {d.name: d for d in datasets}
    lines = []
    for name in names:
        ds = known[name] if name in known else ref.load(name)
        lines.append(f"- {ds.meta['title']} (quality {ds.meta['quality']}): {ds.meta['source']}")
    return "\n".join(lines)
