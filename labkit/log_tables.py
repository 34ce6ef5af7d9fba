"""Tool logs read as datasets: every table of an nccl-tests, nvbandwidth, bandwidthTest or p2pBandwidthLatencyTest
log (labkit.logs), with its collective, rank count and nodes settled from the log, the user or the numbers, and each
fact's origin; refused, naming what to give, where the log leaves a fact out or contradicts it."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from . import collectives
from . import logs as _logs
from .schema import (
    COLLECTIVE_OPS,
    META_FIELDS,
    NOT_STATED,
    SCHEMA_VERSION,
    Dataset,
    DatasetError,
    validate_frame,
    validate_meta,
)
from .units import format_bytes


def _op_from_file_name(path: Path) -> str | None:
    """nccl-tests binaries are <op>_perf: a log named all_reduce_perf*.log says its collective."""
    for op in sorted(COLLECTIVE_OPS, key=len, reverse=True):
        if path.name.lower().startswith(f"{op}_perf"):
            return op
    return None


#: The collective a notebook shows, for a log that does not name its own (notebooks 05 and 06 draw all-reduce).
KIND_OP = {"allreduce_sweep": "all_reduce"}
#: The kinds an nccl-tests table can be (labkit.logs.nccl_tests: all_reduce, or another collective).
NCCL_TESTS_KINDS = ("allreduce_sweep", "collective_sweep")
#: How a user gives what a log leaves out: flags on the command line, parameters in a notebook.
CLI, NOTEBOOK = "cli", "notebook"
_FORMAT_CHOICES = "|".join(_logs.FORMATS)


def _op_flag() -> str:
    return "--op " + "|".join(COLLECTIVE_OPS)


def log_datasets(path: str | os.PathLike, fmt: str = "auto", **kw) -> list[Dataset]:
    """Every table of a tool log (nccl-tests, nvbandwidth, bandwidthTest, p2pBandwidthLatencyTest) as
    Datasets, numbers as printed (see log_tables for `name`, `op`, `fill`, `system`, `source`, `kind`)."""
    tables, _ = log_tables(path, fmt, **kw)
    return [Dataset(n, checked, m, Path(path)) for n, _, checked, m in tables]


def _parse(path: Path, fmt: str, asker: str):
    if path.is_dir():
        raise DatasetError(f"{path}: a folder, not a log file; give one log file")
    if not path.exists():
        raise DatasetError(f"{path}: no such file")
    try:
        return _logs.parse_log(path, format=fmt)
    except _logs.LogFormatError as e:
        if fmt != "auto" or "output found" not in e.reason:
            raise DatasetError(str(e)) from None
        how = (
            f"name it: --format {_FORMAT_CHOICES}"
            if asker == CLI
            else f"import it naming the tool (`labkit ref import-log FILE --name NAME --format {_FORMAT_CHOICES}`) "
            "and give that NAME as reference="
        )
        raise DatasetError(f"{e}; if it is the output of one of these tools, {how}") from None


def numbers_hint(part) -> str:
    """What busbw/algbw says about the collective of a table that does not name it."""
    fits = {o: _logs.checks.rank_count(o, part.frame, collectives.bus_factor) for o in ("all_reduce", "all_gather")}
    ar, ag = fits["all_reduce"], fits["all_gather"]
    if ar.ratio is None:
        return ""
    if ar.status == "derived" and ar.world_size > 2:
        return f"busbw/algbw = {ar.ratio:.4g} > 1: only all_reduce has a bus factor above 1, for {ar.world_size} ranks"
    if ag.status in ("derived", "ambiguous") and ar.status == "inconsistent":
        n = f"{ag.world_size} ranks" if ag.world_size else "ambiguous rank count"
        return f"busbw/algbw = {ag.ratio:.4g} < 1 fits all_gather, reduce_scatter or alltoall, {n}"
    if ar.status == "derived" and ar.world_size == 2:
        return "busbw = algbw fits broadcast, reduce, sendrecv, or all_reduce on 2 ranks"
    return ""


def _hint(part) -> str:
    h = numbers_hint(part)
    return f"; {h}" if h else ""


def _settle_nccl(part, op, file_op, assume_op, cols: dict, path: Path, asker: str):
    """(table with op, world_size, nodes and config settled or None if it is not of `assume_op`, its facts,
    its warnings, what is still missing). Refuses --op / --fill values the log or its numbers contradict."""
    where = f"{path}, lines {part.lines[0]}-{part.lines[1]}"
    facts, warnings, missing = {}, [], []
    stated_op = None if "op" in part.missing else str(part.frame["op"].iloc[0])
    if stated_op:
        facts["op"] = "stated in the log"
        if op and op != stated_op:
            raise DatasetError(f"{where}: the log states {stated_op}; --op {op} contradicts it (leave --op out)")
    else:
        chosen, how = next(
            (
                (o, h)
                for o, h in (
                    (op, "given: --op"),
                    (file_op, "from the file name"),
                    (assume_op, "assumed: the notebook shows it"),
                )
                if o
            ),
            (None, None),
        )
        if chosen is None:
            missing.append((part, "op", numbers_hint(part)))
            return part, facts, warnings, missing
        rc = _logs.checks.rank_count(chosen, part.frame, collectives.bus_factor)
        if rc.status == "inconsistent":
            if how.startswith("assumed"):
                return None, facts, [f"{where}: {rc.describe()}"], missing
            if how.startswith("given"):
                raise DatasetError(f"{where}: --op {chosen} contradicts the numbers: {rc.describe()}{_hint(part)}")
        part = part.filled(op=chosen)
        facts["op"] = f"{how} ({chosen})"
    op_now = str(part.frame["op"].iloc[0])
    rc = _logs.checks.rank_count(op_now, part.frame, collectives.bus_factor)
    printed = part.meta.get("gpu_count") if part.meta.get("rank_lines_complete") else None
    given = cols.pop("world_size", None)
    if given is not None:
        if (rc.status == "derived" and given != rc.world_size) or (
            rc.status == "ambiguous" and given not in rc.candidates
        ):
            raise DatasetError(
                f"{where}: --fill world_size={given} contradicts the numbers: {rc.describe()} "
                f"(nccl-tests prints busbw = algbw × {collectives.BUS_FACTOR_WORDS.get(op_now, 'its bus factor')}); "
                "leave --fill world_size out"
            )
        part = part.filled(world_size=given)  # refuses a value the Rank lines contradict
        facts["world_size"] = f"given: --fill world_size={given}"
    elif printed:
        facts["world_size"] = f"stated in the log ({printed} Rank lines)"
        if rc.status == "derived" and rc.world_size != printed:
            warnings.append(f"the log lists {printed} ranks, but {rc.describe()}")
    elif rc.status == "derived":
        part = part.filled(world_size=rc.world_size)
        part.meta["gpu_count"] = rc.world_size
        facts["world_size"] = f"derived: {rc.describe()}"
    else:
        facts["world_size"] = f"{NOT_STATED} ({rc.describe()})"
    if rc.status == "inconsistent" and not facts["op"].startswith("assumed"):
        warnings.append(f"{rc.describe()}{_hint(part)}")
    if "nodes" in cols:
        part = part.filled(nodes=cols.pop("nodes"))
        facts["nodes"] = "given: --fill nodes"
    elif printed:
        hosts = len(part.meta.get("hosts") or [])
        facts["nodes"] = f"stated in the log ({hosts} distinct host{'s' * (hosts != 1)} in the Rank lines)"
    else:
        facts["nodes"] = NOT_STATED
    if "config" in part.missing:
        cols.setdefault("config", part.meta.get("method") or "as logged")  # a label: the command it ran
    return part, facts, warnings, missing


def _repeats_message(where: str, rep: dict, asker: str) -> str:
    example = ", ".join(format_bytes(s) for s in rep["examples"])
    return (
        f"{where}: {rep['sizes']} sizes are printed more than once ({rep['extra_rows']} repeated rows; e.g. {example}, "
        f"up to {rep['most_repeats']} times). nccl-tests prints each size once per run, so these are runs pasted "
        "together without their own headers, or repeated lines; labkit does not choose between repeated measurements "
        "and refuses the table: split the file so each run keeps its header and '# Avg bus bandwidth' line"
        + (
            " (each run then imports as its own dataset)"
            if asker == CLI
            else " (a folder of such files works as reference=)"
        )
        + ", or delete the repeats"
    )


def log_tables(
    path: str | os.PathLike,
    fmt: str = "auto",
    *,
    name: str | None = None,
    op: str | None = None,
    fill: dict | None = None,
    system: str | None = None,
    source: str | None = None,
    kind: str | None = None,
    asker: str = CLI,
) -> tuple[list[tuple], tuple]:
    """([(name, frame as printed, frame validated, meta) for every table], lines skipped) of a tool log, read once
    by labkit.logs.

    The collective of an nccl-tests table that does not name it comes from `op`, else from a file name like
    all_reduce_perf.log, else (a notebook asking for `kind`) from KIND_OP — and a table whose numbers fit no rank
    count of that collective is then left out. The rank count comes from the Rank lines, else `fill`, else what
    busbw/algbw fixes (labkit.logs.checks.rank_count, labelled 'derived'); a value the log or its numbers contradict
    is refused. World size and nodes that nothing states stay empty and the meta says NOT_STATED. A table with sizes
    printed twice is refused; one cut short is kept, marked `meta['completeness']['status'] == 'incomplete'`. Every
    fact still missing is reported at once. Names: NAME (default the file's stem) for one table; for several,
    NAME_<collective> (NAME_<collective>_1, _2, ... when a collective repeats), NAME_1, NAME_2, ... for other tools.
    """
    path = Path(path)
    parsed = _parse(path, fmt, asker)
    if kind is not None and kind not in NCCL_TESTS_KINDS:  # a notebook asking for copies: no collective to settle
        parsed = dataclasses.replace(parsed, datasets=tuple(p for p in parsed if p.tool != "nccl-tests"))
    fill = dict(fill or {})
    op = op or fill.pop("op", None)
    base = name or "".join(c if c.isalnum() else "_" for c in path.stem.lower()).strip("_") or "log"
    settled = _settle_all(parsed, path, fill, op, KIND_OP.get(kind), asker)
    ops = [str(p.frame["op"].iloc[0]) if p.tool == "nccl-tests" else None for p, _, _ in settled]
    out = []
    for i, ((part, facts, warnings), op_i) in enumerate(zip(settled, ops), start=1):
        if len(settled) == 1:
            ds_name = base
        elif op_i is None:
            ds_name = f"{base}_{i}"
        else:
            same = [j for j, o in enumerate(ops) if o == op_i]
            ds_name = f"{base}_{op_i}" + (f"_{same.index(i - 1) + 1}" if len(same) > 1 else "")
        out.append(_table(part, facts, warnings, ds_name, path, system, source))
    return out, parsed.skipped


def _settle_all(parsed, path: Path, fill: dict, op, assume_op, asker: str) -> list[tuple]:
    """[(table, facts, warnings)] for every table of the log with nothing missing; refuses copies, repeated sizes
    and what is still missing, all at once."""
    file_op = _op_from_file_name(path)
    refused, copies = _copies(parsed, path)
    settled, missing = [], []
    for part in parsed:
        cols, facts, warnings = dict(fill or {}), {}, []
        if part.lines in copies:
            continue  # refused below; a file of thousands of copies is not read thousands of times
        if part.tool == "nccl-tests":
            part, facts, warnings, lacking = _settle_nccl(part, op, file_op, assume_op, cols, path, asker)
            missing += lacking
            if part is None or lacking:
                continue
            rep = part.meta.get("repeated_sizes") or {}
            if rep.get("sizes"):
                refused.append(_repeats_message(f"{path}, lines {part.lines[0]}-{part.lines[1]}", rep, asker))
                continue
        part = part.filled(**{k: v for k, v in cols.items() if k in part.missing or k not in part.frame})
        lacking = [c for c in part.missing if not (part.tool == "nccl-tests" and c in ("world_size", "nodes"))]
        if lacking:
            missing += [(part, c, "") for c in lacking]
            continue
        settled.append((part, facts, warnings))
    if refused:
        raise DatasetError("; ".join(refused))
    if missing:
        raise DatasetError(_missing_message(path, missing, asker))
    return settled


def _table(part, facts: dict, warnings: list, ds_name: str, path: Path, system, source) -> tuple:
    """(name, frame as printed, frame validated, meta) of one settled table; what the log leaves out is NOT_STATED."""
    import pandas as pd

    if part.meta.get("title", "").startswith("nccl-tests (collective not named)") and part.kind:
        part.meta["title"] = part.meta["title"].replace(
            "collective not named", f"{part.frame['op'].iloc[0]}, named at import"
        )
    meta = part.dataset_meta(
        system=system,
        source=source or f"{part.tool} log {path.name}",
        source_file=str(path),
        quality="B",
    )
    meta = {"schema_version": SCHEMA_VERSION, **meta, "name": ds_name}
    for field in META_FIELDS:
        if meta.get(field) in (None, ""):
            meta[field] = NOT_STATED
    log = meta.get("log", {})
    for key in ("completeness", "repeated_sizes"):
        if key in log:
            meta[key] = log.pop(key)
    completeness = meta.get("completeness") or {}
    if completeness.get("status") == "incomplete":
        warnings = [f"incomplete: missing {'; '.join(completeness['missing'])}"] + warnings
    if completeness.get("above_stated_max"):
        warnings.append(completeness["above_stated_max"])
    meta["facts"], meta["warnings"] = facts, warnings
    frame = pd.DataFrame(part.frame).reset_index(drop=True)
    validate_meta(meta, path)
    return ds_name, frame, validate_frame(frame.copy(), meta, path), meta


def _copies(parsed, path: Path) -> tuple[list[str], set]:
    """(messages, lines of the copies) for nccl-tests runs that repeat an earlier run digit for digit: pasted copies
    (two measurements never agree to the last printed digit in every row), refused like repeated sizes."""
    first, copies = {}, {}
    for part in parsed:
        if part.tool != "nccl-tests":
            continue
        key = str(part.frame.to_numpy().tolist())
        if key in first:
            copies.setdefault(first[key].lines, []).append(part.lines)
        first.setdefault(key, part)
    said = []
    for (a, b), repeats in copies.items():
        where = ", ".join(f"{c}-{d}" for c, d in repeats[:3]) + (
            f", ... ({len(repeats)} in all)" if len(repeats) > 3 else ""
        )
        said.append(
            f"{path}: lines {where} repeat the run at lines {a}-{b} digit for digit — pasted copies of one run, not "
            "more measurements; delete the copies"
        )
    return said, {lines for repeats in copies.values() for lines in repeats}


def _missing_message(path: Path, missing: list, asker: str) -> str:
    """Every fact the log's tables leave out, once, with where and how to give it."""
    by_fact: dict[str, list] = {}
    for part, fact, hint in missing:
        by_fact.setdefault("op" if fact in ("kind", "op") else fact, []).append((part, hint))
    said = []
    for fact, parts in by_fact.items():
        where = ", ".join(f"{p.lines[0]}-{p.lines[1]}" + (f" ({h})" if h else "") for p, h in parts)
        if fact == "op":
            how = (
                f"give it: {_op_flag()}"
                if asker == CLI
                else "rename the file after it as nccl-tests names its binaries (e.g. all_gather_perf.log), or import "
                f"it with its collective (`labkit ref import-log FILE --name NAME {_op_flag()}`) and give NAME"
            )
            said.append(f"the log does not name its collective (lines {where}); {how}")
        else:
            how = f"give it: --fill {fact}=VALUE" if asker == CLI else f"import it with `--fill {fact}=VALUE`"
            said.append(f"the log does not state {fact} (lines {where}); {how}")
    return f"{path}: " + "; ".join(said)
