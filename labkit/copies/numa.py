"""Host memory bandwidth with the memory on the thread's own NUMA node vs on another node, measured here (nb 02).

The recorded side is `labkit.copies.placement` (a Tesla P100 server's bandwidthTest with the process on the
GPU's socket or the other one); this is the learner's own machine, CPU only.

How memory is placed: Linux's default *first-touch* policy puts a page on the NUMA node of the CPU that first
writes it. So the child process pins itself (`os.sched_setaffinity`) to node M's CPUs and fills the source
buffer, pins itself to node C's CPUs and fills the destination buffer, then times `np.copyto(dst, src)` there.
"Memory on node M" means the *source* buffer; the destination always lies on the thread's own node C.

Which bytes are counted: read + write bandwidth — each copied byte is read once from the source and written
once to the destination, so GB/s = 2 × bytes copied / median seconds / 1e9 (the write-allocate reads a CPU
may add are not counted, as in STREAM's copy).

Where the pages actually landed is checked after the timed copies with `move_pages(2)` (nodes=NULL: the node
of each page; no libnuma needed) or, failing that, `/proc/self/numa_maps`. A row is called "remote" only when
the check shows the pages on another node than the thread's CPUs; when no check is possible it says
"placement not verified". Automatic NUMA balancing (`/proc/sys/kernel/numa_balancing`) may migrate pages
towards the thread while it runs; the result says when it is on.

The measurement runs in a child process (`python -m labkit.copies.numa --json`), so the caller's (a Jupyter
kernel's) CPU affinity is never changed; the child restores its own affinity anyway.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from .. import plots
from ..system import _cpulist, cpu_model
from ..timing import time_host
from ..units import MiB, format_bytes

SYSFS_NODES = "/sys/devices/system/node"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
DEFAULT_NBYTES, QUICK_NBYTES = 256 * MiB, 64 * MiB
DEFAULT_REPEATS, QUICK_REPEATS = 7, 5
#: The share of checked pages that must lie on a node for the buffer to count as placed there.
PLACED_FRACTION = 0.9
#: move_pages is asked about at most this many pages per buffer, evenly spaced (all of them when fewer).
MAX_CHECKED_PAGES = 8192
#: move_pages(2) syscall numbers (the libc wrapper lives in libnuma, which is not always installed).
SYS_MOVE_PAGES = {"x86_64": 279, "aarch64": 239}
BYTES_COUNTED = (
    "read + write bandwidth: 2 × bytes copied per second (each byte is read once from the source buffer "
    "and written once to the destination buffer), in GB/s = 1e9 B/s"
)
COLUMNS = [
    "cpu_node",
    "memory_node",
    "intended",
    "placement",
    "nbytes",
    "GBps",
    "vs_local",
    "pages_on_node_fraction",
    "page_node",
    "thread_on_node",
    "verification",
    "median_s",
    "label",
]


def numa_nodes(sysfs: str | os.PathLike = SYSFS_NODES) -> dict[int, list[int]]:
    """NUMA node id → its CPU ids, from `node*/cpulist` (e.g. "0-3,8-11").

    Nodes without CPUs (memory-only: CXL, HBM) are kept with an empty list. Without that directory (or with
    no node in it) the whole machine is one node: {0: the CPUs this process may run on}.
    """
    out: dict[int, list[int]] = {}
    root = Path(sysfs)
    if root.is_dir():
        for p in root.iterdir():
            m = re.fullmatch(r"node(\d+)", p.name)
            if not m or not p.is_dir():
                continue
            try:
                text = (p / "cpulist").read_text()
            except OSError:
                text = ""
            out[int(m.group(1))] = sorted(_cpulist(text))
    if not out:
        return {0: sorted(os.sched_getaffinity(0))}
    return dict(sorted(out.items()))


def numa_balancing(path: str | os.PathLike = NUMA_BALANCING) -> int | None:
    """The kernel's automatic NUMA balancing mode (0 = off; 1, 2, 3 = on), or None where the file is missing."""
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def balancing_note(mode: int | None) -> str:
    """One sentence on what automatic NUMA balancing means for this measurement."""
    if mode is None:
        return "automatic NUMA balancing: unknown (no /proc/sys/kernel/numa_balancing)"
    if mode == 0:
        return "automatic NUMA balancing is off (numa_balancing = 0): pages stay where they were first touched"
    return (
        f"automatic NUMA balancing is ON (numa_balancing = {mode}): the kernel may migrate pages towards the "
        "thread during the run, turning a remote measurement into a local one; the page check after the "
        "timed copies shows where they ended up"
    )


def one_node_message(nodes: dict[int, list[int]] | None = None) -> str:
    """What a machine with one NUMA node (with CPUs) can and cannot show, and where to look instead."""
    n = len([c for c in (numa_nodes() if nodes is None else nodes).values() if c])
    return (
        f"This machine has {n} NUMA node{'s' if n != 1 else ''} with CPUs, so there is no remote node here: "
        "only the local figure can be measured. For what remote memory costs, see the recorded Tesla P100 "
        "server in labkit.copies.placement.host_placement_table() (bandwidthTest with the process and its "
        "memory on the GPU's socket vs on the other socket), or run this on a two-socket machine "
        "(`python -m labkit.copies.numa`)."
    )


# --- where pages lie ----------------------------------------------------------------------------------------


def _page_addresses(arr: np.ndarray) -> list[int]:
    ps = os.sysconf("SC_PAGE_SIZE")
    start = -(-arr.ctypes.data // ps) * ps
    n = (arr.ctypes.data + arr.nbytes - start) // ps
    if n <= 0:
        return []
    idx = np.unique(np.linspace(0, n - 1, min(n, MAX_CHECKED_PAGES)).astype(np.int64))
    return [start + int(i) * ps for i in idx]


def _move_pages_nodes(arr: np.ndarray) -> list[int] | None:
    """The node of (up to MAX_CHECKED_PAGES of) the buffer's pages via move_pages(2), or None where it fails."""
    nr = SYS_MOVE_PAGES.get(platform.machine())
    addrs = _page_addresses(arr)
    if nr is None or not addrs:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pages = (ctypes.c_void_p * len(addrs))(*addrs)
        status = (ctypes.c_int * len(addrs))()
        rc = libc.syscall(ctypes.c_long(nr), 0, ctypes.c_ulong(len(addrs)), pages, None, status, 0)
    except (OSError, AttributeError):
        return None
    if rc != 0:
        return None
    return list(status)  # a node id, or -errno for a page that is not there (e.g. -ENOENT)


def numa_maps_counts(address: int, nbytes: int, maps_text: str, numa_maps_text: str) -> dict[int, int] | None:
    """Pages per node of the mapping that holds [address, address + nbytes), from /proc/self/{maps,numa_maps}.

    Only when that mapping is the buffer alone (at most two pages larger): the kernel merges neighbouring
    anonymous mappings, and counts for a merged one would mix other memory in. None otherwise.
    """
    ps = os.sysconf("SC_PAGE_SIZE")
    for ln in maps_text.splitlines():
        lo, _, hi = ln.split(" ", 1)[0].partition("-")
        lo_i, hi_i = int(lo, 16), int(hi, 16)
        if lo_i <= address < hi_i:
            if address + nbytes > hi_i or hi_i - lo_i > nbytes + 2 * ps:
                return None
            for nl in numa_maps_text.splitlines():
                if nl.split(" ", 1)[0] == lo:
                    counts = {int(k): int(v) for k, v in re.findall(r"\bN(\d+)=(\d+)", nl)}
                    return counts or None
            return None
    return None


def page_nodes(arr: np.ndarray) -> tuple[dict[int, int] | None, str | None]:
    """Pages per NUMA node of a (touched) buffer in this process, and the method that found them.

    (None, None) when neither move_pages(2) nor /proc/self/numa_maps can tell: "placement not verified".
    """
    status = _move_pages_nodes(arr)
    if status is not None:
        counts: dict[int, int] = {}
        for s in status:
            if s >= 0:
                counts[s] = counts.get(s, 0) + 1
        if counts:
            return dict(sorted(counts.items())), "move_pages"
    try:
        maps, numa_maps = Path("/proc/self/maps").read_text(), Path("/proc/self/numa_maps").read_text()
    except OSError:
        return None, None
    counts = numa_maps_counts(arr.ctypes.data, arr.nbytes, maps, numa_maps)
    return (counts, "numa_maps") if counts else (None, None)


# --- the measurement (runs in the child process) ------------------------------------------------------------


def _classify(intended: str, memory_node: int, counts: dict[int, int] | None, thread_node: int | None):
    """(placement, fraction of pages on memory_node, the node most pages are on) for one row."""
    if not counts:
        return f"{intended} (placement not verified)", None, None
    total = sum(counts.values())
    fraction = counts.get(memory_node, 0) / total
    page_node = max(counts, key=counts.get)
    if thread_node is None:
        return f"{intended} (placement not verified: the thread's CPUs are on no single node)", fraction, page_node
    if counts[page_node] / total < PLACED_FRACTION:
        return f"{intended} (placement not verified: pages spread over nodes {counts})", fraction, page_node
    actual = "local" if page_node == thread_node else "remote"
    if actual != intended:
        return f"{actual}, not {intended}: thread on node {thread_node}, pages on node {page_node}", fraction, page_node
    if intended == "remote" and fraction < PLACED_FRACTION:
        return f"remote, but pages on node {page_node}, not {memory_node}", fraction, page_node
    return intended, fraction, page_node


def _real_node_of(cpus: list[int]) -> int | None:
    """The real NUMA node of these CPUs (from sysfs), or None where they span several or sysfs cannot tell."""
    cpu_to_node = {c: n for n, cs in numa_nodes().items() for c in cs}
    found = {cpu_to_node.get(c) for c in cpus}
    return found.pop() if len(found) == 1 and None not in found else None


def measure(nodes: dict[int, list[int]] | None = None, nbytes: int = DEFAULT_NBYTES, repeats: int = DEFAULT_REPEATS):
    """Measure every (CPU node, memory node) pair in *this* process; returns a JSON-able dict.

    Changes this process's CPU affinity while it runs (and restores it): call `local_vs_remote` from a
    notebook, which runs this in a child process.
    """
    if nbytes < 1 or repeats < 1:
        raise ValueError(f"nbytes and repeats must be >= 1, got {nbytes} and {repeats}")
    nodes = numa_nodes() if nodes is None else {int(k): list(v) for k, v in nodes.items()}
    before = os.sched_getaffinity(0)
    usable = {n: sorted(set(cs) & before) for n, cs in nodes.items()}
    notes = [BYTES_COUNTED, balancing_note(numa_balancing())]
    for n, cs in nodes.items():
        if not cs:
            notes.append(f"node {n} has no CPUs (memory-only): first touch cannot place memory there; not measured")
        elif not usable[n]:
            notes.append(f"node {n}: none of its CPUs {cs} is in this process's affinity; not measured")
    cpu_nodes = [n for n, cs in usable.items() if cs]
    if len(cpu_nodes) < 2:
        notes.append(one_node_message(nodes))
    rows, methods = [], set()
    try:
        for c in cpu_nodes:
            thread_node = _real_node_of(usable[c])
            for m in [c] + [m for m in cpu_nodes if m != c]:
                os.sched_setaffinity(0, usable[m])
                src = np.empty(nbytes, np.uint8)
                src.fill(1)  # first touch: the pages go to node m
                os.sched_setaffinity(0, usable[c])
                dst = np.empty(nbytes, np.uint8)
                dst.fill(0)  # first touch on node c
                copy = functools.partial(np.copyto, dst, src)
                meas = time_host(copy, repeats=repeats, warmup=1, nbytes=2 * nbytes, label=f"{c}<-{m}")
                counts, method = page_nodes(src)  # after the timed copies: balancing may have moved them
                methods.add(method)
                intended = "local" if m == c else "remote"
                placement, fraction, page_node = _classify(intended, m, counts, thread_node)
                rows.append(
                    dict(
                        cpu_node=c,
                        memory_node=m,
                        intended=intended,
                        placement=placement,
                        nbytes=nbytes,
                        GBps=meas.bandwidth_GBps,
                        pages_on_node_fraction=fraction,
                        page_node=page_node,
                        thread_on_node=thread_node,
                        pages_on_nodes={str(k): v for k, v in (counts or {}).items()},
                        verification=method,
                        median_s=meas.median_s,
                        samples_s=list(meas.samples_s),
                        warnings=meas.warnings,
                    )
                )
                del copy, src, dst  # free both buffers before the next pair
    finally:
        os.sched_setaffinity(0, before)
    return {
        "rows": rows,
        "nodes": {str(k): v for k, v in nodes.items()},
        "numa_balancing": numa_balancing(),
        "cpu": cpu_model(),
        "verification": sorted(m for m in methods if m) or None,
        "affinity_restored": os.sched_getaffinity(0) == before,
        "repeats": repeats,
        "notes": notes,
    }


# --- the caller's side --------------------------------------------------------------------------------------


def run_child(nodes=None, nbytes: int = DEFAULT_NBYTES, repeats: int = DEFAULT_REPEATS, timeout: float = 600) -> dict:
    """`measure` in a child process (`python -m labkit.copies.numa --json`); the caller's affinity is untouched."""
    cmd = [sys.executable, "-m", "labkit.copies.numa", "--json", "--nbytes", str(nbytes), "--repeats", str(repeats)]
    if nodes is not None:
        cmd += ["--nodes", json.dumps({str(k): list(v) for k, v in nodes.items()})]
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"the NUMA measurement failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def local_vs_remote(quick: bool = False, *, nodes=None, nbytes: int | None = None, repeats: int | None = None):
    """Copy bandwidth with the source buffer on the thread's own NUMA node vs on each other node, measured here.

    Returns a DataFrame, one row per (cpu_node, memory_node) pair: placement ("local", "remote", or what it
    really was when the page check disagrees, or "... (placement not verified)"), nbytes (buffer size),
    GBps (read + write: 2 × nbytes / median time / 1e9), vs_local (ratio to the same CPU node's local row),
    pages_on_node_fraction (share of the source's checked pages on memory_node; NaN when not verified),
    page_node, thread_on_node, verification, median_s and label. `frame.attrs` holds notes (which bytes are
    counted, NUMA balancing, and on a one-node machine `one_node_message()`), cpu and numa_balancing.
    `nodes` replaces the topology (node → CPU ids), e.g. to exercise the two-node path on a one-node machine.
    """
    import pandas as pd

    nbytes = nbytes if nbytes is not None else QUICK_NBYTES if quick else DEFAULT_NBYTES
    repeats = repeats if repeats is not None else QUICK_REPEATS if quick else DEFAULT_REPEATS
    res = run_child(nodes, nbytes, repeats)
    df = pd.DataFrame(res["rows"])
    if df.empty:
        df = pd.DataFrame(columns=COLUMNS)
    else:
        local = {r.cpu_node: r.GBps for r in df.itertuples() if r.memory_node == r.cpu_node}
        df["vs_local"] = [g / local[c] if c in local else float("nan") for c, g in zip(df.cpu_node, df.GBps)]
        df["pages_on_node_fraction"] = df["pages_on_node_fraction"].astype(float)
        df["label"] = [
            f"measured here: {res['cpu']}, node {r.cpu_node} threads, memory on node {r.memory_node}"
            + ("" if r.placement == r.intended else f" ({r.placement})")
            for r in df.itertuples()
        ]
        df = df[COLUMNS + [c for c in df.columns if c not in COLUMNS]]
    df.attrs.update({k: res[k] for k in ("notes", "cpu", "numa_balancing", "verification", "affinity_restored")})
    df.attrs["one_node"] = df.empty or df["cpu_node"].nunique() < 2
    return df


def plot_local_vs_remote(frame, ax=None):
    """Bars of read + write GB/s per (CPU node, memory node) pair, labelled "measured here".

    Blue: local, red: remote (both verified, or unverifiable where the kernel would not say), grey: the page
    check found the memory elsewhere than meant. On a one-node machine the axes say there is no remote node.
    """
    import textwrap

    if ax is None:
        _, ax = plots.figure(width=max(7.0, 1.8 * len(frame) + 2))
    cpu = frame.attrs.get("cpu", "this CPU")
    seen = set()
    for x, r in enumerate(frame.itertuples()):
        kind = r.intended if r.placement.startswith(r.intended) else "not as meant"
        label = f"measured here ({cpu}): {kind}"
        color = {"local": "C0", "remote": "C3"}.get(kind, "0.6")
        (b,) = ax.bar(x, r.GBps, width=0.6, color=color, label=label if label not in seen else "_" + label)
        seen.add(label)
        ax.annotate(f"{r.GBps:.1f} GB/s\n×{r.vs_local:.2f} of local", (x, b.get_height()), ha="center",
                    va="bottom", fontsize=7)  # fmt: skip
    ticks = [f"CPU node {r.cpu_node}, memory node {r.memory_node}: {r.placement}" for r in frame.itertuples()]
    ax.set_xticks(range(len(frame)), [textwrap.fill(t, 24) for t in ticks], fontsize=7)
    ax.set_ylim(0, max(frame["GBps"], default=1) * 1.35)
    ax.set_xlim(-0.7 if len(frame) > 1 else -1.5, len(frame) - 0.3 if len(frame) > 1 else 1.5)
    size = format_bytes(int(frame["nbytes"].iloc[0])) if len(frame) else "?"
    plots.finish(
        ax,
        "Host copy bandwidth: memory on the thread's own NUMA node vs another",
        "thread's CPU node, source buffer's memory node (placement)",
        "copy bandwidth, read + write (GB/s)",
        source=f"measured here: np.copyto of {size}; GB/s = 2 × bytes copied / median time",
    )
    if frame.attrs.get("one_node") and ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="upper right", title_fontsize=7,
                  title="one NUMA node here: no remote node to measure\n(recorded: labkit.copies.placement)")  # fmt: skip
    return ax


def _table(res: dict) -> str:
    lines = [f"CPU: {res['cpu']}"] + [f"note: {n}" for n in res["notes"]]
    lines.append(f"{'cpu node':>8} {'memory node':>11} {'GB/s':>8}  placement (where the source's pages are)")
    for r in res["rows"]:
        where = "not verified" if r["page_node"] is None else f"on node {r['page_node']}, by {r['verification']}"
        lines.append(f"{r['cpu_node']:>8} {r['memory_node']:>11} {r['GBps']:>8.2f}  {r['placement']} ({where})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m labkit.copies.numa", description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print the raw result as JSON (what local_vs_remote reads)")
    p.add_argument("--quick", action="store_true", help=f"{format_bytes(QUICK_NBYTES)} buffers, fewer repeats")
    p.add_argument("--nbytes", type=int, default=None, help="buffer size in bytes")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--nodes", default=None, help='topology to use instead of sysfs, as JSON: {"0": [0], "1": [1]}')
    a = p.parse_args(argv)
    nbytes = a.nbytes if a.nbytes is not None else QUICK_NBYTES if a.quick else DEFAULT_NBYTES
    repeats = a.repeats if a.repeats is not None else QUICK_REPEATS if a.quick else DEFAULT_REPEATS
    res = measure(json.loads(a.nodes) if a.nodes else None, nbytes, repeats)
    print(json.dumps(res) if a.json else _table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
