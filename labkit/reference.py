"""Reference datasets: load, validate, list and write recorded measurements with provenance.

A dataset is `<name>.csv` (tidy, units in column names) + `<name>.meta.json` (provenance);
data/README.md defines the format (labkit.schema: the kinds, the meta fields, `Dataset`, the checks). Files are
parsed as CSV and JSON only — never pickle or eval. Here: where datasets live, loading and listing them, what a
notebook's `reference=` selects, writing them, the shipped profiles, and `labkit ref import-log` (the log's tables
are read by labkit.log_tables).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from . import log_tables
from . import logs as _logs
from .fileio import atomic_write_text
from .schema import META_FIELDS, NOT_STATED, SCHEMA_VERSION, Dataset, DatasetError, validate_frame, validate_meta


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
            raise DatasetError(f"{d}: " + ("is a file, not a folder of datasets" if d.exists() else "no such folder"))
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
    hint = closest(name_or_path, list_datasets(folder))
    raise DatasetError(f"no dataset named {str(name_or_path)!r}; {hint} (see `labkit ref list`)")


#: How alike a name must be to be offered as "did you mean" (difflib's ratio, 0 to 1): difflib's own default.
#: Below it the offers are noise: 'nvidia' scores 0.25 against 'bandwidthtest_t4_aliyun_vm'.
CLOSE_ENOUGH = 0.6

#: Choices this few are all named when none is close (the notebooks, the dataset kinds).
NAME_ALL_UP_TO = 8


def closest(name, choices) -> str:
    """'did you mean: a, b, c?' — up to three close names (difflib), never a list of a long list's every name.

    When none is close: every choice of a short list; else the names that contain `name`, or a few of all.
    """
    import difflib

    choices, name = list(choices), str(name)
    best = difflib.get_close_matches(name, choices, n=3, cutoff=CLOSE_ENOUGH)
    if best or not choices:
        return f"did you mean: {', '.join(best)}?" if best else "there are none"
    if len(choices) <= NAME_ALL_UP_TO:
        return f"choose from: {', '.join(choices)}"
    within = [c for c in choices if name.lower() in c.lower()]
    if within:
        return f"{len(within)} name(s) contain {name!r}: {', '.join(within[:3])}{', ...' if len(within) > 3 else ''}"
    return f"none of the {len(choices)} names is close (e.g. {', '.join(choices[:3])})"


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
    out = [ds for ds in log_tables.log_datasets(path, kind=kind, asker=log_tables.NOTEBOOK) if ds.kind == kind]
    for ds in out:
        ds.meta["your_log"] = ds.name
    return out


def log_reference_note(reference: str | os.PathLike | None, kind: str) -> str | None:
    """Read a `reference=` that is a log (or a folder of logs) now, in a notebook's first cell, not when a late cell
    needs it: DatasetError saying what to change in the notebook, or a Markdown note of what the log gives (where
    each fact came from, what is missing from it). None for any other reference (a dataset or profile name).

    A log that does not name its collective is read as the one the notebook shows (log_tables.KIND_OP: all-reduce for
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
    want = log_tables.KIND_OP.get(kind, kind)
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
        + (
            str(d.frame["op"].iloc[0])
            if "op" not in d.missing
            else log_tables.numbers_hint(d) or "collective not named"
        )
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

    if Path(ds.path).suffix == ".csv":
        raw = pd.read_csv(ds.path, dtype=str)[column].fillna("")
    else:  # a tool log given as reference=: its values as parsed (the log's text is not a CSV)
        raw = ds.frame[column].map(lambda v: "" if pd.isna(v) else repr(float(v)))
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
    atomic_write_text(folder / f"{name}.csv", frame.to_csv(index=False))
    atomic_write_text(folder / f"{name}.meta.json", json.dumps(meta, indent=2, default=str) + "\n")
    return folder / f"{name}.csv"


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
    shown = ("schema_version", "name", "kind", "title", "quality", "provenance")  # on the first two lines
    for field in (f for f in META_FIELDS if f not in shown):
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


def _refuse_shipped_names(names, dest: Path) -> None:
    if dest.resolve() != data_dir().resolve():
        taken = [n for n in names if (data_dir() / f"{n}.meta.json").exists()]
        if taken:
            raise FileExistsError(f"{', '.join(taken)}: a shipped dataset has that name; choose another --name")


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
    tables, skipped = log_tables.log_tables(
        path, fmt, name=name, **kw
    )  # everything read and checked before anything is written
    names = [t[0] for t in tables]
    _refuse_shipped_names(names, dest)
    clash = [n for n in names if (dest / f"{n}.meta.json").exists()]
    if clash and not force:
        raise FileExistsError(f"{', '.join(clash)} already in {dest}; pass --force to replace")
    for table_name, frame, _, meta in tables:
        write_dataset(dest, table_name, frame, meta)  # the frame as printed: '0.00' stays '0.00'
    return names, skipped
