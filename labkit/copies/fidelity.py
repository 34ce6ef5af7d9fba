"""Fidelity: labkit's pinned copy bandwidth checked against a raw CUDA-runtime probe, same process, same run.

labkit times `dst.copy_(src, non_blocking=True)` through PyTorch. Is PyTorch (or labkit's timer) in
the way? The probe below calls the CUDA runtime directly through ctypes — cudaMallocHost,
cudaMalloc, cudaMemcpyAsync between two cudaEvents on one stream, the bandwidthTest method — on
the same libcudart that torch loaded, so both sides share one context and one driver. The two
bandwidths should agree to within `FIDELITY_TOLERANCE`; the link's theoretical limit (from the
PCIe generation and width NVML reports) is reported beside them.

`labkit bench fidelity --json` (labkit.copies.bench_fidelity) prints one record per direction.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses

from .. import timing
from ..runtime import require_cuda
from ..specs import pcie_spec
from ..system import nvml_gpus
from ..units import MiB, check_pinned_request, format_bytes
from .sweeps import gpu_copy_sweep

#: Large enough that the per-copy latency (a few µs) is < 0.1% of a copy at PCIe speeds.
DEFAULT_NBYTES = 256 * MiB
#: labkit and the raw probe must agree this closely (issue #10: within 5%).
FIDELITY_TOLERANCE = 0.05
#: cudaMemcpyKind values from cuda_runtime_api.h.
_MEMCPY_KIND = {"h2d": 1, "d2h": 2}
#: Copies per timed sample and samples per direction (bandwidthTest uses 100 × one copy of 32,000,000 B; 32 MiB in versions before the samples moved to GitHub).
RAW_INNER, RAW_REPEATS, RAW_WARMUP = 10, 10, 3


def _cudart():
    """The libcudart that this process (torch) has loaded; found via /proc/self/maps, else by name."""
    require_cuda("the raw cudaMemcpyAsync probe")
    import torch

    torch.cuda.init()
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libcudart.so" in line}
    except OSError:
        paths = set()
    paths = sorted(p for p in paths if "/" in p)
    for p in paths:
        try:
            return ctypes.CDLL(p), p
        except OSError:
            continue
    name = ctypes.util.find_library("cudart")
    if name:
        return ctypes.CDLL(name), name
    raise RuntimeError(
        "could not find libcudart (the CUDA runtime) in this process or on the library path; "
        "the raw probe needs a CUDA build of torch"
    )


class _Runtime:
    """The handful of CUDA runtime calls the probe needs, each checked."""

    def __init__(self):
        self.lib, self.path = _cudart()
        self.lib.cudaGetErrorString.restype = ctypes.c_char_p

    def __call__(self, fn: str, *args):
        rc = getattr(self.lib, fn)(*args)
        if rc != 0:
            msg = self.lib.cudaGetErrorString(rc).decode()
            raise RuntimeError(f"{fn} failed: {msg} (cudaError {rc})")


def raw_copy(
    nbytes: int,
    direction: str,
    *,
    device: int = 0,
    repeats: int = RAW_REPEATS,
    inner: int = RAW_INNER,
    warmup: int = RAW_WARMUP,
) -> timing.Measurement:
    """Time pinned cudaMemcpyAsync H2D or D2H with cudaEvents, through the CUDA runtime alone."""
    if direction not in _MEMCPY_KIND:
        raise ValueError(f"direction must be 'h2d' or 'd2h', got {direction!r}")
    nbytes = check_pinned_request(nbytes)
    rt = _Runtime()
    vp = ctypes.c_void_p
    host, dev, stream, start, stop = vp(), vp(), vp(), vp(), vp()
    rt("cudaSetDevice", ctypes.c_int(device))
    rt("cudaMallocHost", ctypes.byref(host), ctypes.c_size_t(nbytes))
    try:
        rt("cudaMalloc", ctypes.byref(dev), ctypes.c_size_t(nbytes))
        try:
            rt("cudaStreamCreate", ctypes.byref(stream))
            rt("cudaEventCreate", ctypes.byref(start))
            rt("cudaEventCreate", ctypes.byref(stop))
            ctypes.memset(host, 1, nbytes)
            dst, src = (dev, host) if direction == "h2d" else (host, dev)
            kind, size = ctypes.c_int(_MEMCPY_KIND[direction]), ctypes.c_size_t(nbytes)

            def copies(n):
                for _ in range(n):
                    rt("cudaMemcpyAsync", dst, src, size, kind, stream)

            copies(warmup)
            rt("cudaStreamSynchronize", stream)
            samples, ms = [], ctypes.c_float()
            for _ in range(repeats):
                rt("cudaEventRecord", start, stream)
                copies(inner)
                rt("cudaEventRecord", stop, stream)
                rt("cudaEventSynchronize", stop)
                rt("cudaEventElapsedTime", ctypes.byref(ms), start, stop)
                samples.append(ms.value / 1e3 / inner)
            for ev in (start, stop):
                rt("cudaEventDestroy", ev)
            rt("cudaStreamDestroy", stream)
        finally:
            rt("cudaFree", dev)
    finally:
        rt("cudaFreeHost", host)
    return timing.Measurement(
        tuple(samples),
        inner,
        f"cuda_event (raw {rt.path})",
        f"raw cudaMemcpyAsync {direction} pinned {format_bytes(nbytes)}",
        nbytes,
    )


@dataclasses.dataclass(frozen=True)
class Fidelity:
    """labkit's measurement and the raw probe's, for one direction and size."""

    direction: str
    nbytes: int
    labkit: timing.Measurement
    raw: timing.Measurement
    link_limit_GBps: float | None  # per direction, from NVML's current PCIe gen/width
    link: str | None

    @property
    def ratio(self) -> float:
        """labkit bandwidth / raw bandwidth (1.0 = identical)."""
        return self.labkit.bandwidth_GBps / self.raw.bandwidth_GBps

    @property
    def ok(self) -> bool:
        return abs(self.ratio - 1) <= FIDELITY_TOLERANCE

    def to_dict(self) -> dict:
        return {
            "experiment": "fidelity",
            "direction": self.direction,
            "memory": "pinned",
            "nbytes": self.nbytes,
            "size": format_bytes(self.nbytes),
            "labkit_GBps": self.labkit.bandwidth_GBps,
            "labkit_iqr_s": self.labkit.iqr_s,
            "raw_GBps": self.raw.bandwidth_GBps,
            "raw_iqr_s": self.raw.iqr_s,
            "ratio": self.ratio,
            "tolerance": FIDELITY_TOLERANCE,
            "ok": self.ok,
            "link": self.link,
            "link_limit_GBps": self.link_limit_GBps,
            "bandwidth_direction": "unidirectional",
            "raw_timer": self.raw.timer,
            "labkit_samples_s": list(self.labkit.samples_s),
            "raw_samples_s": list(self.raw.samples_s),
        }


def _link_limit(device: int) -> tuple[float | None, str | None]:
    gpus, _ = nvml_gpus()
    g = next((g for g in gpus if g.get("index") == device), None)
    if not g or not g.get("pcie_gen_current") or not g.get("pcie_width_current"):
        return None, None
    try:
        s = pcie_spec(int(g["pcie_gen_current"]), int(g["pcie_width_current"]))
    except (KeyError, ValueError):
        return None, f"PCIe Gen{g['pcie_gen_current']} x{g['pcie_width_current']}"
    return s.per_direction_GBps(), s.name + " (current link, per direction, after encoding)"


def check(nbytes: int = DEFAULT_NBYTES, directions=("h2d", "d2h"), device: int = 0) -> list[Fidelity]:
    """labkit's gpu_copy_sweep and the raw probe, interleaved per direction, in this one process."""
    limit, link = _link_limit(device)
    out = []
    for d in directions:
        ours = gpu_copy_sweep([nbytes], d, "pinned", device=device).measurements[0]
        raw = raw_copy(nbytes, d, device=device)
        out.append(Fidelity(d, nbytes, ours, raw, limit, link))
    return out


def summary(results: list[Fidelity]) -> str:
    lines = []
    for f in results:
        lines.append(
            f"{f.direction} pinned {format_bytes(f.nbytes)}: labkit {f.labkit.bandwidth_GBps:.2f} GB/s, "
            f"raw cudaMemcpyAsync {f.raw.bandwidth_GBps:.2f} GB/s (ratio {f.ratio:.3f}, "
            f"{'within' if f.ok else 'OUTSIDE'} ±{FIDELITY_TOLERANCE:.0%})"
            + (f"; link limit {f.link_limit_GBps:.2f} GB/s ({f.link})" if f.link_limit_GBps else "")
        )
    return "\n".join(lines)


def to_frame(results: list[Fidelity]):
    """Rows in the `point` schema: labkit's and the raw probe's bandwidth, their ratio, and the link limit."""
    import pandas as pd

    rows = []
    for f in results:
        what = f"pinned {f.direction.upper()} {format_bytes(f.nbytes)}"
        for timer, m, how in (
            ("labkit", f.labkit, "labkit (torch copy_(non_blocking=True), CUDA events)"),
            ("raw cudaMemcpyAsync + cudaEvent", f.raw, "raw cudaMemcpyAsync + cudaEvent (ctypes)"),
        ):
            rows.append(
                {
                    "quantity": f"{what}: {how}",
                    "value": m.bandwidth_GBps,
                    "unit": "GB/s",
                    "bandwidth_direction": "unidirectional",
                    "direction": f.direction,
                    "nbytes": f.nbytes,
                    "timer": timer,
                }
            )
        rows.append(
            {
                "quantity": f"{what}: labkit / raw",
                "value": f.ratio,
                "unit": "ratio",
                "bandwidth_direction": "none",
                "direction": f.direction,
                "nbytes": f.nbytes,
                "timer": "ratio",
            }
        )
    if results and results[0].link_limit_GBps:
        rows.append(
            {
                "quantity": f"{results[0].link} (link limit)",
                "value": results[0].link_limit_GBps,
                "unit": "GB/s",
                "bandwidth_direction": "unidirectional",
                "direction": "",
                "nbytes": None,
                "timer": "spec",
            }
        )
    frame = pd.DataFrame(rows)
    frame["nbytes"] = frame["nbytes"].astype("Int64")
    return frame
