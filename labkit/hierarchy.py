"""The hierarchy cliff (notebook 6): the bandwidth ladder, and hierarchical vs flat all-reduce over a slow link.

- `labkit bench ladder` / `labkit record` (experiment "ladder"): every level this machine has,
  same sizes, same timing, GB/s one way (machinery in `labkit.ladder`).
- `compare(...)`: the hand-written hierarchical all-reduce (`labkit.hierarchical`) against a
  flat ring and gloo's own all_reduce, on real processes (`labkit.launch`) whose groups are
  joined by a genuinely slower link — network namespaces shaped with tc when running as root
  (`labkit.slowlink`), otherwise an emulated token-bucket uplink, labelled as such.
- `straggler(...)`: one rank arrives late, and every rank waits for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from pathlib import Path
from typing import Sequence

from . import ladder
from .launch import descendants
from .units import MiB, format_bytes, parse_sizes

#: Default rate of the slow link between groups: 0.025 GB/s (200 Mb/s) per direction. gloo over
#: this machine's loopback moves ~1 GB/s, so the link between groups is ~40× slower than inside
#: one — the same order as NVLink (450 GB/s) against one NDR NIC (50 GB/s) shared by 8 GPUs.
SLOW_LINK_GBPS = 0.025
#: Sizes for the hierarchical comparison: big enough that the slow link, not per-message
#: overheads, sets the time; small enough to run in seconds at SLOW_LINK_GBPS.
COMPARE_SIZES_QUICK = (1 * MiB,)
COMPARE_SIZES_FULL = (1 * MiB, 4 * MiB, 16 * MiB)
SLOW_LINK_KINDS = ("auto", "netns", "emulated", "none")


# --------------------------------------------------------------------------- CLI: labkit bench ladder
def bench_arguments(p, name: str) -> None:
    p.add_argument("--sizes", help="comma-separated (default: powers of four, 64 B .. 256 MiB; --quick: 256 B .. 64 MiB)")
    p.add_argument("--levels", default="gpu,host,processes",
                   help="which levels to measure: gpu (only with CUDA), host, processes (comma-separated)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for the process level's launch")


def measure(sizes: Sequence[int], levels: Sequence[str] = ("gpu", "host", "processes"), repeats: int = 10,
            timeout_s: float = 120.0) -> list[ladder.LevelSweep]:
    """Measure the requested levels on this machine (GPU levels only where CUDA exists)."""
    unknown = set(levels) - {"gpu", "host", "processes"}
    if unknown:
        raise ValueError(f"unknown ladder level(s) {sorted(unknown)}; choose from gpu, host, processes")
    out = []
    if "gpu" in levels:
        out += ladder.measure_gpu(sizes, repeats)
    if "host" in levels:
        out.append(ladder.measure_host(sizes, repeats))
    if "processes" in levels:
        out.append(ladder.measure_processes(sizes, repeats, timeout_s))
    return out


def bench(args, name: str):
    sizes = parse_sizes(args.sizes) if args.sizes else (ladder.QUICK_SIZES if args.quick else ladder.FULL_SIZES)
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    for s in measure(sizes, levels, args.repeats, args.timeout):
        for n, bw in zip(s.nbytes, s.bandwidth_GBps):
            yield {"experiment": "ladder", "level": s.level, "nbytes": n, "size": format_bytes(n),
                   "seconds": n / (bw * 1e9), "bandwidth_GBps": bw, "bandwidth_direction": "unidirectional",
                   "label": s.label, "method": s.method}


# --------------------------------------------------------------------------- labkit record
def record(folder, quick: bool, env: dict) -> list[str]:
    """Write this machine's ladder: host memory and processes always, GPU levels where CUDA exists."""
    import pandas as pd

    from .provenance import measured_meta
    from .reference import write_dataset

    sizes = ladder.QUICK_SIZES if quick else ladder.FULL_SIZES
    names = []
    for s in measure(sizes, ("gpu", "host")):
        direction = {"gpu_memory": "d2d", "host_gpu": "h2d", "host_memory": "host"}.get(s.level)
        if direction is None:  # GPU0→GPU1 has no copy_sweep direction; notebook 4 records peers
            continue
        memory = {"d2d": "device", "h2d": "pinned", "host": "host"}[direction]
        frame = pd.DataFrame({"direction": direction, "memory": memory, "nbytes": list(s.nbytes),
                              "bandwidth_GBps": list(s.bandwidth_GBps),
                              "time_s": [n / (bw * 1e9) for n, bw in zip(s.nbytes, s.bandwidth_GBps)]})
        name = f"ladder_{s.level}"
        title = {"host_memory": "ladder: host memory copy (caches, then DRAM)"}.get(s.level, f"ladder: {ladder.LEVEL_NAMES[s.level]}")
        write_dataset(folder, name, frame, measured_meta(
            env, kind="copy_sweep", title=title, method=s.method,
            bandwidth_direction="unidirectional", caveats="one-way copy rate, bytes counted once"))
        names.append(name)
    proc = ladder.measure_processes(sizes)
    frame = pd.DataFrame({"quantity": [f"gloo sendrecv busbw, 2 processes, {format_bytes(n)}" for n in proc.nbytes],
                          "value": list(proc.bandwidth_GBps), "unit": "GB/s", "bandwidth_direction": "unidirectional",
                          "nbytes": list(proc.nbytes)})
    write_dataset(folder, "ladder_processes", frame, measured_meta(
        env, kind="point", title="ladder: between processes (gloo sendrecv, 2 ranks)", method=proc.method,
        bandwidth_direction="unidirectional", interconnect="loopback (one host)",
        caveats="a sweep stored as points (one row per size, column nbytes): no sweep kind fits a sendrecv"))
    names.append("ladder_processes")
    return names


def profile_curves(reference) -> list[ladder.LevelSweep]:
    """Ladder curves a `labkit record` profile folder holds (shown as recorded on that machine)."""
    from .reference import list_datasets, load, profile_path

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
        level = name[len("ladder_"):]
        if level not in ladder.LEVELS:
            continue
        out.append(ladder.LevelSweep(level, f"recorded: {ds.meta['title']} — {ds.meta['source']}",
                                     tuple(int(x) for x in f["nbytes"]), tuple(float(x) for x in f[col]),
                                     "recorded", ds.meta["method"], name))
    return out


# --------------------------------------------------------------------------- hierarchical vs flat
def choose_slow_link(kind: str = "auto") -> tuple[str, str]:
    """'netns' where this machine can build namespaces (root, ip, tc), else 'emulated'; with the reason."""
    from . import slowlink

    if kind not in SLOW_LINK_KINDS:
        raise ValueError(f"slow_link must be one of {SLOW_LINK_KINDS}, got {kind!r}")
    ok, why = slowlink.available()
    if kind == "netns" and not ok:
        raise RuntimeError(f"slow_link='netns' is not possible here: {why}. Use slow_link='emulated'.")
    if kind == "auto":
        return ("netns", why) if ok else ("emulated", why)
    return kind, why


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Records of library / flat ring / hierarchical runs, and what the slow link was."""

    records: tuple[dict, ...]
    slow_link: str  # netns / emulated / none
    slow_link_text: str
    world_size: int
    group_size: int
    rate_GBps: float

    @property
    def groups(self) -> int:
        return self.world_size // self.group_size

    @property
    def short_link_text(self) -> str:
        """One line for figure titles."""
        return {"netns": f"real — network namespaces + tc tbf, {self.rate_GBps:g} GB/s per direction per group uplink",
                "emulated": f"emulated — token bucket, {self.rate_GBps:g} GB/s per direction per group uplink",
                "none": "none — loopback only"}[self.slow_link]

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items() if k != "samples_s"} for r in self.records])

    def bytes_table(self):
        """Bytes over the slow link per algorithm and size: computed, counted by the Link, seen on the wire."""
        import pandas as pd

        from .cluster import slow_link_bytes

        rows = []
        for r in self.records:
            if r["impl"] == "library":
                continue
            calc = slow_link_bytes(r["nbytes"], self.group_size, self.groups)
            key = "flat" if r["impl"] == "flat_ring" else "hier"
            counted = sum(r["counted_inter_bytes_per_rank"])
            wire = r.get("wire_tx_bytes_per_group")
            rows.append({"impl": r["impl"], "nbytes": r["nbytes"],
                         "computed_per_sending_rank": calc[f"{key}_per_{'crossing_rank' if key == 'flat' else 'rank'}"],
                         "counted_max_per_rank": max(r["counted_inter_bytes_per_rank"]),
                         "computed_total": calc[f"{key}_total"], "counted_total": counted,
                         "wire_total": sum(wire) if wire else None})
        return pd.DataFrame(rows)

    def speedup(self, nbytes: int | None = None) -> float:
        """Flat ring time ÷ hierarchical time (at the largest size unless given)."""
        df = self.to_frame()
        n = df["nbytes"].max() if nbytes is None else nbytes
        t = df[df["nbytes"] == n].set_index("impl")["seconds"]
        return float(t["flat_ring"] / t["hierarchical"])



@contextlib.contextmanager
def _slow_link(kind: str, why: str, groups: int, rate_GBps: float):
    """Build the slow link between groups; yield (the `slow` dict for the ranks, a description)."""
    from . import slowlink
    from .hierarchical import SharedUplink

    if kind == "netns":
        slowlink.remove_stale()
        with slowlink.NetnsCluster(groups, rate_GBps) as cl:
            yield ({"kind": "netns", "namespaces": cl.nodes, "iface": slowlink.IFACE, "rate_GBps": rate_GBps},
                   f"real: {cl.describe()}")
    elif kind == "emulated":
        with tempfile.TemporaryDirectory(prefix="labkit-uplinks-") as d:
            paths = [str(Path(d) / f"group{i}.link") for i in range(groups)]
            for p in paths:
                SharedUplink.create(p)
            yield ({"kind": "emulated", "uplinks": paths, "rate_GBps": rate_GBps},
                   f"emulated: each group's uplink is a token bucket of {rate_GBps:g} GB/s per direction applied to "
                   f"the hand-written algorithms' sends between groups (gloo's own all_reduce is not slowed) — {why}")
    else:
        yield {"kind": "none"}, "none: every process on the host's loopback"


def compare(world_size: int = 4, group_size: int = 2, sizes: Sequence[int] = COMPARE_SIZES_QUICK, *,
            slow_link: str = "auto", rate_GBps: float = SLOW_LINK_GBPS, repeats: int = 3,
            timeout_s: float = 180.0) -> Comparison:
    """Run hierarchical vs flat ring vs gloo all_reduce on `world_size` processes in groups of `group_size`."""
    return run_live(world_size, group_size, compare_sizes=sizes, slow_link=slow_link, rate_GBps=rate_GBps,
                    repeats=repeats, ladder_sizes=None, straggler_delay=None, timeout_s=timeout_s).comparison


@dataclasses.dataclass(frozen=True)
class LiveRuns:
    """What one launch of notebook 6's process experiments measured."""

    comparison: Comparison
    processes: ladder.LevelSweep | None = None  # the ladder's "between processes" level
    straggler: object = None  # DataFrame, one row per rank
    straggler_delay: tuple | None = None  # (rank, seconds)


def run_live(world_size: int = 4, group_size: int = 2, *, compare_sizes: Sequence[int] = COMPARE_SIZES_QUICK,
             ladder_sizes: Sequence[int] | None = None, straggler_delay: tuple | None = (1, 0.2),
             slow_link: str = "auto", rate_GBps: float = SLOW_LINK_GBPS, repeats: int = 3,
             ladder_repeats: int = 5, timeout_s: float = 300.0) -> LiveRuns:
    """All of notebook 6's multi-process experiments in ONE launch (process start-up is the slow part).

    In order: the ladder's process level (gloo sendrecv between ranks 0 and 1, on loopback), the
    straggler (rank R sleeps S seconds before an all_reduce), then hierarchical vs flat ring vs
    gloo over the slow link (which, for namespaces, moves every rank into its group's namespace).
    """
    import pandas as pd

    from .hierarchical import Layout
    from .hierarchy_worker import run_tasks
    from .launch import launch

    layout = Layout(world_size, group_size)
    kind, why = choose_slow_link(slow_link)
    if kind != "none" and layout.groups < 2:
        raise ValueError("a slow link between groups needs at least two groups")
    tasks = []
    if ladder_sizes:
        tasks.append(("sendrecv", dict(sizes=list(ladder_sizes), repeats=ladder_repeats, ranks=[0, 1])))
    if straggler_delay:
        r, d = straggler_delay
        if not 0 <= r < world_size:
            raise ValueError(f"straggler rank must be in 0..{world_size - 1}, got {r}")
        tasks.append(("straggler", dict(delay_rank=int(r), delay_s=float(d), nbytes=1 * MiB)))
    with _slow_link(kind, why, layout.groups, rate_GBps) as (slow, text):
        tasks.append(("bench", dict(group_size=group_size, sizes=list(compare_sizes), repeats=repeats,
                                    timeout_s=timeout_s, slow=slow)))
        results = launch(run_tasks, world_size, "gloo", timeout_s=timeout_s, kwargs=dict(tasks=tasks))
    out = dict(zip([t[0] for t in tasks], zip(*results)))  # task name -> results by rank
    cmp = Comparison(tuple(out["bench"][0]), kind, text, world_size, group_size, rate_GBps)
    proc = None
    if "sendrecv" in out:
        rows = out["sendrecv"][0]
        proc = ladder.LevelSweep("processes", "measured here: 2 processes, gloo send/recv over loopback",
                                 tuple(r["nbytes"] for r in rows), tuple(r["busbw_GBps"] for r in rows), "measured",
                                 ladder.PROCESS_METHOD)
    strag = pd.DataFrame(list(out["straggler"])) if "straggler" in out else None
    return LiveRuns(cmp, proc, strag, straggler_delay)


def compare_model(cmp: Comparison, intra_GBps: float, intra_latency_s: float = 0.0, inter_latency_s: float = 0.0):
    """model: the same runs predicted by labkit.cluster (one uplink per group: nics_per_node = 1)."""
    import pandas as pd

    from .cluster import ClusterLinks, flat_time, hierarchical_time

    links = ClusterLinks(cmp.group_size, intra_GBps, cmp.rate_GBps, 1, intra_latency_s, inter_latency_s,
                         name="this experiment", source="measured gloo rate inside a group; slow-link rate as set")
    sizes = sorted({r["nbytes"] for r in cmp.records})
    return pd.DataFrame([{"nbytes": n, "flat_ring_s": flat_time(n, cmp.groups, links),
                          "hierarchical_s": hierarchical_time(n, cmp.groups, links)} for n in sizes])


def plot_compare(cmp: Comparison, model=None):
    """Measured time per algorithm and size (bars), with the model's prediction where given."""
    import numpy as np

    from . import plots

    df = cmp.to_frame()
    sizes = sorted(df["nbytes"].unique())
    impls = ["library", "flat_ring", "hierarchical"]
    fig, ax = plots.figure(width=8.5, height=4.5)
    w = 0.25
    for j, impl in enumerate(impls):
        t = [float(df[(df["nbytes"] == n) & (df["impl"] == impl)]["seconds"].iloc[0]) * 1e3 for n in sizes]
        name = {"library": "gloo dist.all_reduce", "flat_ring": "flat ring (hand-written)",
                "hierarchical": "hierarchical (hand-written)"}[impl]
        if impl == "library" and cmp.slow_link == "emulated":
            name += " — not slowed by the emulated link"
        ax.bar(np.arange(len(sizes)) + (j - 1) * w, t, w, label=f"measured here: {name}", color=f"C{j}")
    if model is not None:
        for j, col in ((1, "flat_ring_s"), (2, "hierarchical_s")):
            ax.plot(np.arange(len(sizes)) + (j - 1) * w, model[col] * 1e3, "k_", ms=18, mew=2,
                    label="model: labkit.cluster" if j == 1 else None)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([format_bytes(n) for n in sizes])
    plots.finish(ax, f"All-reduce over {cmp.world_size} processes in {cmp.groups} groups of {cmp.group_size}",
                 "message size (bytes)", "time per all-reduce (ms)",
                 source=f"measured here; slow link between groups: {cmp.short_link_text}")
    return fig


# --------------------------------------------------------------------------- the straggler
def straggler(world_size: int = 4, delay_rank: int = 1, delay_s: float = 0.2, nbytes: int = 1 * MiB,
              repeats: int = 3, timeout_s: float = 120.0):
    """Every rank's time from a common barrier to the end of one all_reduce, while one rank sleeps first."""
    import pandas as pd

    from .hierarchy_worker import straggler_rank
    from .launch import launch

    if not 0 <= delay_rank < world_size:
        raise ValueError(f"delay_rank must be in 0..{world_size - 1}, got {delay_rank}")
    rows = launch(straggler_rank, world_size, "gloo", timeout_s=timeout_s,
                  kwargs=dict(delay_rank=delay_rank, delay_s=delay_s, nbytes=nbytes, repeats=repeats))
    return pd.DataFrame(rows)


def plot_straggler(df, delay_s: float):
    from . import plots

    fig, ax = plots.figure(width=7, height=3.8)
    colors = ["C3" if d else "C0" for d in df["delayed"]]
    ax.bar(df["rank"] - 0.2, df["total_s"] * 1e3, 0.4, color=colors, label="measured here: barrier → end of all_reduce")
    ax.bar(df["rank"] + 0.2, df["in_collective_s"] * 1e3, 0.4, color=colors, alpha=0.45,
           label="measured here: time inside the all_reduce call")
    ax.axhline(delay_s * 1e3, ls=":", color="0.3", label=f"the straggler's delay ({delay_s * 1e3:g} ms)")
    ax.set_xticks(list(df["rank"]))
    plots.finish(ax, "One late rank: everybody waits inside the collective", "rank (index)", "time (ms)",
                 source="measured here: gloo all_reduce, red = the delayed rank")
    return fig


# --------------------------------------------------------------------------- across machines: torchrun
#: Seconds an agent gets to stop its workers after SIGTERM before everything left is killed.
TORCHRUN_GRACE_S = 5.0


def torchrun_command(node_rank: int, *, nnodes: int = 2, nproc_per_node: int = 2, endpoint: str = "HOST:29500",
                     rdzv_id: str = "labkit-hierarchy", sizes: str = "1MiB", repeats: int = 3,
                     out: str | None = None, python: str = "python") -> list[str]:
    """The command one node runs: a torchrun agent (c10d rendezvous) starting the hierarchy worker."""
    cmd = [python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node", str(nproc_per_node),
           "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id, "--node-rank", str(node_rank),
           "-m", "labkit.hierarchy_worker", "--sizes", sizes, "--repeats", str(repeats), "--json"]
    return cmd + (["--out", out] if out else [])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(procs) -> None:
    """SIGTERM the agents (they stop their workers), then SIGKILL whatever of the tree is left."""
    import os
    import signal
    import time

    tree = {p.pid: descendants(p.pid) for p in procs}  # torchrun starts workers in sessions of their own
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + TORCHRUN_GRACE_S
    for p in procs:
        try:
            p.wait(max(0.0, end - time.monotonic()))
        except Exception:
            pass
    for p in procs:
        for pid in {p.pid} | tree[p.pid] | descendants(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        p.wait()


def torchrun_local(nnodes: int = 2, nproc_per_node: int = 2, sizes: str = "1MiB", repeats: int = 3,
                   timeout_s: float = 180.0) -> dict:
    """Start `nnodes` torchrun agents on 127.0.0.1, each standing for one machine; return rank 0's records.

    Exactly what runs on a real cluster, except that every "node" is this host: one agent per
    node, c10d rendezvous at one endpoint, LOCAL_WORLD_SIZE processes per agent. Bounded by
    `timeout_s`; every agent and worker is stopped before this returns, whatever happened.
    """
    import json
    import subprocess
    import sys
    import time

    with tempfile.TemporaryDirectory(prefix="labkit-torchrun-") as d:
        out = str(Path(d) / "records.json")
        endpoint = f"127.0.0.1:{_free_port()}"
        logs, procs = [], []
        try:
            for node in range(nnodes):
                log = open(Path(d) / f"agent{node}.log", "w+")
                logs.append(log)
                cmd = torchrun_command(node, nnodes=nnodes, nproc_per_node=nproc_per_node, endpoint=endpoint,
                                       rdzv_id=f"labkit-{Path(d).name}", sizes=sizes, repeats=repeats,
                                       out=out if node == 0 else None, python=sys.executable)
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            deadline = time.monotonic() + timeout_s
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                time.sleep(0.2)
            timed_out = any(p.poll() is None for p in procs)
        finally:
            _stop(procs)
        codes = [p.returncode for p in procs]
        tails = []
        for i, log in enumerate(logs):
            log.seek(0)
            tails.append(f"--- agent {i} ---\n" + "".join(log.readlines()[-15:]))
            log.close()
        if timed_out:
            raise TimeoutError(f"torchrun did not finish within {timeout_s:g} s; agents stopped.\n" + "\n".join(tails))
        if any(codes) or not Path(out).exists():
            raise RuntimeError(f"torchrun agents exited with {codes}\n" + "\n".join(tails))
        with open(out) as f:
            records = json.load(f)
    return {"endpoint": endpoint, "nnodes": nnodes, "nproc_per_node": nproc_per_node, "records": records,
            "command_node0": " ".join(torchrun_command(0, nnodes=nnodes, nproc_per_node=nproc_per_node,
                                                        endpoint=endpoint, sizes=sizes, repeats=repeats))}
