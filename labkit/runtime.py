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

`session.show(experiment, live=, recorded=, fallback=)` makes that decision once, for every notebook:
it returns what the experiment shows (`Shown`: the data, its provenance label, how it was obtained —
measured here, recorded, or fell back — and a note when it fell back), so a notebook cell holds no
if/else over modes. `session.references(kind)` is what `reference=` selects, with its note shown;
`session.figure(fig)` checks every figure the same way (results: the `figures_labelled` check).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
from pathlib import Path
from typing import Callable

from . import reference as _reference
from .fileio import atomic_write_text
from .plots import figure_problems, legend_problems, tidy
from .system import no_nvidia_driver

MODES = ("auto", "live", "reference")


@dataclasses.dataclass(frozen=True)
class Requirement:
    """What an experiment needs to run live."""

    gpus: int = 0  # CUDA devices needed (0 = runs on any CPU)
    what: str = ""  # plain words for error messages


#: Hardware each named experiment needs to run live. `Session.mode_for` refuses a name not listed here.
EXPERIMENTS: dict[str, Requirement] = {
    "h2d_sweep": Requirement(1, "a CUDA GPU"),
    "small_copies": Requirement(1, "a CUDA GPU"),
    "host_copy_sweep": Requirement(0, "nothing (host memory)"),
    "pinned_vs_pageable": Requirement(1, "a CUDA GPU"),
    "pin_cost": Requirement(0, "nothing (pinning works without a GPU only where torch allows it)"),
    "nonblocking_pitfall": Requirement(1, "a CUDA GPU"),
    "dataloader": Requirement(1, "a CUDA GPU"),
    "numa_host_copy": Requirement(0, "nothing (host memory; a remote node only where the machine has two)"),
    "dataloader_stages": Requirement(0, "nothing for the workers' stage; a CUDA GPU for pinning and copying"),
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
    """CUDA devices visible to torch (0 when torch, CUDA or the NVIDIA driver is missing)."""
    if no_nvidia_driver():
        return 0
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
        raise ValueError(
            f"unknown mode {mode!r}: use one of {', '.join(MODES)} "
            "('auto' measures where the hardware exists and replays the rest)"
        )
    return mode


def requirement(experiment: str) -> Requirement:
    """What `experiment` needs to run live; an unknown name is an error (a typo would otherwise run live)."""
    try:
        return EXPERIMENTS[experiment]
    except KeyError:
        raise ValueError(
            f"unknown experiment {experiment!r}: known experiments are {', '.join(sorted(EXPERIMENTS))} "
            "(add a new one to labkit.runtime.EXPERIMENTS with what it needs)"
        ) from None


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
        f"mode='reference', or see `labkit doctor`."
    )


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
            why = (
                f"this torch ({torch.__version__}) is a CPU-only build: install a CUDA build on a GPU machine"
                if torch.version.cuda is None
                else "no driver, or the GPUs are hidden by CUDA_VISIBLE_DEVICES"
            )
        need = "a CUDA GPU" if gpus == 1 else f"{gpus} CUDA GPUs"
        found = "torch sees no CUDA device" if have == 0 else f"this machine has {have} CUDA device(s)"
        raise CudaUnavailable(
            f"{what} needs {need}, but {found} ({why}). Run with mode='reference'{hint}, or see `labkit doctor`."
        )
    return have


#: How an experiment's data was obtained (`Shown.obtained`).
MEASURED_HERE, RECORDED, FELL_BACK, NOTHING = "measured here", "recorded", "fell back", "nothing"


@dataclasses.dataclass(frozen=True)
class Found:
    """What one way of obtaining an experiment's data gave: the data and where it came from.

    `label` is the provenance every figure carries ("measured here: <GPU>, <date>", "recorded: <system>
    — <source>", "model: …"); `datasets` are the reference datasets it shows; `note` (Markdown) says
    what the reader should know about it — why it fell back, what was left out.
    """

    data: object
    label: str
    datasets: tuple[str, ...] = ()
    note: str | None = None


@dataclasses.dataclass(frozen=True)
class Shown:
    """What an experiment shows in this run (`Session.show`)."""

    experiment: str
    mode: str  # 'live' or 'reference', from the mode contract
    obtained: str  # MEASURED_HERE, RECORDED, FELL_BACK or NOTHING
    data: object  # None when nothing could be shown
    label: str  # provenance, for legends and titles
    note: str | None = None
    datasets: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """What the numbers are — 'measured', 'recorded' or 'model' (the plot style), read from the label."""
        for kind in ("measured", "recorded", "model"):
            if self.label.startswith(kind):
                return kind
        return "none" if self.data is None else "recorded"

    @property
    def fell_back(self) -> bool:
        return self.obtained == FELL_BACK


class DatasetsTable:
    """A section that is one table made from the shipped datasets (for `Session.present`): `make()` builds it, once,
    as `table`; its `dataset` column names the datasets it shows."""

    make: Callable

    @functools.cached_property
    def table(self):
        return self.make()

    @property
    def datasets(self) -> tuple[str, ...]:
        return tuple(self.table["dataset"].unique())


@dataclasses.dataclass(frozen=True)
class ShownSection:
    """A section that presents what one experiment showed (for `Session.present`): `shown` is the `Shown` that
    `Session.show` returned; `frame` is its data, `source` its provenance label, `experiment` its name."""

    shown: Shown

    @property
    def experiment(self) -> str:
        return self.shown.experiment

    @property
    def frame(self):
        return self.shown.data

    @property
    def source(self) -> str:
        return self.shown.label


Getter = Callable[[], "Found | None"]


class Session:
    """One notebook run: resolves modes, remembers what was shown, writes the results JSON."""

    def __init__(
        self,
        notebook: str,
        mode: str = "auto",
        quick: bool = False,
        reference=None,
        results_path=None,
        gpus: int | None = None,
    ):
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
        self.figures_checked = 0
        self.figure_problems: list[str] = []

    def mode_for(self, experiment: str) -> str:
        used = resolve_mode(self.mode, experiment, self.gpus)
        self.experiments.setdefault(experiment, {})["mode"] = used
        return used

    def show(
        self,
        experiment: str,
        *,
        live: Getter | None = None,
        recorded: Getter | None = None,
        fallback: Getter | None = None,
    ) -> Shown:
        """What `experiment` shows in this run, decided once: measured here, else recorded, else the fallback.

        `live` runs only where the mode contract says this experiment runs live (`mode_for`); each getter
        returns a `Found`, or None when it has nothing (no GPU for a live measurement that needs one, no
        recorded run of this kind), and the next is tried. The datasets shown are recorded, the note is
        displayed, and the results JSON gets `mode`, `obtained`, `shown_as` (measured / recorded / model)
        and `source` for the experiment.
        """
        mode = self.mode_for(experiment)
        found, obtained = None, NOTHING
        for how, get in (
            (MEASURED_HERE, live if mode == "live" else None),
            (RECORDED, recorded),
            (FELL_BACK, fallback),
        ):
            found = get() if get is not None else None
            if found is not None:
                obtained = how
                break
        found = found or Found(None, "")
        shown = Shown(experiment, mode, obtained, found.data, found.label, found.note, tuple(found.datasets))
        self.shown(*shown.datasets)
        self.note(
            experiment,
            obtained=obtained,
            shown_as=shown.kind,
            source=found.label,
            **({"note": found.note} if found.note else {}),
        )
        self.say(found.note)
        return shown

    def references(self, kind: str, *, usable=None, needs: str = "") -> list:
        """The recorded datasets of `kind` this run's `reference=` selects (labkit.reference.select).

        A reference that holds nothing usable of this kind gives the shipped datasets instead, and the note
        saying so is displayed. Mark the ones a figure draws with `shown`.
        """
        datasets, note = _reference.select(self.reference, kind, usable=usable, needs=needs)
        self.say(note)
        return datasets

    def figure(self, fig):
        """Check a figure (title, axis labels with units, legend or source: plots.figure_problems); return it.

        Every figure a notebook draws goes through here, widgets' too (`widgets.interactive(on_figure=...)`);
        `save()` records the `figures_labelled` check and the problems found.
        """
        self.figures_checked += 1
        # A doubled provenance prefix is a label built wrong: reported as drawn, before tidy() hides it on screen.
        self.figure_problems.extend(p for p in legend_problems(fig) if "doubled prefix" in p)
        tidy(fig)  # legible legends: one provenance prefix, no look-alike lines, 8 pt text
        self.figure_problems.extend(figure_problems(fig) + legend_problems(fig))
        return fig

    @staticmethod
    def say(markdown: str | None) -> None:
        """Show a note to the reader: Markdown in a notebook, plain text elsewhere; nothing for None."""
        if not markdown:
            return
        try:
            from IPython import get_ipython
            from IPython.display import Markdown, display
        except ImportError:
            print(markdown)
            return
        if get_ipython() is None:
            print(markdown)
        else:
            display(Markdown(markdown))

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

    def present(self, result, experiment: str | None = None):
        """Show a topic result and record what it shows, so a notebook cell holds the idea, not the bookkeeping.

        `result` is any object with some of these methods (each optional, duck-typed):
        - `figure()` -> a matplotlib figure: checked through `figure()` and shown;
        - `report()` -> Markdown (a string), a DataFrame, or a list of these: displayed in order (an empty result
          explains itself here);
        - `numbers()` -> {key: float}: into the results JSON's `numbers`;
        - `checks()` -> {name: bool}: into `checks` (recorded, not raised);
        - `notes()` -> {key: value}: attached to `experiment` (default: the result's `experiment` attribute);
        - a `datasets` attribute (names): recorded as shown.
        Returns `result`, so `fit = session.present(topic.fit_curve(...))` reads as one step.
        """
        if hasattr(result, "figure"):
            fig = result.figure()
            if fig is not None:
                self.figure(fig)
                _show(fig)
        if hasattr(result, "report"):
            report = result.report()
            for part in report if isinstance(report, list) else [report]:  # a line of text, then its table
                _display(part)
        for key, value in (result.numbers() if hasattr(result, "numbers") else {}).items():
            self.number(key, value)
        for name, passed in (result.checks() if hasattr(result, "checks") else {}).items():
            self.check(name, passed)
        experiment = experiment or getattr(result, "experiment", None)
        if experiment and hasattr(result, "notes"):
            self.note(experiment, **result.notes())
        self.shown(*getattr(result, "datasets", ()))
        return result

    def summary(self) -> dict:
        if self.figures_checked:
            self.check("figures_labelled", not self.figure_problems)
        return {
            "notebook": self.notebook,
            "mode": self.mode,
            "quick": self.quick,
            "reference": None if self.reference is None else str(self.reference),
            "gpus": self.gpus,
            "started": self.started.isoformat(),
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "experiments": self.experiments,
            "datasets": self.datasets,
            "numbers": self.numbers,
            "checks": self.checks,
            "figures_checked": self.figures_checked,
            "figure_problems": self.figure_problems,
            "all_checks_passed": all(self.checks.values()) if self.checks else None,
        }

    def save(self) -> dict:
        """Write the results JSON atomically (if results_path was given) and return it."""
        data = self.summary()
        if self.results_path is not None:
            self.results_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.results_path, json.dumps(data, indent=2, default=_json_default) + "\n")
        return data


def _json_default(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _show(fig) -> None:
    """Show a figure: inline in a notebook (plt.show), closed elsewhere so scripts and tests do not pile them up."""
    import matplotlib.pyplot as plt

    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # noqa: N806
    if get_ipython is not None and get_ipython() is not None:
        plt.show()
    else:
        plt.close(fig)


def _display(shown) -> None:
    """Display a report: Markdown for a string, the rich table for a DataFrame, plain text outside a notebook."""
    if shown is None or (isinstance(shown, str) and not shown):
        return
    if isinstance(shown, str):
        Session.say(shown)
        return
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        print(shown)
        return
    if get_ipython() is None:
        print(shown)
    else:
        display(shown)
