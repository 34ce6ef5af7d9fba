"""P2P matrices: the four of p2pBandwidthLatencyTest, read from recorded datasets or a live run, with the topology.

Four matrices, each once with peer access on and once staged through host memory, as
cuda-samples p2pBandwidthLatencyTest prints them (rows = source GPU, columns = destination GPU):

- `bandwidth_uni` — one direction at a time (GB/s, 1 GB = 1e9 B);
- `bandwidth_bi`  — both directions at once on two streams, the *sum* of both (GB/s);
- `latency_gpu`   — time per small copy, back to back on one stream (µs);
- `latency_cpu`   — the host-side cost of issuing it (recorded systems only).

The diagonal is a copy inside one GPU's memory; like p2pBandwidthLatencyTest we count its bytes
twice (read + write), so a diagonal is comparable with the recorded ones and with HBM specs.
`matrix(data, kind, p2p)` gives one as a square DataFrame; `as_source` wraps a Dataset, a live
`P2PRun` or a bare frame in one shape (`MatrixSource`) with its label and `nvidia-smi topo -m`.
"""

from __future__ import annotations

import dataclasses
import re

from .. import timing
from ..reference import load_all
from ..system import parse_topology

# --------------------------------------------------------------------------- vocabulary
KINDS = ("bandwidth_uni", "bandwidth_bi", "latency_gpu", "latency_cpu")
P2P_STATES = ("enabled", "disabled")
#: What each matrix's numbers are, for labels and the `bandwidth_direction` column.
DIRECTION = {
    "bandwidth_uni": "unidirectional",
    "bandwidth_bi": "bidirectional",
    "latency_gpu": "none",
    "latency_cpu": "none",
}
KIND_TEXT = {
    "bandwidth_uni": "unidirectional bandwidth",
    "bandwidth_bi": "bidirectional bandwidth (sum of both directions)",
    "latency_gpu": "latency (GPU-timed)",
    "latency_cpu": "latency (host-side issue time)",
}
P2P_TEXT = {"enabled": "P2P on", "disabled": "P2P off (staged through host memory)"}
UNIT_TEXT = {
    "bandwidth_uni": "GB/s (unidirectional)",
    "bandwidth_bi": "GB/s (bidirectional: sum of both directions)",
    "latency_gpu": "µs per copy",
    "latency_cpu": "µs per copy (host side)",
}
#: Row modes of measured datasets. Recorded datasets use the tools' own ('write', 'ce_read', ...).
MODES = ("local", "p2p", "driver", "host_staged", "host_staged_loopback")


def is_bandwidth(kind: str) -> bool:
    return kind.startswith("bandwidth")


def metric_label(kind: str, p2p: str) -> str:
    """'unidirectional bandwidth, P2P on' — one line for dropdowns and titles."""
    return f"{KIND_TEXT[kind]}, {P2P_TEXT[p2p]}"


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
        raise KeyError(
            f"no {metric_label(kind, p2p)} matrix here; have: "
            f"{', '.join(metric_label(*m) for m in metrics(f)) or 'none'}"
        )
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

    return [
        (int(i), int(j), float(m.loc[i, j])) for i in m.index for j in m.columns if i != j and np.isfinite(m.loc[i, j])
    ]


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
        return MatrixSource(
            "measured_here", data.to_frame(), data.label, data.topology, ", ".join(sorted(set(data.devices))), ""
        )
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
                problems.append(
                    f"{name}: not square (rows {sorted(rows)}, columns {sorted(cols)}) "
                    f"and rows {incomplete} are incomplete"
                )
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


# --------------------------------------------------------------------------- figures


# --------------------------------------------------------------------------- diagnosis


# --------------------------------------------------------------------------- tensor-parallel groups


# --------------------------------------------------------------------------- staging through host memory


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
            row = {
                "matrix": r.matrix,
                "p2p": r.p2p,
                "src": r.src,
                "dst": r.dst,
                "bandwidth_GBps": r.value if is_bandwidth(r.matrix) else None,
                "latency_us": None if is_bandwidth(r.matrix) else r.value,
                "mode": r.mode,
                "bandwidth_direction": DIRECTION[r.matrix],
                "nbytes_counted": m.nbytes,
                "time_s": m.median_s,
                "iqr_s": m.iqr_s,
                "inner": m.inner,
                "timer": m.timer,
                "peer_access": r.peer_access,
                "samples_s": " ".join(f"{s:.6e}" for s in m.samples_s),
            }
            rows.append(row)
        return pd.DataFrame(rows)

    def matrix(self, kind: str = "bandwidth_uni", p2p: str = "enabled", **kw):
        return matrix(self.to_frame(), kind, p2p, **kw)

    @property
    def warnings(self) -> list[str]:
        return [f"{r.matrix}/{r.p2p} GPU{r.src}→GPU{r.dst}: {w}" for r in self.results for w in r.warnings]


# --------------------------------------------------------------------------- `labkit bench p2p`


# --------------------------------------------------------------------------- `labkit record`


def shipped_systems(*needles: str) -> tuple:
    """The shipped p2p_matrix datasets whose names contain each needle, in order (notebook 04's worked examples)."""
    shipped = load_all(kind="p2p_matrix")
    return tuple(next(d for d in shipped if needle in d.name) for needle in needles)
