"""One rank of the hierarchical-vs-flat all-reduce benchmark — under labkit.launch or under torchrun.

Across machines (c10d rendezvous; each node runs one agent with one process per GPU):

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
             -m labkit.hierarchy.worker --sizes 64MiB,1GiB --json

Ranks are grouped node by node: the group size is LOCAL_WORLD_SIZE (GPUs per node), so the
hierarchical algorithm's middle phase is exactly the traffic between machines. Rank 0 prints one
JSON record per (algorithm, size) with the same fields as `labkit bench allreduce`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import time

from ..collectives import algbw, busbw, slowest_rank, within_summation_tolerance
from ..fileio import atomic_write_text
from ..timing import time_collectives
from ..units import parse_sizes
from . import hierarchical as H
from . import slowlink
from .ladder import sendrecv_rank
from .slowlink import iface_counters, tcp_retransmitted_segments

#: Warm-up collectives before timing (the first call sets up connections and buffers).
WARMUP = 1
ALGORITHMS = ("library", "flat_ring", "hierarchical")


def _sync(device):
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def _join_netns(rank: int, world_size: int, slow: dict, timeout_s: float) -> None:
    """Move this rank into its group's namespace and rebuild the default group there.

    The launcher's group lives on the host's loopback. A store hosted by rank 0 is reached by
    every rank *before* it changes namespace (an open socket keeps working afterwards), then gloo
    is re-initialised with its sockets bound to the namespace's interface — so traffic between
    groups crosses the shaped uplinks, and traffic inside a group stays on the namespace's loopback.
    """
    import torch.distributed as dist

    timeout = _dt.timedelta(seconds=timeout_s)
    store = (
        dist.TCPStore("127.0.0.1", 0, world_size, True, timeout=timeout, wait_for_workers=False) if rank == 0 else None
    )
    port = [store.port if store else None]
    dist.broadcast_object_list(port, src=0)
    if rank != 0:
        store = dist.TCPStore("127.0.0.1", port[0], world_size, False, timeout=timeout)
    dist.barrier()
    dist.destroy_process_group()
    slowlink.enter(slow["namespaces"][rank // slow["group_size"]])
    os.environ["GLOO_SOCKET_IFNAME"] = slow["iface"]
    dist.init_process_group(
        "gloo", store=dist.PrefixStore("labkit-netns", store), rank=rank, world_size=world_size, timeout=timeout
    )
    _join_netns.store = store  # keep the client (and rank 0's server) alive while the group lives


def _wire_bytes(slow: dict, rank: int, delay_s: float = 0.0) -> tuple[int, int, int] | None:
    """(tx bytes of this group's uplink, TCP segments retransmitted in its namespace, tx frames of the uplink),
    read by local rank 0 of each group (rank 0 after `delay_s`); None elsewhere."""
    if slow.get("kind") != "netns" or rank % slow["group_size"]:
        return None
    if rank == 0 and delay_s > 0:
        time.sleep(delay_s)
    c = iface_counters(slow["iface"])
    return c["tx_bytes"], tcp_retransmitted_segments(), c["tx_packets"]


def _ops(rank: int, world_size: int, group_size: int, slow: dict, timeout_s: float) -> tuple[dict, object, object]:
    """({algorithm: all-reduce in place}, the layout, the Link counting hand-written sends) for this rank."""
    import torch.distributed as dist

    if slow["kind"] == "netns":
        _join_netns(rank, world_size, slow, timeout_s)
    layout = H.Layout(world_size, group_size)
    groups = H.make_groups(layout)
    uplink = None
    if slow["kind"] == "emulated":
        uplink = H.SharedUplink(slow["uplinks"][layout.group_of(rank)], slow["rate_GBps"] * 1e9)
    link = H.Link(layout, rank, uplink)
    ops = {
        "library": lambda t: dist.all_reduce(t),
        "flat_ring": lambda t: H.flat_all_reduce(t, groups, link),
        "hierarchical": lambda t: H.hierarchical_all_reduce(t, groups, link),
    }
    return ops, layout, link


def _bytes_sent(op, t, link, dev, slow: dict, rank: int, delay_s: float) -> tuple[dict, list | None]:
    """One call of `op`: (bytes the Link counted, the group's wire counters' change or None), barriers around
    every counter read so that no other rank's traffic falls inside the count."""
    import torch.distributed as dist

    dist.barrier()
    w0 = _wire_bytes(slow, rank, delay_s)
    dist.barrier()  # nobody sends before every group's counter is read
    link.reset()
    op(t)
    _sync(dev)
    sent = dict(link.sent)
    dist.barrier()
    w1 = _wire_bytes(slow, rank, delay_s)
    dist.barrier()  # nobody starts the timing loop (its warm-up sends) before every counter is read
    return sent, None if w0 is None else [b - a for a, b in zip(w0, w1)]


def _record(algo: str, per_rank: list[dict], numel: int, world_size: int, group_size: int, groups: int, slow) -> dict:
    """Rank 0's record of one algorithm at one size, from every rank's samples, counts and check."""
    import torch.distributed as dist

    samples = slowest_rank([r["samples"] for r in per_rank])
    seconds = statistics.median(samples)
    wire = [r["wire"][0] for r in per_rank if r["wire"] is not None]
    retrans = [r["wire"][1] for r in per_rank if r["wire"] is not None]
    frames = [r["wire"][2] for r in per_rank if r["wire"] is not None]
    counted = algo != "library"
    return {
        "impl": algo,
        "backend": dist.get_backend(),
        "world_size": world_size,
        "group_size": group_size,
        "groups": groups,
        "nbytes": numel * 4,
        "seconds": seconds,
        "algbw_GBps": algbw(numel * 4, seconds),
        "busbw_GBps": busbw("all_reduce", numel * 4, seconds, world_size),
        "samples_s": samples,
        "correct": all(r["ok"] for r in per_rank),
        "slow_link": slow["kind"],
        "rate_GBps": slow.get("rate_GBps"),
        "counted_inter_bytes_per_rank": [r["sent"]["inter"] for r in per_rank] if counted else None,
        "counted_intra_bytes_per_rank": [r["sent"]["intra"] for r in per_rank] if counted else None,
        "wire_tx_bytes_per_group": wire or None,
        "wire_retransmitted_segments_per_group": retrans or None,
        "wire_tx_frames_per_group": frames or None,
    }


def bench_rank(
    rank: int,
    world_size: int,
    *,
    group_size: int,
    sizes,
    repeats: int = 5,
    slow: dict | None = None,
    timeout_s: float = 120.0,
    device: str = "cpu",
    counter_read_delay_s: float = 0.0,
) -> list[dict] | None:
    """Check and time library / flat ring / hierarchical all-reduce on this rank; rank 0 returns the records.

    `counter_read_delay_s`: rank 0 waits this long before each read of its group's wire counters, as a busy
    machine's scheduler may make it wait; the barriers around every read keep other ranks' traffic out of
    the count all the same (tests/test_hierarchy.py checks it).
    """
    import torch
    import torch.distributed as dist

    slow = dict(slow or {"kind": "none"})
    slow.setdefault("group_size", group_size)
    ops, layout, link = _ops(rank, world_size, group_size, slow, timeout_s)
    dev = torch.device(device)
    records = []
    for nbytes in sizes:
        numel = max(1, int(nbytes) // 4)  # float32
        gen = torch.Generator().manual_seed(1234 + rank)
        x0 = torch.randn(numel, generator=gen).to(dev)
        ref, abs_sum = x0.clone(), x0.abs()
        dist.all_reduce(ref)
        dist.all_reduce(abs_sum)  # for the summation-order tolerance (labkit.collectives)
        for algo in ALGORITHMS:
            # correctness, apart from timing
            t = x0.clone()
            ops[algo](t)
            ok, _ = within_summation_tolerance(t, ref, abs_sum, world_size, "float32")
            # bytes: counted by the Link (hand-written sends) and, in namespaces, on the wire
            sent, wire = _bytes_sent(ops[algo], t, link, dev, slow, rank, counter_read_delay_s)
            # time: nccl-tests' loop (labkit.timing.time_collectives); a sample is the slowest rank's
            buf = torch.zeros(numel, device=dev)
            times = time_collectives(
                {algo: lambda op=ops[algo]: op(buf)},
                repeats=repeats,
                warmup=WARMUP,
                barrier=dist.barrier,
                sync=lambda: _sync(dev),
            )[algo]
            per_rank = [None] * world_size
            dist.all_gather_object(per_rank, {"samples": times, "sent": sent, "ok": ok, "wire": wire})
            if rank == 0:
                records.append(_record(algo, per_rank, numel, world_size, group_size, layout.groups, slow))
    dist.barrier()
    return records if rank == 0 else None


def straggler_rank(
    rank: int, world_size: int, *, delay_rank: int, delay_s: float, nbytes: int, repeats: int = 3
) -> dict:
    """Time one all-reduce per repeat from a common barrier while `delay_rank` sleeps `delay_s` first."""
    import torch
    import torch.distributed as dist

    x = torch.zeros(max(1, nbytes // 4))
    dist.all_reduce(x)  # warm-up: connections and buffers
    total, inside, entered, left = [], [], [], []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on this machine
        if rank == delay_rank:
            time.sleep(delay_s)
        t1 = time.monotonic()
        dist.all_reduce(x)
        t2 = time.monotonic()
        total.append(t2 - t0)  # from the barrier to the end of the collective
        inside.append(t2 - t1)  # inside the collective call: waiting for the slowest rank + the work
        entered.append(t1)
        left.append(t2)
    return {
        "rank": rank,
        "total_s": statistics.median(total),
        "in_collective_s": statistics.median(inside),
        "delayed": rank == delay_rank,
        "entered_s": entered,  # per repeat, on the machine's monotonic clock
        "left_s": left,
    }


#: Tasks `run_tasks` knows, by name.
TASKS = {"sendrecv": sendrecv_rank, "straggler": straggler_rank, "bench": bench_rank}


def run_tasks(rank: int, world_size: int, tasks) -> list:
    """Run several experiments in one launch (starting processes is the slow part on a small machine).

    `tasks` is a list of (name, kwargs) run in order on every rank; returns each task's result.
    A "bench" with a network-namespace slow link rebuilds the process group, so it goes last.
    """
    import torch.distributed as dist

    out = []
    for i, (name, kwargs) in enumerate(tasks):
        if name not in TASKS:
            raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
        if name == "bench" and (kwargs.get("slow") or {}).get("kind") == "netns" and i != len(tasks) - 1:
            raise ValueError("a bench over network namespaces must be the last task")
        out.append(TASKS[name](rank, world_size, **kwargs))
        if dist.is_initialized():
            dist.barrier()
    return out


# --------------------------------------------------------------------------- torchrun entry point
def _env_int(name: str) -> int:
    if name not in os.environ:
        raise SystemExit(
            f"labkit.hierarchy.worker: {name} is not set — start this module with torchrun "
            "(python -m torch.distributed.run ... -m labkit.hierarchy.worker)"
        )
    return int(os.environ[name])


def main(argv=None) -> int:
    import torch
    import torch.distributed as dist

    p = argparse.ArgumentParser(
        prog="python -m labkit.hierarchy.worker",
        description="hierarchical vs flat ring all-reduce, one rank (run under torchrun)",
    )
    p.add_argument("--sizes", default="1MiB", help="comma-separated, e.g. 4MiB,64MiB")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    p.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    p.add_argument("--out", help="rank 0 also writes the records here (JSON list)")
    p.add_argument("--json", action="store_true", help="rank 0 prints one JSON record per line")
    args = p.parse_args(argv)
    rank, world, local_rank, local_world = (
        _env_int(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    )
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= local_world else "gloo"
    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    torch.set_num_threads(1)
    dist.init_process_group(backend, timeout=_dt.timedelta(seconds=args.timeout))
    try:
        sizes = [local_world] * world
        dist.all_gather_object(sizes, local_world)
        if len(set(sizes)) != 1:
            raise SystemExit(f"every node must run the same number of processes (LOCAL_WORLD_SIZE), got {sizes}")
        records = bench_rank(
            rank,
            world,
            group_size=local_world,
            sizes=parse_sizes(args.sizes),
            repeats=args.repeats,
            timeout_s=args.timeout,
            device=device,
        )
        if rank == 0:
            for r in records:
                r.update(launcher="torchrun", nodes=world // local_world)
                if args.json:
                    print(json.dumps(r), flush=True)
                else:
                    print(
                        f"{r['impl']:13s} {r['nbytes']:>12d} B  {r['seconds'] * 1e3:9.3f} ms  "
                        f"busbw {r['busbw_GBps']:.3f} GB/s  correct={r['correct']}",
                        flush=True,
                    )
            if args.out:
                atomic_write_text(args.out, json.dumps(records))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
