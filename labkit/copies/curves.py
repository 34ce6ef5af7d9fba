"""Notebook 01's machinery: copy-time curves (live or recorded), their α-β fits, and the figures."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from .. import models, plots, specs
from ..models import MIN_POINTS_FOR_FIT
from ..reference import precise_rows
from ..runtime import Found
from ..units import GB, format_bytes, format_time, pow2_sizes
from .sweeps import QUICK_MAX_BYTES, SWEEP_MAX_BYTES, SWEEP_MIN_BYTES, gpu_copy_sweep


@dataclasses.dataclass(frozen=True)
class Curve:
    """Copy times against size for one system and direction."""

    label: str  # legend text, with where the numbers came from
    how: str  # plots.MEASURED or plots.RECORDED
    direction: str  # h2d, d2h, host
    nbytes: tuple[int, ...]
    seconds: tuple[float, ...]
    system: str
    source: str  # dataset name, or "measured here"
    pcie_gen: int | None = None  # generation of the link, when known
    short: str = ""  # a few words for menus: GPU, direction, provenance

    @property
    def bandwidth_GBps(self) -> np.ndarray:
        return np.asarray(self.nbytes) / np.asarray(self.seconds) / GB

    def fit(self) -> models.AlphaBetaFit | None:
        if len(set(self.nbytes)) < MIN_POINTS_FOR_FIT:
            return None
        return models.fit_alpha_beta(self.nbytes, self.seconds)


def pcie_generation(text: str) -> int | None:
    m = re.search(r"Gen\s*([3-6])", text or "")
    return int(m.group(1)) if m else None


def curves_from_dataset(ds, memory: str = "pinned", directions=("h2d", "d2h")) -> list[Curve]:
    """One Curve per (direction, run) of a copy_sweep dataset; time from time_s, else nbytes / bandwidth.

    Sizes whose bandwidth was printed with a single significant digit are left out: the rounding
    alone makes the time they imply uncertain by 10-50%.
    """
    f = precise_rows(ds)  # a printed 0.0 GB/s, or a single digit, carries no time
    f = f[(f["memory"] == memory) & (f["direction"].isin(directions))]
    if (
        "bandwidth_direction" in f.columns
    ):  # one link, one direction: aggregates over several GPUs are not curves of a link
        f = f[f["bandwidth_direction"].fillna(ds.meta["bandwidth_direction"]) == "unidirectional"]
    elif ds.meta["bandwidth_direction"] != "unidirectional":
        return []
    runs = f["run"].fillna("") if "run" in f.columns else None
    out = []
    keys = ["direction"] + (["run"] if runs is not None else [])
    for key, g in f.assign(**({"run": runs} if runs is not None else {})).groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        direction, run = key[0], (key[1] if len(key) > 1 else "")
        g = g.sort_values("nbytes")
        if "time_s" in g.columns and g["time_s"].notna().all() and ds.meta.get("provenance") == "measured":
            secs = g["time_s"].to_numpy(float)
        else:
            secs = g["nbytes"].to_numpy(float) / (g["bandwidth_GBps"].to_numpy(float) * GB)
        label = f"{ds.label} [{direction.upper()}{', ' + str(run) if run else ''}, {len(g)} sizes]"
        how = plots.MEASURED if ds.meta.get("provenance") == "measured" else plots.RECORDED
        short = f"{ds.meta['gpu']} {direction.upper()}{' ' + str(run) if run else ''} ({'measured' if how == plots.MEASURED else 'recorded'})"
        out.append(
            Curve(
                label,
                how,
                direction,
                tuple(int(x) for x in g["nbytes"]),
                tuple(float(s) for s in secs),
                ds.meta["title"],
                ds.name,
                pcie_generation(ds.meta.get("interconnect", "")),
                short,
            )
        )
    return out


def curve_from_sweep(sweep, label_prefix: str = "measured here") -> Curve:
    """A Curve from a live labkit.copies.sweeps.Sweep."""
    return Curve(
        f"{label_prefix}: {sweep.device} [{sweep.direction.upper()}]",
        plots.MEASURED,
        sweep.direction,
        tuple(sweep.nbytes),
        tuple(sweep.seconds),
        sweep.device,
        "measured here",
        short=f"{sweep.device} {sweep.direction.upper()} (measured here)",
    )


def measure_here(quick: bool, *, progress: bool = True) -> Found:
    """H2D and D2H pinned sweeps on this machine's GPU, as Curves (4 B .. 1 GiB; quick: every 4×, up to 64 MiB)."""
    sizes = pow2_sizes(SWEEP_MIN_BYTES, QUICK_MAX_BYTES if quick else SWEEP_MAX_BYTES, step=2 if quick else 1)
    curves, skipped = [], []
    for direction in ("h2d", "d2h"):
        sweep = gpu_copy_sweep(sizes, direction, "pinned", progress=progress)
        curves.append(curve_from_sweep(sweep))
        skipped += sweep.skipped
    return Found(
        curves, f"measured here: {curves[0].system}", note=("Skipped: " + "; ".join(skipped)) if skipped else None
    )


#: What notebook 01 needs of a reference's own copy sweeps (`reference.select(usable=..., needs=...)`).
FITTABLE = f"a pinned H2D or D2H sweep of at least {MIN_POINTS_FOR_FIT} sizes to fit"


def has_fittable_curve(datasets) -> bool:
    """Whether any dataset holds a pinned H2D/D2H curve with enough sizes for an α-β fit."""
    return any(len(c.nbytes) >= MIN_POINTS_FOR_FIT for d in datasets for c in curves_from_dataset(d))


def curves_of(datasets) -> tuple[list[Curve], list[str]]:
    """(the curves of every dataset that has some, the names of those datasets) — what a figure shows."""
    curves, names = [], []
    for ds in datasets:
        got = curves_from_dataset(ds)
        if got:
            curves += got
            names.append(ds.name)
    return curves, names


def host_curve(sweep) -> Curve:
    """The host-memory copy sweep as a Curve, labelled as host memory measured here."""
    return Curve(
        f"measured here: host memory copy ({sweep.device})",
        plots.MEASURED,
        "host",
        tuple(sweep.nbytes),
        tuple(sweep.seconds),
        sweep.device,
        "measured here",
        short="host memory copy (measured here)",
    )


def link_facts(env: dict, datasets):
    """(table, text, facts) about the PCIe link the curves ran over.

    With NVIDIA GPUs here: their links from NVML, the spec of the first one's (per direction), and
    `facts` for the results file; without: the links of the recorded systems shown (`facts` empty).
    """
    import pandas as pd

    if not env.get("gpus"):
        table = pd.DataFrame(
            [{"dataset": d.name, "system": d.meta["system"], "interconnect": d.meta["interconnect"]} for d in datasets]
        )
        return table, f"No NVIDIA GPU here ({env.get('nvml_problem')}). The recorded systems' links:", {}
    table = pd.DataFrame(env["gpus"])[
        [
            "index",
            "name",
            "bus_id",
            "numa_node",
            "pcie_gen_current",
            "pcie_gen_max",
            "pcie_width_current",
            "pcie_width_max",
        ]
    ]
    g = env["gpus"][0]
    if not (g.get("pcie_gen_max") and g.get("pcie_width_max")):
        return table, "", {}
    s = specs.pcie_spec(g["pcie_gen_max"], g["pcie_width_max"])
    return (
        table,
        f"spec for this link: {s.bandwidth_GBps:g} GB/s per direction ({s.source})",
        {"gen": g["pcie_gen_max"], "width": g["pcie_width_max"], "spec_GBps": s.bandwidth_GBps},
    )


def fit_table(curves):
    """α, β, n½ and the worst residual for each curve that has enough sizes."""
    import pandas as pd

    rows = []
    for c in curves:
        fit = c.fit()
        if fit is None:
            continue
        rows.append(
            {
                "curve": c.label,
                "direction": c.direction,
                "points": len(c.nbytes),
                "alpha_us": fit.latency_s * 1e6,
                "beta_GBps": fit.bandwidth_GBps,
                "n_half": format_bytes(fit.n_half_bytes),
                "n_half_bytes": fit.n_half_bytes,
                "median_residual_pct": 100 * float(np.median(np.abs(fit.residuals))),
                "max_residual_pct": 100 * float(np.max(np.abs(fit.residuals))),
                "largest_size": format_bytes(max(c.nbytes)),
                "peak_measured_GBps": float(np.max(c.bandwidth_GBps)),
            }
        )
    return pd.DataFrame(rows)


def plot_curves(curves, *, title: str, spec_gens=(3, 4, 5, 6), fits: bool = True):
    """Two panels: time vs size and bandwidth vs size, log axes, fits as dashed model lines.

    The legend sits under the panels (one entry per curve, its fit and the spec lines), so that
    long source names never cover the data.
    """
    fig, (ax_t, ax_b) = plots.figure(1, 2, width=6.0, height=4.4)
    for c in curves:
        n = np.asarray(c.nbytes, float)
        h = plots.line(ax_t, n, np.asarray(c.seconds) * 1e6, c.label, c.how)
        plots.line(ax_b, n, c.bandwidth_GBps, "_nolegend_", c.how, color=h.get_color())
        fit = c.fit() if fits else None
        if fit is not None:
            xs = np.geomspace(n.min(), n.max(), 100)
            lab = (
                f"model: α-β fit of the curve above, α = {fit.latency_s * 1e6:.2g} µs, "
                f"β = {fit.bandwidth_GBps:.3g} GB/s, n½ = {format_bytes(fit.n_half_bytes)}"
            )
            plots.line(ax_t, xs, fit.predict(xs) * 1e6, lab, plots.MODEL, color=h.get_color(), alpha=0.6)
            plots.line(
                ax_b, xs, fit.predict_bandwidth_GBps(xs), "_nolegend_", plots.MODEL, color=h.get_color(), alpha=0.6
            )
    for i, g in enumerate(spec_gens):
        plots.spec_line(ax_b, specs.pcie_spec(g), color=str(0.15 + 0.15 * i))
    for ax in (ax_t, ax_b):
        ax.set_yscale("log")
        plots.size_axis(ax)
    plots.finish(ax_t, f"{title}: time per copy", "copy size (bytes, log2)", "time per copy (µs, log)", legend=False)
    plots.finish(
        ax_b,
        f"{title}: bandwidth",
        "copy size (bytes, log2)",
        "bandwidth (GB/s = 1e9 B/s, unidirectional)",
        legend=False,
    )
    if spec_gens:
        ax_b.legend(fontsize=7, loc="upper left")  # spec lines
    handles, labels = ax_t.get_legend_handles_labels()
    fig.tight_layout()
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=7.5, ncol=1, frameon=False)
    return fig


def predict(fit: models.AlphaBetaFit, nbytes: int) -> dict:
    """What the α-β model says about one copy size."""
    t = fit.predict(nbytes)
    return {
        "nbytes": nbytes,
        "size": format_bytes(nbytes),
        "seconds": t,
        "time": format_time(t),
        "bandwidth_GBps": nbytes / t / GB,
        "bound": fit.bound(nbytes),
        "latency_share": fit.latency_s / t,
    }


def plot_prediction(fit: models.AlphaBetaFit, nbytes: int, system: str, source: str = ""):
    """The fitted curve with the chosen size marked, and the two asymptotes (α and n/β)."""
    fig, ax = plots.figure(width=8.0, height=4.6)
    xs = np.geomspace(4, 1 << 30, 200)
    plots.line(ax, xs, fit.predict(xs) * 1e6, "α-β fit", plots.MODEL)
    ax.axhline(fit.latency_s * 1e6, color="0.6", ls=":", label=f"α = {fit.latency_s * 1e6:.3g} µs (latency floor)")
    ax.plot(
        xs, xs / (fit.bandwidth_GBps * GB) * 1e6, color="0.6", ls="-.", label=f"n/β, β = {fit.bandwidth_GBps:.3g} GB/s"
    )
    ax.axvline(fit.n_half_bytes, color="tab:red", lw=0.8, label=f"n½ = {format_bytes(fit.n_half_bytes)}")
    p = predict(fit, nbytes)
    ax.plot(
        [nbytes],
        [p["seconds"] * 1e6],
        "o",
        color="tab:red",
        ms=9,
        label=f"{p['size']}: {p['time']}, {p['bandwidth_GBps']:.3g} GB/s, {p['bound']}",
    )
    ax.set_yscale("log")
    ax.set_ylim(fit.latency_s * 1e6 / 3, None)
    plots.size_axis(ax)
    plots.finish(
        ax,
        f"Predicted copy time — {system}",
        "copy size (bytes, log2)",
        "time (µs, log)",
        source=f"model: t = α + n/β fitted to {source or system}",
        legend=False,
    )
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig, p
