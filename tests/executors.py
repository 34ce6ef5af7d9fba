"""Run a notebook the way a user's executor does: a separate process, a clean environment, a time bound.

Two executors besides `labkit run`: the `papermill` command line, and `jupyter nbconvert --execute`
(nbclient underneath both, as in nbmake and `jupyter execute`). Nothing labkit-specific is set in the
environment — no LABKIT_HEADLESS, no MPLBACKEND — so a notebook that would wait for a widget front end
hangs here as it would for a user, and the time bound turns that hang into a failure naming it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import nbformat

# A quick reference-mode notebook takes 10-40 s on two busy cores; a hang never ends. The bound sits far
# above the first and still ends the second within the suite.
RUN_TIMEOUT_S = 300
# Variables a user's shell would not have, which would change what the kernel does.
_LABKIT_VARS = ("LABKIT_HEADLESS", "MPLBACKEND", "LABKIT_START_METHOD")


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _LABKIT_VARS and not k.startswith("PYTEST")}
    # the executors' entry points live next to this interpreter (the project's .venv)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run `cmd` in its own process group; on timeout kill the group (executor and kernel) and raise."""
    proc = subprocess.Popen(
        cmd,
        cwd=str(cwd),
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise TimeoutError(
            f"{' '.join(cmd[:3])} did not finish in {timeout:.0f} s (a hang?); last output:\n{out[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def papermill_cli(path: Path, out_dir: Path, parameters: dict, timeout: float = RUN_TIMEOUT_S) -> Path:
    """`papermill IN OUT -y PARAMS --cwd DIR`; returns the executed notebook. Raises with the log on failure."""
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / Path(path).name
    cmd = [
        _bin("papermill"),
        str(path),
        str(output),
        "-y",
        json.dumps(parameters),
        "--cwd",
        str(Path(path).parent),
        "--kernel",
        "python3",
        "--no-progress-bar",
        "--execution-timeout",
        str(int(timeout)),
    ]
    done = _run(cmd, out_dir, timeout + 30)
    if done.returncode != 0:
        raise AssertionError(f"papermill failed on {Path(path).name} (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return output


def with_parameters(path: Path, parameters: dict, out: Path) -> Path:
    """A copy of the notebook whose `parameters` cell ends with the given assignments (what papermill injects)."""
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\n# set by the test\n" + "\n".join(f"{k} = {v!r}" for k, v in parameters.items()) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))
    return out


def nbconvert_execute(path: Path, out_dir: Path, parameters: dict, timeout: float = RUN_TIMEOUT_S) -> Path:
    """`jupyter nbconvert --to notebook --execute` on a copy with `parameters` set; returns the executed copy."""
    src = with_parameters(Path(path), parameters, out_dir / "in" / Path(path).name)
    output = out_dir / Path(path).name
    cmd = [
        _bin("jupyter"),
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        str(src),
        "--output",
        str(output),
        f"--ExecutePreprocessor.timeout={int(timeout)}",
        "--ExecutePreprocessor.kernel_name=python3",
    ]
    done = _run(cmd, Path(path).parent, timeout + 30)
    if done.returncode != 0:
        raise AssertionError(f"nbconvert failed on {Path(path).name} (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return output
