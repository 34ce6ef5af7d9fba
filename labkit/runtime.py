"""Runtime: the mode contract (live / reference / auto, decided per experiment) and the results file.

Every notebook starts with a `parameters` cell (`mode`, `quick`, `reference`, `results_path`)
and then makes a `Session`. For each experiment it asks `session.mode_for(name)`:
- `live` → measure here; if the experiment's hardware is missing, raise `LiveModeUnavailable`
  saying what is missing and which mode to use instead;
- `reference` → replay recorded data (experiments that need no GPU — host memory, gloo — still
  run live: they are cheap, deterministic enough, and the point of their notebook);
- `auto` → live where this machine has the hardware, reference where it does not.
What each experiment used, the datasets shown, key numbers and self-checks go to the results
JSON (when `results_path` is set), which the tests assert on.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
from pathlib import Path

MODES = ("auto", "live", "reference")


@dataclasses.dataclass(frozen=True)
class Requirement:
    """What an experiment needs to run live."""

    gpus: int = 0  # CUDA devices needed (0 = runs on any CPU)
    what: str = ""  # plain words for error messages


#: Hardware each named experiment needs to run live. `Session.mode_for` refuses a name not listed here.
EXPERIMENTS: dict[str, Requirement] = {
    "h2d_sweep": Requirement(1, "a CUDA GPU"),
    "host_copy_sweep": Requirement(0, "nothing (host memory)"),
    "pinned_vs_pageable": Requirement(1, "a CUDA GPU"),
    "pin_cost": Requirement(0, "nothing (pinning works without a GPU only where torch allows it)"),
    "nonblocking_pitfall": Requirement(1, "a CUDA GPU"),
    "dataloader": Requirement(1, "a CUDA GPU"),
    "overlap": Requirement(1, "a CUDA GPU"),
    "host_overlap": Requirement(0, "nothing (threads on this CPU)"),
    "p2p_local": Requirement(1, "a CUDA GPU"),
    "p2p_matrix": Requirement(2, "two or more CUDA GPUs"),
    "ring_gloo": Requirement(0, "nothing (gloo on CPU)"),
    "ring_nccl": Requirement(2, "two or more CUDA GPUs"),
    "ladder_gpu": Requirement(1, "a CUDA GPU"),
    "ladder_host": Requirement(0, "nothing (host memory and processes)"),
    "hierarchical_gloo": Requirement(0, "nothing (gloo on CPU)"),
}


class LiveModeUnavailable(RuntimeError):
    """mode='live' was asked for an experiment whose hardware this machine lacks."""


class CudaUnavailable(RuntimeError):
    """Something that needs CUDA devices ran where torch sees too few (see `require_cuda`)."""


def gpu_count() -> int:
    """CUDA devices visible to torch (0 when torch or CUDA is missing)."""
    try:
        import torch
    except ImportError:
        return 0
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver counts as no GPU; `labkit doctor` explains
        return 0


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)} "
                         "('auto' measures where the hardware exists and replays the rest)")
    return mode


def requirement(experiment: str) -> Requirement:
    """What `experiment` needs to run live; an unknown name is an error (a typo would otherwise run live)."""
    try:
        return EXPERIMENTS[experiment]
    except KeyError:
        raise ValueError(f"unknown experiment {experiment!r}: known experiments are {', '.join(sorted(EXPERIMENTS))} "
                         "(add a new one to labkit.runtime.EXPERIMENTS with what it needs)") from None


def resolve_mode(mode: str, experiment: str, gpus: int | None = None) -> str:
    """'live' or 'reference' for one experiment; raises LiveModeUnavailable for impossible live runs."""
    check_mode(mode)
    need = requirement(experiment)
    have = gpu_count() if gpus is None else gpus
    if need.gpus == 0:
        return "live"  # cheap CPU experiments are the point of a notebook: they run in every mode
    if mode == "reference":
        return "reference"
    if have >= need.gpus:
        return "live"
    if mode == "auto":
        return "reference"
    raise LiveModeUnavailable(
        f"experiment {experiment!r} needs {need.what} to run live, but this machine has {have} CUDA "
        f"device(s). Run with mode='auto' (replays recorded data where hardware is missing) or "
        f"mode='reference', or see `labkit doctor`.")


def require_cuda(what: str, gpus: int = 1, *, hint: str = "") -> int:
    """The number of CUDA devices torch sees, if at least `gpus`; else CudaUnavailable saying what to do.

    `what` names the caller in the message ("labkit bench p2p", "pinned_empty"); `hint` adds another
    way out (", or `labkit bench host` for host memory"). Every "needs a GPU" error in labkit is this one.
    """
    have, why = gpu_count(), ""
    if have < gpus:
        try:
            import torch
        except ImportError:
            why = "torch is not installed (`pip install -e .` installs it)"
        else:
            why = (f"this torch ({torch.__version__}) is a CPU-only build: install a CUDA build on a GPU machine"
                   if torch.version.cuda is None else "no driver, or the GPUs are hidden by CUDA_VISIBLE_DEVICES")
        need = "a CUDA GPU" if gpus == 1 else f"{gpus} CUDA GPUs"
        found = "torch sees no CUDA device" if have == 0 else f"this machine has {have} CUDA device(s)"
        raise CudaUnavailable(f"{what} needs {need}, but {found} ({why}). Run with mode='reference'{hint}, "
                              "or see `labkit doctor`.")
    return have


class Session:
    """One notebook run: resolves modes, remembers what was shown, writes the results JSON."""

    def __init__(self, notebook: str, mode: str = "auto", quick: bool = False, reference=None,
                 results_path=None, gpus: int | None = None):
        self.notebook = notebook
        self.mode = check_mode(mode)
        self.quick = bool(quick)
        self.reference = reference
        self.results_path = Path(results_path) if results_path else None
        self.gpus = gpu_count() if gpus is None else gpus
        self.started = _dt.datetime.now(_dt.timezone.utc)
        self.experiments: dict[str, dict] = {}
        self.checks: dict[str, bool] = {}
        self.numbers: dict[str, float] = {}
        self.datasets: list[str] = []

    def mode_for(self, experiment: str) -> str:
        used = resolve_mode(self.mode, experiment, self.gpus)
        self.experiments.setdefault(experiment, {})["mode"] = used
        return used

    def shown(self, *dataset_names: str) -> None:
        """Record the datasets a figure or table displayed."""
        for n in dataset_names:
            if n not in self.datasets:
                self.datasets.append(n)

    def note(self, experiment: str, **info) -> None:
        """Attach plain values (fitted numbers, counts) to an experiment."""
        self.experiments.setdefault(experiment, {}).update(info)

    def number(self, key: str, value: float) -> float:
        self.numbers[key] = float(value)
        return value

    def check(self, name: str, passed: bool) -> bool:
        """A self-check the notebook asserts; it is recorded, not raised, so the run goes on."""
        self.checks[name] = bool(passed)
        return bool(passed)

    def summary(self) -> dict:
        return {
            "notebook": self.notebook, "mode": self.mode, "quick": self.quick,
            "reference": None if self.reference is None else str(self.reference),
            "gpus": self.gpus, "started": self.started.isoformat(),
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "experiments": self.experiments, "datasets": self.datasets,
            "numbers": self.numbers, "checks": self.checks,
            "all_checks_passed": all(self.checks.values()) if self.checks else None,
        }

    def save(self) -> dict:
        """Write the results JSON atomically (if results_path was given) and return it."""
        data = self.summary()
        if self.results_path is not None:
            self.results_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.results_path.with_suffix(self.results_path.suffix + ".tmp")
            tmp.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")
            os.replace(tmp, self.results_path)
        return data


def _json_default(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)
