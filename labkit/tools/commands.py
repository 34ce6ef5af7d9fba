"""What each `labkit` subcommand does with the flags the parser read (labkit.tools.cli builds the parser)."""

from __future__ import annotations

import json
import os
import sys

from .. import cluster as cluster_model
from .. import reference, schema
from ..models import allreduce_time
from ..system import environment
from ..units import MAX_MODELLED_BYTES, format_time, parse_size
from . import benches, doctor, flags
from .benches import BENCHES
from .compare import compare, save_figures
from .notebooks import closest, copy_notebooks, find_notebook, require_reference_exists, run_notebooks
from .record import record
from .site import build_site
from .student import build


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
    flags.existing_file(args.name, "a log file")
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
    if args.kind is not None and args.kind not in schema.KINDS:
        raise ValueError(f"--kind {args.kind!r}: no such kind; {closest(args.kind, schema.KINDS)}")
    if args.action == "import":
        if not args.name or not args.prefix:
            raise ValueError("labkit ref import PROFILE --prefix NAME: give the profile folder and a name prefix")
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
    for name in args.notebooks:
        find_notebook(name)
    require_reference_exists(args.reference, "--reference")  # before a kernel starts
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
    if N < 2:  # with or without --nodes: an all-reduce over one GPU crosses no link, its time is 0 by definition
        raise ValueError(
            f"--gpus {N}: one GPU has no all-reduce to model (nothing crosses a link); give --gpus 2 or more"
        )
    if m is not None:
        return  # the cluster flags are checked by labkit.cluster.cli_records, in the same words
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
    """`labkit model --nodes N ...`: every algorithm that applies on that cluster (labkit.cluster)."""
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
        if kind not in schema.KINDS:
            raise ValueError(f"--kind {kind!r}: no such kind; {closest(kind, schema.KINDS)}")
    if args.plot:
        flags.output_file(args.plot, "--plot")
    result = compare(args.profiles, kinds=args.kind)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        print(result.table(), end="")
    for path in save_figures(result, args.plot) if args.plot else ():
        print(f"figure written to {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def cmd_student(args) -> int:
    for path in build(args.out, args.notebooks or None):
        print(f"student edition: {path}")
    return 0


def cmd_notebooks(args) -> int:
    for path in copy_notebooks(args.out, force=args.force):
        print(f"notebook: {path}")
    return 0


def cmd_site(args) -> int:
    if args.executed is not None and not os.path.isdir(args.executed):
        raise FileNotFoundError(f"--executed {args.executed}: no such folder (a folder of executed notebooks)")
    pages = build_site(args.out, executed_dir=args.executed, quick=args.quick, timeout=args.timeout)
    print(f"site: {len(pages)} pages, {sum(p.figures for p in pages)} figures -> {args.out}/index.html")
    return 0
