"""What notebook 01 shows, section by section: results that `runtime.Session.present` shows and records."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .. import check, specs
from ..runtime import DatasetsTable, ShownSection
from ..units import format_bytes, pow2_sizes
from . import curves as lc
from . import directions, link_health
from . import small_copy as sc
from . import sweeps as copy_sweeps

#: The fit table's columns, as the reader compares them: the fit, n½, and how far the points stray from it.
FIT_COLUMNS = [
    "curve",
    "points",
    "alpha_us",
    "beta_GBps",
    "n_half",
    "median_residual_pct",
    "max_residual_pct",
    "peak_measured_GBps",
]
#: A plausible latency floor for one host↔GPU copy, µs: a driver call and a DMA round trip, not ns, not ms.
ALPHA_PLAUSIBLE_US = (0.5, 50)
#: A fit describes a curve when its typical point is within this (%); the worst point is shown, not hidden.
FIT_MEDIAN_RESIDUAL_PCT = 15
#: Bandwidth saturates: the largest size reaches at least this share of the best bandwidth seen.
SATURATED_SHARE = 0.8
#: Why the exercises and predictions that read the primary fit cannot be scored in a run without one.
NO_FIT = "no curve in this run has enough sizes to fit α and β (see the fit table), so nothing to check it against"


@dataclass(frozen=True)
class Curves(ShownSection):
    """Experiment 1: copy time against size, measured here (with a GPU) and on every recorded system; `shown` is the
    "h2d_sweep" experiment (its data: the live curves, or None)."""

    recorded: list  # the copy_sweep datasets the reference selects

    @cached_property
    def _recorded(self):
        return lc.curves_of(self.recorded)

    @property
    def datasets(self) -> list:
        return self._recorded[1]

    @cached_property
    def curves(self) -> list:
        return (self.frame or []) + self._recorded[0]

    @property
    def sweeps(self) -> list:
        """Curves with enough sizes to fit α and β."""
        return [c for c in self.curves if len(c.nbytes) >= lc.MIN_POINTS_FOR_FIT]

    @property
    def points(self) -> list:
        """Curves of a few sizes only: shown as a table, not fitted."""
        return [c for c in self.curves if len(c.nbytes) < lc.MIN_POINTS_FOR_FIT]

    def direction(self, direction: str) -> list:
        return [c for c in self.sweeps if c.direction == direction]

    def report(self) -> str:
        return f"H2D/D2H experiment: {self.shown.mode}; {len(self.curves)} curves"

    def notes(self) -> dict:
        return {
            "curves": len(self.curves),
            "recorded_datasets": len(dict.fromkeys(self.shown.datasets + tuple(self.datasets))),
        }


@dataclass(frozen=True)
class Points:
    """The curves of a few sizes only, as a table (too few to fit); without any, a sentence saying so."""

    curves: Curves

    def report(self):
        if not self.curves.points:
            return (
                f"Every curve shown has at least {lc.MIN_POINTS_FOR_FIT} sizes, so each is fitted below: no system "
                "here was measured at a few sizes only."
            )
        import pandas as pd

        return pd.DataFrame(
            [
                {"system": c.label, "direction": c.direction, "size": format_bytes(n), "GB/s": round(bw, 2)}
                for c in self.curves.points
                for n, bw in zip(c.nbytes, c.bandwidth_GBps)
            ]
        )


@dataclass(frozen=True)
class Fits:
    """The α-β fit of every sweep, and of the primary curve (the first) the numbers quote."""

    curves: Curves
    experiment = "fit"

    @cached_property
    def table(self):
        return lc.fit_table(self.curves.sweeps)

    @property
    def primary(self):
        return self.curves.sweeps[0] if self.curves.sweeps else None

    @cached_property
    def primary_fit(self):
        """The primary curve's α-β fit, or None without a curve to fit."""
        return self.primary.fit() if self.primary else None

    def report(self) -> list:
        if self.table.empty:
            return ["No curve has enough sizes to fit α and β: see the points table above."]
        table, f = self.table[FIT_COLUMNS].round(2), self.primary_fit  # a table row: a sweep, so a primary fit
        return [
            table,
            f"primary curve: {self.primary.label}\n\nα = {f.latency_s * 1e6:.2f} µs, β = {f.bandwidth_GBps:.2f} GB/s, "
            f"n½ = {format_bytes(f.n_half_bytes)}",
        ]

    def numbers(self) -> dict:
        f = self.primary_fit
        if f is None:
            return {}
        return {"alpha_us": f.latency_s * 1e6, "beta_GBps": f.bandwidth_GBps, "n_half_bytes": f.n_half_bytes}

    def notes(self) -> dict:
        return {} if self.primary_fit is None else {"curve": self.primary.label, **self.primary_fit.to_dict()}

    def exercises(self, answer_1MiB_us, answer_batch_factor) -> list:
        """Exercises 1 and 3 checked against the primary fit: one 1 MiB copy's time (µs), and 1,000 copies of 4 KiB
        one by one against one copy of 4000 KiB (the factor). Without a fit, each says why it cannot be checked."""
        f = self.primary_fit
        if f is None:
            return [check.unavailable(name, NO_FIT) for name in ("1 MiB copy time", "batching factor")]
        return [
            check.numeric(
                "1 MiB copy time",
                answer_1MiB_us,
                f.predict(1 << 20) * 1e6,
                unit="µs",
                hint="t = α + n/β with n = 1,048,576 bytes and β in bytes per second",
            ),
            check.numeric(
                "batching factor",
                answer_batch_factor,
                1000 * f.predict(4096) / f.predict(1000 * 4096),
                rel_tol=0.15,
                hint="1000·(α + 4 KiB/β) versus α + 4000 KiB/β",
            ),
        ]

    def predictions(self, latency_us, n_half_KiB) -> list:
        """The predict-first guesses scored against the primary fit: a tiny copy's latency (µs) and n½ (KiB)."""
        f = self.primary_fit
        if f is None:
            return [check.unavailable(name, NO_FIT) for name in ("latency of a tiny copy", "n½")]
        return [
            check.predict_score("latency of a tiny copy", latency_us, f.latency_s * 1e6, "µs"),
            check.predict_score("n½", n_half_KiB, f.n_half_bytes / 1024, "KiB"),
        ]


@dataclass(frozen=True)
class Invariants:
    """What every run must satisfy, recorded in the results file: the fits exist, are plausible, and fit; bandwidth
    saturates; no PCIe measurement exceeds its generation's per-direction spec."""

    fits: Fits

    @property
    def over_spec(self) -> list:
        return [
            c.label
            for c in self.fits.curves.curves
            if c.pcie_gen and c.bandwidth_GBps.max() > specs.pcie_spec(c.pcie_gen).bandwidth_GBps
        ]

    def checks(self) -> dict:
        t, sweeps = self.fits.table, self.fits.curves.sweeps
        lo, hi = ALPHA_PLAUSIBLE_US
        alpha = t["alpha_us"] if len(t) else np.array([])
        residual = t["median_residual_pct"] if len(t) else np.array([])
        return {
            "fits_exist": len(t) >= 1,
            "latency_floor_plausible": bool(((alpha > lo) & (alpha < hi)).all()),
            "fit_median_residual_below_15pct": bool((residual < FIT_MEDIAN_RESIDUAL_PCT).all()),
            "bandwidth_saturates": all(
                c.bandwidth_GBps[-1] >= SATURATED_SHARE * c.bandwidth_GBps.max() for c in sweeps
            ),
            "within_pcie_spec": not self.over_spec,
        }

    def report(self) -> str:
        checks = ", ".join(f"{name} {'✓' if ok else '✗'}" for name, ok in self.checks().items())
        return f"{checks}; over its PCIe generation's spec: {', '.join(self.over_spec) or 'none'}"


@dataclass(frozen=True)
class SmallCopies(ShownSection):
    """The small-copy floor: whose overhead is it (measured here with a GPU, else the recorded H100 loop); `shown`
    is the "small_copies" experiment."""

    @cached_property
    def table(self):
        import pandas as pd

        return pd.DataFrame(self.frame or [])

    def report(self) -> list:
        return [self.source, self.table.round(2)]

    def checks(self) -> dict:
        return {"small_copy_floor_shown": not self.table.empty}

    def notes(self) -> dict:
        return {"rows": len(self.table), "d2h_floor_spread": sc.d2h_floor_spread(self.shown.data)}


def host_sweep(quick: bool, *, progress: bool = True):
    """numpy.copyto between two buffers in this machine's RAM, every size from 64 B (quick: every 4×, fewer repeats)."""
    top = copy_sweeps.HOST_QUICK_MAX_BYTES if quick else copy_sweeps.HOST_MAX_BYTES
    sizes = pow2_sizes(copy_sweeps.HOST_MIN_BYTES, top, step=2 if quick else 1)
    return copy_sweeps.host_copy_sweep(sizes, repeats=5 if quick else 10, progress=progress)


@dataclass(frozen=True)
class HostLaw:
    """The same α + n/β law on this machine's host memory, measured live in every mode."""

    sweep: object  # sweeps.host_copy_sweep
    experiment = "host_copy_sweep"

    @cached_property
    def curve(self):
        return lc.host_curve(self.sweep)

    @cached_property
    def fit(self):
        return self.curve.fit()

    def figure(self):
        return lc.plot_curves([self.curve], title="Host memory copy (numpy.copyto)", spec_gens=())

    def report(self) -> str:
        f = self.fit
        return (
            f"host memory: α = {f.latency_s * 1e6:.2f} µs, β = {f.bandwidth_GBps:.1f} GB/s, "
            f"n½ = {format_bytes(f.n_half_bytes)}; worst residual {100 * np.max(np.abs(f.residuals)):.0f}%"
        )

    def numbers(self) -> dict:
        return {"host_alpha_us": self.fit.latency_s * 1e6, "host_beta_GBps": self.fit.bandwidth_GBps}

    def checks(self) -> dict:
        return {"host_fit_positive": self.fit.latency_s >= 0 and self.fit.bandwidth_GBps > 0}

    def notes(self) -> dict:
        return self.fit.to_dict()


@dataclass(frozen=True)
class Link:
    """The PCIe link: this machine's GPUs from NVML and the spec of the first, else the recorded systems' links."""

    env: dict
    shown: list  # the recorded datasets the figures showed (Dataset objects)
    experiment = "link"

    @cached_property
    def _facts(self):
        return lc.link_facts(self.env, self.shown)

    def report(self) -> list:
        table, text, _ = self._facts
        return [text, table]

    def notes(self) -> dict:
        return self._facts[2]  # this machine's link and its spec; empty without an NVIDIA GPU


@dataclass(frozen=True)
class DeviceOrder:
    """Which GPU is "GPU 0": torch's order against PCI bus ids and nvidia-smi here; a recorded slow-link outlier."""

    experiment = "device_order"
    datasets = (link_health.RECORDED_OUTLIER,)

    @cached_property
    def order(self):
        return link_health.device_order()

    def report(self) -> list:
        o = link_health.recorded_outlier()
        outlier = (
            f"recorded: {o['title']} — {o['slow_GBps']} vs {o['others_min_GBps']}–{o['others_max_GBps']} GB/s "
            f"({o['source']})"
        )
        return [self.order, *self.order.attrs["notes"], outlier]

    def notes(self) -> dict:
        return {"gpus": len(self.order), "notes": self.order.attrs["notes"]}


@dataclass(frozen=True)
class Explore:
    """The widget: any size on any fitted system → the predicted time, and whether latency or bandwidth bounds it."""

    curves: list

    @cached_property
    def by_system(self) -> dict:
        """Each fitted curve by its short name, fitted once (not again on every move of the widget)."""
        return {c.short: c for c in self.curves if c.fit() is not None}

    @property
    def systems(self) -> list:
        return list(self.by_system)

    def view(self, size, system_label):
        c = self.by_system[system_label]
        fig, p = lc.plot_prediction(c.fit(), size, system_label, c.label)
        print(
            f"{p['size']} on {system_label}: {p['time']} → {p['bandwidth_GBps']:.3g} GB/s, {p['bound']} "
            f"(α is {100 * p['latency_share']:.0f}% of the time)"
        )
        return p


@dataclass(frozen=True)
class Claim(DatasetsTable):
    """Check the claim "H2D is faster than D2H" on every shipped copy sweep (directions.h2d_vs_d2h)."""

    experiment = "h2d_vs_d2h"
    make = staticmethod(directions.h2d_vs_d2h)

    @cached_property
    def summary(self) -> dict:
        return directions.summary(self.table)

    def report(self):
        return self.table[["system", "nbytes", "h2d_GBps", "d2h_GBps", "d2h_over_h2d", "claim_holds"]]

    def notes(self) -> dict:
        return self.summary

    def checks(self) -> dict:
        return {"claim_fails_on_every_copy_sweep": self.summary["claim_holds_on"] == 0}


@dataclass(frozen=True)
class OtherDirections(DatasetsTable):
    """The other shipped measurements with both directions: D2H ≥ H2D is no law either."""

    experiment = "h2d_vs_d2h_others"
    make = staticmethod(directions.others)

    def report(self):
        return self.table[["system", "h2d_GBps", "d2h_GBps", "d2h_over_h2d"]].round(3)

    def notes(self) -> dict:
        r = self.table["d2h_over_h2d"]
        return {
            "rows": len(self.table),
            "h2d_ahead": int((r < 1).sum()),
            "min_d2h_over_h2d": float(r.min()),
            "max_d2h_over_h2d": float(r.max()),
        }
