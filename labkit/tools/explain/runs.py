"""The runs `labkit explain` looks at: each nccl-tests table of a log (read by labkit.logs) or each curve of a dataset.

A `Run` holds the numbers as floats and what the source states about them (collective, ranks, hosts, GPU, NCCL
version, NCCL_* variables), with `None` where it states nothing; the numbers are never changed.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ... import collectives, logs, reference

_ALGO = re.compile(r"\bNCCL_ALGO=(\S+)")
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+)=([^\s,;()]+)")
#: nccl-tests' parameter line ('# nThread 1 nGpus 8 minBytes ...') and its '# Rank' lines, after any launcher prefix.
_PARAMS_LINE = re.compile(r"(?:^|[\s#>:])nThread\s+\d+\s+nGpus\s+\d+")
_RANK_LINE = re.compile(r"(?:^|[\s#>:])Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s")


@dataclasses.dataclass
class Run:
    """One sweep: `points` are (nbytes, placement, algbw, busbw, wrong-as-printed), in the source's order."""

    label: str
    source: str
    op: str | None
    points: list[tuple]
    world_size: int | None = None
    world_size_basis: str = "not stated"  # "stated" (Rank lines / dataset), "derived" (busbw/algbw), "not stated"
    nodes: int | None = None
    hosts: tuple[str, ...] = ()
    rank_lines: int = 0
    rank_hosts: tuple[tuple[int, str], ...] = ()  # (rank, host) of each '# Rank' line, as printed
    gpu: str = ""
    nccl_version: str | None = None
    env: dict = dataclasses.field(default_factory=dict)
    algo_env: str | None = None  # NCCL_ALGO as the source gives it
    out_of_bounds: str | None = None
    wrong_is_count: bool = True  # False for old logs whose 'error' column is a deviation, not a count
    log_text: str = ""  # the whole log (for NCCL INFO evidence); empty for datasets
    table: object = None  # algbw/busbw as printed (a DataFrame), for the rank count they fix
    jobs_at_once: int = 1  # nccl-tests jobs whose parameter lines were printed together before this table

    def plateau(self) -> tuple[float, float, float]:
        """(nbytes, busbw, algbw) at the largest size, out-of-place where both placements were printed."""
        top = max(p[0] for p in self.points)
        at = [p for p in self.points if p[0] == top]
        best = next((p for p in at if p[1] == "out-of-place"), at[0])
        return best[0], best[3], best[2]

    def curve(self) -> list[tuple[float, float]]:
        """(nbytes, busbw) per size, out-of-place where both were printed."""
        out = {}
        for n, placement, _a, b, _w in self.points:
            if n not in out or placement == "out-of-place":
                out[n] = b
        return sorted(out.items())


def _num(v) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x else None


def derive_world_size(run: "Run", op: str | None, who: str = "--op") -> None:
    """Fill in the rank count busbw/algbw fixes for `op` when the source states none (labkit.logs.checks.rank_count:
    each printed pair's rounding interval; 'derived' only when exactly one rank count fits every row)."""
    if op is None or run.table is None:
        return
    rc = logs.checks.rank_count(op, run.table, collectives.bus_factor)
    if rc.status == "inconsistent":
        raise ValueError(f"{who} {op} contradicts the numbers of {run.label}: {rc.describe()}")
    ratios = [b / a for _n, _p, a, b, _w in run.points if a and b and a >= 1.0]
    if rc.status == "not fixed" and ratios and max(abs(r - 1) for r in ratios) > 0.01:
        raise ValueError(
            f"{who} {op} contradicts the numbers of {run.label}: busbw/algbw = {ratios[-1]:.4g}, "
            f"but {op} prints busbw = algbw"
        )
    if run.world_size is not None:
        return
    if rc.status == "derived":
        run.world_size, run.world_size_basis = rc.world_size, f"derived: {rc.describe()}"
    else:
        run.world_size_basis = f"not stated: {rc.describe()}"


def _algo(env: dict, config: str | None) -> str | None:
    if env.get("NCCL_ALGO"):
        return env["NCCL_ALGO"]
    m = _ALGO.search(config or "")
    return m.group(1) if m else None


def jobs_before(lines: list[str]) -> int:
    """How many nccl-tests jobs printed their parameter line together last in `lines` (the text before a table):
    the parameter lines since the last one a '# Rank' line followed (0 if none).

    A job prints that line once, from rank 0 (nccl-tests src/common.cu, run(): `is_main_proc = (proc == 0)`; the
    line is PRINTed from the main process only). Processes that each ran as rank 0 of their own job print one each,
    before any of their Rank lines, as in nccl-tests#182, #213 and #306; a job that printed its Rank lines and then
    failed before a rerun ends its group."""
    count, ranked = 0, False
    for line in lines:
        if _PARAMS_LINE.search(line):
            count, ranked = (1, False) if ranked else (count + 1, False)
        elif count and _RANK_LINE.search(line):
            ranked = True
    return count


def from_log(path: Path, text: str) -> list[Run]:
    """Every nccl-tests table of a log file (labkit.logs.parse_log), in order."""
    parsed = logs.parse_log(path, format="nccl-tests")
    lines, end, jobs = text.splitlines(), 0, 1
    runs = []
    for ds in parsed:
        # nccl-tests prints its parameter line before every job's table, so a table with none of its own comes from
        # the jobs that printed one last: the second job's table (#306), or a piece of two jobs' tables whose rows
        # interleave (#182), which the log reader splits where the sizes start again
        jobs = jobs_before(lines[end : ds.lines[0] - 1]) or jobs
        end = ds.lines[1]
        f, meta = ds.frame, ds.meta
        points = [
            (int(r.nbytes), r.placement, _num(r.algbw_GBps), _num(r.busbw_GBps), r.wrong)
            for r in f.itertuples()
            if _num(r.busbw_GBps) is not None
        ]
        if not points:
            continue
        op = meta.get("op") or (f["op"].dropna().iloc[0] if f["op"].notna().any() else None)
        stated = {int(v) for v in f["world_size"].dropna()}
        nodes = {int(v) for v in f["nodes"].dropna()}
        run = Run(
            ds.label,
            str(path),
            op,
            points,
            hosts=tuple(meta.get("hosts") or ()),
            rank_lines=len(meta.get("devices") or ()),
            rank_hosts=tuple((d["rank"], d["host"]) for d in meta.get("devices") or ()),
            gpu=meta.get("gpu") or "",
            nccl_version=meta.get("nccl_version"),
            env=dict(meta.get("env") or {}),
            algo_env=_algo(meta.get("env") or {}, None),
            out_of_bounds=meta.get("out_of_bounds_printed"),
            wrong_is_count=not any(re.fullmatch(r"\d*\.\d+|\d+e-?\d+", str(p[4] or "")) for p in points),
            log_text=text,
            jobs_at_once=jobs,
        )
        run.table = f[["algbw_GBps", "busbw_GBps"]]
        if len(stated) == 1:
            run.world_size, run.world_size_basis = stated.pop(), "stated"
        try:
            derive_world_size(run, op, "the log's collective")
        except ValueError:
            pass  # said when the run is explained (explain_run), not while the file is read
        if len(nodes) == 1:
            run.nodes = nodes.pop()
        runs.append(run)
    return runs


def from_dataset(name: str) -> list[Run]:
    """Every curve of a shipped or imported dataset: one per (nodes, world_size, config)."""
    ds = reference.load(name)
    f, meta = ds.frame, ds.meta
    if "busbw_GBps" not in f:
        raise ValueError(f"dataset {name!r} is a {meta.get('kind')} dataset with no busbw: give an nccl-tests dataset")
    keys = [k for k in ("nodes", "world_size", "config") if k in f]
    runs = []
    for key, g in f.groupby(keys, dropna=False, sort=False) if keys else [((), f)]:
        key = key if isinstance(key, tuple) else (key,)
        by = dict(zip(keys, key))
        op = g["op"].dropna().iloc[0] if "op" in g and g["op"].notna().any() else None
        op = op or ("all_reduce" if meta.get("kind") == "allreduce_sweep" else None)
        placement = g["placement"] if "placement" in g else ["unspecified"] * len(g)
        algbw = g["algbw_GBps"] if "algbw_GBps" in g else [None] * len(g)
        points = [
            (int(n), p, _num(a), _num(b), None) for n, p, a, b in zip(g["nbytes"], placement, algbw, g["busbw_GBps"])
        ]
        points = [p for p in points if p[3] is not None]
        if not points:
            continue
        desc = ", ".join(f"{k}={v}" for k, v in by.items() if v == v and v is not None)
        ws, nodes = _num(by.get("world_size")), _num(by.get("nodes"))
        run = Run(f"{name} ({desc})", name, op, points, gpu=str(meta.get("gpu") or ""))
        config = str(by.get("config") or "")
        run.env = dict(_ENV.findall(config))  # NCCL_* settings the dataset's config names
        run.algo_env = _algo(run.env, config)
        if "algbw_GBps" in g:
            run.table = g[["algbw_GBps", "busbw_GBps"]].astype(str)
        if ws:
            run.world_size, run.world_size_basis = int(ws), "stated"
        if nodes:
            run.nodes = int(nodes)
        runs.append(run)
    return runs


def load_runs(source: str) -> list[Run]:
    """The runs of a log file or a dataset name; errors say what to give instead."""
    p = Path(source)
    if p.is_dir():
        raise ValueError(
            f"{source} is a folder: give one nccl-tests log file (or a dataset name from `labkit ref list`)"
        )
    if p.is_file():
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise ValueError(f"cannot read {source} ({e.strerror}): give a readable nccl-tests log file") from None
        try:
            runs = from_log(p, text)
        except logs.LogFormatError as e:
            raise ValueError(
                f"{e}: give the whole output of an nccl-tests binary (all_reduce_perf and friends), to its "
                "'# Avg bus bandwidth' line"
            ) from None
        if not runs:
            raise ValueError(f"{source}: no nccl-tests table with a busbw column: give the full all_reduce_perf output")
        return runs
    if source in reference.list_datasets():
        return from_dataset(source)
    raise ValueError(
        f"no such file or dataset: {source!r}; give an nccl-tests log file or a dataset name (labkit ref list)"
    )
