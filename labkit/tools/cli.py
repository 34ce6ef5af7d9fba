"""The `labkit` command line: the parser (one subcommand per command) and main, which turns every failure into one line.

labkit.tools.commands holds what each subcommand does; labkit.tools.flags checks the values the user typed.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__, logs
from ..units import MAX_MODELLED_BYTES
from . import benches, flags
from .benches import BENCHES
from .commands import (
    cmd_bench,
    cmd_compare,
    cmd_doctor,
    cmd_model,
    cmd_notebooks,
    cmd_record,
    cmd_ref,
    cmd_run,
    cmd_site,
    cmd_student,
)
from .explain import command as explain_cmd


def build_parser() -> argparse.ArgumentParser:
    """The `labkit` parser: one subcommand per command, each added by its own _add_<command>."""
    p = flags.Parser(prog="labkit", description="Measure and learn how data moves between CPUs and GPUs.")
    p.add_argument("--version", action="version", version=f"labkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (
        _add_doctor,
        _add_bench,
        _add_ref,
        _add_record,
        _add_run,
        _add_model,
        _add_compare,
        _add_notebooks,
        _add_site,
        _add_student,
        _add_explain,
    ):
        add(sub)
    return p


def _add_doctor(sub) -> None:
    d = sub.add_parser("doctor", help="what this machine has, with plain-language warnings")
    d.add_argument("--json", action="store_true", help="print the full environment as JSON")
    d.set_defaults(func=cmd_doctor)


def _add_bench(sub) -> None:
    b = sub.add_parser("bench", help="run one experiment")
    bsub = b.add_subparsers(dest="experiment", required=True)
    for name, mod_name in BENCHES.items():
        bp = bsub.add_parser(name, help=f"benchmark: {name}")
        bp.add_argument("--json", action="store_true", help="one JSON record per line")
        mod = benches.load(mod_name)
        if mod is None:
            continue
        mod.add_arguments(bp)
        flags.check_flags(bp, flags.BENCH_FLAG_CHECKS)
    b.set_defaults(func=cmd_bench)


def _add_ref(sub) -> None:
    r = sub.add_parser("ref", help="reference datasets")
    r.add_argument(
        "action",
        choices=["list", "show", "profiles", "import", "import-log"],
        help="list datasets, show one, list shipped profiles, import a profile's datasets, or import a tool log "
        "(nccl-tests, nvbandwidth, bandwidthTest, p2pBandwidthLatencyTest)",
    )
    r.add_argument("name", nargs="?", help="dataset name (show), profile folder (import) or log file (import-log)")
    r.add_argument(
        "--name", dest="dataset_name", help="with import-log: the dataset name (NAME_<op>, NAME_1, ... if several)"
    )
    r.add_argument(
        "--format",
        default="auto",
        choices=["auto", *logs.FORMATS],
        help="with import-log: the tool that wrote the log (default: recognised from its text)",
    )
    flags.add_folder_flag(r, "--out", "with import-log: folder to write into (default: the per-user data folder)")
    r.add_argument("--source", help="with import-log: where the log comes from (a URL, a cluster and date)")
    r.add_argument("--op", help="with import-log: the collective of an nccl-tests log that does not name it")
    r.add_argument(
        "--fill", action="append", metavar="COLUMN=VALUE", help="with import-log: a column the log leaves empty"
    )
    r.add_argument("--folder", help="a profile folder instead of the shipped data")
    r.add_argument("--kind", help="only datasets of this kind")
    r.add_argument("--rows", type=flags.whole(0), default=0, help="with show: print the first N rows")
    r.add_argument("--prefix", help="with import: prefix for the imported dataset names")
    r.add_argument("--only", action="append", help="with import: only this dataset (repeatable)")
    r.add_argument("--system", help="with import / import-log: describe the system in plain words")
    r.add_argument("--caveat", help="with import: a caveat appended to every imported dataset")
    flags.add_folder_flag(r, "--dest", "with import: folder to import into (default: the per-user data folder)")
    r.add_argument("--force", action="store_true", help="with import: replace datasets of the same names")
    r.set_defaults(func=cmd_ref)


def _add_record(sub) -> None:
    rec = sub.add_parser("record", help="run every experiment this machine can and write a profile folder")
    flags.add_folder_flag(rec, "--out", "profile folder to write (written atomically)", required=True)
    rec.add_argument("--quick", action="store_true", help="smaller sweeps")
    rec.add_argument("--force", action="store_true", help="replace an existing profile folder")
    rec.add_argument("--only", action="append", help="record only this experiment (repeatable)")
    rec.set_defaults(func=cmd_record)


def _add_run(sub) -> None:
    run = sub.add_parser("run", help="execute notebooks headless with papermill")
    run.add_argument("notebooks", nargs="*", help="notebook names or paths (default: all of them)")
    flags.add_folder_flag(run, "--out", "folder for executed notebooks and results", default="artifacts/run")
    run.add_argument("--mode", default="auto", choices=["auto", "live", "reference"])
    run.add_argument("--reference", default=None, help="dataset name or profile folder to replay")
    run.add_argument("--html", action="store_true", help="also export each executed notebook to HTML")
    flags.add_notebook_flags(run)
    run.set_defaults(func=cmd_run)


def _add_model(sub) -> None:
    m = sub.add_parser("model", help="all-reduce cost model calculator")
    m.add_argument(
        "--size",
        type=flags.checked(flags.size(MAX_MODELLED_BYTES), None),
        required=True,
        help="message size, e.g. 14GB (decimal) or 1GiB; any size up to PiB (a model allocates nothing)",
    )
    m.add_argument("--gpus", type=flags.whole(1), required=True)
    m.add_argument("--bandwidth", type=flags.real(0.0), required=True, help="GB/s per GPU, per direction")
    m.add_argument("--latency-us", type=flags.real(0.0, strict=False), default=0.0, help="α per message, µs")
    m.add_argument(
        "--algorithm", default="ring", choices=["ring", "tree", "naive", "recursive_doubling", "hierarchical"]
    )
    m.add_argument("--inter-bandwidth", type=flags.real(0.0), help="GB/s per direction between groups (hierarchical)")
    m.add_argument("--inter-latency-us", type=flags.real(0.0, strict=False), help="α between groups, µs (hierarchical)")
    flags.add_cluster_flags(
        m,
        nodes="modelling every algorithm that applies there (ring over all NICs, tree, hierarchical, NVLS, SHARP)",
        gpus_per_node="with --algorithm hierarchical, or with --nodes (default --gpus / --nodes)",
        nic_bandwidth="with --nodes",
        nics_per_node="with --nodes",
        nvls="with --nodes",
        sharp="with --nodes",
    )
    m.add_argument("--json", action="store_true", help="one JSON record per line (one per algorithm with --nodes)")
    m.set_defaults(func=cmd_model)


def _add_compare(sub) -> None:
    c = sub.add_parser("compare", help="profiles side by side: plateau bandwidth and n½ of like-for-like series")
    c.add_argument("profiles", nargs="+", help="profile folders (labkit record) or reference dataset names / CSV paths")
    c.add_argument("--kind", action="append", help="only datasets of this kind (repeatable)")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.add_argument("--plot", metavar="FILE.png", help="save the figure (one per kind: FILE_<kind>.png)")
    c.set_defaults(func=cmd_compare)


def _add_notebooks(sub) -> None:
    nb = sub.add_parser("notebooks", help="copy the notebooks (instructor edition) into a folder")
    flags.add_folder_flag(nb, "--out", "folder for the copies", required=True)
    nb.add_argument("--force", action="store_true", help="overwrite notebooks already in that folder")
    nb.set_defaults(func=cmd_notebooks)


def _add_site(sub) -> None:
    si = sub.add_parser("site", help="build the static website: every notebook executed and exported to HTML")
    flags.add_folder_flag(si, "--out", "folder for the site (index.html and one page per notebook)", required=True)
    si.add_argument("--executed", help="use already-executed notebooks from this folder instead of running them")
    flags.add_notebook_flags(si)
    si.set_defaults(func=cmd_site)


def _add_student(sub) -> None:
    st = sub.add_parser("student", help="write the student edition: notebooks with the solutions removed")
    st.add_argument("notebooks", nargs="*", help="notebook names or paths (default: all)")
    flags.add_folder_flag(st, "--out", "folder for the student copies", required=True)
    st.set_defaults(func=cmd_student)


def _add_explain(sub) -> None:
    ex = sub.add_parser("explain", help="is my nccl-tests number normal? verdict, expected busbw, likely causes")
    explain_cmd.add_arguments(ex)
    ex.set_defaults(func=explain_cmd.cmd_explain)


#: Exit status when stdout is closed early (`labkit ref list | head`): what a process killed by SIGPIPE
#: reports in the shell (128 + 13), as `yes | head` does.
EXIT_BROKEN_PIPE = 141


def main(argv=None) -> int:
    """Run one command; every failure is one line on stderr (exit 2 for bad input), never a traceback.

    LABKIT_DEBUG=1 shows the traceback of an unexpected error (a bug to report).
    """
    command = "labkit"
    try:
        args = build_parser().parse_args(argv)
        command = f"labkit {args.command}" + (f" {args.experiment}" if args.command == "bench" else "")
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, rather than at interpreter exit
        return code
    except SystemExit as e:  # --help, --version, a usage error argparse has printed, or a message
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        return _error(command, str(e.code))
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, RuntimeError, OSError) as e:
        return _error(command, _message(e))
    except Exception as e:
        if os.environ.get("LABKIT_DEBUG"):
            raise
        print(
            f"{command}: internal error: {type(e).__name__}: {_message(e)} — please report it "
            "(LABKIT_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 1


def _message(e: BaseException) -> str:
    """The error as one line; an OSError names its file first (not errno's bracketed number)."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.filename}: {e.strerror}" + (f" ({e.filename2})" if e.filename2 else "")
    else:
        text = str(e) or type(e).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _error(command: str, message: str) -> int:
    print(f"{command}: error: {message}", file=sys.stderr)
    return 2


def _stdout_to_devnull() -> None:
    """After a broken pipe, point stdout at /dev/null so the flush at exit does not fail again (Python docs,
    'Note on SIGPIPE' in the signal module)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (stdout captured in-process): nothing to flush
        pass


if __name__ == "__main__":
    sys.exit(main())
