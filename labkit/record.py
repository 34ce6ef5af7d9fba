"""`labkit record`: run every experiment this machine can run; write one profile folder atomically.

The profile is written into a temporary sibling folder and renamed into place only when complete,
so an interrupted run leaves either the previous profile or a complete new one. Each experiment's
recorder lives in its concept's module: `record(folder, quick, env) -> list[str]` (dataset names
written), and returns [] when this machine cannot run it.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

from .reference import PROFILE_FILE, SCHEMA_VERSION, data_dir

#: experiment → module with a `record(folder, quick, env)` function.
RECORDERS = {
    "copy": "labkit.transfer_record",
    "pinned": "labkit.pinned",
    "overlap": "labkit.overlap",
    "p2p": "labkit.p2p",
    "allreduce": "labkit.collectives_bench",
    "ladder": "labkit.hierarchy",
    "fidelity": "labkit.fidelity",
}


def _recorder(mod_name: str):
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name == mod_name:
            return None
        raise
    return getattr(mod, "record", None)


def record(out: str | os.PathLike, quick: bool = False, force: bool = False, only=None, progress=print) -> Path:
    from .system import environment

    out = Path(out).resolve()
    shipped = data_dir().resolve()
    if out == shipped and not force:
        raise FileExistsError(f"{out} is labkit's shipped reference data; pass --force to write into it")
    if out.exists() and any(out.iterdir()) and not force:
        raise FileExistsError(f"{out} already holds a profile; pass --force to replace it")
    unknown = set(only or ()) - set(RECORDERS)
    if unknown:
        raise ValueError(f"unknown experiment(s) {sorted(unknown)}; choose from {sorted(RECORDERS)}")
    env = environment(command="labkit record", parameters={"quick": quick, "only": only})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    # SIGTERM becomes KeyboardInterrupt so the partial folder is removed the same way as on Ctrl-C.
    old = signal.signal(signal.SIGTERM, _raise_interrupt) if _main_thread() else None
    try:
        written = {}
        for name, mod_name in RECORDERS.items():
            if only and name not in only:
                continue
            fn = _recorder(mod_name)
            if fn is None:
                progress(f"record: {name}: not available in this version, skipped")
                continue
            names = fn(tmp, quick, env)
            written[name] = list(names)
            progress(f"record: {name}: {', '.join(names) if names else 'this machine cannot run it, skipped'}")
        if not any(written.values()):
            raise RuntimeError("no experiment could run on this machine; nothing recorded")
        info = {"schema_version": SCHEMA_VERSION, "created": env["date"], "host": env["host"],
                "experiments": written, "environment": env}
        (tmp / PROFILE_FILE).write_text(json.dumps(info, indent=2, default=str) + "\n")
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    return out


def _swap_into_place(tmp: Path, out: Path) -> None:
    if not out.exists():
        os.replace(tmp, out)
        return
    backup = out.with_name(f".{out.name}.old-{os.getpid()}")
    os.replace(out, backup)
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(backup, out)
        raise
    shutil.rmtree(backup, ignore_errors=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def measured_meta(env: dict, *, kind: str, title: str, method: str, bandwidth_direction: str,
                  caveats: str = "", gpu_count: int | None = None, nodes: int = 1, interconnect: str | None = None) -> dict:
    """Provenance for a dataset measured by labkit on this machine, filled from `environment()`."""
    from .system import describe_gpu

    gpus = env.get("gpus") or []
    g0 = gpus[0] if gpus else {}
    link = (f"PCIe Gen{g0.get('pcie_gen_current')}/{g0.get('pcie_gen_max')} x{g0.get('pcie_width_current')}/"
            f"{g0.get('pcie_width_max')} (current/max at record time)") if g0 else "none (host only)"
    return {
        "kind": kind, "title": f"{title} — {describe_gpu(env) if gpus or env.get('cuda_available') else env.get('cpu')}",
        "system": f"{env.get('host')}: {env.get('cpu')}, {env.get('cpu_count')} CPUs",
        "gpu": describe_gpu(env) if (gpus or env.get("cuda_available")) else "none",
        "gpu_count": len(gpus) if gpu_count is None else gpu_count, "nodes": nodes,
        "interconnect": interconnect or link,
        "software": (f"labkit {env.get('labkit')}, torch {env.get('torch')}, CUDA {env.get('cuda_build')}, "
                     f"NCCL {env.get('nccl')}, driver {g0.get('driver')}, python {env.get('python')}"),
        "date": env.get("date"), "method": method, "source": f"labkit record on {env.get('host')}",
        "source_file": "labkit record", "caveats": caveats or "measured by labkit; see environment for the full context",
        "quality": "A", "bandwidth_direction": bandwidth_direction, "provenance": "measured", "environment": env,
    }
