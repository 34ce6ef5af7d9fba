"""GPU↔GPU copies: the peer-to-peer matrix, read against `nvidia-smi topo -m`, and what it diagnoses.

Four matrices, each once with peer access on and once staged through host memory, as
cuda-samples p2pBandwidthLatencyTest prints them (rows = source GPU, columns = destination GPU):

- `bandwidth_uni` — one direction at a time (GB/s, 1 GB = 1e9 B);
- `bandwidth_bi`  — both directions at once on two streams, the *sum* of both (GB/s);
- `latency_gpu`   — time per small copy, back to back on one stream (µs);
- `latency_cpu`   — the host-side cost of issuing it (recorded systems only).

The diagonal is a copy inside one GPU's memory; like p2pBandwidthLatencyTest we count its bytes
twice (read + write), so a diagonal is comparable with the recorded ones and with HBM specs.

Method (p2pBandwidthLatencyTest, nvbandwidth): warm up; time batches of back-to-back copies
between CUDA events (`labkit.timing.time_cuda`); bidirectional = both directions forked from one
timing stream and joined back into it; latency = 16-byte copies queued behind a GPU spin so the
host's Python overhead stays out of the timed region. "P2P disabled" copies are staged explicitly
through pinned host buffers (`staged_copy`), chunk by chunk, double-buffered — written against
injected copy functions so the CPU tests can drive it.

The rest of the module reads matrices (live or recorded): `matrix`, `heatmap`, `diagnose` (plain-
language findings), `rank_tp_groups` / `tp_partition` (tensor-parallel groups from a topology).
`labkit bench p2p` (`bench_arguments`, `bench`) and `labkit record` (`record`) live here too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import time
from typing import Callable, Iterable, Sequence

from . import timing
from .runtime import require_cuda
from .system import Finding
from .units import MiB, format_bytes, parse_size

# --------------------------------------------------------------------------- vocabulary
KINDS = ("bandwidth_uni", "bandwidth_bi", "latency_gpu", "latency_cpu")
P2P_STATES = ("enabled", "disabled")
#: What each matrix's numbers are, for labels and the `bandwidth_direction` column.
DIRECTION = {"bandwidth_uni": "unidirectional", "bandwidth_bi": "bidirectional",
             "latency_gpu": "none", "latency_cpu": "none"}
KIND_TEXT = {"bandwidth_uni": "unidirectional bandwidth", "bandwidth_bi": "bidirectional bandwidth (sum of both directions)",
             "latency_gpu": "latency (GPU-timed)", "latency_cpu": "latency (host-side issue time)"}
P2P_TEXT = {"enabled": "P2P on", "disabled": "P2P off (staged through host memory)"}
UNIT_TEXT = {"bandwidth_uni": "GB/s (unidirectional)", "bandwidth_bi": "GB/s (bidirectional: sum of both directions)",
             "latency_gpu": "µs per copy", "latency_cpu": "µs per copy (host side)"}
#: Row modes of measured datasets. Recorded datasets use the tools' own ('write', 'ce_read', ...).
MODES = ("local", "p2p", "driver", "host_staged", "host_staged_loopback")


def is_bandwidth(kind: str) -> bool:
    return kind.startswith("bandwidth")


def metric_label(kind: str, p2p: str) -> str:
    """'unidirectional bandwidth, P2P on' — one line for dropdowns and titles."""
    return f"{KIND_TEXT[kind]}, {P2P_TEXT[p2p]}"


# --------------------------------------------------------------------------- policy numbers
#: Bytes per bandwidth copy: 256 MiB, well past the size where any GPU link saturates
#: (p2pBandwidthLatencyTest uses 40e6 ints = 160 MB, nvbandwidth 512 MiB).
BANDWIDTH_BYTES = 256 * MiB
#: Quick runs (CI, `--quick`): 32 MiB still takes ≥ 80 µs per copy at 400 GB/s, far above the
#: per-copy overhead, so the plateau is reached.
QUICK_BANDWIDTH_BYTES = 32 * MiB
#: One int4, as p2pBandwidthLatencyTest's latency matrix copies.
LATENCY_BYTES = 16
#: Copies queued per latency sample (p2pBandwidthLatencyTest queues 100; far more can block the
#: host on a full launch queue, which is why the tool keeps it low).
LATENCY_CALLS = 100
#: Chunk for host staging. Pinned H2D/D2H copies reach their plateau by a few MiB, and more chunks
#: cost more host-side issue time per staged copy; 8 MiB balances the two.
STAGING_CHUNK_BYTES = 8 * MiB
#: Staging buffers per direction: two, so chunk k+1 leaves the source while chunk k lands.
STAGING_SLOTS = 2
#: The GPU spin before a latency batch lasts this many times the measured host issue time (+1 ms),
#: so every copy is queued before the first one runs.
SPIN_MARGIN = 2.0
QUICK_REPEATS = 5
#: What to do without a GPU, added to `require_cuda`'s message.
NO_GPU_HINT = (" (notebook 04 replays recorded systems; one GPU measures the copy inside it, GPU pairs need two "
               "or more)")

# Diagnosis thresholds — each says when a number is worth a sentence.
#: A pair at < 75% of the median of comparable pairs is an outlier worth a warning.
OUTLIER_FRACTION = 0.75
#: A GPU whose pairs are all < 90% of the others' is worth a note (a slow slot, a remote socket).
SLOW_GPU_FRACTION = 0.90
#: 'P2P on' within 25% of 'staged through host' means peer access is not really in effect.
SAME_PATH_RATIO = 1.25
#: Heatmap colours span at least max/2 .. max (bandwidth) or min .. 2·min (latency).
COLOUR_SPAN = 2.0
#: Both directions at once below 90% of one direction alone is contention, not noise.
BIDIR_FLOOR_FRACTION = 0.90
#: NVLink 1 (P100) carries 20 GB/s per link per direction, the slowest generation (P100
#: whitepaper: 4 links, 160 GB/s bidirectional). So NV# promises at least #·20 GB/s each way.
NVLINK_MIN_PER_LINK_GBps = 20.0
#: Report an NVLink pair below half of that floor: no working NVLink is that slow.
PROMISE_FRACTION = 0.5


# --------------------------------------------------------------------------- reading matrices
def frame_of(data):
    """The tidy p2p_matrix DataFrame of a Dataset, a P2PRun or a DataFrame."""
    if hasattr(data, "to_frame") and not hasattr(data, "columns"):
        return data.to_frame()
    if hasattr(data, "frame"):
        return data.frame
    return data


def metrics(data) -> list[tuple[str, str]]:
    """The (kind, p2p) matrices present, in the order KINDS × P2P_STATES."""
    f = frame_of(data)
    if "mode" in f.columns:
        f = f[f["mode"].astype(str) != "host_staged_loopback"]
    have = set(zip(f["matrix"], f["p2p"]))
    return [(k, p) for k in KINDS for p in P2P_STATES if (k, p) in have]


def matrix(data, kind: str = "bandwidth_uni", p2p: str = "enabled", *, loopback: bool = False):
    """One matrix as a square DataFrame: index = source GPU, columns = destination GPU, NaN where unprinted.

    Values are GB/s for bandwidth kinds and µs for latency kinds. The loopback staged copy of a
    single-GPU run (mode 'host_staged_loopback', GPU→host→same GPU) is left out; `loopback=True`
    returns those cells instead.
    """
    if kind not in KINDS or p2p not in P2P_STATES:
        raise ValueError(f"matrix must be one of {KINDS} and p2p one of {P2P_STATES}, got {kind!r}, {p2p!r}")
    f = frame_of(data)
    rows = f[(f["matrix"] == kind) & (f["p2p"] == p2p)]
    if "mode" in rows.columns:
        loop = rows["mode"].astype(str) == "host_staged_loopback"
        rows = rows[loop] if loopback else rows[~loop]
    if rows.empty:
        raise KeyError(f"no {metric_label(kind, p2p)} matrix here; have: "
                       f"{', '.join(metric_label(*m) for m in metrics(f)) or 'none'}")
    col = "bandwidth_GBps" if is_bandwidth(kind) else "latency_us"
    if col not in rows.columns or rows[col].isna().any():
        raise ValueError(f"{kind} rows need a value in column {col!r}")
    dup = rows.duplicated(["src", "dst"])
    if dup.any():
        r = rows[dup].iloc[0]
        raise ValueError(f"{kind}/{p2p}: more than one value for GPU{int(r.src)}→GPU{int(r.dst)}")
    m = rows.pivot(index="src", columns="dst", values=col).astype(float)
    gpus = sorted(set(m.index) | set(m.columns))
    m = m.reindex(index=gpus, columns=gpus)
    m.index.name, m.columns.name = "src", "dst"
    return m


def off_diagonal(m) -> list[tuple[int, int, float]]:
    """(src, dst, value) for every printed cell off the diagonal."""
    import numpy as np

    return [(int(i), int(j), float(m.loc[i, j])) for i in m.index for j in m.columns
            if i != j and np.isfinite(m.loc[i, j])]


def diagonal(m) -> dict[int, float]:
    import numpy as np

    return {int(i): float(m.loc[i, i]) for i in m.index if i in m.columns and np.isfinite(m.loc[i, i])}


def median_off_diagonal(m) -> float:
    import numpy as np

    vals = [v for _, _, v in off_diagonal(m)]
    return float(np.median(vals)) if vals else float("nan")


# --------------------------------------------------------------------------- topology
def gpu_topology(text_or_frame):
    """The GPU-only part of a `nvidia-smi topo -m` table (labels 'NV12', 'PIX', ...), or None.

    Accepts the raw text (as datasets keep it in meta['topology']) or a parsed frame. The NUMA
    affinity per GPU stays in `.attrs['numa_affinity']`.
    """
    from .system import parse_topology

    if text_or_frame is None or (isinstance(text_or_frame, str) and not text_or_frame.strip()):
        return None
    topo = parse_topology(text_or_frame) if isinstance(text_or_frame, str) else text_or_frame
    gpus = [d for d in topo.index if str(d).startswith("GPU")]
    sub = topo.loc[gpus, gpus].copy()
    sub.attrs = dict(topo.attrs)
    return sub


def link_label(topo, i: int, j: int) -> str | None:
    """The topology's label for GPUi↔GPUj ('NV12', 'SYS', 'X'), or None if unknown."""
    if topo is None:
        return None
    a, b = f"GPU{i}", f"GPU{j}"
    if a in topo.index and b in topo.columns:
        return str(topo.loc[a, b])
    return None


def numa_of(topo) -> dict[int, str]:
    """GPU index → NUMA node as `nvidia-smi topo -m` prints it ('0', '1', 'N/A')."""
    if topo is None:
        return {}
    out = {}
    for dev, node in (topo.attrs.get("numa_affinity") or {}).items():
        m = re.fullmatch(r"GPU(\d+)", str(dev))
        if m:
            out[int(m.group(1))] = str(node)
    return out


def nvlink_count(label: str | None) -> int:
    """Bonded NVLinks in a label: 'NV12' → 12; anything else → 0."""
    m = re.fullmatch(r"NV(\d+)", label or "")
    return int(m.group(1)) if m else 0


# --------------------------------------------------------------------------- a source of matrices
@dataclasses.dataclass(frozen=True)
class MatrixSource:
    """What a figure or a diagnosis needs: the tidy frame, a label saying where it came from, topology."""

    name: str
    frame: "object"
    label: str  # "recorded: <system> — <source>" or "measured here: <GPU>, <date>"
    topology_text: str | None
    gpu: str  # GPU model(s), plain words
    context: str  # free text searched for hints (VM, container, ...)

    @property
    def topology(self):
        return gpu_topology(self.topology_text)

    def topology_or_none(self):
        """The parsed topology, or None when there is none or it does not parse (figures and diagnosis
        carry on without link labels; `validate` reports the parse error)."""
        try:
            return self.topology
        except ValueError:
            return None


def as_source(data, topology: str | None = None) -> MatrixSource:
    """Wrap a reference Dataset, a live P2PRun or a tidy p2p_matrix DataFrame in one shape.

    `topology` (raw `nvidia-smi topo -m` text) replaces the one the data carries, if given."""
    if topology is not None:
        return dataclasses.replace(as_source(data), topology_text=topology)
    if isinstance(data, MatrixSource):
        return data
    if hasattr(data, "columns"):  # a bare DataFrame in the p2p_matrix schema
        return MatrixSource("matrix", data, "matrix given by the caller", None, "", "")
    if isinstance(data, P2PRun):
        return MatrixSource("measured_here", data.to_frame(), data.label, data.topology, ", ".join(sorted(set(data.devices))),
                            "")
    meta = data.meta
    ctx = " ".join(str(meta.get(k, "")) for k in ("system", "interconnect", "caveats", "title"))
    return MatrixSource(data.name, data.frame, data.label, meta.get("topology"), str(meta.get("gpu", "")), ctx)


# --------------------------------------------------------------------------- validation
def validate(data) -> list[str]:
    """Inconsistencies in a p2p matrix dataset, as sentences (empty = fine).

    Checks: each (matrix, p2p) has one value per cell in the right column; GPU indices fall within
    meta['gpu_count']; the matrix is square, or (a partial printout) every printed row is complete;
    a diagonal is printed for every row or for none; the `bandwidth_direction` column, if present,
    matches the kind; the topology (if any) parses and its GPU count equals gpu_count.
    """
    problems: list[str] = []
    src = as_source(data)
    f = src.frame
    meta = getattr(data, "meta", {}) or {}
    n = meta.get("gpu_count")
    if "bandwidth_direction" in f.columns:
        for kind, want in DIRECTION.items():
            got = set(f.loc[f["matrix"] == kind, "bandwidth_direction"].dropna())
            if got - {want}:
                problems.append(f"{kind} rows say bandwidth_direction {sorted(got)}; expected {want!r}")
    for kind, p2p in metrics(f):
        name = f"{kind}/{p2p}"
        try:
            m = matrix(f, kind, p2p)
        except (ValueError, KeyError) as e:
            problems.append(f"{name}: {e}")
            continue
        f_rows = f[(f["matrix"] == kind) & (f["p2p"] == p2p)]
        rows, cols = set(f_rows["src"].astype(int)), set(f_rows["dst"].astype(int))
        everyone = rows | cols
        if n is not None and (min(everyone) < 0 or max(everyone) >= int(n)):
            problems.append(f"{name}: GPU indices {sorted(everyone)} fall outside 0..{int(n) - 1} (gpu_count {n})")
        if rows != cols:
            full = set(range(int(n))) if n is not None else cols
            incomplete = [i for i in rows if set(f_rows.loc[f_rows["src"] == i, "dst"].astype(int)) | {i} < full]
            if incomplete:
                problems.append(f"{name}: not square (rows {sorted(rows)}, columns {sorted(cols)}) "
                                f"and rows {incomplete} are incomplete")
        diag = diagonal(m)
        if diag and set(diag) != rows:
            problems.append(f"{name}: diagonal printed for GPUs {sorted(diag)} but not for {sorted(rows - set(diag))}")
    if src.topology_text:
        try:
            topo = src.topology
        except ValueError as e:
            problems.append(f"topology does not parse: {e}")
        else:
            if n is not None and len(topo) != int(n):
                problems.append(f"topology has {len(topo)} GPUs but gpu_count is {n}")
    return problems


def is_square(data, kind: str, p2p: str) -> bool:
    """Every GPU that appears as a source also appears as a destination, and the reverse."""
    f = frame_of(data)
    rows = f[(f["matrix"] == kind) & (f["p2p"] == p2p)]
    return set(rows["src"].astype(int)) == set(rows["dst"].astype(int))


def is_nvlink_system(data) -> bool:
    """NVLink between the GPUs: NV# in the topology, or NVLink/NVSwitch named in the interconnect."""
    src = as_source(data)
    topo = src.topology_or_none()
    if topo is not None:
        return any(nvlink_count(v) for v in topo.to_numpy().ravel())
    meta = getattr(data, "meta", {}) or {}
    text = f"{meta.get('interconnect', '')}"
    return bool(re.search(r"NVLink|NVSwitch", text, re.I)) and not re.search(r"no NVLink", text, re.I)


# --------------------------------------------------------------------------- summaries
def summary_row(data) -> dict:
    """One line per system: medians over GPU pairs (off-diagonal) of every matrix it has."""
    import numpy as np

    src = as_source(data)
    row = {"system": src.label, "dataset": src.name}
    for kind, p2p in metrics(src.frame):
        m = matrix(src.frame, kind, p2p)
        key = f"{kind}_{p2p}"
        row[key] = median_off_diagonal(m)
        d = diagonal(m)
        if d:
            row[f"{key}_diagonal"] = float(np.median(list(d.values())))
    return row


def link_summary(data):
    """Median of every matrix per topology link label (NV12, PIX, SYS, ...): what each link delivers."""
    import numpy as np
    import pandas as pd

    src = as_source(data)
    topo = src.topology
    if topo is None:
        raise ValueError(f"{src.name}: no topology published, so no link labels to group by")
    out = []
    for kind, p2p in metrics(src.frame):
        m = matrix(src.frame, kind, p2p)
        groups: dict[str, list[float]] = {}
        for i, j, v in off_diagonal(m):
            groups.setdefault(link_label(topo, i, j) or "?", []).append(v)
        for label, vals in groups.items():
            out.append({"link": label, "matrix": kind, "p2p": p2p, "pairs": len(vals),
                        "median": float(np.median(vals)), "min": min(vals), "max": max(vals),
                        "unit": UNIT_TEXT[kind]})
    # a one-GPU system (a profile recorded on one GPU) has no pair: an empty table, still with its columns
    return pd.DataFrame(out, columns=["link", "matrix", "p2p", "pairs", "median", "min", "max", "unit"])


# --------------------------------------------------------------------------- figures
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
    cbar.set_label(UNIT_TEXT[kind] + (" — GPU pairs only; grey = local copy or not printed" if n > 1 else ""),
                   fontsize=8)
    return cbar


def plot_matrix(data, kind: str = "bandwidth_uni", p2p: str = "enabled"):
    """A figure with one heatmap of `data` (Dataset, P2PRun or MatrixSource), annotated with its topology."""
    from . import plots

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

    from . import plots

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

    from . import plots

    rows = [summary_row(s) for s in sources]
    labels = [short_name(s) for s in sources]
    measured = any(as_source(s).label.startswith("measured") for s in sources)
    how = "measured here and recorded" if measured else "recorded"
    fig, axes = plots.figure(1, 2, width=7.0, height=0.42 * len(rows) + 2.0)
    y = np.arange(len(rows))
    for ax, kind, xlabel in ((axes[0], "bandwidth_uni", "GB/s (unidirectional; median over GPU pairs; log scale)"),
                             (axes[1], "latency_gpu", "µs per small copy (median over GPU pairs; log scale)")):
        for k, (p2p, colour) in enumerate((("enabled", "tab:green"), ("disabled", "tab:red"))):
            vals = [r.get(f"{kind}_{p2p}", np.nan) for r in rows]
            ax.barh(y + (k - 0.5) * 0.38, vals, height=0.36, color=colour, label=P2P_TEXT[p2p])
        ax.set_xscale("log")
        ax.set_yticks(y, labels, fontsize=7)
        ax.invert_yaxis()
        plots.finish(ax, KIND_TEXT[kind].split(" (")[0] if kind.startswith("bandwidth") else "latency (GPU-timed)",
                     xlabel, "system (dataset)", source=f"{how}: sources in the table above")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2)
    fig.tight_layout()
    return fig


def short_name(data) -> str:
    """The system part of a source's label, short enough for a dropdown or a bar label."""
    src = as_source(data)
    s = src.label.split(": ", 1)[-1].split(" — ")[0]
    s = re.sub(r",? ?p2pBandwidthLatencyTest.*$", "", s)
    return s if len(s) <= 60 else s[:57] + "..."


def systems_table(sources: Sequence):
    """One row per system: what it is, which matrices it has, and where the numbers come from."""
    import pandas as pd

    rows = []
    for d in sources:
        src = as_source(d)
        meta = getattr(d, "meta", {}) or {}
        rows.append({"dataset": src.name, "system": short_name(src), "GPUs": meta.get("gpu_count"),
                     "interconnect": meta.get("interconnect", ""), "topology": "yes" if src.topology_text else "no",
                     "matrices": len(metrics(src.frame)), "quality": meta.get("quality", ""),
                     "source": src.label.split(" — ", 1)[-1]})
    return pd.DataFrame(rows)


def ratio_table(sources: Sequence):
    """Per system: bidirectional ÷ unidirectional and staged ÷ P2P latency, medians over GPU pairs.

    A full-duplex link (NVLink, PCIe peer-to-peer) gives bi/uni ≈ 2; a copy staged through host
    memory shares the host's links and memory in both directions, so it gets far less.
    """
    import numpy as np
    import pandas as pd

    rows = []
    for d in sources:
        r = summary_row(d)
        row = {"system": short_name(d)}
        for state in P2P_STATES:
            uni, bi = r.get(f"bandwidth_uni_{state}"), r.get(f"bandwidth_bi_{state}")
            row[f"bi ÷ uni, {P2P_TEXT[state].split(' (')[0]}"] = bi / uni if uni and bi else np.nan
        on, off = r.get("latency_gpu_enabled"), r.get("latency_gpu_disabled")
        row["latency P2P on (µs)"] = on if on else np.nan
        row["latency staged (µs)"] = off if off else np.nan
        row["staged ÷ P2P latency"] = off / on if on and off else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def staged_bandwidth_model(h2d_GBps: float, d2h_GBps: float) -> dict:
    """Model (not a measurement) of a copy staged through host memory, from one-way PCIe rates.

    pipelined: chunks leave the source while earlier ones land, so the slower leg sets the pace →
    min(H2D, D2H). serial: each byte crosses one leg, then the other → 1 / (1/H2D + 1/D2H).
    """
    if h2d_GBps <= 0 or d2h_GBps <= 0:
        raise ValueError("both one-way bandwidths must be positive (GB/s)")
    return {"pipelined_GBps": min(h2d_GBps, d2h_GBps), "serial_GBps": 1.0 / (1.0 / h2d_GBps + 1.0 / d2h_GBps)}


def plot_matrices(data, which: Sequence[tuple[str, str]], ncols: int | None = None):
    """Several matrices of one system in a grid (e.g. P2P on vs off), each annotated with the topology."""
    from . import plots

    src = as_source(data)
    n = len(matrix(src.frame, *which[0]))
    ncols = ncols or len(which)
    nrows = -(-len(which) // ncols)
    size = 3.2 + 0.55 * n
    fig, axes = plots.figure(nrows, ncols, width=size + 1.2, height=size)
    axes = [axes] if len(which) == 1 and nrows * ncols == 1 else list(axes)
    topo = src.topology_or_none()
    for ax, (kind, state) in zip(axes, which):
        heatmap(ax, matrix(src.frame, kind, state), kind=kind, title=metric_label(kind, state), source=src.label,
                topology=topo)
    for ax in axes[len(which):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def plot_local_vs_recorded(sources: Sequence, run: "P2PRun | None" = None):
    """What one GPU can show: the copy inside a GPU (the diagonal) and a copy staged through host memory,
    this machine's (if `run`) next to every recorded system's median."""
    import numpy as np

    from . import plots

    rows = []
    if run is not None:
        f = run.to_frame()
        uni = f[f["matrix"] == "bandwidth_uni"]
        diag = uni[uni["mode"] == "local"]["bandwidth_GBps"]
        staged = uni[uni["mode"].isin(["host_staged", "host_staged_loopback"])]["bandwidth_GBps"]
        rows.append((run.label, float(np.median(diag)) if len(diag) else np.nan,
                     float(np.median(staged)) if len(staged) else np.nan))
    for d in sources:
        r = summary_row(d)
        local = r.get("bandwidth_uni_enabled_diagonal", r.get("bandwidth_uni_disabled_diagonal"))
        staged = r.get("bandwidth_uni_disabled")
        if local is not None or staged is not None:
            rows.append((f"recorded: {short_name(d)}", np.nan if local is None else local,
                         np.nan if staged is None else staged))
    fig, ax = plots.figure(width=9.0, height=0.45 * len(rows) + 2.0)
    y = np.arange(len(rows))
    ax.barh(y - 0.19, [r[1] for r in rows], height=0.36, color="tab:blue",
            label="copy inside one GPU (the diagonal; read + write counted)")
    ax.barh(y + 0.19, [r[2] for r in rows], height=0.36, color="tab:red",
            label="GPU→host→GPU staged copy (P2P off: median over pairs, or one GPU's loopback)")
    ax.set_yticks(y, [r[0] if len(r[0]) <= 70 else r[0][:67] + "..." for r in rows], fontsize=7)
    ax.set_xscale("log")
    ax.invert_yaxis()
    where = "measured here and recorded" if run is not None else "recorded"
    plots.finish(ax, "One GPU: a copy inside it vs a trip through host memory",
                 "GB/s (unidirectional; log scale)", "system (label)", source=f"{where}: sources in the table above")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.4, -0.13), ncol=1)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- diagnosis
_CONSUMER_RE = re.compile(r"GeForce|RTX\s*[2-5]0[5-9]0(?!.*(PRO|Ada|A\d000))|TITAN", re.I)
_VM_RE = re.compile(r"\bVM\b|virtual machine|hypervisor|Standard_ND|\bND\d", re.I)


def _fmt(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def _fmt_range(vals: Sequence[float]) -> str:
    import numpy as np

    lo, hi = np.percentile(vals, [10, 90]) if len(vals) >= 5 else (min(vals), max(vals))
    return f"~{_fmt(lo)}" if _fmt(lo) == _fmt(hi) else f"~{_fmt(lo)}–{_fmt(hi)}"


def _pair_text(pairs: Iterable[tuple[int, int]]) -> list[tuple[str, tuple[tuple[int, int], ...]]]:
    """Collapse (i, j) and (j, i) into 'GPUi↔GPUj'; a lone direction stays 'GPUi→GPUj'."""
    pairs = set(pairs)
    out, seen = [], set()
    for i, j in sorted(pairs):
        if (i, j) in seen:
            continue
        if (j, i) in pairs:
            a, b = min(i, j), max(i, j)
            out.append((f"GPU{a}↔GPU{b}", ((a, b), (b, a))))
            seen |= {(i, j), (j, i)}
        else:
            out.append((f"GPU{i}→GPU{j}", ((i, j),)))
            seen.add((i, j))
    return out


def _what(kind: str, p2p: str) -> str:
    what = {"bandwidth_uni": "unidirectional", "bandwidth_bi": "bidirectional", "latency_gpu": "latency",
            "latency_cpu": "host-side latency"}[kind]
    return f"{what}, {P2P_TEXT[p2p].split(' (')[0]}"


def _likely_causes(label: str | None, gpu: str, context: str) -> str:
    causes = []
    if _CONSUMER_RE.search(gpu or ""):
        causes.append("consumer (GeForce) GPUs — the driver does not offer PCIe peer-to-peer on most of "
                      "them (both recorded GeForce pairs print 'CANNOT Access Peer')")
    if _VM_RE.search(context or ""):
        causes.append("a virtual machine — the hypervisor must expose the PCIe topology and allow peer traffic")
    if label in ("PIX", "PXB"):
        causes.append(f"the pair shares a PCIe switch ({label}), so the hardware path exists: check that the IOMMU "
                      "is off or in passthrough and that ACS does not redirect peer traffic to the root complex")
    elif label == "SYS":
        causes.append("the GPUs sit under different CPU sockets (SYS): many platforms do not route PCIe "
                      "peer traffic across the socket link")
    elif label in ("PHB", "NODE"):
        causes.append(f"the path crosses the CPU's host bridge ({label}): the platform must support "
                      "peer-to-peer through its root complex, and IOMMU/ACS must allow it")
    elif label and nvlink_count(label):
        causes.append(f"the topology shows {label}, so the NVLink path exists: peer access may be off in "
                      "software, or links are down (`nvidia-smi nvlink -s`)")
    if not causes:
        causes.append("consumer GPUs, IOMMU/ACS on the PCIe path, a virtual machine, or GPUs under different "
                      "CPU sockets — `nvidia-smi topo -p2p r` says which pairs the driver allows")
    return "; ".join(causes)


def _range_text(vals: Sequence[float]) -> str:
    lo, hi = min(vals), max(vals)
    return _fmt(lo) if _fmt(lo) == _fmt(hi) else f"{_fmt(lo)}–{_fmt(hi)}"


def diagnose(data, *, topology: str | None = None, access=None) -> list[Finding]:
    """Plain-language findings from a p2p matrix and its topology.

    `data`: a recorded Dataset, a live P2PRun, or a tidy DataFrame in the p2p_matrix schema;
    `topology`: `nvidia-smi topo -m` text (default: the one the data carries, if any).

    Rules: peer access not in effect (P2P on ≈ staged, or `access` says no); P2P slower than
    staging; an NVLink pair far below what its link count promises; GPUs slow with every peer;
    single pairs far below comparable pairs (same link label for P2P, same NUMA relation for staged
    copies); both directions at once well below one direction alone; staged copies across NUMA
    nodes. `access` is {(src, dst): bool} (a live P2PRun brings its own). Warnings come first.
    """
    import numpy as np

    src = as_source(data, topology)
    f = src.frame
    topo = src.topology_or_none()
    if access is None and isinstance(data, P2PRun):
        access = {(a, b): data.peer_access[x][y] for x, a in enumerate(data.indices) for y, b in enumerate(data.indices)}
    mats = {km: matrix(f, *km) for km in metrics(f)}
    numa = numa_of(topo)
    out: list[Finding] = []

    # 1. peer access not in effect
    blocked: set[tuple[int, int]] = {p for p, ok in (access or {}).items() if p[0] != p[1] and not ok}
    on, off = mats.get(("bandwidth_uni", "enabled")), mats.get(("bandwidth_uni", "disabled"))

    def staged_value(i, j):
        return off.loc[i, j] if off is not None and i in off.index and j in off.columns else np.nan

    if on is not None and off is not None:
        blocked |= {(i, j) for i, j, v in off_diagonal(on) if np.isfinite(staged_value(i, j))
                    and v < SAME_PATH_RATIO * staged_value(i, j)}
    for text, pairs in _pair_text(blocked):
        i, j = pairs[0]
        got = [on.loc[p] for p in pairs if on is not None and np.isfinite(on.loc[p])]
        staged = [staged_value(*p) for p in pairs if np.isfinite(staged_value(*p))]
        numbers = (f": with P2P 'on' the copy reaches {_range_text(got)} GB/s, no more than staged through host memory "
                   f"({_range_text(staged)} GB/s, unidirectional)" if got and staged else
                   " (can_device_access_peer says no)")
        out.append(Finding("warn", f"{text}: peer access is not in effect{numbers} — every copy between them is staged through host "
            f"memory. Likely cause: {_likely_causes(link_label(topo, i, j), src.gpu, src.context)}.", rule="peer_access", pairs=pairs))

    # 2. P2P slower than staging
    if on is not None and off is not None:
        slower = [(i, j) for i, j, v in off_diagonal(on) if np.isfinite(staged_value(i, j)) and v < 0.9 * staged_value(i, j)]
        for text, pairs in _pair_text(slower):
            out.append(Finding("warn", f"{text}: the direct P2P copy ({_range_text([on.loc[p] for p in pairs])} GB/s, unidirectional) is slower "
                f"than staging through host memory ({_range_text([staged_value(*p) for p in pairs])} GB/s) — the "
                "platform's peer path is poor (often across CPU sockets); NCCL_P2P_LEVEL keeps NCCL off it.", rule="p2p_slower_than_staged", pairs=pairs))

    # 3. NVLink promise
    for kind in ("bandwidth_uni", "bandwidth_bi"):
        m = mats.get((kind, "enabled"))
        if m is None or topo is None:
            continue
        per_pair = 2 if kind == "bandwidth_bi" else 1
        weak = [(i, j) for i, j, v in off_diagonal(m) if (i, j) not in blocked and nvlink_count(link_label(topo, i, j))
                and v < PROMISE_FRACTION * per_pair * NVLINK_MIN_PER_LINK_GBps * nvlink_count(link_label(topo, i, j))]
        for text, pairs in _pair_text(weak):
            label = link_label(topo, *pairs[0])
            floor = per_pair * NVLINK_MIN_PER_LINK_GBps * nvlink_count(label)
            out.append(Finding("warn", f"{text}: the topology says {label}, which carries at least {_fmt(floor)} GB/s ({DIRECTION[kind]}) even on "
                f"first-generation NVLink, but the copy reaches {_range_text([m.loc[p] for p in pairs])} GB/s: the NVLink "
                "path is not in use (peer access off in software, or links down — `nvidia-smi nvlink -s`).", rule="nvlink_promise", pairs=pairs))

    for (kind, p2p), m in sorted(mats.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][1])):
        cells = off_diagonal(m)
        gpus = sorted({i for i, _, _ in cells} | {j for _, j, _ in cells})
        lower_is_better = not is_bandwidth(kind)
        unit = "µs" if lower_is_better else "GB/s"

        def worse(a, b):  # how far a is below b, as a fraction ≤ 1 when a is the worse one
            return (b / a) if lower_is_better else (a / b)

        # 4. GPUs slow with every peer (one finding per matrix, naming them all)
        slow = {}
        if len(gpus) >= 4:
            for g in gpus:
                mine = [v for i, j, v in cells if g in (i, j)]
                rest = [v for i, j, v in cells if g not in (i, j)]
                if len(mine) >= 2 and len(rest) >= 2 and worse(np.median(mine), np.median(rest)) < SLOW_GPU_FRACTION:
                    slow[g] = (float(np.median(mine)), float(np.median(rest)))
        if slow and len(slow) <= len(gpus) // 2:
            names = ", ".join(f"GPU{g}" for g in slow)
            nodes = {numa.get(g) for g in slow}
            numa_note = (f" They share NUMA node {nodes.pop()}, unlike the others: perhaps the process issuing the copies "
                         "ran on the other socket." if len(nodes) == 1 and None not in nodes and
                         nodes != {numa.get(g) for g in gpus if g not in slow} else "")
            vals = "; ".join(f"GPU{g} {_fmt(a)} vs {_fmt(b)} {unit}" for g, (a, b) in slow.items())
            out.append(Finding("info", f"{names}: {'higher latency' if lower_is_better else 'lower bandwidth'} with every peer "
                f"({_what(kind, p2p)}; median of its pairs vs pairs without it: {vals}) — such a GPU may sit under the "
                "other CPU socket, behind a busier PCIe switch, or on a narrower or slower link (`labkit doctor` shows "
                f"width and generation).{numa_note}", rule="slow_gpu", pairs=tuple((i, j) for i, j, _ in cells if i in slow or j in slow)))

        # 5. single pairs far below comparable pairs
        def group_of(i, j):
            if p2p == "enabled":
                label = link_label(topo, i, j)
                return f"with the same link ({label})" if label else ""
            if numa.get(i) is not None and numa.get(j) is not None:
                return "on the same NUMA node" if numa[i] == numa[j] else "across NUMA nodes"
            return ""

        groups: dict[str, list[tuple[int, int, float]]] = {}
        for i, j, v in cells:
            groups.setdefault(group_of(i, j), []).append((i, j, v))
        for where, members in groups.items():
            if len(members) < 4:
                continue
            med = float(np.median([v for _, _, v in members]))
            flagged = [(i, j) for i, j, v in members if worse(v, med) < OUTLIER_FRACTION
                       and not ({i, j} & set(slow)) and (i, j) not in blocked]
            others = [v for i, j, v in members if (i, j) not in flagged]
            hint = (" (A staged copy climbs to host memory and back: GPUs behind one PCIe switch share its uplink.)"
                    if p2p == "disabled" else " Check that pair's links (`nvidia-smi nvlink -s`, `nvidia-smi topo -m`).")
            for text, pairs in _pair_text(flagged):
                out.append(Finding("warn", f"{text} {'takes' if lower_is_better else 'reaches'} {_range_text([m.loc[p] for p in pairs])} {unit} "
                    f"({_what(kind, p2p)}) vs {_fmt_range(others)} {unit} for the other pairs"
                    f"{' ' + where if where else ''}.{hint}", rule="outlier_pair", pairs=pairs))

    # 6. both directions at once well below one direction alone
    for p2p in P2P_STATES:
        uni, bi = mats.get(("bandwidth_uni", p2p)), mats.get(("bandwidth_bi", p2p))
        if uni is None or bi is None:
            continue
        below = [(i, j) for i, j, v in off_diagonal(bi) if i in uni.index and j in uni.columns
                 and np.isfinite(uni.loc[i, j]) and v < BIDIR_FLOOR_FRACTION * uni.loc[i, j]]
        for text, pairs in _pair_text(below):
            out.append(Finding("warn" if p2p == "enabled" else "info", f"{text} ({P2P_TEXT[p2p].split(' (')[0]}): both directions at once reach "
                f"{_range_text([bi.loc[p] for p in pairs])} GB/s in total, less than one direction alone "
                f"({_range_text([uni.loc[p] for p in pairs])} GB/s) — the two directions contend for something they "
                "share, typically a PCIe switch uplink or the host memory they are staged through.", rule="bidirectional_below_unidirectional", pairs=pairs))

    # 7. staged copies that cross NUMA nodes
    if off is not None and len(set(numa.values()) - {"N/A"}) > 1:
        within = [v for i, j, v in off_diagonal(off) if numa.get(i) == numa.get(j)]
        across = [v for i, j, v in off_diagonal(off) if numa.get(i) != numa.get(j)]
        if within and across and np.median(across) < SLOW_GPU_FRACTION * np.median(within):
            out.append(Finding("info", f"Staged copies between GPUs on different NUMA nodes reach a median {_fmt(np.median(across))} GB/s vs "
                f"{_fmt(np.median(within))} GB/s within one node: the staging buffer sits on one socket, so the "
                "other GPU's half of the copy crosses the socket link.", rule="numa", pairs=()))
    out.sort(key=lambda x: x.level != "warn")
    return out


def doctor_findings(env: dict) -> list[Finding]:
    """Peer-access findings for `labkit doctor`, with the likely cause per pair.

    Uses only what `labkit.system.environment()` collected (no measurement): `peer_access`,
    the GPU names and `nvidia-smi topo -m`.
    """
    peers = env.get("peer_access") or {}
    if not peers:
        return []
    topo = None
    if env.get("topology"):
        try:
            topo = gpu_topology(env["topology"])
        except ValueError:
            topo = None
    names = env.get("cuda_devices") or [g.get("name") for g in env.get("gpus") or []]
    gpu = ", ".join(sorted({str(n) for n in names if n}))
    blocked = []
    for key, ok in peers.items():
        i, j = (int(x) for x in key.split("->"))
        if not ok:
            blocked.append((i, j))
    out = []
    for text, pairs in _pair_text(blocked):
        i, j = pairs[0]
        label = link_label(topo, i, j)
        out.append(Finding("warn", f"{text}{f' ({label})' if label else ''}: peer access unavailable — GPU↔GPU copies "
                                   f"are staged through host memory. Likely cause: {_likely_causes(label, gpu, '')}.",
                           rule="peer_access", pairs=pairs))
    if not blocked:
        out.append(Finding("ok", "peer access available between every GPU pair", rule="peer_access"))
    if topo is not None:
        cross = [(i, j) for i in range(len(topo)) for j in range(i + 1, len(topo))
                 if link_label(topo, i, j) == "SYS" and peers.get(f"{i}->{j}")]
        if cross:
            out.append(Finding("info", "peer access across CPU sockets (SYS) for "
                               + ", ".join(f"GPU{i}↔GPU{j}" for i, j in cross) + ": it works but crosses the socket link "
                               "— measure it (`labkit bench p2p`) before putting these pairs in one tensor-parallel "
                               "group.", rule="numa", pairs=tuple(cross)))
    return out


# --------------------------------------------------------------------------- tensor-parallel groups
@dataclasses.dataclass(frozen=True)
class GroupScore:
    """A candidate tensor-parallel group and how good its worst links are."""

    gpus: tuple[int, ...]
    links: tuple[str, ...]  # the group's pair labels, worst first
    numa_nodes: int  # distinct NUMA nodes the group spans (1 = all on one socket)

    @property
    def worst_link(self) -> str:
        return self.links[0] if self.links else "X"

    @property
    def key(self) -> tuple:
        """Sort key, smaller = better: the worst link first (a ring runs at its slowest hop), then the
        next worst, ..., then the NUMA spread."""
        return (tuple(_link_cost(x) for x in self.links), self.numa_nodes)

    def __str__(self) -> str:
        return f"GPUs {list(self.gpus)}: worst link {self.worst_link}, NUMA nodes {self.numa_nodes}"


def _link_cost(label: str) -> tuple[int, int]:
    from .system import link_rank

    return (link_rank(label), -nvlink_count(label))


def _topology_frame(topology):
    topo = gpu_topology(topology) if isinstance(topology, str) else topology
    if topo is None or len(topo) == 0:
        raise ValueError("no GPU topology: pass `nvidia-smi topo -m` text or labkit.system.parse_topology(...)")
    return topo


def score_group(topology, gpus: Sequence[int]) -> GroupScore:
    topo = _topology_frame(topology)
    labels = [link_label(topo, a, b) for a, b in itertools.combinations(sorted(gpus), 2)]
    if any(x is None for x in labels):
        raise ValueError(f"GPUs {list(gpus)} are not all in the topology ({list(topo.index)})")
    numa = numa_of(topo)
    nodes = {numa.get(g, "?") for g in gpus}
    return GroupScore(tuple(sorted(gpus)), tuple(sorted(labels, key=_link_cost, reverse=True)), len(nodes))


def rank_tp_groups(topology, size: int, *, include: Sequence[int] = ()) -> list[GroupScore]:
    """Every group of `size` GPUs, best first: ranked by its worst link (NV# > PIX > PXB > PHB > NODE > SYS,
    more NVLinks better), then its next-worst links, then how many NUMA nodes it spans.

    `include` keeps only groups containing those GPUs (e.g. "the group of GPU0").
    """
    topo = _topology_frame(topology)
    gpus = sorted(int(d[3:]) for d in topo.index)
    if not 1 <= size <= len(gpus):
        raise ValueError(f"group size must be between 1 and {len(gpus)} GPUs, got {size}")
    groups = [score_group(topo, c) for c in itertools.combinations(gpus, size) if set(include) <= set(c)]
    return sorted(groups, key=lambda g: (g.key, g.gpus))


def tp_partition(topology, size: int) -> list[GroupScore]:
    """Split all GPUs into disjoint tensor-parallel groups of `size`, the worst group as good as possible.

    Exhaustive over partitions up to 12 GPUs (at most 15,400 of them); greedy (best remaining
    group first) beyond that.
    """
    topo = _topology_frame(topology)
    gpus = sorted(int(d[3:]) for d in topo.index)
    if size < 1 or len(gpus) % size:
        raise ValueError(f"{len(gpus)} GPUs cannot be split into groups of {size}")
    if len(gpus) > 12:
        left, out = list(gpus), []
        while left:
            best = min((score_group(topo, c) for c in itertools.combinations(left, size)), key=lambda g: (g.key, g.gpus))
            out.append(best)
            left = [g for g in left if g not in best.gpus]
        return out

    def partitions(left):
        if not left:
            yield []
            return
        first, rest = left[0], left[1:]
        for others in itertools.combinations(rest, size - 1):
            remaining = [g for g in rest if g not in others]
            for tail in partitions(remaining):
                yield [score_group(topo, (first, *others))] + tail

    def cost(p):
        return sorted((g.key for g in p), reverse=True)

    return min(partitions(gpus), key=cost)


def check_tp_group(name: str, answer, topology, size: int, *, include: Sequence[int] = ()):
    """Self-check: is `answer` (GPU indices) one of the best groups of `size` (containing `include`)?"""
    from . import check

    if answer is None or answer is Ellipsis:
        return check.choice(name, None, None)
    try:
        got = tuple(sorted(int(g) for g in answer))
    except (TypeError, ValueError):
        return check.choice(name, repr(answer), "a list of GPU indices", hint="answer with a list such as [0, 1]")
    ranked = rank_tp_groups(topology, size, include=include)
    best = ranked[0]
    if len(got) != size or not set(include) <= set(got):
        return check.choice(name, list(got), list(best.gpus),
                            hint=f"a group has {size} GPUs" + (f" and contains GPU{list(include)}" if include else ""))
    mine = score_group(topology, got)
    if mine.key == best.key:
        return check.choice(name, list(got), list(got))
    return check.choice(name, list(got), list(best.gpus),
                        hint=f"its worst link is {mine.worst_link}; a group whose worst link is {best.worst_link} exists")


def check_pair(name: str, answer, flagged: Iterable[tuple[int, int]], *, hint: str = ""):
    """Self-check for 'which GPU pair looks wrong': any orientation of a flagged pair is right."""
    from . import check

    if answer is None or answer is Ellipsis:
        return check.choice(name, None, None)
    flagged = {tuple(sorted(p)) for p in flagged}
    try:
        got = tuple(sorted(int(g) for g in answer))
    except (TypeError, ValueError):
        return check.choice(name, repr(answer), "a pair of GPU indices", hint="answer with a pair such as (2, 3)")
    if got in flagged:
        return check.choice(name, got, got)
    return check.choice(name, got, sorted(flagged)[0] if flagged else None, hint=hint)


#: A hypothetical 8-GPU PCIe server, written for the tensor-parallel exercise — not a measurement
#: and not a published machine. Two sockets; on each, two PCIe switches with two GPUs each; NVLink
#: bridges (NV4) join GPUs across the two switches of a socket, not within one switch.
HYPOTHETICAL_PCIE_SERVER_TOPOLOGY = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    CPU Affinity    NUMA Affinity
GPU0     X      PIX     NV4     NODE    SYS     SYS     SYS     SYS     0-31            0
GPU1    PIX      X      NODE    NV4     SYS     SYS     SYS     SYS     0-31            0
GPU2    NV4     NODE     X      PIX     SYS     SYS     SYS     SYS     0-31            0
GPU3    NODE    NV4     PIX      X      SYS     SYS     SYS     SYS     0-31            0
GPU4    SYS     SYS     SYS     SYS      X      PIX     NV4     NODE    32-63           1
GPU5    SYS     SYS     SYS     SYS     PIX      X      NODE    NV4     32-63           1
GPU6    SYS     SYS     SYS     SYS     NV4     NODE     X      PIX     32-63           1
GPU7    SYS     SYS     SYS     SYS     NODE    NV4     PIX      X      32-63           1
"""


# --------------------------------------------------------------------------- staging through host memory
def chunks(nbytes: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """[(start, stop), ...] covering nbytes in chunk_bytes pieces (the last may be shorter)."""
    if nbytes < 1 or chunk_bytes < 1:
        raise ValueError(f"need nbytes ≥ 1 and chunk_bytes ≥ 1, got {nbytes}, {chunk_bytes}")
    return [(lo, min(lo + chunk_bytes, nbytes)) for lo in range(0, nbytes, chunk_bytes)]


def staged_copy(dst, src, buffers: Sequence, *, d2h: Callable, h2d: Callable, chunk_bytes: int | None = None) -> int:
    """Copy `src` (on one GPU) into `dst` (on another) through host staging buffers; returns the chunk count.

    Chunk k goes source → buffers[k % len(buffers)] (`d2h(buffer_view, src_view, slot)`), then
    buffer → destination (`h2d(dst_view, buffer_view, slot)`). The injected functions own the
    ordering: on a GPU, d2h waits until the slot's previous h2d has drained it and h2d waits for the
    d2h that filled it (CUDA events, `CudaStaging`), so chunk k+1 leaves the source while chunk k
    lands; on the CPU tests, plain copies in order. Tensors are flat byte (uint8) tensors.
    """
    n = int(src.numel() * src.element_size())
    if int(dst.numel() * dst.element_size()) != n:
        raise ValueError(f"source has {n} bytes but destination {dst.numel() * dst.element_size()}")
    if not buffers:
        raise ValueError("staging needs at least one host buffer")
    cap = min(int(b.numel()) for b in buffers)
    chunk = cap if chunk_bytes is None else int(chunk_bytes)
    if chunk > cap:
        raise ValueError(f"chunk of {format_bytes(chunk)} does not fit the {format_bytes(cap)} staging buffers")
    pieces = chunks(n, chunk)
    s, d = src.view(-1), dst.view(-1)
    for k, (lo, hi) in enumerate(pieces):
        slot = k % len(buffers)
        buf = buffers[slot][: hi - lo]
        d2h(buf, s[lo:hi], slot)
        h2d(d[lo:hi], buf, slot)
    return len(pieces)


class CudaStaging:
    """Host staging between two CUDA devices: pinned buffers, a D2H stream on the source, an H2D stream
    on the destination, and per-slot events so the two pipelines overlap without overwriting a slot
    that is still being read."""

    def __init__(self, src_device: int, dst_device: int, chunk_bytes: int = STAGING_CHUNK_BYTES,
                 slots: int = STAGING_SLOTS):
        import torch

        self.src_device, self.dst_device = src_device, dst_device
        self.chunk_bytes = chunk_bytes
        self.buffers = [torch.empty(chunk_bytes, dtype=torch.uint8, pin_memory=True) for _ in range(slots)]
        self.d2h_stream = torch.cuda.Stream(device=src_device)
        self.h2d_stream = torch.cuda.Stream(device=dst_device)
        self.filled = [torch.cuda.Event() for _ in range(slots)]  # recorded on d2h_stream
        self.drained = [torch.cuda.Event() for _ in range(slots)]  # recorded on h2d_stream
        self._drained_once = [False] * slots

    def d2h(self, buf, src_view, slot: int) -> None:
        import torch

        with torch.cuda.stream(self.d2h_stream):
            if self._drained_once[slot]:
                self.d2h_stream.wait_event(self.drained[slot])
            buf.copy_(src_view, non_blocking=True)
            self.filled[slot].record(self.d2h_stream)

    def h2d(self, dst_view, buf, slot: int) -> None:
        import torch

        with torch.cuda.stream(self.h2d_stream):
            self.h2d_stream.wait_event(self.filled[slot])
            dst_view.copy_(buf, non_blocking=True)
            self.drained[slot].record(self.h2d_stream)
            self._drained_once[slot] = True

    def copy(self, dst, src) -> int:
        return staged_copy(dst, src, self.buffers, d2h=self.d2h, h2d=self.h2d, chunk_bytes=self.chunk_bytes)

    @property
    def first_stream(self):
        return self.d2h_stream

    @property
    def last_stream(self):
        return self.h2d_stream


# --------------------------------------------------------------------------- live measurement
@dataclasses.dataclass(frozen=True)
class PairResult:
    """One cell of one matrix, with its raw timing."""

    matrix: str  # a KINDS entry
    p2p: str  # "enabled" (copy_ with peer access where the pair has it) or "disabled" (staged via host)
    mode: str  # local | p2p | driver | host_staged | host_staged_loopback
    src: int
    dst: int
    measurement: timing.Measurement  # nbytes = bytes counted (bidirectional: both; local: read + write)
    peer_access: bool
    notes: tuple[str, ...] = ()

    @property
    def value(self) -> float:
        """GB/s for bandwidth cells, µs per copy for latency cells."""
        return self.measurement.bandwidth_GBps if is_bandwidth(self.matrix) else self.measurement.median_s * 1e6

    @property
    def warnings(self) -> list[str]:
        return list(self.measurement.warnings) + list(self.notes)


@dataclasses.dataclass(frozen=True)
class P2PRun:
    """A live run: every cell measured, plus the devices, their peer access and the topology text."""

    results: tuple[PairResult, ...]
    devices: tuple[str, ...]  # names of the GPUs measured, by position in `indices`
    indices: tuple[int, ...]  # CUDA device indices measured
    peer_access: tuple[tuple[bool, ...], ...]  # [a][b] for positions in `indices`
    nbytes: int
    latency_nbytes: int
    topology: str | None = None
    date: str = ""

    @property
    def label(self) -> str:
        names = sorted(set(self.devices))
        what = names[0] if len(names) == 1 else " + ".join(names)
        return f"measured here: {len(self.devices)}× {what}, {self.date[:10]}"

    def to_frame(self):
        """Tidy rows in the p2p_matrix schema (+ bandwidth_direction, mode, raw samples, IQR)."""
        import pandas as pd

        rows = []
        for r in self.results:
            m = r.measurement
            row = {"matrix": r.matrix, "p2p": r.p2p, "src": r.src, "dst": r.dst,
                   "bandwidth_GBps": r.value if is_bandwidth(r.matrix) else None,
                   "latency_us": None if is_bandwidth(r.matrix) else r.value,
                   "mode": r.mode, "bandwidth_direction": DIRECTION[r.matrix], "nbytes_counted": m.nbytes,
                   "time_s": m.median_s, "iqr_s": m.iqr_s, "inner": m.inner, "timer": m.timer,
                   "peer_access": r.peer_access, "samples_s": " ".join(f"{s:.6e}" for s in m.samples_s)}
            rows.append(row)
        return pd.DataFrame(rows)

    def matrix(self, kind: str = "bandwidth_uni", p2p: str = "enabled", **kw):
        return matrix(self.to_frame(), kind, p2p, **kw)

    @property
    def warnings(self) -> list[str]:
        return [f"{r.matrix}/{r.p2p} GPU{r.src}→GPU{r.dst}: {w}" for r in self.results for w in r.warnings]


def peer_access_matrix(devices: Sequence[int] | None = None) -> list[list[bool]]:
    """torch.cuda.can_device_access_peer for every ordered pair (True on the diagonal)."""
    import torch

    devices = list(range(torch.cuda.device_count())) if devices is None else list(devices)
    return [[a == b or bool(torch.cuda.can_device_access_peer(a, b)) for b in devices] for a in devices]


class CudaBackend:
    """How measure() touches real GPUs: buffers, copy paths with their streams, and the timers."""

    def __init__(self, chunk_bytes: int = STAGING_CHUNK_BYTES):
        require_cuda("measuring GPU copies", hint=NO_GPU_HINT)
        import torch

        self.torch = torch
        self.chunk_bytes = chunk_bytes
        self._cycles_per_s: dict[int, float] = {}

    def device_names(self, devices):
        return [self.torch.cuda.get_device_name(d) for d in devices]

    def can_access(self, a: int, b: int) -> bool:
        return a == b or bool(self.torch.cuda.can_device_access_peer(a, b))

    def alloc(self, device: int, nbytes: int):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=f"cuda:{device}").fill_(1)

    def timing_stream(self, device: int):
        return self.torch.cuda.Stream(device=device)

    def path(self, src: int, dst: int, staged: bool, nbytes: int):
        chunk = max(1, min(self.chunk_bytes, nbytes))
        return _CudaStagedPath(CudaStaging(src, dst, chunk)) if staged else _CudaDirectPath(src, dst)

    def time(self, fn, *, nbytes, label, repeats, stream):
        return timing.time_cuda(fn, repeats=repeats, nbytes=nbytes, label=label, stream=stream), ()

    def time_latency(self, fn, *, nbytes, label, repeats, stream, calls=LATENCY_CALLS):
        return _time_queued(self.torch, fn, calls=calls, repeats=repeats, nbytes=nbytes, label=label,
                            stream=stream, cycles_cache=self._cycles_per_s)

    def synchronize(self, devices):
        for d in devices:
            self.torch.cuda.synchronize(d)


class _CudaDirectPath:
    """src → dst with `copy_` on a stream of the source GPU. torch fences a cross-device copy
    against the destination's current stream; a private idle stream there keeps that fence from
    serialising the two directions of a bidirectional run."""

    def __init__(self, src: int, dst: int):
        import torch

        self.src, self.dst = src, dst
        self.stream = torch.cuda.Stream(device=src)
        self.peer_stream = torch.cuda.Stream(device=dst) if dst != src else None

    @property
    def home_stream(self):
        return self.stream

    def enqueue(self, dst, src) -> None:
        import torch

        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.cuda.stream(self.stream))
            if self.peer_stream is not None:
                stack.enter_context(torch.cuda.stream(self.peer_stream))
            dst.copy_(src, non_blocking=True)

    def fork(self, timing_stream) -> None:
        if timing_stream is not self.stream:
            self.stream.wait_stream(timing_stream)

    def join(self, timing_stream) -> None:
        if timing_stream is not self.stream:
            timing_stream.wait_stream(self.stream)


class _CudaStagedPath:
    def __init__(self, staging: CudaStaging):
        self.staging = staging

    def enqueue(self, dst, src) -> None:
        self.staging.copy(dst, src)

    def fork(self, timing_stream) -> None:
        self.staging.first_stream.wait_stream(timing_stream)

    def join(self, timing_stream) -> None:
        timing_stream.wait_stream(self.staging.last_stream)


def _time_queued(torch, fn, *, calls, repeats, nbytes, label, stream, cycles_cache, warmup=timing.WARMUP_CALLS):
    """Time `calls` back-to-back calls of fn per sample, queued behind a GPU spin (p2pBandwidthLatencyTest's
    delay kernel) so the GPU runs them back to back however slow the host is to issue them.

    1. warm up; 2. time the host issuing `calls` calls; 3. per sample: spin the stream for
    SPIN_MARGIN × that (+1 ms), record start, issue the calls, record end — if the start event has
    already fired when the host finishes issuing, the spin was too short: double it and retry
    (three times at most; after that the sample is kept with a note). Returns (Measurement, notes).
    """
    dev = stream.device.index if stream.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(dev), torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        if dev not in cycles_cache:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(10_000_000)
            e.record()
            e.synchronize()
            cycles_cache[dev] = 10_000_000 / (s.elapsed_time(e) / 1e3)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        issue_s = time.perf_counter() - t0
        torch.cuda.synchronize()
        notes, samples = [], []
        spin_s = SPIN_MARGIN * issue_s + 1e-3
        for _ in range(repeats):
            for attempt in range(4):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(int(spin_s * cycles_cache[dev]))
                start.record()
                for _ in range(calls):
                    fn()
                end.record()
                too_short = start.query()
                end.synchronize()
                if not too_short:
                    break
                spin_s *= 2
            else:
                notes.append("the host could not queue the copies ahead of the GPU; this latency includes host time")
            samples.append(start.elapsed_time(end) / 1e3 / calls)
        for d in range(torch.cuda.device_count()):
            torch.cuda.synchronize(d)
    return timing.Measurement(tuple(samples), calls, "cuda_event", label, nbytes), tuple(sorted(set(notes)))


def _counted_bytes(kind: str, nbytes: int, local: bool) -> int:
    """Bytes a cell counts, as p2pBandwidthLatencyTest: both directions for bidirectional, and read +
    write for a copy inside one GPU (the diagonal)."""
    return nbytes * (2 if kind == "bandwidth_bi" else 1) * (2 if local else 1)


def measure(devices: Sequence[int] | None = None, *, nbytes: int = BANDWIDTH_BYTES, latency_nbytes: int = LATENCY_BYTES,
            kinds: Sequence[str] = ("bandwidth_uni", "bandwidth_bi", "latency_gpu"), p2p: Sequence[str] = P2P_STATES,
            repeats: int = timing.DEFAULT_REPEATS, loopback: bool | None = None, backend=None, progress: bool = False,
            topology: str | None = None) -> P2PRun:
    """Measure the P2P matrices between `devices` (default: every visible GPU).

    'enabled' cells copy with `copy_` (torch turns peer access on where `can_device_access_peer`
    allows; elsewhere the driver stages the copy itself — mode 'driver'); 'disabled' cells stage
    explicitly through pinned host memory (`CudaStaging`). The diagonal is a copy inside one GPU
    in both. With one GPU (`loopback` defaults to True then) a staged copy GPU→host→same GPU is
    added as mode 'host_staged_loopback': what a pair without P2P would get at best on this host.
    `backend` defaults to CudaBackend(); tests inject a host-memory one.
    """
    import datetime as _dt

    backend = backend or CudaBackend()
    if devices is None:
        import torch

        devices = list(range(torch.cuda.device_count()))
    devices = [int(d) for d in devices]
    if not devices:
        require_cuda("labkit.p2p.measure", hint=NO_GPU_HINT)
    bad = [k for k in kinds if k not in KINDS or k == "latency_cpu"]
    if bad:
        raise ValueError(f"cannot measure {bad}; choose from bandwidth_uni, bandwidth_bi, latency_gpu")
    loopback = len(devices) == 1 if loopback is None else loopback
    names = backend.device_names(devices)
    access = [[backend.can_access(a, b) for b in devices] for a in devices]
    big = {d: [backend.alloc(d, nbytes) for _ in range(2)] for d in devices}  # [send, receive] per GPU
    big_back = {d: [backend.alloc(d, nbytes) for _ in range(2)] for d in devices} if "bandwidth_bi" in kinds else {}
    small = {d: [backend.alloc(d, latency_nbytes) for _ in range(2)] for d in devices}
    timers = {d: backend.timing_stream(d) for d in devices}
    paths: dict[tuple, object] = {}

    def path(a, b, staged, n, lane=0):
        key = (a, b, staged, n, lane)  # lane 1 = a second, independent path (the diagonal's other direction)
        if key not in paths:
            paths[key] = backend.path(a, b, staged, n)
        return paths[key]

    jobs = [(k, p, a, b, False) for k in kinds for p in p2p for a in devices for b in devices]
    if loopback:
        jobs += [(k, "disabled", d, d, True) for k in kinds if k != "bandwidth_bi" for d in devices]
    if progress:
        from tqdm.auto import tqdm

        jobs = tqdm(jobs, desc="p2p", unit="cell", leave=False)
    results = []
    for kind, state, a, b, loop in jobs:
        local = a == b and not loop
        staged = (state == "disabled" and not local) or loop
        ia, ib = devices.index(a), devices.index(b)
        mode = ("host_staged_loopback" if loop else "local" if local else "host_staged" if staged
                else "p2p" if access[ia][ib] else "driver")
        lat = kind.startswith("latency")
        n = latency_nbytes if lat else nbytes
        bufs = small if lat else big
        fwd = path(a, b, staged, n)
        pairs = [(fwd, bufs[b][1], bufs[a][0])]
        if kind == "bandwidth_bi":
            pairs.append((path(b, a, staged, n, lane=1 if local else 0), big_back[a][1], big_back[b][0]))
        # One direct path times on its own stream (no fork/join in the timed loop, as the tool does);
        # anything else forks from and joins into the source GPU's timing stream.
        home = getattr(fwd, "home_stream", None)
        t = home if len(pairs) == 1 and home is not None else timers[a]

        def fn(pairs=pairs, t=t):
            for p, _, _ in pairs:
                p.fork(t)
            for p, dst, src in pairs:
                p.enqueue(dst, src)
            for p, _, _ in pairs:
                p.join(t)

        label = f"{kind} {state} GPU{a}→GPU{b} ({mode})"
        counted = _counted_bytes(kind, n, local)
        if lat:
            m, notes = backend.time_latency(fn, nbytes=counted, label=label, repeats=repeats, stream=t)
        else:
            m, notes = backend.time(fn, nbytes=counted, label=label, repeats=repeats, stream=t)
        results.append(PairResult(kind, state, mode, a, b, m, bool(access[ia][ib]), tuple(notes)))
    backend.synchronize(devices)
    return P2PRun(tuple(results), tuple(names), tuple(devices), tuple(tuple(r) for r in access), int(nbytes),
                  int(latency_nbytes), topology, _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


# --------------------------------------------------------------------------- `labkit bench p2p`
def bench_arguments(p, name: str) -> None:
    p.add_argument("--devices", help="CUDA device indices, e.g. 0,1 (default: every visible GPU)")
    p.add_argument("--size", help=f"bytes per bandwidth copy (default {format_bytes(BANDWIDTH_BYTES)}; "
                                  f"--quick {format_bytes(QUICK_BANDWIDTH_BYTES)})")
    p.add_argument("--latency-size", default=f"{LATENCY_BYTES}B", help="bytes per latency copy (default 16B)")
    p.add_argument("--matrices", default="uni,bi,latency", help="uni, bi, latency (comma-separated)")
    p.add_argument("--p2p", default="enabled,disabled",
                   help="enabled (copy_ with peer access), disabled (staged through host memory)")
    p.add_argument("--repeats", type=int, default=timing.DEFAULT_REPEATS)
    p.add_argument("--quick", action="store_true", help=f"{format_bytes(QUICK_BANDWIDTH_BYTES)} copies, {QUICK_REPEATS} repeats")


_MATRIX_ARGS = {"uni": "bandwidth_uni", "bi": "bandwidth_bi", "latency": "latency_gpu"}


def bench(args, name: str = "p2p"):
    """Records, one per matrix cell; raises RuntimeError (no GPU) before anything runs."""
    require_cuda("labkit bench p2p", hint=NO_GPU_HINT)
    try:
        kinds = [_MATRIX_ARGS[x.strip()] for x in args.matrices.split(",") if x.strip()]
        states = [x.strip() for x in args.p2p.split(",") if x.strip()]
    except KeyError as e:
        raise ValueError(f"--matrices takes uni, bi, latency; got {e.args[0]!r}") from None
    if set(states) - set(P2P_STATES):
        raise ValueError(f"--p2p takes enabled, disabled; got {args.p2p!r}")
    devices = [int(x) for x in args.devices.split(",")] if args.devices else None
    size = parse_size(args.size) if args.size else (QUICK_BANDWIDTH_BYTES if args.quick else BANDWIDTH_BYTES)
    repeats = QUICK_REPEATS if args.quick and args.repeats == timing.DEFAULT_REPEATS else args.repeats
    return _bench_records(devices, kinds, states, size, parse_size(args.latency_size), repeats, progress=not args.json)


def _bench_records(devices, kinds, states, size, latency_size, repeats, progress):
    import sys

    from .system import environment

    env = environment(command="labkit bench p2p")
    run = measure(devices, nbytes=size, latency_nbytes=latency_size, kinds=kinds, p2p=states, repeats=repeats,
                  progress=progress, topology=env.get("topology"))
    if len(run.indices) == 1:
        print("only one GPU: measured the device-local copy (diagonal) and a copy staged GPU→host→GPU; "
              "GPU↔GPU pairs need two or more GPUs", file=sys.stderr)
    for w in run.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for r in run.results:
        m = r.measurement
        rec = {"experiment": "p2p", "matrix": r.matrix, "p2p": r.p2p, "mode": r.mode, "src": r.src, "dst": r.dst,
               "src_device": run.devices[run.indices.index(r.src)], "dst_device": run.devices[run.indices.index(r.dst)],
               "peer_access": r.peer_access, "nbytes": run.latency_nbytes if r.matrix.startswith("latency") else run.nbytes,
               "nbytes_counted": m.nbytes, "seconds": m.median_s, "iqr_s": m.iqr_s,
               "bandwidth_direction": DIRECTION[r.matrix], "timer": m.timer, "samples_s": list(m.samples_s)}
        if is_bandwidth(r.matrix):
            rec["bandwidth_GBps"] = r.value
        else:
            rec["latency_us"] = r.value
        yield rec
    for f in diagnose(run):
        print(f"finding: {f}", file=sys.stderr)


# --------------------------------------------------------------------------- `labkit record`
METHOD = ("labkit.p2p.measure: 'enabled' = torch copy_ between GPUs (peer access turned on by torch where "
          "can_device_access_peer allows; mode 'driver' where it does not), 'disabled' = explicit staging "
          f"through pinned host buffers in {format_bytes(STAGING_CHUNK_BYTES)} chunks, double-buffered; "
          "bandwidth = batches of back-to-back copies between CUDA events (warm-up, median of samples); "
          "bidirectional = both directions forked from and joined into one timing stream, bytes summed; "
          f"latency = {LATENCY_CALLS} back-to-back {LATENCY_BYTES}-byte copies queued behind a GPU spin; "
          "diagonal = copy inside one GPU, read + write counted (as p2pBandwidthLatencyTest)")


def record(folder, quick: bool, env: dict, *, backend=None, devices=None, nbytes: int | None = None) -> list[str]:
    """Write the `p2p_matrix` dataset of this machine into a profile folder; [] without a GPU.

    `backend`, `devices` and `nbytes` are for tests (a host-memory backend, small copies)."""
    from .provenance import measured_meta
    from .reference import write_dataset

    if backend is None and not env.get("cuda_available"):
        return []
    nbytes = nbytes or (QUICK_BANDWIDTH_BYTES if quick else BANDWIDTH_BYTES)
    run = measure(devices, nbytes=nbytes,
                  repeats=QUICK_REPEATS if quick else timing.DEFAULT_REPEATS, backend=backend, progress=backend is None,
                  topology=env.get("topology"))
    caveats = ["the diagonal counts read + write bytes (p2pBandwidthLatencyTest convention)",
               "'P2P disabled' is labkit's explicit host staging, not the driver's (p2pBandwidthLatencyTest uses "
               "cudaMemcpyPeer without peer access); rows with mode 'driver' are copy_ between GPUs without peer "
               "access, staged by the driver",
               "latency includes torch's cross-device event fence per copy_, so it reads a little above "
               "p2pBandwidthLatencyTest's"]
    if len(run.indices) == 1:
        caveats.append("one GPU: only the diagonal, plus mode 'host_staged_loopback' (GPU→host→same GPU)")
    caveats += sorted(set(run.warnings))
    meta = measured_meta(env, kind="p2p_matrix", title="GPU↔GPU copy matrices", method=METHOD,
                         bandwidth_direction="mixed", caveats="; ".join(caveats), gpu_count=len(run.indices))
    meta["nbytes"] = run.nbytes
    meta["latency_nbytes"] = run.latency_nbytes
    if env.get("topology"):
        meta["topology"] = env["topology"]
    name = "p2p_matrix"
    write_dataset(folder, name, run.to_frame(), meta)
    return [name]
