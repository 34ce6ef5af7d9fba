"""P2P matrices drawn: heatmaps annotated with the topology's link labels, peer access, and systems side by side."""

from __future__ import annotations

from typing import Sequence

from .. import plots, widgets
from .diagnosis import diagnose
from .matrices import (
    KIND_TEXT,
    KINDS,
    P2P_STATES,
    P2P_TEXT,
    UNIT_TEXT,
    P2PRun,
    as_source,
    is_bandwidth,
    link_label,
    matrix,
    metric_label,
    metrics,
    numa_of,
)
from .summaries import short_name, summary_row

#: Heatmap colours span at least max/2 .. max (bandwidth) or min .. 2·min (latency).
COLOUR_SPAN = 2.0


def heatmap(ax, m, *, kind: str, title: str, source: str, topology=None, value_format=None, fontsize=None):
    """Draw one matrix: colour = value (off-diagonal scale), text = value + link label; diagonal in grey.

    Axes: rows are the source GPU, columns the destination GPU; tick labels carry the NUMA node
    when the topology gives it. Returns the colorbar.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    gpus = list(m.index)
    vals = m.to_numpy(dtype=float)
    n = len(gpus)
    off = np.array([[vals[a, b] if gpus[a] != m.columns[b] else np.nan for b in range(n)] for a in range(n)])
    finite = off[np.isfinite(off)]
    cmap = plt.get_cmap("viridis" if is_bandwidth(kind) else "magma_r").with_extremes(bad="0.85")
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    # The colour scale spans at least a factor of 2 (COLOUR_SPAN), so a 1% spread does not look like
    # a 2× one: only differences worth a finding stand out.
    if is_bandwidth(kind):
        vmin = min(vmin, vmax / COLOUR_SPAN)
    else:
        vmax = max(vmax, vmin * COLOUR_SPAN)
    img = ax.imshow(np.ma.masked_invalid(off), cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal")
    numa = numa_of(topology)
    ticks = [f"GPU{g}" + (f"\nNUMA {numa[g]}" if g in numa else "") for g in gpus]
    fs = fontsize or (8 if n <= 4 else 7 if n <= 8 else 4.5)
    ax.set_xticks(range(n), ticks, fontsize=max(fs - 0.5, 4))
    ax.set_yticks(range(n), ticks, fontsize=max(fs - 0.5, 4))
    fmt = value_format or (lambda v: f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}")
    mid = (vmin + vmax) / 2
    for a in range(n):
        for b in range(n):
            v = vals[a, b]
            label = link_label(topology, gpus[a], m.columns[b])
            if not np.isfinite(v):
                text = "—" if a != b else ""
            elif gpus[a] == m.columns[b]:
                text = f"{fmt(v)}\nlocal"
            else:
                text = fmt(v) + (f"\n{label}" if label else "")
            dark = np.isfinite(off[a, b]) and ((off[a, b] < mid) == is_bandwidth(kind))
            ax.text(b, a, text, ha="center", va="center", fontsize=fs, color="white" if dark else "black")
    ax.set_title(f"{title}\n{source}", fontsize=9)
    ax.set_xlabel("destination GPU (index)")
    ax.set_ylabel("source GPU (index)")
    cbar = ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.04)
    cbar.set_label(
        UNIT_TEXT[kind] + (" — GPU pairs only; grey = local copy or not printed" if n > 1 else ""), fontsize=8
    )
    return cbar


def plot_matrix(data, kind: str = "bandwidth_uni", p2p: str = "enabled"):
    """A figure with one heatmap of `data` (Dataset, P2PRun or MatrixSource), annotated with its topology."""
    src = as_source(data)
    m = matrix(src.frame, kind, p2p)
    size = 3.2 + 0.55 * len(m)
    fig, ax = plots.figure(width=size + 1.2, height=size)
    topo = None
    note = ""
    try:
        topo = src.topology
    except ValueError as e:
        note = f" (topology unreadable: {e})"
    if topo is None and not note:
        note = " — no `nvidia-smi topo -m` published"
    heatmap(ax, m, kind=kind, title=metric_label(kind, p2p) + note, source=src.label, topology=topo)
    fig.tight_layout()
    return fig


def plot_access(access, label: str):
    """The can_device_access_peer matrix as a heatmap of yes/no."""
    import numpy as np

    n = len(access)
    fig, ax = plots.figure(width=2.5 + 0.5 * n, height=2.0 + 0.5 * n)
    arr = np.array([[1.0 if access[i][j] else 0.0 for j in range(n)] for i in range(n)])
    ax.imshow(arr, cmap="RdYlGn", vmin=0, vmax=1)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, "self" if i == j else ("yes" if access[i][j] else "no"), ha="center", va="center", fontsize=8)
    ax.set_xticks(range(n), [f"GPU{j}" for j in range(n)])
    ax.set_yticks(range(n), [f"GPU{i}" for i in range(n)])
    ax.set_title(f"torch.cuda.can_device_access_peer(src, dst)\n{label}", fontsize=9)
    ax.set_xlabel("destination GPU (index)")
    ax.set_ylabel("source GPU (index)")
    fig.tight_layout()
    return fig


def plot_overview(sources: Sequence):
    """Two panels across systems: unidirectional bandwidth and latency, P2P on vs staged through host."""
    import numpy as np

    rows = [summary_row(s) for s in sources]
    labels = [short_name(s) for s in sources]
    measured = any(as_source(s).label.startswith("measured") for s in sources)
    how = "measured here and recorded" if measured else "recorded"
    fig, axes = plots.figure(1, 2, width=7.0, height=0.42 * len(rows) + 2.0)
    y = np.arange(len(rows))
    for ax, kind, xlabel in (
        (axes[0], "bandwidth_uni", "GB/s (unidirectional; median over GPU pairs; log scale)"),
        (axes[1], "latency_gpu", "µs per small copy (median over GPU pairs; log scale)"),
    ):
        for k, (p2p, colour) in enumerate((("enabled", "tab:green"), ("disabled", "tab:red"))):
            vals = [r.get(f"{kind}_{p2p}", np.nan) for r in rows]
            ax.barh(y + (k - 0.5) * 0.38, vals, height=0.36, color=colour, label=P2P_TEXT[p2p])
        ax.set_xscale("log")
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        plots.finish(
            ax,
            KIND_TEXT[kind].split(" (")[0] if kind.startswith("bandwidth") else "latency (GPU-timed)",
            xlabel,
            "system (dataset)",
            source=f"{how}: sources in the table above",
        )
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2)
    fig.tight_layout()
    return fig


def plot_matrices(data, which: Sequence[tuple[str, str]], ncols: int | None = None):
    """Several matrices of one system in a grid (e.g. P2P on vs off), each annotated with the topology."""
    src = as_source(data)
    n = len(matrix(src.frame, *which[0]))
    ncols = ncols or len(which)
    nrows = -(-len(which) // ncols)
    size = 3.2 + 0.55 * n
    fig, axes = plots.figure(nrows, ncols, width=size + 1.2, height=size)
    axes = [axes] if len(which) == 1 and nrows * ncols == 1 else list(axes)
    topo = src.topology_or_none()
    for ax, (kind, state) in zip(axes, which):
        heatmap(
            ax,
            matrix(src.frame, kind, state),
            kind=kind,
            title=metric_label(kind, state),
            source=src.label,
            topology=topo,
        )
    for ax in axes[len(which) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def plot_local_vs_recorded(sources: Sequence, run: "P2PRun | None" = None):
    """What one GPU can show: the copy inside a GPU (the diagonal) and a copy staged through host memory,
    this machine's (if `run`) next to every recorded system's median."""
    import numpy as np

    rows = []
    if run is not None:
        f = run.to_frame()
        uni = f[f["matrix"] == "bandwidth_uni"]
        diag = uni[uni["mode"] == "local"]["bandwidth_GBps"]
        staged = uni[uni["mode"].isin(["host_staged", "host_staged_loopback"])]["bandwidth_GBps"]
        rows.append(
            (
                run.label,
                float(np.median(diag)) if len(diag) else np.nan,
                float(np.median(staged)) if len(staged) else np.nan,
            )
        )
    for d in sources:
        r = summary_row(d)
        local = r.get("bandwidth_uni_enabled_diagonal", r.get("bandwidth_uni_disabled_diagonal"))
        staged = r.get("bandwidth_uni_disabled")
        if local is not None or staged is not None:
            rows.append(
                (f"recorded: {short_name(d)}", np.nan if local is None else local, np.nan if staged is None else staged)
            )
    fig, ax = plots.figure(width=9.0, height=0.45 * len(rows) + 2.0)
    y = np.arange(len(rows))
    ax.barh(
        y - 0.19,
        [r[1] for r in rows],
        height=0.36,
        color="tab:blue",
        label="copy inside one GPU (the diagonal; read + write counted)",
    )
    ax.barh(
        y + 0.19,
        [r[2] for r in rows],
        height=0.36,
        color="tab:red",
        label="GPU→host→GPU staged copy (P2P off: median over pairs, or one GPU's loopback)",
    )
    ax.set_yticks(y, [r[0] if len(r[0]) <= 70 else r[0][:67] + "..." for r in rows], fontsize=7)
    ax.set_xscale("log")
    ax.invert_yaxis()
    where = "measured here and recorded" if run is not None else "recorded"
    plots.finish(
        ax,
        "One GPU: a copy inside it vs a trip through host memory",
        "GB/s (unidirectional; log scale)",
        "system (label)",
        source=f"{where}: sources in the table above",
    )
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.4, -0.13), ncol=1)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 04's views
#: The matrices drawn P2P on beside P2P off for a run measured here.
RUN_MATRICES = ("bandwidth_uni", "bandwidth_bi", "latency_gpu")


def show_pairs(session, run: "P2PRun | None") -> None:
    """A run measured here with two GPUs or more: peer access, each matrix P2P on beside off, what `diagnose` finds.

    Nothing for no run or a single GPU (its one copy is drawn among the recorded systems instead).
    """
    if run is None or len(run.indices) < 2:
        return
    from IPython.display import display

    session.figure(plot_access(run.peer_access, run.label))
    for which in RUN_MATRICES:
        session.figure(plot_matrices(run, [(which, "enabled"), (which, "disabled")]))
    for finding in diagnose(run):
        display(finding)


class MatrixExplorer:
    """The widget over the recorded matrices: pick a system and a matrix; a missing matrix falls back to one it has."""

    def __init__(self, sources: Sequence, default):
        self.systems = {short_name(d): d for d in sources}
        self.default = short_name(default) if short_name(default) in self.systems else next(iter(self.systems))

    def controls(self) -> dict:
        options = [(metric_label(k, s), f"{k}/{s}") for k in KINDS for s in P2P_STATES]
        return {
            "system_name": widgets.dropdown(list(self.systems), self.default, "system"),
            "metric": widgets.dropdown(options, "bandwidth_uni/enabled", "matrix"),
        }

    def view(self, system_name: str, metric: str):
        """Draw one matrix; return (dataset, kind, P2P state) drawn."""
        ds = self.systems[system_name]
        kind, state = metric.split("/")
        if (kind, state) not in metrics(ds):
            kind, state = metrics(ds)[0]
            print(f"{ds.name} has no {metric_label(*metric.split('/'))} matrix; showing {metric_label(kind, state)}")
        plot_matrix(ds, kind, state)
        return ds.name, kind, state
