"""`labkit bench ladder` and the `ladder` part of `labkit record`: every level this machine has, same sizes, same timing."""

from __future__ import annotations

from ..provenance import write_measured
from ..units import format_bytes, parse_sizes
from . import ladder


def add_arguments(parser) -> None:
    parser.add_argument(
        "--sizes", help="comma-separated (default: powers of four, 64 B .. 256 MiB; --quick: 256 B .. 64 MiB)"
    )
    parser.add_argument(
        "--levels",
        default="gpu,host,processes",
        help="which levels to measure: gpu (only with CUDA), host, processes (comma-separated)",
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for the process level's launch")


def bench(args):
    """One record per (level, size): the one-way rate, its time and where it was measured."""
    sizes = parse_sizes(args.sizes) if args.sizes else (ladder.QUICK_SIZES if args.quick else ladder.FULL_SIZES)
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    for s in ladder.measure(sizes, levels, args.repeats, args.timeout):
        for n, bw in zip(s.nbytes, s.bandwidth_GBps):
            yield {
                "experiment": "ladder",
                "level": s.level,
                "nbytes": n,
                "size": format_bytes(n),
                "seconds": n / (bw * 1e9),
                "bandwidth_GBps": bw,
                "bandwidth_direction": "unidirectional",
                "label": s.label,
                "method": s.method,
            }


def record(folder, quick: bool, env: dict) -> list[str]:
    """Write this machine's ladder: host memory and processes always, GPU levels where CUDA exists."""
    import pandas as pd

    sizes = ladder.QUICK_SIZES if quick else ladder.FULL_SIZES
    names = []
    for s in ladder.measure(sizes, ("gpu", "host")):
        direction = {"gpu_memory": "d2d", "host_gpu": "h2d", "host_memory": "host"}.get(s.level)
        if direction is None:  # GPU0→GPU1 has no copy_sweep direction; notebook 4 records peers
            continue
        memory = {"d2d": "device", "h2d": "pinned", "host": "host"}[direction]
        frame = pd.DataFrame(
            {
                "direction": direction,
                "memory": memory,
                "nbytes": list(s.nbytes),
                "bandwidth_GBps": list(s.bandwidth_GBps),
                "time_s": [n / (bw * 1e9) for n, bw in zip(s.nbytes, s.bandwidth_GBps)],
            }
        )
        name = f"ladder_{s.level}"
        title = {"host_memory": "ladder: host memory copy (caches, then DRAM)"}.get(
            s.level, f"ladder: {ladder.LEVEL_NAMES[s.level]}"
        )
        write_measured(
            folder,
            name,
            frame,
            env,
            kind="copy_sweep",
            title=title,
            method=s.method,
            bandwidth_direction="unidirectional",
            caveats="one-way copy rate, bytes counted once",
        )
        names.append(name)
    proc = ladder.measure_processes(sizes)
    frame = pd.DataFrame(
        {
            "quantity": [f"gloo sendrecv busbw, 2 processes, {format_bytes(n)}" for n in proc.nbytes],
            "value": list(proc.bandwidth_GBps),
            "unit": "GB/s",
            "bandwidth_direction": "unidirectional",
            "nbytes": list(proc.nbytes),
        }
    )
    write_measured(
        folder,
        "ladder_processes",
        frame,
        env,
        kind="point",
        title="ladder: between processes (gloo sendrecv, 2 ranks)",
        method=proc.method,
        bandwidth_direction="unidirectional",
        interconnect="loopback (one host)",
        caveats="a sweep stored as points (one row per size, column nbytes): no sweep kind fits a sendrecv",
    )
    names.append("ladder_processes")
    return names
