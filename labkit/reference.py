"""Reference datasets: load, validate, list and write recorded measurements with provenance.

A dataset is `<name>.csv` (tidy, units in column names) + `<name>.meta.json` (provenance);
data/README.md defines the format. Files are parsed as CSV and JSON only — never pickle or eval.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Iterable

from . import collectives
from . import logs as _logs
from .fileio import atomic_write_text
from .units import format_bytes

#: 2: kind collective_sweep (nccl-tests sweeps of every collective, with an `op` column) and an
#: optional `op` column on allreduce_sweep (only 'all_reduce'). Files of version 1 load unchanged.
SCHEMA_VERSION = 2

META_FIELDS = (
    "schema_version",
    "name",
    "kind",
    "title",
    "system",
    "gpu",
    "gpu_count",
    "nodes",
    "interconnect",
    "software",
    "date",
    "method",
    "source",
    "source_file",
    "caveats",
    "quality",
    "bandwidth_direction",
    "provenance",
)
QUALITIES = ("A", "B", "C")
PROVENANCES = ("recorded", "measured")
BANDWIDTH_DIRECTIONS = ("unidirectional", "bidirectional", "aggregate", "mixed", "none")

#: Collectives nccl-tests measures (`<op>_perf` binaries) and labkit.collectives names.
COLLECTIVE_OPS = _logs.nccl_tests.OPS
_SWEEP_NUMERIC = ("nbytes", "world_size", "nodes", "count", "time_us", "algbw_GBps", "busbw_GBps")

# kind -> (required columns, numeric columns, allowed values for categorical columns)
KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "copy_sweep": (
        ("direction", "memory", "nbytes", "bandwidth_GBps"),
        ("nbytes", "bandwidth_GBps", "time_s"),
        {"direction": ("h2d", "d2h", "d2d", "host"), "memory": ("pinned", "pageable", "device", "host")},
    ),
    "p2p_matrix": (
        ("matrix", "p2p", "src", "dst"),
        ("src", "dst", "bandwidth_GBps", "latency_us"),
        {"matrix": ("bandwidth_uni", "bandwidth_bi", "latency_gpu", "latency_cpu"), "p2p": ("enabled", "disabled")},
    ),
    "allreduce_sweep": (("nbytes", "world_size", "nodes", "config"), _SWEEP_NUMERIC, {"op": ("all_reduce",)}),
    "collective_sweep": (("op", "nbytes", "world_size", "nodes", "config"), _SWEEP_NUMERIC, {"op": COLLECTIVE_OPS}),
    "latency_table": (("op", "world_size", "config", "time_us"), ("world_size", "nbytes", "time_us"), {}),
    "point": (("quantity", "value", "unit", "bandwidth_direction"), ("value",), {}),
    "overlap_run": (("scenario", "event", "stream", "start_s", "end_s"), ("start_s", "end_s"), {}),
}


class DatasetError(ValueError):
    """A dataset or profile that cannot be loaded; the message names the file and the field."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    frame: "object"  # pandas.DataFrame
    meta: dict
    path: Path  # the CSV file

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    @property
    def label(self) -> str:
        """Legend text: what the numbers are and where they come from."""
        how = "measured here" if self.meta.get("provenance") == "measured" else "recorded"
        return f"{how}: {self.meta['title']} — {short_source(self.meta['source'])}"

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, kind={self.kind!r}, rows={len(self.frame)}, quality={self.meta.get('quality')!r})"
        )


def short_source(source: str) -> str:
    """A compact form of a source URL for legends (github.com/owner/repo...)."""
    s = source.replace("https://", "").replace("http://", "")
    parts = s.split("/")
    if parts and parts[0] == "github.com" and len(parts) >= 3:
        return "/".join(parts[:3])
    return s if len(s) <= 60 else s[:57] + "..."


def data_dir() -> Path:
    """The shipped reference data: inside the wheel (labkit/_data) or the source tree's data/."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_data", here.parent / "data"):
        if candidate.is_dir():
            return candidate
    raise DatasetError(f"no reference data found next to {here}: reinstall labkit (pip install .)")


def user_data_dir() -> Path:
    """Where imported datasets and profiles go: $LABKIT_DATA, else the platform's per-user data folder
    (platformdirs: ~/.local/share/labkit on Linux). Never the installed package. Notebooks search it
    after the shipped data; a user dataset may not take a shipped dataset's name (refused at import)."""
    env = os.environ.get("LABKIT_DATA")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("labkit", appauthor=False))


def _search_dirs(folder: str | os.PathLike | None) -> list[Path]:
    if folder is not None:
        return [Path(folder)]
    user = user_data_dir()
    return [data_dir()] + ([user] if user.is_dir() and user.resolve() != data_dir().resolve() else [])


def list_datasets(folder: str | os.PathLike | None = None, kind: str | None = None) -> list[str]:
    """Names of the datasets in `folder` (default: the shipped data, then the user's: user_data_dir()),
    optionally of one kind. A name in both is the shipped one."""
    names = []
    for d in _search_dirs(folder):
        if not d.is_dir():
            raise DatasetError(f"{d}: no such folder")
        for meta_path in sorted(d.glob("*.meta.json")):
            name = meta_path.name[: -len(".meta.json")]
            if kind is not None:
                try:
                    if json.loads(meta_path.read_text()).get("kind") != kind:
                        continue
                except json.JSONDecodeError as e:
                    raise DatasetError(f"{meta_path}: not valid JSON ({e})") from None
            if name not in names:
                names.append(name)
    return names


def _resolve(name_or_path: str | os.PathLike, folder) -> tuple[Path, Path]:
    p = Path(name_or_path)
    if p.suffix == ".csv" or str(p).endswith(".meta.json"):
        stem = p.name[: -len(".meta.json")] if str(p).endswith(".meta.json") else p.stem
        return p.parent / f"{stem}.csv", p.parent / f"{stem}.meta.json"
    for d in _search_dirs(folder):
        csv, meta = d / f"{name_or_path}.csv", d / f"{name_or_path}.meta.json"
        if meta.exists() or csv.exists():
            return csv, meta
    import difflib  # the three closest names, not a dump of every dataset

    near = difflib.get_close_matches(str(name_or_path), list_datasets(folder), n=3, cutoff=0.0)
    hint = f"did you mean: {', '.join(near)}?" if near else "there are none"
    raise DatasetError(f"no dataset named {str(name_or_path)!r}; {hint} (see `labkit ref list`)")


def validate_meta(meta: dict, where: Path) -> None:
    if not isinstance(meta, dict):
        raise DatasetError(f"{where}: metadata must be a JSON object")
    version = meta.get("schema_version")
    if not isinstance(version, int):
        raise DatasetError(f"{where}: field 'schema_version' is missing or not an integer")
    if version > SCHEMA_VERSION:
        raise DatasetError(
            f"{where}: field 'schema_version' is {version}, written by a newer labkit "
            f"(this one reads up to {SCHEMA_VERSION}); upgrade labkit to read it"
        )
    for field in META_FIELDS:
        if field not in meta or meta[field] in (None, ""):
            raise DatasetError(f"{where}: required field {field!r} is missing or empty")
    if meta["kind"] not in KINDS:
        raise DatasetError(f"{where}: field 'kind' is {meta['kind']!r}; expected one of {sorted(KINDS)}")
    if meta["quality"] not in QUALITIES:
        raise DatasetError(f"{where}: field 'quality' is {meta['quality']!r}; expected one of {QUALITIES}")
    if meta["provenance"] not in PROVENANCES:
        raise DatasetError(f"{where}: field 'provenance' is {meta['provenance']!r}; expected one of {PROVENANCES}")
    if meta["bandwidth_direction"] not in BANDWIDTH_DIRECTIONS:
        raise DatasetError(
            f"{where}: field 'bandwidth_direction' is {meta['bandwidth_direction']!r}; "
            f"expected one of {BANDWIDTH_DIRECTIONS}"
        )


#: Sweep columns an imported log may leave empty, each with the meta field that must then read NOT_STATED.
_MAY_BE_UNSTATED = {"world_size": "gpu_count", "nodes": "nodes"}


def validate_frame(frame, meta: dict, where: Path) -> "object":
    import pandas as pd

    required, numeric, allowed = KINDS[meta["kind"]]
    if len(frame) == 0:
        raise DatasetError(f"{where}: no rows")
    for col in required:
        if col not in frame.columns:
            raise DatasetError(f"{where}: required column {col!r} is missing (kind {meta['kind']!r})")
        if frame[col].isna().all() and meta.get(_MAY_BE_UNSTATED.get(col, "")) == NOT_STATED:
            continue  # a log that does not state its rank or node count (the meta says so): empty, never guessed
        if frame[col].isna().any():
            row = int(frame[col].isna().to_numpy().nonzero()[0][0]) + 2  # +1 header, +1 one-based
            raise DatasetError(f"{where}: column {col!r} is empty on line {row}")
    for col in numeric:
        if col in frame.columns:
            try:
                frame[col] = pd.to_numeric(frame[col], errors="raise")
            except (ValueError, TypeError) as e:
                raise DatasetError(f"{where}: column {col!r} holds a value that is not a number ({e})") from None
    for col, values in allowed.items():
        if col not in frame.columns:  # an optional categorical column (allreduce_sweep's op)
            continue
        bad = set(frame[col].dropna().unique()) - set(values)
        if bad:
            raise DatasetError(f"{where}: column {col!r} has {sorted(bad)}; expected one of {values}")
    for col in ("nbytes", "bandwidth_GBps", "time_s", "time_us", "algbw_GBps", "busbw_GBps", "latency_us"):
        if col in frame.columns and (frame[col].dropna() < 0).any():
            raise DatasetError(f"{where}: column {col!r} has a negative value")
    if meta["bandwidth_direction"] == "mixed" and "bandwidth_direction" not in frame.columns:
        raise DatasetError(
            f"{where}: meta says bandwidth_direction 'mixed' but the CSV has no 'bandwidth_direction' column"
        )
    return frame


def load(name: str | os.PathLike, folder: str | os.PathLike | None = None) -> Dataset:
    """Load and validate a dataset by name (shipped data or `folder`) or by path to its CSV."""
    import pandas as pd

    csv, meta_path = _resolve(name, folder)
    if not meta_path.exists():
        raise DatasetError(f"{meta_path}: metadata file is missing")
    if not csv.exists():
        raise DatasetError(f"{csv}: data file is missing")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{meta_path}: not valid JSON ({e})") from None
    validate_meta(meta, meta_path)
    stem = csv.stem
    if meta["name"] != stem:
        raise DatasetError(f"{meta_path}: field 'name' is {meta['name']!r} but the file is {stem!r}")
    try:
        frame = pd.read_csv(csv, keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise DatasetError(f"{csv}: not a readable CSV ({e})") from None
    frame = validate_frame(frame, meta, csv)
    return Dataset(stem, frame, meta, csv)


def load_all(folder: str | os.PathLike | None = None, kind: str | None = None) -> list[Dataset]:
    return [load(n, folder) for n in list_datasets(folder, kind)]


def resolve_reference(reference: str | os.PathLike | None, kind: str) -> list[Dataset]:
    """The datasets a notebook's `reference=` parameter selects, for one kind.

    None → every shipped dataset of that kind; a folder (a profile from `labkit record`) or the
    name of a profile shipped in data/profiles/ → its datasets of that kind first, then the shipped
    ones; a dataset name → that dataset, which must be of that kind.
    """
    if reference is None:
        return load_all(None, kind)
    own, folder = _own_datasets(reference, kind)
    return own + load_all(None, kind) if folder else own


def _own_datasets(reference: str | os.PathLike, kind: str) -> tuple[list[Dataset], bool]:
    """(the datasets of `kind` that `reference` itself holds, whether it is a profile folder)."""
    p = profile_path(reference) or Path(reference)
    if p.is_dir() and not (p / "profile.json").exists() and not list(p.glob("*.meta.json")):
        logs = [f for f in sorted(p.iterdir()) if f.is_file() and not f.name.startswith(".")]
        if not logs:
            raise DatasetError(f"{p}: not a labkit profile folder (no profile.json and no datasets) and no logs")
        return [ds for f in logs for ds in _your_log(f, kind)], True
    if _is_log_file(p):
        return _your_log(p, kind), True
    if p.is_dir():
        check_profile(p)
        return load_all(p, kind), True
    ds = load(reference)
    if ds.kind != kind:
        raise DatasetError(f"dataset {ds.name!r} is of kind {ds.kind!r}, not {kind!r}")
    if "facts" in ds.meta and (data_dir() / f"{ds.name}.meta.json") != ds.path.with_suffix(".meta.json"):
        ds.meta["your_log"] = ds.name  # a log the user imported (`labkit ref import-log`), given by its name
    return [ds], False


def _is_log_file(p: Path) -> bool:
    return p.is_file() and p.suffix != ".csv" and not p.name.endswith(".meta.json")


def _your_log(path: Path, kind: str) -> list[Dataset]:
    """The tables of `kind` in a log given as `reference=`, marked as the user's own (`meta['your_log']`)."""
    out = [ds for ds in log_datasets(path, kind=kind, asker=_NOTEBOOK) if ds.kind == kind]
    for ds in out:
        ds.meta["your_log"] = ds.name
    return out


def check_reference(reference: str | os.PathLike | None, kind: str) -> str | None:
    """Read a `reference=` that is a log (or a folder of logs) now, in a notebook's first cell, not when a late cell
    needs it: DatasetError saying what to change in the notebook, or a Markdown note of what the log gives (where
    each fact came from, what is missing from it). None for any other reference (a dataset or profile name).

    A log that does not name its collective is read as the one the notebook shows (KIND_OP: all-reduce for
    `allreduce_sweep`), unless its numbers fit no rank count of that collective.
    """
    if reference is None:
        return None
    p = profile_path(reference) or Path(reference)
    is_folder_of_logs = p.is_dir() and not (p / PROFILE_FILE).exists() and not list(p.glob("*.meta.json"))
    if not p.exists() and (p.suffix or os.sep in str(reference)) and not (_search_hit(str(reference))):
        raise DatasetError(
            f"reference={str(reference)!r}: no such file or folder (looked in {Path.cwd()}, the notebook's folder); "
            "give the log's path from there, or an absolute path"
        )
    if not (_is_log_file(p) or is_folder_of_logs):
        return None
    want = KIND_OP.get(kind, kind)
    try:
        own, _ = _own_datasets(p, kind)
    except (DatasetError, _logs.LogFormatError) as e:
        raise DatasetError(f"reference={str(reference)!r}: {e}") from None
    if not own:
        raise DatasetError(
            f"reference={str(reference)!r} holds no {want} table this notebook can draw (it shows {want}"
            f"{_what_it_holds(p)}); "
            f"set reference= to a log of {want} (nccl-tests {want}_perf), or to None for the recorded systems"
        )
    said = []
    for ds in own:
        facts = ds.meta.get("facts") or {}
        bits = [f"{k}: {v}" for k, v in facts.items()] + [f"**{w}**" for w in ds.meta.get("warnings") or []]
        said.append(f"- your log `{ds.name}` ({len(ds.frame)} rows): " + "; ".join(bits))
    return f"Your log `{p.name}`, read now so nothing fails later (this notebook shows {want}):\n" + "\n".join(said)


def _what_it_holds(p: Path) -> str:
    """'; the log holds: ...' for a log file whose tables are of another collective (what it states, or what its
    busbw/algbw fits)."""
    if not p.is_file():
        return ""
    try:
        parts = [d for d in _logs.parse_log(p) if d.tool == "nccl-tests"]
    except _logs.LogFormatError:
        return ""
    said = [
        f"lines {d.lines[0]}-{d.lines[1]}: "
        + (str(d.frame["op"].iloc[0]) if "op" not in d.missing else _numbers_hint(d) or "collective not named")
        for d in parts
    ]
    return f"; the log holds {'; '.join(said)}" if said else ""


def _search_hit(name: str) -> bool:
    """Whether `name` is a dataset in the shipped or the user's data."""
    return any((d / f"{name}.meta.json").exists() for d in _search_dirs(None))


def select(reference: str | os.PathLike | None, kind: str, usable=None, needs: str = ""):
    """(datasets, note): what a notebook shows of `kind` for its `reference=` parameter.

    Like resolve_reference, but a notebook never stops on it: a dataset name of another kind, or a
    reference whose own datasets hold nothing `usable` (a predicate on that list; `needs` says what
    the part needs) gives the shipped datasets of `kind` instead — and `note` (Markdown) says so,
    naming the reference, so nothing shown is mistaken for the system asked for. `note` is None
    otherwise. `usable` judges the reference's own data only: the shipped datasets that follow a
    profile folder's own do not make it usable.
    """
    if reference is None:
        return load_all(None, kind), None
    try:
        own, folder = _own_datasets(reference, kind)
    except DatasetError as e:
        if "is of kind" not in str(e):
            raise
        return load_all(None, kind), (
            f"`reference={str(reference)!r}` is a dataset of kind "
            f"`{load(reference).kind}`; this part shows `{kind}` data, so the "
            f"shipped `{kind}` datasets are shown."
        )
    if usable is not None and not usable(own):
        return load_all(None, kind), (
            f"`reference={str(reference)!r}` holds no `{kind}` data this part can draw"
            + (f" ({needs})" if needs else "")
            + f", so the shipped `{kind}` datasets are shown."
        )
    return own + load_all(None, kind) if folder else own, None


# --------------------------------------------------------------------------- printed precision
#: A printed bandwidth with fewer significant digits than this is too coarse to give a time:
#: '0.4' GB/s could be anything from 0.35 to 0.45 (±12%); '0.001' could be ±50%.
MIN_SIGNIFICANT_DIGITS = 2


def significant_digits(text: str) -> int:
    """Significant digits of a number as printed ('0.004' → 1, '12.0' → 3, '1.5e-4' → 2)."""
    mantissa = str(text).strip().lower().split("e")[0].lstrip("+-").replace(".", "").lstrip("0")
    return len(mantissa)


def precise_rows(ds: Dataset, column: str = "bandwidth_GBps"):
    """The dataset's rows whose `column` was printed with at least MIN_SIGNIFICANT_DIGITS digits, and above 0.

    The CSE 554 console table prints 3 decimals, so a 2-byte copy shows '0.000' or '0.001' GB/s: a time
    or a ratio computed from such a value is rounding, not a measurement (and 0.0 carries no time at
    all). The raw CSV text is read to count the printed digits.
    """
    import pandas as pd

    raw = pd.read_csv(ds.path, dtype=str)[column].fillna("")
    f = ds.frame[raw.map(significant_digits).to_numpy() >= MIN_SIGNIFICANT_DIGITS]
    return f[f[column] > 0]


# --------------------------------------------------------------------------- writing
def write_dataset(folder: str | os.PathLike, name: str, frame, meta: dict) -> Path:
    """Validate and write `<name>.csv` + `<name>.meta.json` into folder, each file atomically."""
    folder = Path(folder)
    meta = {"schema_version": SCHEMA_VERSION, **meta, "name": name}
    validate_meta(meta, folder / f"{name}.meta.json")
    validate_frame(frame.copy(), meta, folder / f"{name}.csv")
    folder.mkdir(parents=True, exist_ok=True)
    _atomic_write(folder / f"{name}.csv", frame.to_csv(index=False))
    _atomic_write(folder / f"{name}.meta.json", json.dumps(meta, indent=2, default=str) + "\n")
    return folder / f"{name}.csv"


def _atomic_write(path: Path, text: str) -> None:
    atomic_write_text(path, text)  # labkit.fileio: atomic, and the mode the user's umask gives


PROFILE_FILE = "profile.json"


def check_profile(folder: str | os.PathLike) -> dict:
    """Read and check a profile folder's profile.json (schema version, environment)."""
    p = Path(folder) / PROFILE_FILE
    if not p.exists():
        return {}
    try:
        info = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise DatasetError(f"{p}: not valid JSON ({e})") from None
    v = info.get("schema_version")
    if not isinstance(v, int):
        raise DatasetError(f"{p}: field 'schema_version' is missing or not an integer")
    if v > SCHEMA_VERSION:
        raise DatasetError(f"{p}: field 'schema_version' is {v}, written by a newer labkit; upgrade labkit to read it")
    return info


def describe(ds: Dataset) -> str:
    """Plain-text summary for `labkit ref show`."""
    m = ds.meta
    lines = [f"{ds.name}  ({m['kind']}, quality {m['quality']}, {m['provenance']})", f"  {m['title']}"]
    for field in (
        "system",
        "gpu",
        "gpu_count",
        "nodes",
        "interconnect",
        "software",
        "date",
        "method",
        "bandwidth_direction",
        "source",
        "source_file",
        "caveats",
    ):
        lines.append(f"  {field:19s} {m[field]}")
    lines.append(f"  rows                {len(ds.frame)}; columns: {', '.join(map(str, ds.frame.columns))}")
    return "\n".join(lines)


def names_of(datasets: Iterable[Dataset]) -> list[str]:
    return [d.name for d in datasets]


# --------------------------------------------------------------------------- shipped profiles
#: Complete `labkit record` profiles shipped with labkit live in data/profiles/<name>/.
PROFILES_DIR = "profiles"


def list_profiles() -> list[str]:
    """Names of the recorded profiles shipped in data/profiles/ (each a `labkit record` folder)."""
    d = data_dir() / PROFILES_DIR
    return sorted(p.name for p in d.iterdir() if (p / PROFILE_FILE).exists()) if d.is_dir() else []


def profile_path(name: str | os.PathLike) -> Path | None:
    """The folder a `reference=` value names: an existing folder, or a shipped profile's name."""
    p = Path(name)
    if p.is_dir():
        return p
    shipped = data_dir() / PROFILES_DIR / str(name)
    return shipped if (shipped / PROFILE_FILE).exists() else None


def import_profile(
    profile: str | os.PathLike,
    prefix: str,
    *,
    only: Iterable[str] | None = None,
    system: str | None = None,
    caveat: str = "",
    dest: str | os.PathLike | None = None,
    force: bool = False,
) -> list[str]:
    """Copy datasets of a `labkit record` profile into the reference catalogue as recorded data.

    Each dataset keeps its numbers and environment untouched; only its name (`<prefix>_<name>`) and
    provenance change: `provenance` becomes "recorded" (it is no longer "measured here" for
    whoever loads it), `source` names the profile it came from, `caveat` is appended. Nothing is
    overwritten without `force`. Returns the new names.
    """
    import re

    src = Path(profile)
    info = check_profile(src)
    if not info:
        raise DatasetError(f"{src}: not a labkit profile folder (no {PROFILE_FILE})")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_]*", prefix):
        raise ValueError(f"prefix {prefix!r}: use lower-case letters, digits and '_' only")
    dest = Path(dest) if dest is not None else user_data_dir()
    names = list(only) if only else list_datasets(src)
    datasets = [load(n, src) for n in names]  # validates every one before anything is written
    targets = [f"{prefix}_{ds.name}" for ds in datasets]
    _refuse_shipped_names(targets, dest)
    clash = [t for t in targets if (dest / f"{t}.meta.json").exists()]
    if clash and not force:
        raise FileExistsError(f"{', '.join(clash)} already in {dest}; pass force=True (--force) to replace")
    for ds, target in zip(datasets, targets):
        meta = {k: v for k, v in ds.meta.items() if k != "name"}
        when = str(meta.get("date", ""))[:10]
        meta.update(
            provenance="recorded",
            system=system or meta["system"],
            source=f"labkit record {when}, profile {src.name}",
            source_file=f"labkit record: {PROFILES_DIR}/{src.name}/{ds.name}.csv"
            if src.parent.name == PROFILES_DIR
            else f"labkit record: {src.name}/{ds.name}.csv",
            caveats="; ".join(c for c in (meta.get("caveats", ""), caveat) if c),
        )
        write_dataset(dest, target, ds.frame, meta)
    return targets


# --------------------------------------------------------------------------- tool logs (labkit.logs)
#: What an imported log's meta says where the log itself is silent (never a guessed value).
NOT_STATED = "not stated in the log"


def _refuse_shipped_names(names, dest: Path) -> None:
    if dest.resolve() != data_dir().resolve():
        taken = [n for n in names if (data_dir() / f"{n}.meta.json").exists()]
        if taken:
            raise FileExistsError(f"{', '.join(taken)}: a shipped dataset has that name; choose another --name")


def _op_from_file_name(path: Path) -> str | None:
    """nccl-tests binaries are <op>_perf: a log named all_reduce_perf*.log says its collective."""
    for op in sorted(COLLECTIVE_OPS, key=len, reverse=True):
        if path.name.lower().startswith(f"{op}_perf"):
            return op
    return None


#: The collective a notebook shows, for a log that does not name its own (notebooks 05 and 06 draw all-reduce).
KIND_OP = {"allreduce_sweep": "all_reduce"}
#: How a user gives what a log leaves out: flags on the command line, parameters in a notebook.
_CLI, _NOTEBOOK = "cli", "notebook"
_FORMAT_CHOICES = "|".join(_logs.FORMATS)


#: The bus factors in words, for messages (the numbers come from labkit.collectives.bus_factor).
_FACTOR_WORDS = {"all_reduce": "2(n−1)/n", "all_gather": "(n−1)/n", "reduce_scatter": "(n−1)/n", "alltoall": "(n−1)/n"}


def _op_flag() -> str:
    return "--op " + "|".join(COLLECTIVE_OPS)


def log_datasets(path: str | os.PathLike, fmt: str = "auto", **kw) -> list[Dataset]:
    """Every table of a tool log (nccl-tests, nvbandwidth, bandwidthTest, p2pBandwidthLatencyTest) as
    Datasets, numbers as printed (see _log_tables for `name`, `op`, `fill`, `system`, `source`, `kind`)."""
    tables, _ = _log_tables(path, fmt, **kw)
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
            if asker == _CLI
            else f"import it naming the tool (`labkit ref import-log FILE --name NAME --format {_FORMAT_CHOICES}`) "
            "and give that NAME as reference="
        )
        raise DatasetError(f"{e}; if it is the output of one of these tools, {how}") from None


def _numbers_hint(part) -> str:
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
    h = _numbers_hint(part)
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
            missing.append((part, "op", _numbers_hint(part)))
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
                f"(nccl-tests prints busbw = algbw × {_FACTOR_WORDS.get(op_now, 'its bus factor')}); "
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
            if asker == _CLI
            else " (a folder of such files works as reference=)"
        )
        + ", or delete the repeats"
    )


def _log_tables(
    path: str | os.PathLike,
    fmt: str = "auto",
    *,
    name: str | None = None,
    op: str | None = None,
    fill: dict | None = None,
    system: str | None = None,
    source: str | None = None,
    kind: str | None = None,
    asker: str = _CLI,
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
    import pandas as pd

    path = Path(path)
    parsed = _parse(path, fmt, asker)
    fill = dict(fill or {})
    op = op or fill.pop("op", None)
    file_op = _op_from_file_name(path)
    assume_op = KIND_OP.get(kind)
    base = name or "".join(c if c.isalnum() else "_" for c in path.stem.lower()).strip("_") or "log"
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
        out.append((ds_name, frame, validate_frame(frame.copy(), meta, path), meta))
    return out, parsed.skipped


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
                if asker == _CLI
                else "rename the file after it as nccl-tests names its binaries (e.g. all_gather_perf.log), or import "
                f"it with its collective (`labkit ref import-log FILE --name NAME {_op_flag()}`) and give NAME"
            )
            said.append(f"the log does not name its collective (lines {where}); {how}")
        else:
            how = f"give it: --fill {fact}=VALUE" if asker == _CLI else f"import it with `--fill {fact}=VALUE`"
            said.append(f"the log does not state {fact} (lines {where}); {how}")
    return f"{path}: " + "; ".join(said)


def import_summary(ds: Dataset, dest) -> str:
    """What `labkit ref import-log` prints for one imported dataset: kind and rows, then where each fact came
    from (stated, derived, given, not stated) and what is wrong with the log (incomplete, contradictions)."""
    lines = [f"imported {ds.name}: {ds.kind}, {len(ds.frame)} rows -> {dest}"]
    for fact, how in (ds.meta.get("facts") or {}).items():
        lines.append(f"  {fact}: {how}" + (f" (record it with --fill {fact}=N)" if how == NOT_STATED else ""))
    lines += [f"  warning: {w}" for w in ds.meta.get("warnings") or []]
    return "\n".join(lines)


def import_log(
    path: str | os.PathLike,
    name: str,
    fmt: str = "auto",
    *,
    out: str | os.PathLike | None = None,
    force: bool = False,
    **kw,
) -> tuple[list[str], tuple]:
    """`labkit ref import-log`: write a log's datasets as NAME.csv + NAME.meta.json into `out` (default
    user_data_dir()); returns (names written, what the log reader skipped: (line, text, why))."""
    import re

    if not re.fullmatch(r"[a-z0-9][a-z0-9_]*", name):
        raise ValueError(f"--name {name!r}: use lower-case letters, digits and '_' only")
    dest = Path(out) if out is not None else user_data_dir()
    tables, skipped = _log_tables(path, fmt, name=name, **kw)  # everything read and checked before anything is written
    names = [t[0] for t in tables]
    _refuse_shipped_names(names, dest)
    clash = [n for n in names if (dest / f"{n}.meta.json").exists()]
    if clash and not force:
        raise FileExistsError(f"{', '.join(clash)} already in {dest}; pass --force to replace")
    for table_name, frame, _, meta in tables:
        write_dataset(dest, table_name, frame, meta)  # the frame as printed: '0.00' stays '0.00'
    return names, skipped
