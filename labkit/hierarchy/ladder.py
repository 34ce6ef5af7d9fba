"""The bandwidth ladder: every level data can move through, measured with the same sizes and units.

Levels, fastest first: GPU memory (a copy inside HBM), GPU↔GPU (NVLink or PCIe), host↔GPU
(PCIe), host memory (cache, then DRAM), between processes on one host (gloo over loopback),
between machines (the network, as nccl-tests sees it). Every number is a one-way data rate:
bytes delivered per second from source to destination, GB/s = 1e9 B/s, unidirectional —
a copy counts each byte once, a collective counts nccl-tests busbw (per rank, per direction).
Where a source counts otherwise (bandwidthTest's D2D counts the read *and* the write; HBM specs
quote reads + writes), the conversion is exact, stated, and shown in the label.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Sequence

from .. import plots, timing
from ..collectives import algbw, busbw, slowest_rank
from ..copies.sweeps import gpu_copy_sweep, host_copy_sweep
from ..launch import launch
from ..reference import list_datasets, load, profile_path
from ..runtime import Found
from ..schema import DatasetError, short_source
from ..system import cpu_model
from ..units import PINNED_CAP_BYTES, MiB, pow2_sizes

LEVELS = ("gpu_memory", "gpu_gpu", "host_gpu", "host_cache", "host_memory", "processes", "network")
LEVEL_NAMES = {
    "gpu_memory": "GPU memory (HBM copy)",
    "gpu_gpu": "GPU↔GPU",
    "host_gpu": "host↔GPU (PCIe)",
    "host_cache": "host memory: caches",
    "host_memory": "host memory: DRAM",
    "processes": "between processes (this host)",
    "network": "between machines (network)",
}
#: Ladder sizes: powers of four, 256 B .. 64 MiB in quick mode (64 MiB copies already spill a
#: 32 MiB last-level cache), 64 B .. 256 MiB otherwise. The same list for every level.
QUICK_SIZES = pow2_sizes(256, 64 * MiB, step=2)
FULL_SIZES = pow2_sizes(64, 256 * MiB, step=2)
PROCESS_METHOD = (
    "labkit.launch + torch.distributed gloo: each rank sends S to the other while receiving S "
    "(nccl-tests sendrecv), busbw = S / t, slowest rank per sample, median"
)


@dataclasses.dataclass(frozen=True)
class LevelSweep:
    """Bandwidth against size for one level, with where it came from."""

    level: str
    label: str  # legend text: "measured here: …", "recorded: … — source"
    nbytes: tuple[int, ...]
    bandwidth_GBps: tuple[float, ...]
    how: str  # "measured" or "recorded"
    method: str = ""
    dataset: str | None = None

    @property
    def peak_GBps(self) -> float:
        return max(self.bandwidth_GBps)

    @property
    def plateau_GBps(self) -> float:
        """Bandwidth at the large sizes (median of the two largest), the plateau of docs/design.md's conventions."""
        pairs = sorted(zip(self.nbytes, self.bandwidth_GBps))
        return float(statistics.median(bw for _, bw in pairs[-2:]))

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(
            {
                "level": self.level,
                "nbytes": list(self.nbytes),
                "bandwidth_GBps": list(self.bandwidth_GBps),
                "how": self.how,
                "label": self.label,
            }
        )


def _from_transfer(sweep, level: str, label: str, method: str) -> LevelSweep:
    return LevelSweep(level, label, tuple(sweep.nbytes), tuple(sweep.bandwidth_GBps), "measured", method)


# --------------------------------------------------------------------------- measured here
def last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache (from sysfs), or None where it cannot be read."""
    best = None
    for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = p.read_text().strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        try:
            n = int(text.rstrip("KM")) * mult
        except ValueError:
            continue
        best = max(best or 0, n)
    return best


def measure_host(sizes: Sequence[int], repeats: int = timing.DEFAULT_REPEATS) -> LevelSweep:
    """Host memory: numpy copies between two buffers of each size (labkit.copies.sweeps.host_copy_sweep)."""
    s = host_copy_sweep(sizes, repeats=repeats)
    return _from_transfer(
        s,
        "host_memory",
        f"measured here: host memory copy ({cpu_model()})",
        "labkit.copies.sweeps.host_copy_sweep (numpy.copyto, host timer, median)",
    )


def measure_processes(
    sizes: Sequence[int], repeats: int = timing.DEFAULT_REPEATS, timeout_s: float = 120.0
) -> LevelSweep:
    """Between processes: gloo sendrecv between 2 ranks over loopback, through labkit.launch."""
    rows = launch(sendrecv_rank, 2, "gloo", timeout_s=timeout_s, kwargs=dict(sizes=list(sizes), repeats=repeats))[0]
    return processes_sweep(rows)


def processes_sweep(rows: list[dict]) -> LevelSweep:
    """The "between processes" level from `sendrecv_rank`'s records (rank 0's), however it was launched."""
    return LevelSweep(
        "processes",
        "measured here: 2 processes, gloo send/recv over loopback",
        tuple(r["nbytes"] for r in rows),
        tuple(r["busbw_GBps"] for r in rows),
        "measured",
        PROCESS_METHOD,
    )


#: Untimed exchanges before a size's estimate (the first opens gloo's pair connection), and the cap on
#: back-to-back exchanges per timing sample (each is a round trip through the kernel).
SENDRECV_WARMUP, SENDRECV_MAX_INNER = 2, 200


def sendrecv_rank(rank: int, world_size: int, *, sizes, repeats: int = 10, ranks=None) -> list[dict] | None:
    """nccl-tests sendrecv over gloo: each rank sends S to the next rank while receiving S from the previous.

    `ranks` (default: all) picks the ranks taking part; the others return at once. Every rank runs
    the same number of calls: the inner loop is sized (timing.inner_for: to last ≥ timing.MIN_SAMPLE_S) from the
    slowest rank's estimate. A sample is the slowest rank's; busbw = S / t (factor 1).
    """
    import torch
    import torch.distributed as dist

    group = None
    if ranks is not None:
        ranks = sorted(ranks)
        group = dist.new_group(ranks)  # every rank must call new_group, members or not
        if rank not in ranks:
            return None
    members = ranks or list(range(world_size))
    me, n_ranks = members.index(rank), len(members)
    nxt, prv = members[(me + 1) % n_ranks], members[(me - 1) % n_ranks]
    rows = []
    for n in sizes:
        send, recv = torch.ones(int(n), dtype=torch.uint8), torch.empty(int(n), dtype=torch.uint8)

        def call():
            r = dist.irecv(recv, src=prv, group=group)
            dist.isend(send, dst=nxt, group=group).wait()
            r.wait()

        # one estimate (SENDRECV_WARMUP untimed calls, then 3 timed), agreed on by every rank: the slowest sizes the loop
        est = torch.tensor([timing.time_host(call, repeats=1, warmup=SENDRECV_WARMUP, inner=3).samples_s[0]])
        dist.all_reduce(est, op=dist.ReduceOp.MAX, group=group)
        inner = timing.inner_for(est.item(), max_inner=SENDRECV_MAX_INNER)
        mine = timing.time_collectives(
            {"sendrecv": call}, repeats=repeats, warmup=0, inner=inner, barrier=lambda: dist.barrier(group=group)
        )["sendrecv"]
        per_rank = [None] * n_ranks
        dist.all_gather_object(per_rank, mine, group=group)
        samples = slowest_rank(per_rank)
        seconds = statistics.median(samples)
        rows.append(
            {
                "op": "sendrecv",
                "backend": "gloo",
                "world_size": n_ranks,
                "nbytes": int(n),
                "seconds": seconds,
                "inner": inner,
                "samples_s": samples,
                "algbw_GBps": algbw(n, seconds),
                "busbw_GBps": busbw("sendrecv", n, seconds, n_ranks),
            }
        )
    return rows if me == 0 else None


def measure_gpu(sizes: Sequence[int], repeats: int = timing.DEFAULT_REPEATS) -> list[LevelSweep]:
    """GPU memory (D2D copy), host↔GPU (pinned H2D) and, with two GPUs, GPU0→GPU1 — only where CUDA exists."""
    import torch

    if not torch.cuda.is_available():
        return []
    name = torch.cuda.get_device_name(0)
    top = [n for n in sizes if n <= PINNED_CAP_BYTES]
    out = [
        _from_transfer(
            gpu_copy_sweep(top, "d2d", "pinned", repeats=repeats),
            "gpu_memory",
            f"measured here: {name} D2D copy (bytes counted once)",
            "labkit.copies.sweeps.gpu_copy_sweep d2d",
        ),
        _from_transfer(
            gpu_copy_sweep(top, "h2d", "pinned", repeats=repeats),
            "host_gpu",
            f"measured here: {name} H2D pinned",
            "labkit.copies.sweeps.gpu_copy_sweep h2d pinned",
        ),
    ]
    if torch.cuda.device_count() >= 2:
        out.append(peer_copy_sweep(top, repeats=repeats))
    return out


def peer_copy_sweep(
    sizes: Sequence[int], src: int = 0, dst: int = 1, repeats: int = timing.DEFAULT_REPEATS
) -> LevelSweep:
    """GPU src → GPU dst copies timed with CUDA events (P2P where the driver allows it, else staged)."""
    import torch

    bws = []
    for n in sizes:
        a = torch.empty(n, dtype=torch.uint8, device=f"cuda:{src}").fill_(1)
        b = torch.empty(n, dtype=torch.uint8, device=f"cuda:{dst}")
        with torch.cuda.device(src):
            m = timing.time_cuda(lambda a=a, b=b: b.copy_(a, non_blocking=True), repeats=repeats, nbytes=n)
        bws.append(m.bandwidth_GBps)
        del a, b
    peer = torch.cuda.can_device_access_peer(src, dst)
    return LevelSweep(
        "gpu_gpu",
        f"measured here: GPU{src}→GPU{dst} copy (P2P {'on' if peer else 'off'})",
        tuple(sizes),
        tuple(bws),
        "measured",
        "copy_ (non_blocking) between CUDA events on the source's stream",
    )


def measure(
    sizes: Sequence[int],
    levels: Sequence[str] = ("gpu", "host", "processes"),
    repeats: int = 10,
    timeout_s: float = 120.0,
) -> list[LevelSweep]:
    """Measure the requested levels on this machine (GPU levels only where CUDA exists)."""
    unknown = set(levels) - {"gpu", "host", "processes"}
    if unknown:
        raise ValueError(f"unknown ladder level(s) {sorted(unknown)}; choose from gpu, host, processes")
    out = []
    if "gpu" in levels:
        out += measure_gpu(sizes, repeats)
    if "host" in levels:
        out.append(measure_host(sizes, repeats))
    if "processes" in levels:
        out.append(measure_processes(sizes, repeats, timeout_s))
    return out


def profile_curves(reference) -> list[LevelSweep]:
    """Ladder curves a `labkit record` profile folder holds (shown as recorded on that machine)."""
    reference = profile_path(reference) if reference is not None else None
    if reference is None:
        return []
    out = []
    for name in list_datasets(reference):
        if not name.startswith("ladder_"):
            continue
        ds = load(name, reference)
        f = ds.frame
        col = "bandwidth_GBps" if "bandwidth_GBps" in f else "value"
        level = name[len("ladder_") :]
        if level not in LEVELS:
            continue
        out.append(
            LevelSweep(
                level,
                f"recorded: {ds.meta['title']} — {ds.meta['source']}",
                tuple(int(x) for x in f["nbytes"]),
                tuple(float(x) for x in f[col]),
                "recorded",
                ds.meta["method"],
                name,
            )
        )
    return out


def gpu_levels_here(sizes: Sequence[int], repeats: int) -> Found:
    """This machine's GPU levels (GPU memory, host↔GPU, GPU↔GPU with two GPUs), measured."""
    levels = measure_gpu(sizes, repeats)
    return Found(levels, levels[0].label if levels else "measured here")


def profile_levels(reference) -> Found:
    """The GPU levels a `labkit record` profile given as `reference=` holds ([] for none), replayed, with a note."""
    curves = profile_curves(reference)
    return Found(
        curves,
        curves[0].label if curves else "recorded",
        tuple(c.dataset for c in curves if c.dataset),
        note="no CUDA device here: GPU levels come from recorded systems"
        + (f" and the profile {reference}" if curves else ""),
    )


# --------------------------------------------------------------------------- recorded elsewhere
@dataclasses.dataclass(frozen=True)
class RecordedCurve:
    """How to read one level's curve out of a reference dataset."""

    level: str
    dataset: str
    where: dict  # column == value filters
    column: str
    factor: float = 1.0  # exact, stated conversion to a one-way data rate
    note: str = ""


#: Curves of recorded systems shown beside this machine's (names in data/; see `labkit ref show`).
RECORDED_CURVES = (
    RecordedCurve(
        "gpu_memory",
        "bandwidthtest_shmoo_v100_pcie_32gb_superbench",
        {"direction": "d2d"},
        "bandwidth_GBps",
        0.5,
        "D2D ÷2: bandwidthTest counts a copy's read and write",
    ),
    RecordedCurve("host_gpu", "bandwidthtest_shmoo_v100_pcie_32gb_superbench", {"direction": "h2d"}, "bandwidth_GBps"),
    RecordedCurve(
        "gpu_gpu",
        "nccl_allreduce_gh200_alps_1to16nodes_slingshot11",
        {"nodes": 1, "placement": "out-of-place"},
        "busbw_GBps",
        1.0,
        "all_reduce busbw, 4 GPUs over NVLink",
    ),
    RecordedCurve(
        "network",
        "nccl_allreduce_gh200_alps_1to16nodes_slingshot11",
        {"nodes": 2, "placement": "out-of-place"},
        "busbw_GBps",
        1.0,
        "all_reduce busbw, 2 nodes: NCCL's tree, up to ~2× the node's 4 × 25 GB/s NICs; not one NIC's rate",
    ),
    RecordedCurve(
        "network",
        "nccl_allreduce_16xa100_2node_p4d_efa_awsefaeks",
        {"placement": "out-of-place"},
        "busbw_GBps",
        1.0,
        "all_reduce busbw, 2 nodes, ring: the sum of 4 × 12.5 GB/s EFA NICs; not one NIC's rate",
    ),
)


def recorded_curves(curves=RECORDED_CURVES) -> tuple[list[LevelSweep], list[str]]:
    """The recorded curves that exist in this install; and a note for each one that does not."""
    out, missing = [], []
    for c in curves:
        try:
            ds = load(c.dataset)
        except DatasetError as e:
            missing.append(f"{c.dataset}: {e}")
            continue
        f = ds.frame
        for col, val in c.where.items():
            f = f[f[col] == val]
        f = f[f[c.column] > 0].sort_values("nbytes")
        if f.empty:
            missing.append(f"{c.dataset}: no rows match {c.where}")
            continue
        note = f" ({c.note})" if c.note else ""
        label = f"recorded: {ds.meta['title'].split(',')[0]}{note} — {short_source(ds.meta['source'])}"
        out.append(
            LevelSweep(
                c.level,
                label,
                tuple(int(x) for x in f["nbytes"]),
                tuple(float(x) * c.factor for x in f[c.column]),
                "recorded",
                ds.meta["method"],
                ds.name,
            )
        )
    return out, missing


# --------------------------------------------------------------------------- one number per level


# --------------------------------------------------------------------------- plots
def plot_curves(sweeps: Sequence[LevelSweep], *, title: str = "The bandwidth ladder: one-way data rate against size"):
    """All level curves on one log-log chart (measured here: solid; recorded: thin, open markers)."""
    fig, ax = plots.figure(width=9.5, height=5.5)
    colours = {lv: f"C{i}" for i, lv in enumerate(LEVELS)}
    for s in sweeps:
        plots.line(
            ax,
            s.nbytes,
            s.bandwidth_GBps,
            f"{s.label}",
            how=plots.MEASURED if s.how == "measured" else plots.RECORDED,
            color=colours[s.level],
        )
    ax.set_yscale("log")
    plots.size_axis(ax)
    plots.finish(
        ax,
        title,
        "message size (bytes)",
        "bandwidth, one way (GB/s)",
        source="solid = measured here, thin = recorded; GB/s = 1e9 B/s",  # colours: one per curve (plots.tidy)
    )
    # many long source labels: below the axes, not over the data (notebooks save figures with a tight box)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=1, frameon=False)
    return fig


class LadderCurves:
    """Notebook 06's ladder: the levels measured here, the GPU levels (here or a profile), the recorded curves.

    `curves` is what `plot_curves` draws; the report names the recorded curves that could not be loaded.
    """

    experiment = "ladder_gpu"

    def __init__(self, measured: Sequence[LevelSweep], gpu_levels: Sequence[LevelSweep]):
        self.gpu_levels = list(gpu_levels)
        self.recorded, self.missing = recorded_curves()
        self.curves = list(measured) + self.gpu_levels + self.recorded
        self.datasets = [c.dataset for c in self.recorded + self.gpu_levels if c.dataset]

    def report(self) -> str:
        """The recorded curves that could not be drawn, and why."""
        return "  \n".join(f"not shown: {note}" for note in self.missing)

    def notes(self) -> dict:
        return {"levels": [c.level for c in self.gpu_levels]}
