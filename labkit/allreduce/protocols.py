"""NCCL's protocols (LL, LL128, Simple) and algorithms (ring, tree, NVLS) in numbers, from recorded data.

- `protocol_table`: each protocol's data fraction (NCCL src/include/device.h) and the maintainer's per-step
  latency and bandwidth figures (nccl-tests#123, dataset `nccl_protocol_latency_issue123_points`; LL128's
  "95% peak" is also sjeaugey's in NVIDIA/nccl#281). NCCL's tuner uses its own constants instead
  (src/graph/tuning.cc, NCCL 2.30.7: ring 0.6/1.9/3.4 µs per NVLink step, 2.7/4.0/14 µs per network step);
- `small_message_latency`: the DGX A100 small all-reduce times of nccl-tests#123 against the number of ring
  steps 2(N−1), with a least-squares line per protocol (a model fitted to recorded numbers);
- `nvls_vs_ring`: one 8× H200 node, NVLS on vs off (`nccl_allreduce_nvls_vs_ring_vs_gpu_count_8xh200_mlengineering`).
"""

from __future__ import annotations

from .. import plots
from .. import reference as ref

LATENCY_DATASET = "nccl_allreduce_small_message_latency_dgxa100_issue123"
PROTOCOL_DATASET = "nccl_protocol_latency_issue123_points"
NVLS_DATASET = "nccl_allreduce_nvls_vs_ring_vs_gpu_count_8xh200_mlengineering"

#: Bytes of data per bytes on the wire, from NCCL src/include/device.h (v2.30.7): an LL line is 8 B of which
#: 4 B data and 4 B flag; an LL128 line is 128 B of which 120 B data (NCCL_LL128_DATAELEMS = 15 of 16
#: uint64); Simple sends the data alone and signals with a separate flag after a memory fence.
DATA_FRACTION = {"LL": 4 / 8, "LL128": 120 / 128, "Simple": 1.0}


def protocol_table():
    """One row per protocol: data fraction (NCCL source) and the maintainer's approximate figures."""
    import pandas as pd

    f = ref.load(PROTOCOL_DATASET).frame
    rows = []
    for proto in DATA_FRACTION:
        pick = lambda what: float(f[f.quantity.str.startswith(f"NCCL {proto} protocol {what}")].value.iloc[0])
        rows.append(
            {
                "protocol": proto,
                "data per line (NCCL device.h)": f"{DATA_FRACTION[proto]:.2%}",
                "latency per step (µs, maintainer ~)": pick("latency"),
                "peak bandwidth (% of link, maintainer ~)": pick("bandwidth"),
            }
        )
    return pd.DataFrame(rows)


def small_message_latency():
    """Rows (protocol, N, steps = 2(N−1), time_us) of nccl-tests#123: table 1 (default protocol, `-g N`) and
    table 2's totals (`-t N`, one protocol forced each; the author's '~' values). Per-step rows are left out:
    they are the author's total / 2(N−1), not measurements."""
    f = ref.load(LATENCY_DATASET).frame
    f = f[f.op == "all_reduce"].copy()
    f["protocol"] = f.config.map(lambda c: c.split(",")[0].split("=")[1] if c.startswith("NCCL_PROTO=") else "default")
    f["steps"] = 2 * (f.world_size - 1)
    return f[["protocol", "world_size", "steps", "time_us", "config"]].reset_index(drop=True)


def fit_per_step(rows) -> dict:
    """Least squares time_us = fixed + per_step × 2(N−1), per protocol: {protocol: (fixed_us, per_step_us)}."""
    import numpy as np

    out = {}
    for proto, g in rows.groupby("protocol", sort=False):
        per_step, fixed = np.polyfit(g.steps.to_numpy(float), g.time_us.to_numpy(float), 1)
        out[proto] = (float(fixed), float(per_step))
    return out


def small_message_figure(rows, fits):
    """Recorded time of an 8–128 B all-reduce against the ring's 2(N−1) steps, with each fitted line."""
    fig, ax = plots.figure()
    for proto, g in rows.groupby("protocol", sort=False):
        g = g.sort_values("steps")
        label = "default protocol (-g N)" if proto == "default" else f"NCCL_PROTO={proto} (-t N)"
        pts = plots.line(ax, g.steps, g.time_us, f"recorded: {label}", plots.RECORDED)
        fixed, slope = fits[proto]
        plots.line(ax, g.steps, fixed + slope * g.steps, f"_{proto} fit", plots.MODEL, color=pts.get_color(), lw=0.8)
    ax.plot([], [], "k--", lw=0.8, label="model: least-squares line per protocol")
    plots.finish(
        ax,
        "All-reduce of 8–128 B on a DGX A100: time grows with the ring's steps",
        "ring steps 2(N−1) (count)",
        "time per all-reduce (µs)",
        source="recorded: DGX A100, NCCL ring, 1 channel — nccl-tests#123 (author's tables, '~' values)",
    )
    return fig


def nvls_vs_ring():
    """busbw at 8 GiB on one 8× H200 node, NVLS (default) vs ring (NCCL_NVLS_ENABLE=0), N = 4…8 GPUs."""
    f = ref.load(NVLS_DATASET).frame
    f = f.assign(algorithm=f.config.map(lambda c: "ring" if "Ring" in c or "=0" in c else "NVLS"))
    return f.pivot_table(index="world_size", columns="algorithm", values="busbw_GBps", aggfunc="first")


class SmallMessages:
    """Notebook 05's small-message regime: the recorded DGX A100 times, a line per protocol, and what LL costs."""

    datasets = (PROTOCOL_DATASET, LATENCY_DATASET)

    def __init__(self):
        self.rows = small_message_latency()
        self.fits = fit_per_step(self.rows)
        ll8 = self.rows[(self.rows.protocol == "LL") & (self.rows.world_size == 8)]
        self.ll_8gpu_us = float(ll8.time_us.iloc[0])

    def figure(self):
        return small_message_figure(self.rows, self.fits)

    def report(self) -> str:
        lines = [
            f"{proto} model (least squares on the recorded times): {fixed:.2f} µs + {per_step:.3f} µs × 2(N−1)"
            for proto, (fixed, per_step) in self.fits.items()
        ]
        lines.append(
            f"8 GPUs, LL: {self.ll_8gpu_us:g} µs for ≤ 128 B — time in which a ring at A100's ≈230 GB/s busbw "
            f"could have moved {self.ll_8gpu_us * 1e-6 * 230e9 / 1e6:.1f} MB"
        )
        return "  \n".join(lines)

    def numbers(self) -> dict:
        out = {f"issue123_{proto}_us_per_step": per_step for proto, (_, per_step) in self.fits.items()}
        out |= {f"issue123_{proto}_fixed_us": fixed for proto, (fixed, _) in self.fits.items()}
        return out | {"issue123_LL_8gpu_us": self.ll_8gpu_us}


class NvlsVsRing:
    """Notebook 05's recorded 8× H200 busbw at 8 GiB, NVLS on vs off, by GPU count."""

    datasets = (NVLS_DATASET,)

    def __init__(self):
        self.table = nvls_vs_ring()

    def report(self):
        return self.table.rename_axis(index="GPUs", columns="busbw at 8 GiB (GB/s), recorded: 8× H200 — ml-engineering")

    def numbers(self) -> dict:
        return {
            "h200_8gpu_ring_busbw_GBps": self.table.loc[8, "ring"],
            "h200_8gpu_nvls_busbw_GBps": self.table.loc[8, "NVLS"],
        }
