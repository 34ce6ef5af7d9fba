"""`labkit bench p2p` and the `p2p` part of `labkit record`: every matrix cell of this machine's GPUs."""

from __future__ import annotations

import sys

from .. import timing
from ..provenance import measured_meta
from ..reference import write_dataset
from ..runtime import require_cuda
from ..system import environment
from ..units import format_bytes, parse_size
from .diagnosis import diagnose
from .matrices import DIRECTION, P2P_STATES, is_bandwidth
from .measure import (
    BANDWIDTH_BYTES,
    LATENCY_BYTES,
    LATENCY_CALLS,
    NO_GPU_HINT,
    QUICK_BANDWIDTH_BYTES,
    QUICK_REPEATS,
    measure,
)
from .staging import STAGING_CHUNK_BYTES


def add_arguments(parser) -> None:
    parser.add_argument("--devices", help="CUDA device indices, e.g. 0,1 (default: every visible GPU)")
    parser.add_argument(
        "--size",
        help=f"bytes per bandwidth copy (default {format_bytes(BANDWIDTH_BYTES)}; "
        f"--quick {format_bytes(QUICK_BANDWIDTH_BYTES)})",
    )
    parser.add_argument("--latency-size", default=f"{LATENCY_BYTES}B", help="bytes per latency copy (default 16B)")
    parser.add_argument("--matrices", default="uni,bi,latency", help="uni, bi, latency (comma-separated)")
    parser.add_argument(
        "--p2p",
        default="enabled,disabled",
        help="enabled (copy_ with peer access), disabled (staged through host memory)",
    )
    parser.add_argument("--repeats", type=int, default=timing.DEFAULT_REPEATS)
    parser.add_argument(
        "--quick", action="store_true", help=f"{format_bytes(QUICK_BANDWIDTH_BYTES)} copies, {QUICK_REPEATS} repeats"
    )


_MATRIX_ARGS = {"uni": "bandwidth_uni", "bi": "bandwidth_bi", "latency": "latency_gpu"}


def bench(args):
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
    env = environment(command="labkit bench p2p")
    run = measure(
        devices,
        nbytes=size,
        latency_nbytes=latency_size,
        kinds=kinds,
        p2p=states,
        repeats=repeats,
        progress=progress,
        topology=env.get("topology"),
    )
    if len(run.indices) == 1:
        print(
            "only one GPU: measured the device-local copy (diagonal) and a copy staged GPU→host→GPU; "
            "GPU↔GPU pairs need two or more GPUs",
            file=sys.stderr,
        )
    for w in run.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for r in run.results:
        m = r.measurement
        rec = {
            "experiment": "p2p",
            "matrix": r.matrix,
            "p2p": r.p2p,
            "mode": r.mode,
            "src": r.src,
            "dst": r.dst,
            "src_device": run.devices[run.indices.index(r.src)],
            "dst_device": run.devices[run.indices.index(r.dst)],
            "peer_access": r.peer_access,
            "nbytes": run.latency_nbytes if r.matrix.startswith("latency") else run.nbytes,
            "nbytes_counted": m.nbytes,
            "seconds": m.median_s,
            "iqr_s": m.iqr_s,
            "bandwidth_direction": DIRECTION[r.matrix],
            "timer": m.timer,
            "samples_s": list(m.samples_s),
        }
        if is_bandwidth(r.matrix):
            rec["bandwidth_GBps"] = r.value
        else:
            rec["latency_us"] = r.value
        yield rec
    for f in diagnose(run):
        print(f"finding: {f}", file=sys.stderr)


METHOD = (
    "labkit.p2p.measure.measure: 'enabled' = torch copy_ between GPUs (peer access turned on by torch where "
    "can_device_access_peer allows; mode 'driver' where it does not), 'disabled' = explicit staging "
    f"through pinned host buffers in {format_bytes(STAGING_CHUNK_BYTES)} chunks, double-buffered; "
    "bandwidth = batches of back-to-back copies between CUDA events (warm-up, median of samples); "
    "bidirectional = both directions forked from and joined into one timing stream, bytes summed; "
    f"latency = {LATENCY_CALLS} back-to-back {LATENCY_BYTES}-byte copies queued behind a GPU spin; "
    "diagonal = copy inside one GPU, read + write counted (as p2pBandwidthLatencyTest)"
)


def record(folder, quick: bool, env: dict, *, backend=None, devices=None, nbytes: int | None = None) -> list[str]:
    """Write the `p2p_matrix` dataset of this machine into a profile folder; [] without a GPU.

    `backend`, `devices` and `nbytes` are for tests (a host-memory backend, small copies)."""
    if backend is None and not env.get("cuda_available"):
        return []
    nbytes = nbytes or (QUICK_BANDWIDTH_BYTES if quick else BANDWIDTH_BYTES)
    run = measure(
        devices,
        nbytes=nbytes,
        repeats=QUICK_REPEATS if quick else timing.DEFAULT_REPEATS,
        backend=backend,
        progress=backend is None,
        topology=env.get("topology"),
    )
    caveats = [
        "the diagonal counts read + write bytes (p2pBandwidthLatencyTest convention)",
        "'P2P disabled' is labkit's explicit host staging, not the driver's (p2pBandwidthLatencyTest uses "
        "cudaMemcpyPeer without peer access); rows with mode 'driver' are copy_ between GPUs without peer "
        "access, staged by the driver",
        "latency includes torch's cross-device event fence per copy_, so it reads a little above "
        "p2pBandwidthLatencyTest's",
    ]
    if len(run.indices) == 1:
        caveats.append("one GPU: only the diagonal, plus mode 'host_staged_loopback' (GPU→host→same GPU)")
    caveats += sorted(set(run.warnings))
    meta = measured_meta(
        env,
        kind="p2p_matrix",
        title="GPU↔GPU copy matrices",
        method=METHOD,
        bandwidth_direction="mixed",
        caveats="; ".join(caveats),
        gpu_count=len(run.indices),
    )
    meta["nbytes"] = run.nbytes
    meta["latency_nbytes"] = run.latency_nbytes
    if env.get("topology"):
        meta["topology"] = env["topology"]
    name = "p2p_matrix"
    write_dataset(folder, name, run.to_frame(), meta)
    return [name]
