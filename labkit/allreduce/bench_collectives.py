"""`labkit bench collectives`: the torch.distributed collectives swept like nccl-tests, on local ranks or under torchrun.

On one machine it launches its own ranks (labkit.launch). Under torchrun (RANK, WORLD_SIZE,
LOCAL_RANK and MASTER_ADDR set) every process is one rank of a group made from that environment
(c10d rendezvous), NCCL on GPUs (device LOCAL_RANK), gloo on CPUs — across machines:

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
             -m labkit bench collectives --collective all_reduce -b 8 -e 1G -f 2

Rank 0 prints nccl-tests' table (labkit.allreduce.perf_table), or with --json one JSON line per
size; the other ranks print nothing. See docs/measure-your-cluster.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys

from ..collectives import OPS
from ..launch import launch
from ..units import parse_size
from . import perf_table
from .perf import REDOPS, TYPES, PerfConfig, describe_ranks, perf_worker, sweep, sweep_sizes, type_name

#: What torchrun sets in every process it starts (the sign that this process is one rank of many).
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
DEFAULT_TIMEOUT_S = 300.0


def torchrun_env(environ=None) -> dict | None:
    """{rank, world_size, local_rank, local_world_size, node} when started by torchrun, else None."""
    env = os.environ if environ is None else environ
    if not all(env.get(k) for k in TORCHRUN_VARS):
        return None
    return {
        "rank": int(env["RANK"]),
        "world_size": int(env["WORLD_SIZE"]),
        "local_rank": int(env["LOCAL_RANK"]),
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", 1)),
        "node": int(env.get("GROUP_RANK", 0)),
    }


def add_arguments(parser) -> None:
    parser.add_argument(
        "--collective",
        default="all_reduce",
        help=f"comma-separated, or 'all': {', '.join(OPS)} (default all_reduce)",
    )
    parser.add_argument("-b", "--min-bytes", default="1KiB", help="smallest size (nccl-tests -b; default 1KiB)")
    parser.add_argument("-e", "--max-bytes", default="64MiB", help="largest size (nccl-tests -e; default 64MiB)")
    parser.add_argument("-f", "--step-factor", type=float, default=2.0, help="size multiplier (nccl-tests -f; 2)")
    parser.add_argument("-n", "--iters", type=int, default=20, help="timed calls per size (nccl-tests -n; 20)")
    parser.add_argument("-w", "--warmup-iters", type=int, default=5, help="untimed calls first (nccl-tests -w; 5)")
    parser.add_argument("-o", "--op", default="sum", choices=REDOPS, help="reduction (nccl-tests -o; sum)")
    parser.add_argument(
        "-d", "--dtype", default="float", help=f"nccl-tests type name ({', '.join(TYPES)}) or torch's (float32 ...)"
    )
    parser.add_argument("-r", "--root", type=int, default=0, help="root of broadcast and reduce (nccl-tests -r; 0)")
    parser.add_argument(
        "-c", "--check", type=int, default=1, choices=[0, 1], help="count wrong elements (nccl-tests -c; 1)"
    )
    parser.add_argument(
        "--backend", default="auto", choices=["auto", "gloo", "nccl"], help="auto: nccl where CUDA is, else gloo"
    )
    parser.add_argument("--ranks", type=int, default=2, help="local ranks when not under torchrun (default 2)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS", help="give up after")


def argparse_defaults(**overrides) -> argparse.Namespace:
    """The flags' defaults as parsed arguments, with `overrides` (for callers that are not the command line)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    vars(args).update({"json": False, **overrides})
    return args


def config(args) -> PerfConfig:
    ops = OPS if args.collective.strip() == "all" else tuple(o.strip() for o in args.collective.split(",") if o.strip())
    return PerfConfig(
        ops=ops,
        sizes=tuple(
            getattr(args, "size_list", None)
            or sweep_sizes(parse_size(args.min_bytes), parse_size(args.max_bytes), args.step_factor)
        ),
        dtype=type_name(args.dtype),
        redop=args.op,
        root=args.root,
        iters=args.iters,
        warmup=args.warmup_iters,
        check=bool(args.check),
    )


def _backend(name: str) -> str:
    if name != "auto":
        return name
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def bench(args):
    """Records of rank 0, one per (collective, size); prints the table's header and closing lines itself."""
    cfg = config(args)
    backend = _backend(args.backend)
    tr = torchrun_env()
    if tr is None:
        res = launch(perf_worker, args.ranks, backend, timeout_s=args.timeout, args=(cfg,))[0]
        yield from _printed(res["records"], res["ranks"], cfg, backend, "labkit.launch", args.json)
        return
    yield from _printed(_under_torchrun(cfg, backend, tr, args.timeout), None, cfg, backend, "torchrun", args.json)
    if tr["rank"] != 0:
        # every rank runs `labkit bench`; only rank 0 reports. `labkit bench` fails when a bench yields
        # nothing, so the others end here, successfully, once the group is done.
        raise SystemExit(0)


def _under_torchrun(cfg, backend, tr, timeout_s):
    """This process as one rank of the torchrun group: yields ("ranks", [...]) then its records."""
    import torch
    import torch.distributed as dist

    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(tr["local_rank"])
        device = f"cuda:{tr['local_rank']}"
    dist.init_process_group(backend, timeout=_dt.timedelta(seconds=timeout_s))  # env:// — what torchrun set
    try:
        yield "ranks", describe_ranks(tr["rank"], device)
        for rec in sweep(cfg, tr["rank"], tr["world_size"], device):
            yield "record", rec
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _printed(source, ranks, cfg, backend, launcher, as_json):
    """Yield rank 0's records; without --json print the header before a collective's rows and its closing lines after."""
    import torch

    rank0 = torchrun_env() is None or torchrun_env()["rank"] == 0
    items = (("record", r) for r in source) if ranks is not None else source
    current, rows = None, []

    def close():
        if current is not None and rank0 and not as_json:
            print("\n".join(perf_table.footer(current, rows)), flush=True)

    for kind, value in items:
        if kind == "ranks":
            ranks = value
            continue
        rec = dict(value, backend=backend, launcher=launcher, nodes=len({r["node"] for r in ranks}))
        if rec["op"] != current:
            close()
            current, rows = rec["op"], []
            if rank0 and not as_json:
                lines = perf_table.header(
                    current, ranks=ranks, backend=backend, launcher=launcher, cfg=cfg, torch_version=torch.__version__
                )
                print("\n".join(lines), flush=True)
        rows.append(rec)
        if rank0:
            yield rec
    close()
    sys.stdout.flush()


def text(record) -> str:
    return perf_table.row(record)
