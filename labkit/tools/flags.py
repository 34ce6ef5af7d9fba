"""What the user typed on the command line, checked: argparse types for numbers, sizes, lists and folders, and the
flags several commands share (a folder to write into; the notebooks' --quick and --timeout; a cluster's shape).

Each check refuses a bad value naming the flag, before anything starts (no process launched, no GPU touched).
"""

from __future__ import annotations

import argparse
import math
import os
import re

from ..units import parse_size, parse_sizes
from .notebooks import CELL_TIMEOUT_S


class Parser(argparse.ArgumentParser):
    """argparse, with its error on one line that names the command and where its help is."""

    def error(self, message):
        message = re.sub(r"^argument ([-\w/]+): must", r"\1 must", message)  # '--gpus must be ...'
        message = re.sub(r"^argument ([-\w/]+): ", r"\1: ", message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def whole(minimum: int):
    """argparse type: a whole number >= minimum."""

    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            what = "positive: a whole number >= 1" if minimum == 1 else f"a whole number >= {minimum}"
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return whole


def real(minimum: float = 0.0, *, strict: bool = True):
    """argparse type: a finite number above `minimum` (at least it where not strict); NaN and inf are refused."""

    def real(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite (a number), got {text!r}")
        if value < minimum or (strict and value == minimum):
            what = "positive" if (strict and minimum == 0) else f"{'>' if strict else '>='} {minimum:g}"
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return real


def size(maximum: int | None = None):
    """argparse type: a size such as 4KiB, 64MiB, 14GB; benchmark buffers keep units.MAX_MESSAGE_BYTES."""

    def size(text: str) -> int:
        try:
            return parse_size(text) if maximum is None else parse_size(text, maximum=maximum)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return size


def sizes(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def reals(text: str) -> list[float]:
    """Comma-separated finite numbers > 0 (--ratios)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"give comma-separated numbers > 0, e.g. 0.25,1,4, got {text!r}")
    return [real(0.0)(p) for p in parts]


def one_of(module: str, constant: str):
    """argparse type: a comma-separated list drawn from `module.constant` (imported when a value is checked)."""

    def one_of(text: str) -> str:
        import importlib

        allowed = getattr(importlib.import_module(module), constant)
        bad = [v for v in text.split(",") if v.strip() not in allowed]
        if bad or not text.strip():
            raise argparse.ArgumentTypeError(f"must be one or more of {', '.join(allowed)}, got {text!r}")
        return text

    return one_of


#: Checks for the flags the experiments share, run as argparse reads each flag: a bad value is refused
#: naming the flag before anything starts (no process launched, no GPU touched). Each experiment's own
#: checks (MAX_RANKS, which ranks exist, what this machine has) follow in its module.
BENCH_FLAG_CHECKS = {
    **dict.fromkeys(("--size", "--latency-size", "--min-bytes", "--max-bytes"), size()),
    "--sizes": sizes,
    **dict.fromkeys(("--repeats", "--ranks", "--runs", "--iters", "--nbytes"), whole(1)),
    **dict.fromkeys(("--launches", "--warmup", "--warmup-iters", "--root", "--fail-rank", "--device"), whole(0)),
    "--timeout": real(0.0),
    "--step-factor": real(1.0),
    "--ratios": reals,
    "--direction": one_of("labkit.copies.sweeps", "DIRECTIONS"),
    "--memory": one_of("labkit.copies.sweeps", "MEMORIES"),
}


#: The flags that describe a cluster, written once for the commands that take them (`labkit model --nodes`,
#: `labkit explain`): each flag's value, its check (run as argparse reads it) and its meaning with its unit.
CLUSTER_FLAGS = {
    "--nodes": dict(type=whole(1), metavar="N", help="nodes in the cluster"),
    "--gpus-per-node": dict(type=whole(1), metavar="G", help="GPUs (ranks) per node"),
    "--nic-bandwidth": dict(
        type=real(0.0), metavar="GBPS", help="GB/s per NIC, per direction, line rate (NDR 400 Gb/s = 50)"
    ),
    "--nics-per-node": dict(type=whole(1), metavar="K", help="NICs per node the collectives use (GPU-facing rails)"),
    "--nvls": dict(action="store_true", help="NVSwitch nodes with NVLink SHARP (HGX/DGX H100 and later)"),
    "--sharp": dict(action="store_true", help="an InfiniBand fabric with SHARP (CollNet)"),
}


def add_cluster_flags(parser: argparse.ArgumentParser, **when: str) -> None:
    """Add CLUSTER_FLAGS to `parser`; `when` appends a command's own clause to a flag's help, keyed by the flag's
    argparse name (`nodes="where the log does not say"`). The values land in args.nodes, args.gpus_per_node,
    args.nic_bandwidth, args.nics_per_node, args.nvls and args.sharp."""
    for flag, spec in CLUSTER_FLAGS.items():
        clause = when.pop(flag[2:].replace("-", "_"), None)
        parser.add_argument(flag, **{**spec, "help": spec["help"] + (f", {clause}" if clause else "")})
    if when:
        raise TypeError(f"add_cluster_flags: no cluster flag for {', '.join(when)}")


def check_flags(parser: argparse.ArgumentParser, checks: dict) -> None:
    """Put `checks` in front of each matching flag's own type (which still makes the value)."""
    for action in parser._actions:
        check = next((checks[f] for f in action.option_strings if f in checks), None)
        if check is not None:
            action.type = checked(check, action.type)


def checked(check, convert):
    def checked(text):
        check(text)
        return text if convert is None else convert(text)

    checked.__name__ = getattr(convert, "__name__", "value")
    return checked


def existing_file(path: str, what: str) -> None:
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder: give {what}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")


def folder(path: str) -> str:
    """argparse type: a folder to write into, new or existing, never a file."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is a file, not a folder: give a folder")
    return path


def add_folder_flag(parser: argparse.ArgumentParser, flag: str, help: str, **kw) -> None:
    """The flag naming the folder a command writes into (`--out`, `ref import --dest`), checked as argparse reads it."""
    parser.add_argument(flag, type=folder, metavar="FOLDER", help=help, **kw)


def add_notebook_flags(parser: argparse.ArgumentParser) -> None:
    """`--quick` and `--timeout` of the commands that execute the notebooks (`labkit run`, `labkit site`)."""
    parser.add_argument(
        "--quick", action="store_true", help="run the notebooks with quick=True: smaller live CPU sweeps"
    )
    parser.add_argument(
        "--timeout",
        type=whole(1),
        default=CELL_TIMEOUT_S,
        metavar="SECONDS",
        help=f"seconds one cell may run before giving up (default {CELL_TIMEOUT_S})",
    )


def output_file(path: str, flag: str) -> None:
    """A flag that names a file to write must not name a folder, nor sit under a file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{flag} {path} is a folder: give a file name, e.g. {os.path.join(path, 'fig.png')}")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{flag} {path}: {parent} is a file, not a folder")
