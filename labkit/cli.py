"""The `labkit` command: doctor, bench, record, ref, run, site, notebooks, model, compare, student."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

from . import __version__, benches, doctor, reference
from . import cluster as cluster_model
from .benches import BENCHES
from .compare import compare, save_figures
from .explain import command as explain_cmd
from .models import allreduce_time
from .notebooks import check_reference, closest, copy_notebooks, find_notebook, run_notebooks
from .record import record
from .site import build_site
from .student import build
from .system import environment
from .units import MAX_MODELLED_BYTES, format_time, parse_size, parse_sizes


def _load_bench(name: str):
    mod = benches.load(BENCHES[name])
    if mod is None:
        raise SystemExit(f"labkit bench {name}: not available in this version of labkit")
    return mod


def cmd_doctor(args) -> int:
    env = environment(command="labkit doctor")
    if args.json:
        print(json.dumps(env, indent=2, default=str))
    else:
        print(doctor.report(env))
    return 0


def cmd_bench(args) -> int:
    mod = _load_bench(args.experiment)
    records = mod.bench(args)
    n = 0
    for rec in records:
        n += 1
        if args.json:
            print(json.dumps(rec, default=str), flush=True)
        elif hasattr(mod, "text"):  # a bench whose record is not flat says itself how to print it
            print(mod.text(rec), flush=True)
        else:
            print("  ".join(f"{k}={_fmt(v)}" for k, v in rec.items() if not isinstance(v, (list, dict))), flush=True)
    return 0 if n else 1


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _import_log(args) -> int:
    if not args.name or not args.dataset_name:
        raise ValueError("labkit ref import-log FILE --name NAME: give the log file and a dataset name")
    _existing_file(args.name, "a log file")
    _folder_flag(args.out, "--out")
    fill = {}
    for item in args.fill or []:
        col, sep, value = item.partition("=")
        if not sep or not col:
            raise ValueError(f"--fill {item!r}: write COLUMN=VALUE, e.g. --fill nodes=2")
        fill[col] = int(value) if value.isdigit() else value
    names, skipped = reference.import_log(
        args.name,
        args.dataset_name,
        args.format,
        out=args.out,
        force=args.force,
        op=args.op,
        fill=fill,
        system=args.system,
        source=args.source,
    )
    dest = args.out or reference.user_data_dir()
    for name in names:
        print(reference.import_summary(reference.load(name, dest), dest))  # where each fact came from, warnings
    for sk in skipped:
        print(f"skipped line {sk.line}: {sk.reason} ({sk.text[:60]!r})", file=sys.stderr)
    return 0


def cmd_ref(args) -> int:
    if args.action == "import-log":
        return _import_log(args)
    if args.kind is not None and args.kind not in reference.KINDS:
        raise ValueError(f"--kind {args.kind!r}: no such kind; {closest(args.kind, reference.KINDS)}")
    if args.action == "import":
        if not args.name or not args.prefix:
            raise ValueError("labkit ref import PROFILE --prefix NAME: give the profile folder and a name prefix")
        _folder_flag(args.dest, "--dest")
        for name in reference.import_profile(
            args.name,
            args.prefix,
            only=args.only,
            system=args.system,
            caveat=args.caveat or "",
            dest=args.dest,
            force=args.force,
        ):
            print(f"imported {name}")
        return 0
    if args.action == "profiles":
        for name in reference.list_profiles():
            info = reference.check_profile(reference.profile_path(name))
            print(f"{name:40s} {info.get('created', '')}  {', '.join(sorted(info.get('experiments', {})))}")
        return 0
    if args.action == "list":
        for name in reference.list_datasets(args.folder, args.kind):
            ds = reference.load(name, args.folder)
            m = ds.meta
            print(f"{name:55s} {m['kind']:16s} {m['quality']}  {m['title']}")
        return 0
    if not args.name:
        raise ValueError("labkit ref show NAME: give a dataset name (see `labkit ref list`)")
    ds = reference.load(args.name, args.folder)
    print(reference.describe(ds))
    if args.rows:
        rows = ds.frame.head(args.rows).copy()
        for col in rows.columns:  # byte counts stay integers when some rows have none (pandas makes them float)
            if (
                (col == "nbytes" or col.endswith("_bytes"))
                and rows[col].dtype.kind == "f"
                and (rows[col].dropna() % 1 == 0).all()
            ):
                rows[col] = rows[col].astype("Int64")
        print(rows.to_string(index=False))
    return 0


def cmd_record(args) -> int:
    path = record(args.out, quick=args.quick, force=args.force, only=args.only)
    print(f"profile written to {path}")
    return 0


def cmd_run(args) -> int:
    _folder_flag(args.out, "--out")
    for name in args.notebooks:
        find_notebook(name)
    check_reference(args.reference, "--reference")  # before a kernel starts
    results = run_notebooks(
        args.notebooks or None,
        out_dir=args.out,
        mode=args.mode,
        quick=args.quick,
        reference=args.reference,
        html=args.html,
        timeout=args.timeout,
    )
    failed = [r for r in results if not r["ok"]]
    for r in results:
        print(
            f"{'ok  ' if r['ok'] else 'FAIL'} {r['notebook']}  {r['seconds']:.1f} s  -> {r['output']}"
            + (f"\n     {r['error']}" if r.get("error") else "")
        )
    return 1 if failed else 0


def _check_model_flags(args) -> None:
    """What argparse cannot check flag by flag: the flags that must agree with each other.

    Checked here, before any model runs, so every message names the flags the user typed."""
    N, g, m = args.gpus, args.gpus_per_node, args.nodes
    if m is not None:
        if N % m:
            raise ValueError(f"--nodes ({m}) must divide --gpus ({N}): every node holds the same number of GPUs")
        if g is not None and g * m != N:
            raise ValueError(f"--gpus-per-node ({g}) must equal --gpus / --nodes ({N}/{m} = {N // m})")
        if m > 1 and (args.nic_bandwidth is None or args.nics_per_node is None):
            raise ValueError("--nic-bandwidth and --nics-per-node are needed when --nodes is above 1")
        return
    cluster = {"--nic-bandwidth": args.nic_bandwidth, "--nics-per-node": args.nics_per_node}
    given = [f for f, v in cluster.items() if v is not None] + [f for f in ("--nvls", "--sharp") if vars(args)[f[2:]]]
    if given:
        raise ValueError(f"{', '.join(given)} describe a cluster: give --nodes too")
    if args.algorithm == "hierarchical":
        if g is None or args.inter_bandwidth is None:
            raise ValueError("--algorithm hierarchical needs --gpus-per-node and --inter-bandwidth")
        if N % g:
            raise ValueError(f"--gpus ({N}) is not a multiple of --gpus-per-node ({g})")


def cmd_model(args) -> int:
    _check_model_flags(args)
    S = parse_size(args.size, maximum=MAX_MODELLED_BYTES)  # any size up to PiB: a model allocates nothing
    if args.nodes is not None:
        return _cluster_model(args, S)
    kw = {}
    if args.algorithm == "hierarchical":
        kw = dict(
            gpus_per_node=args.gpus_per_node,
            inter_bandwidth_GBps=args.inter_bandwidth,
            inter_latency_s=args.inter_latency_us * 1e-6 if args.inter_latency_us is not None else None,
        )
    t = allreduce_time(S, args.gpus, args.bandwidth, args.latency_us * 1e-6, args.algorithm, **kw)
    rec = {
        "model": f"allreduce/{args.algorithm}",
        "nbytes": S,
        "world_size": args.gpus,
        "bandwidth_GBps_per_direction": args.bandwidth,
        "latency_s": args.latency_us * 1e-6,
        "seconds": t,
        **kw,
    }
    if args.json:
        print(json.dumps(rec))
    else:
        print(
            f"model: {args.algorithm} all-reduce of {args.size} on {args.gpus} GPUs at {args.bandwidth:g} GB/s "
            f"per direction, α = {args.latency_us:g} µs: {format_time(t)}"
        )
    return 0


def _cluster_model(args, S: int) -> int:
    """`labkit model --nodes N ...`: every algorithm that applies on that cluster (labkit.hierarchy.cluster_model)."""
    rows = cluster_model.cli_records(
        S,
        args.gpus,
        args.nodes,
        args.bandwidth,
        args.nic_bandwidth,
        args.nics_per_node,
        args.gpus_per_node,
        nvls=args.nvls,
        sharp=args.sharp,
    )
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    r0 = rows[0]
    print(
        f"model: all-reduce of {args.size} on {r0['gpus']} GPUs = {r0['nodes']} node(s) x {r0['gpus_per_node']}, "
        f"{args.bandwidth:g} GB/s per GPU per direction inside"
        + (
            f", {args.nics_per_node} x {args.nic_bandwidth:g} GB/s NICs per node per direction"
            if args.nic_bandwidth
            else ""
        )
    )
    print(f"{'algorithm':<14}{'time':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  bound")
    for r in rows:
        mark = "  <- NCCL's likely pick" if r["nccl_would_pick"] else ""
        print(
            f"{r['algorithm']:<14}{format_time(r['seconds']):>12}{r['algbw_GBps']:>12.1f}{r['busbw_GBps']:>12.1f}"
            f"  {r['bound']}{mark}"
        )
    print("busbw = algbw x 2(N-1)/N for every algorithm (nccl-tests); a model, not a measurement")
    return 0


def cmd_compare(args) -> int:
    for kind in args.kind or ():
        if kind not in reference.KINDS:
            raise ValueError(f"--kind {kind!r}: no such kind; {closest(kind, reference.KINDS)}")
    if args.plot:
        _output_file(args.plot, "--plot")
    result = compare(args.profiles, kinds=args.kind)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(result.table(), end="")
    for path in save_figures(result, args.plot) if args.plot else ():
        print(f"figure written to {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_student(args) -> int:
    _folder_flag(args.out, "--out")
    for path in build(args.out, args.notebooks or None):
        print(f"student edition: {path}")
    return 0


def cmd_notebooks(args) -> int:
    _folder_flag(args.out, "--out")
    for path in copy_notebooks(args.out, force=args.force):
        print(f"notebook: {path}")
    return 0


def cmd_site(args) -> int:
    _folder_flag(args.out, "--out")
    if args.executed is not None and not os.path.isdir(args.executed):
        raise FileNotFoundError(f"--executed {args.executed}: no such folder (a folder of executed notebooks)")
    pages = build_site(args.out, executed_dir=args.executed, quick=args.quick, timeout=args.timeout)
    print(f"site: {len(pages)} pages, {sum(p.figures for p in pages)} figures -> {args.out}/index.html")
    return 0


# --------------------------------------------------------------------------- checking what the user typed
class _Parser(argparse.ArgumentParser):
    """argparse, with its error on one line that names the command and where its help is."""

    def error(self, message):
        message = re.sub(r"^argument ([-\w/]+): must", r"\1 must", message)  # '--gpus must be ...'
        message = re.sub(r"^argument ([-\w/]+): ", r"\1: ", message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _whole(minimum: int):
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


def _real(minimum: float = 0.0, *, strict: bool = True):
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


def _size(maximum: int | None = None):
    """argparse type: a size such as 4KiB, 64MiB, 14GB; benchmark buffers keep units.MAX_MESSAGE_BYTES."""

    def size(text: str) -> int:
        try:
            return parse_size(text) if maximum is None else parse_size(text, maximum=maximum)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return size


def _sizes(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _reals(text: str) -> list[float]:
    """Comma-separated finite numbers > 0 (--ratios)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"give comma-separated numbers > 0, e.g. 0.25,1,4, got {text!r}")
    return [_real(0.0)(p) for p in parts]


def _straggler(text: str) -> str:
    rank, sep, seconds = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"takes R:SECONDS, e.g. 1:0.5, got {text!r}")
    _whole(0)(rank)
    _real(0.0, strict=False)(seconds)
    return text


def _one_of(module: str, constant: str):
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
_BENCH_FLAG_CHECKS = {
    **dict.fromkeys(("--size", "--latency-size", "--min-bytes", "--max-bytes"), _size()),
    "--sizes": _sizes,
    **dict.fromkeys(("--repeats", "--ranks", "--runs", "--iters", "--nbytes"), _whole(1)),
    **dict.fromkeys(("--launches", "--warmup", "--warmup-iters", "--root", "--fail-rank", "--device"), _whole(0)),
    "--timeout": _real(0.0),
    "--step-factor": _real(1.0),
    "--ratios": _reals,
    "--straggler": _straggler,
    "--direction": _one_of("labkit.copies.sweeps", "DIRECTIONS"),
    "--memory": _one_of("labkit.copies.sweeps", "MEMORIES"),
}


#: The same for `labkit explain`'s hardware flags (labkit.explain.command defines them).
_EXPLAIN_FLAG_CHECKS = {
    **dict.fromkeys(("--nodes", "--gpus-per-node", "--nics-per-node", "--run"), _whole(1)),
    **dict.fromkeys(("--nvlink-bandwidth", "--nic-bandwidth"), _real(0.0)),
}


def _check_flags(parser: argparse.ArgumentParser, checks: dict) -> None:
    """Put `checks` in front of each matching flag's own type (which still makes the value)."""
    for action in parser._actions:
        check = next((checks[f] for f in action.option_strings if f in checks), None)
        if check is not None:
            action.type = _checked(check, action.type)


def _checked(check, convert):
    def checked(text):
        check(text)
        return text if convert is None else convert(text)

    checked.__name__ = getattr(convert, "__name__", "value")
    return checked


def _existing_file(path: str, what: str) -> None:
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a folder: give {what}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")


def _folder_flag(path: str | None, flag: str) -> None:
    """A flag that names a folder to write into must not name a file."""
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"{flag} {path} is a file, not a folder: give a folder")


def _output_file(path: str, flag: str) -> None:
    """A flag that names a file to write must not name a folder, nor sit under a file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{flag} {path} is a folder: give a file name, e.g. {os.path.join(path, 'fig.png')}")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{flag} {path}: {parent} is a file, not a folder")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="labkit", description="Measure and learn how data moves between CPUs and GPUs.")
    p.add_argument("--version", action="version", version=f"labkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("doctor", help="what this machine has, with plain-language warnings")
    d.add_argument("--json", action="store_true", help="print the full environment as JSON")
    d.set_defaults(func=cmd_doctor)

    b = sub.add_parser("bench", help="run one experiment")
    bsub = b.add_subparsers(dest="experiment", required=True)
    for name, mod_name in BENCHES.items():
        bp = bsub.add_parser(name, help=f"benchmark: {name}")
        bp.add_argument("--json", action="store_true", help="one JSON record per line")
        mod = benches.load(mod_name)
        if mod is None:
            continue
        mod.add_arguments(bp)
        _check_flags(bp, _BENCH_FLAG_CHECKS)
    b.set_defaults(func=cmd_bench)

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
        choices=["auto", "nccl-tests", "nvbandwidth", "bandwidthtest", "p2pbandwidthlatencytest"],
        help="with import-log: the tool that wrote the log (default: recognised from its text)",
    )
    r.add_argument("--out", help="with import-log: folder to write into (default: the per-user data folder)")
    r.add_argument("--source", help="with import-log: where the log comes from (a URL, a cluster and date)")
    r.add_argument("--op", help="with import-log: the collective of an nccl-tests log that does not name it")
    r.add_argument(
        "--fill", action="append", metavar="COLUMN=VALUE", help="with import-log: a column the log leaves empty"
    )
    r.add_argument("--folder", help="a profile folder instead of the shipped data")
    r.add_argument("--kind", help="only datasets of this kind")
    r.add_argument("--rows", type=_whole(0), default=0, help="with show: print the first N rows")
    r.add_argument("--prefix", help="with import: prefix for the imported dataset names")
    r.add_argument("--only", action="append", help="with import: only this dataset (repeatable)")
    r.add_argument("--system", help="with import / import-log: describe the system in plain words")
    r.add_argument("--caveat", help="with import: a caveat appended to every imported dataset")
    r.add_argument("--dest", help="with import: folder to import into (default: the per-user data folder)")
    r.add_argument("--force", action="store_true", help="with import: replace datasets of the same names")
    r.set_defaults(func=cmd_ref)

    rec = sub.add_parser("record", help="run every experiment this machine can and write a profile folder")
    rec.add_argument("--out", required=True, help="profile folder to write (written atomically)")
    rec.add_argument("--quick", action="store_true", help="smaller sweeps")
    rec.add_argument("--force", action="store_true", help="replace an existing profile folder")
    rec.add_argument("--only", action="append", help="record only this experiment (repeatable)")
    rec.set_defaults(func=cmd_record)

    run = sub.add_parser("run", help="execute notebooks headless with papermill")
    run.add_argument("notebooks", nargs="*", help="notebook names or paths (default: all six)")
    run.add_argument("--out", default="artifacts/run", help="folder for executed notebooks and results")
    run.add_argument("--mode", default="auto", choices=["auto", "live", "reference"])
    run.add_argument("--quick", action="store_true")
    run.add_argument("--reference", default=None, help="dataset name or profile folder to replay")
    run.add_argument("--html", action="store_true", help="also export each executed notebook to HTML")
    run.add_argument("--timeout", type=_whole(1), default=1800, help="seconds per cell before giving up")
    run.set_defaults(func=cmd_run)

    m = sub.add_parser("model", help="all-reduce cost model calculator")
    m.add_argument(
        "--size",
        type=_checked(_size(MAX_MODELLED_BYTES), None),
        required=True,
        help="message size, e.g. 14GB (decimal) or 1GiB; any size up to PiB (a model allocates nothing)",
    )
    m.add_argument("--gpus", type=_whole(1), required=True)
    m.add_argument("--bandwidth", type=_real(0.0), required=True, help="GB/s per GPU, per direction")
    m.add_argument("--latency-us", type=_real(0.0, strict=False), default=0.0, help="α per message, µs")
    m.add_argument(
        "--algorithm", default="ring", choices=["ring", "tree", "naive", "recursive_doubling", "hierarchical"]
    )
    m.add_argument("--gpus-per-node", type=_whole(1))
    m.add_argument("--inter-bandwidth", type=_real(0.0), help="GB/s per direction between groups (hierarchical)")
    m.add_argument("--inter-latency-us", type=_real(0.0, strict=False))
    m.add_argument(
        "--nodes",
        type=_whole(1),
        help="nodes: model the cluster (ring over all NICs, tree, hierarchical, NVLS, SHARP)",
    )
    m.add_argument("--nic-bandwidth", type=_real(0.0), help="GB/s per NIC, per direction (with --nodes)")
    m.add_argument("--nics-per-node", type=_whole(1), help="NICs per node the collectives use (with --nodes)")
    m.add_argument("--nvls", action="store_true", help="NVSwitch with NVLink SHARP (Hopper and later)")
    m.add_argument("--sharp", action="store_true", help="an InfiniBand fabric with SHARP (CollNet)")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_model)

    c = sub.add_parser("compare", help="profiles side by side: plateau bandwidth and n½ of like-for-like series")
    c.add_argument("profiles", nargs="+", help="profile folders (labkit record) or reference dataset names / CSV paths")
    c.add_argument("--kind", action="append", help="only datasets of this kind (repeatable)")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.add_argument("--plot", metavar="FILE.png", help="save the figure (one per kind: FILE_<kind>.png)")
    c.set_defaults(func=cmd_compare)

    nb = sub.add_parser("notebooks", help="copy the six notebooks (instructor edition) into a folder")
    nb.add_argument("--out", required=True, help="folder for the copies")
    nb.add_argument("--force", action="store_true", help="overwrite notebooks already in that folder")
    nb.set_defaults(func=cmd_notebooks)

    si = sub.add_parser("site", help="build the static website: every notebook executed and exported to HTML")
    si.add_argument("--out", required=True, help="folder for the site (index.html and one page per notebook)")
    si.add_argument("--quick", action="store_true", help="smaller live CPU sweeps")
    si.add_argument("--executed", help="use already-executed notebooks from this folder instead of running them")
    si.add_argument("--timeout", type=_whole(1), default=1800, help="seconds per cell before giving up")
    si.set_defaults(func=cmd_site)

    st = sub.add_parser("student", help="write the student edition: notebooks with the solutions removed")
    st.add_argument("notebooks", nargs="*", help="notebook names or paths (default: all)")
    st.add_argument("--out", required=True, help="folder for the student copies")
    st.set_defaults(func=cmd_student)

    ex = sub.add_parser("explain", help="is my nccl-tests number normal? verdict, expected busbw, likely causes")
    explain_cmd.add_arguments(ex)
    _check_flags(ex, _EXPLAIN_FLAG_CHECKS)
    ex.set_defaults(func=explain_cmd.cmd_explain)
    return p


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
