"""nccl-tests output (every `*_perf` binary) → one sweep per run.

Reads what nccl-tests prints (src/util.cu of NVIDIA/nccl-tests): the preamble (`# nccl-tests
version`, `# Collective test starting: <binary>`, `# nThread ... iters ...`, one `#  Rank` line per
rank with host, PID, device, bus id and GPU name), the column header (any layout: with or without
`redop`/`root`, `#wrong` or the old `error`, `cputime`, per-iteration columns, or a hand-trimmed
`size time algbw busbw`), the result rows (header or not), and `# Out of bounds` / `# Avg bus
bandwidth`. NCCL INFO/WARN lines, launcher prefixes and elisions (`...`) in between are passed
over. A file may hold many runs: a run ends at its `# Avg bus bandwidth` line, a new header or
preamble, a code fence, a line of other text, or a size smaller than the one before.

What a run does not print stays empty: the collective (unless the binary is named), world size
and node count (unless every `#  Rank` line 0..n-1 is there), the configuration (unless NCCL_*
variables appear on the command line or in `set by environment` lines).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import checks
from ._model import LogDataset
from ._text import Line, Skipped, integer, is_integer, is_number

TOOL = "nccl-tests"
OPS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "alltoall",
    "alltoallv",
    "sendrecv",
    "hypercube",
    "gather",
    "scatter",
)
#: Columns of a sweep, in data/README.md order (allreduce_sweep adds op; collective_sweep requires it).
COLUMNS = (
    "op",
    "nbytes",
    "world_size",
    "nodes",
    "config",
    "placement",
    "count",
    "dtype",
    "redop",
    "root",
    "time_us",
    "algbw_GBps",
    "busbw_GBps",
    "wrong",
)
#: Units nccl-tests prints under its header; a table in any other unit is not read.
UNITS = {"(B)", "(elements)", "(us)", "(GB/s)", "(%)"}
CAVEATS = (
    "nccl-tests: 'size' (nbytes) is the bytes of the full buffer; algbw = size / time and busbw = algbw "
    "x the collective's bus factor (nccl-tests doc/PERFORMANCE.md), in GB/s with 1 GB = 1e9 B; time in "
    "microseconds. busbw is nccl-tests' per-rank bus bandwidth, comparable with one link's unidirectional "
    "speed. Numbers are copied as printed. 'wrong' is the #wrong count (old versions: 'error', the largest "
    "deviation), 'N/A' when validation was off."
)

_PROGRAM = re.compile(r"\b(" + "|".join(sorted(OPS, key=len, reverse=True)) + r")_perf\w*")
_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)(?:\s+nccl-headers=(\d+))?(?:\s+nccl-library=(\d+))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_PARAMS = re.compile(r"^#\s*nThread\s+\d+")
_KEYVAL = re.compile(
    r"(nThread|nGpus|minBytes|maxBytes|step:|warmup iters:|iters:|agg iters:|validation:|graph:|"
    r"unalign:)\s*(\S+)"
)
_RANK = re.compile(
    r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
    r"\[([^\]]*)\]\s+(.*\S)"
)
_NCCL_VERSION = re.compile(r"\bNCCL version (\d\S*)")
#: nccl-tests lowers maxBytes to what fits in GPU memory and says so after the `# nThread` line (src/common.cu).
_REDUCED = re.compile(r"^#\s*Reducing maxBytes to (\d+)")
_ENV_SET = re.compile(r"\b(NCCL_\w+) set by environment to (\S+)")
_ENV_ARG = re.compile(r"(?:^|\s)(NCCL_[A-Z0-9_]+)=(\S+)")
_NOISE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ERROR)\b|^#|^\[?\.\.\.\]?$|^\.\.\.\s*$")
_ELISION = re.compile(r"^\[?\.\.\.\]?$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(.+?)\s*$")
_TYPE = re.compile(r"^[a-z][a-z0-9_]*$")
_GROUP_STARTS = ("time", "cputime")
_NAMES = {"#wrong": "wrong", "error": "wrong", "size": "size"}


def _header_names(text: str) -> list[str] | None:
    toks = text.lstrip("#").split()
    names = [_NAMES.get(t, t) for t in toks]
    if "size" in names and any(t in names for t in _GROUP_STARTS) and ("algbw" in names or "busbw" in names):
        return names
    return None


def _expected(names: list[str]) -> list[str]:
    return [n for n in names if n != "timestamp"]


def _layout(names: list[str]) -> tuple[list[str], list[list[str]]]:
    """(leading columns, groups of result columns) of a header."""
    starts = [i for i, n in enumerate(names) if n in _GROUP_STARTS]
    lead = names[: starts[0]]
    groups = [names[a:b] for a, b in zip(starts, starts[1:] + [len(names)])]
    return lead, [[n for n in g if n != "timestamp"] for g in groups]


class _Run:
    def __init__(
        self,
        first: int,
        names: list[str] | None,
        titled: bool,
        unit_error: str | None,
        raw_names: list[str] | None = None,
    ):
        self.first = self.last = first
        self.names, self.titled, self.unit_error = names, titled, unit_error
        self.raw_names = raw_names or []  # as printed: '#wrong' (a count) or 'error' (a deviation)
        self.rows: list[dict] = []
        self.prev_size = -1
        self.avg = self.oob = None
        self.elided: list[int] = []
        #: Without a header, whether this run's rows print a root column: the first whole row decides, so a row cut
        #: short later cannot shift its values one column left (its root read as the time).
        self.headerless_root: bool | None = None


def parse(lines: list[Line]) -> tuple[list[LogDataset], list[Skipped]]:
    datasets, skipped = [], []
    pre = _Preamble()
    run: _Run | None = None
    titled = False  # an 'out-of-place  in-place' title line came just before the header

    def close():
        nonlocal run, pre
        if run is not None and run.rows:
            datasets.append(_dataset(run, pre, len(datasets)))
            pre = _Preamble()
        run = None

    for ln in lines:
        t = ln.text
        if ln.fence:
            close()
            continue
        if not t:
            continue
        if names := _header_names(t):
            close()
            run, titled = _Run(ln.no, names, titled, None, t.lstrip("#").split()), False
            continue
        if "out-of-place" in t and t.startswith("#"):
            titled = True
            continue
        if t.startswith("#") and "(B)" in t:
            bad = [u for u in t.lstrip("#").split() if u not in UNITS]
            if run is not None and bad:
                run.unit_error = f"unit {bad[0]} in the header is not the unit nccl-tests prints"
            continue
        if m := _AVG.match(t):
            if run is not None:
                run.avg = m.group(1)
                close()
            continue
        if m := _OOB.match(t):
            if run is not None:
                run.oob = m.group(1)
            continue
        if (end := _CONCLUDED.match(t)) or (found := _Preamble.find(t)):
            if run is not None and run.rows:
                close()  # a preamble line, or the line after a run, ends a run
            if end is None:
                read, m = found
                read(pre, m)
            elif run is None:  # '# Collective test concluded: <binary>' names the run just closed
                _name_program(datasets, end.group(1))
            continue
        toks = ln.tokens
        if toks and is_integer(toks[0]) and (run is not None or _headerless(toks)):
            if run is None:
                run = _Run(ln.no, None, False, None)
            size = integer(toks[0])
            if run.rows and size < run.prev_size:
                names, titled, raw_names = run.names, run.titled, run.raw_names
                close()
                run = _Run(ln.no, names, titled, None, raw_names)
            if run.unit_error:
                skipped.append(Skipped(ln.no, ln.raw, run.unit_error))
                continue
            rows, problem = _row(toks, run)
            if problem:
                skipped.append(Skipped(ln.no, ln.raw, problem))
            if rows:
                run.rows += rows
                run.prev_size, run.last = size, ln.no
            continue
        if _NOISE.search(t):
            pre.env_from(t)
            if run is not None and run.rows and _ELISION.match(t):
                run.elided.append(ln.no)
            continue
        if run is not None and run.rows:
            close()
        pre.other(t)
    close()
    return datasets, skipped


def _headerless(toks: list[str]) -> bool:
    """A row printed without its header: size, count, type, then numbers."""
    return len(toks) >= 7 and is_integer(toks[1]) and bool(_TYPE.match(toks[2])) and not is_number(toks[2])


def _row(toks: list[str], run: _Run) -> tuple[list[dict], str | None]:
    """Records of one result line (one per out-of-place / in-place group) and any problem."""
    if run.names:
        lead_names, groups = _layout(run.names)
    else:
        lead_names, groups = ["size", "count", "type", "redop", "root"], None
    gsize = len(groups[0]) if groups else 4
    lead, i = {"size": toks[0]}, 1
    for name in lead_names[1:]:
        tok = toks[i] if i < len(toks) else ""
        if name in ("redop", "root"):  # alltoall once printed an empty redop; old layouts had no root
            fits = (not is_number(tok) and tok != "N/A") if name == "redop" else bool(re.fullmatch(r"-?\d+", tok))
            if name == "root" and fits and not run.names:  # headerless: as the run's rows so far, or if it
                fits = run.headerless_root if run.headerless_root is not None else (len(toks) - i) % gsize == 1
                # leaves whole groups after it
            if fits:
                lead[name], i = tok, i + 1
            elif run.names and len(toks) == len(_expected(run.names)):
                return [], f"{tok!r} in column {name} does not fit it"
            continue
        if name == "count" and is_integer(tok) or name == "type" and _TYPE.match(tok) and not is_number(tok):
            lead[name], i = tok, i + 1
        elif not tok:
            return [], f"row cut short after {len(toks)} value(s): no {name} column and none after it"
        else:
            return [], f"{tok!r} in column {name} does not fit it"
    rest = toks[i:]
    n_groups = len(groups) if groups else len(rest) // gsize
    if run.names and "timestamp" in run.names:
        rest = rest[: gsize * n_groups]  # the -T timestamp after the last group is not a result
    if groups and len(rest) > gsize * n_groups:
        return [], f"{len(toks)} columns, the header has {len(run.names)}"
    placements = ["out-of-place", "in-place"] if n_groups == 2 or run.titled else [None] * n_groups
    records, problem = [], None
    for g in range(n_groups):
        names = groups[g] if groups else ["time", "algbw", "busbw", "wrong"]
        vals = rest[g * gsize : (g + 1) * gsize]
        where = placements[g] or f"group {g + 1}"
        if len(vals) < len(names):
            problem = problem or f"{where} columns cut short ({len(vals)} of {len(names)} values)"
            continue
        cell = dict(zip(names, vals))
        if bad := _bad_cell(cell, run):
            problem = problem or f"{where}: {bad}"
            continue
        records.append(
            {
                "nbytes": integer(lead["size"]),
                "count": int(lead["count"]) if "count" in lead else None,
                "dtype": lead.get("type"),
                "redop": lead.get("redop"),
                "root": int(lead["root"]) if "root" in lead else None,
                "placement": placements[g] or "unspecified",
                "time_us": cell.get("time", cell.get("cputime")),
                "algbw_GBps": cell.get("algbw"),
                "busbw_GBps": cell.get("busbw"),
                "wrong": cell.get("wrong"),
            }
        )
    if not groups and len(rest) % gsize:  # without a header nothing says which values belong where: none is read
        return [], problem or f"{len(rest) % gsize} value(s) after the last complete column group: row not read"
    if not run.names and run.headerless_root is None and records and not problem:
        run.headerless_root = "root" in lead
    return records, problem


def _bad_cell(cell: dict, run: _Run) -> str | None:
    """What is wrong with one group's values ('<value> in column <name> is ...'), or None. Times and bandwidths are
    non-negative numbers; #wrong is a count (the old 'error' column a number), 'N/A' when validation was off."""
    for name in ("time", "cputime", "algbw", "busbw"):
        v = cell.get(name)
        if v is not None and not is_number(v):
            return f"{v!r} in column {name} is not a number"
        if v is not None and v.startswith("-"):
            return f"{v!r} in column {name} is negative (nccl-tests never prints that: the columns are shifted)"
    v = cell.get("wrong")
    counted = run.names and "#wrong" in " ".join(run.raw_names)
    if v is not None and v != "N/A" and not (re.fullmatch(r"\d+", v) if counted else is_number(v)):
        return f"{v!r} in column wrong is not a number"
    return None


class _Preamble:
    """What the lines before a table say about it."""

    def __init__(self):
        self.version = self.headers = self.library = self.nccl = self.program = self.command = None
        self.from_binary_line = False  # the program was named by '# Collective test starting:'
        self.params: dict[str, str] = {}
        self.ranks: list[dict] = []
        self.env: dict[str, str] = {}
        self.varies: set[str] = set()  # variables given different values within one command block
        self.in_block = self.continued = False
        self.block: list[str] = []

    def _version(self, m: re.Match) -> None:
        self.version, self.headers, self.library = m.groups()

    def _starting(self, m: re.Match) -> None:
        self.program, self.from_binary_line = m.group(1), True

    def _params(self, m: re.Match) -> None:
        self.params = {k.rstrip(":"): v for k, v in _KEYVAL.findall(m.string)}

    def _rank(self, m: re.Match) -> None:
        rank, group, pid, host, dev, bus, name = m.groups()
        self.ranks.append(
            {
                "rank": int(rank),
                "group": None if group is None else int(group),
                "pid": int(pid),
                "host": host,
                "device": int(dev),
                "bus_id": bus,
                "gpu": name,
            }
        )

    def _reduced(self, m: re.Match) -> None:
        self.params = {**self.params, "maxBytes_stated": self.params.get("maxBytes"), "maxBytes": m.group(1)}

    def _nccl(self, m: re.Match) -> None:
        self.nccl = m.group(1)

    #: The preamble's lines: (how to find one, the method that reads it); the first that matches reads the line.
    #: 'NCCL version' counts anywhere in a line (an NCCL INFO line says it) but not in a 'set by environment' line.
    GRAMMAR = (
        (_VERSION.match, _version),
        (_STARTING.match, _starting),
        (_PARAMS.match, _params),
        (_RANK.match, _rank),
        (_REDUCED.match, _reduced),
        (lambda t: None if _ENV_SET.search(t) else _NCCL_VERSION.search(t), _nccl),
    )

    @classmethod
    def find(cls, t: str) -> tuple[Callable[[_Preamble, re.Match], None], re.Match] | None:
        """(the method that reads `t`, its match), or None if `t` is not a preamble line."""
        for match, read in cls.GRAMMAR:
            if m := match(t):
                return read, m
        return None

    def env_from(self, t: str) -> None:
        if m := _ENV_SET.search(t):
            self.env[m.group(1)] = m.group(2)

    def other(self, t: str) -> None:
        """A line of other text before the table. The last block of command lines (a line naming a
        `*_perf` binary, an `export`, or only VAR=value words, with its continuation lines) gives
        the binary and its NCCL_* variables; prose gives nothing and only ends a block."""
        m = _PROGRAM.search(t)
        words = [w for w in t.split() if w not in ("\\", "-x", "env", "/usr/bin/env", ":")]
        commandish = (
            m
            or t.startswith(("export ", "mpirun", "srun", "torchrun"))
            or self.continued
            or (words and all("=" in w for w in words))
        )
        self.continued = bool(commandish) and t.rstrip().endswith("\\")  # a shell line continued below
        if not commandish:
            self.in_block = False
            return
        if not self.in_block:  # a new command block: the variables of an earlier one do not apply
            self.env, self.varies, self.in_block, self.block = {}, set(), True, []
        self.block.append(t.rstrip("\\").strip())
        for k, v in _ENV_ARG.findall(t):
            if self.env.get(k, v) != v:
                self.varies.add(k)  # e.g. a per-rank NCCL_HOSTID in an MPMD mpirun line
            self.env[k] = v
        if m and not self.from_binary_line:
            self.program = m.group(0)
        if any(_PROGRAM.search(b) for b in self.block):
            self.command = " ".join(self.block)


def _name_program(datasets: list[LogDataset], program: str) -> None:
    """Name the last run's binary, unless its preamble did."""
    if not datasets or datasets[-1].meta.get("program") is not None:
        return
    last = datasets[-1]
    op = _op(program)
    last.meta["program"], last.meta["op"] = program, op
    if op and last.kind is None:
        datasets[-1] = last.filled(op=op)


def _op(program: str | None) -> str | None:
    m = _PROGRAM.search(program or "")
    return m.group(1) if m else None


def _dataset(run: _Run, pre: _Preamble, index: int) -> LogDataset:
    import pandas as pd

    ranks = sorted(pre.ranks, key=lambda r: r["rank"])
    complete = bool(ranks) and [r["rank"] for r in ranks] == list(range(len(ranks)))
    hosts = sorted({r["host"] for r in ranks})
    gpus = sorted({r["gpu"] for r in ranks})
    op = _op(pre.program)
    config = " ".join(f"{k}={v}" for k, v in sorted(pre.env.items()) if k not in pre.varies) or None
    frame = pd.DataFrame(
        [
            {
                "op": op,
                "world_size": len(ranks) if complete else None,
                "nodes": len(hosts) if complete else None,
                "config": config,
                **r,
            }
            for r in run.rows
        ],
        columns=list(COLUMNS),
    )
    software = "; ".join(
        s
        for s in (
            pre.version and f"nccl-tests {pre.version}",
            pre.library and f"nccl-library={pre.library}",
            pre.nccl and f"NCCL {pre.nccl}",
        )
        if s
    )
    meta = {
        "tool": TOOL,
        "program": pre.program,
        "op": op,
        "nccl_tests_version": pre.version,
        "nccl_headers": pre.headers,
        "nccl_library": pre.library,
        "nccl_version": pre.nccl,
        "parameters": pre.params,
        "devices": ranks,
        "hosts": hosts,
        "env": pre.env,
        "env_differs_between_ranks": sorted(pre.varies),
        "command": pre.command,
        "avg_busbw_printed": run.avg,
        "out_of_bounds_printed": run.oob,
        "elided_lines": run.elided,
        "rank_lines_complete": complete,
        "time_column": "cputime (host-timed, -C 1)" if run.names and "cputime" in run.names else "time",
        "gpu": " / ".join(gpus),
        "gpu_count": len(ranks) if complete else "",
        "nodes": len(hosts) if complete else "",
        "software": software,
        "method": " ".join(s for s in ("nccl-tests", pre.program or "", _flags(pre.command)) if s),
        "bandwidth_direction": "unidirectional",
        "caveats": CAVEATS,
        "title": f"nccl-tests {pre.program or '(collective not named)'}" + (f" on {' / '.join(gpus)}" if gpus else ""),
    }
    meta["completeness"] = checks.completeness(meta, frame["nbytes"])
    meta["repeated_sizes"] = checks.repeated_sizes(meta, frame)
    kind = None if op is None else "allreduce_sweep" if op == "all_reduce" else "collective_sweep"
    label = f"nccl-tests run {index + 1} ({pre.program or 'collective not named'}, lines {run.first}-{run.last})"
    return LogDataset(TOOL, kind, frame, meta, (run.first, run.last), label)


def _flags(command: str | None) -> str:
    if not command:
        return ""
    m = _PROGRAM.search(command)
    return (
        re.split(r"\s[:|;&]\s|\s[|;]$", command[m.end() :])[0].strip() if m else ""
    )  # up to the next MPMD ':' or pipe
