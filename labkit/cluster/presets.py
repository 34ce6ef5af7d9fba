"""Named systems (one namespace): the node types of labkit's multi-node and NVLS/SHARP datasets, each with
its sources. Line rates come from `labkit.specs`; NCCL's view of them from `labkit.cluster.nccl`."""

from __future__ import annotations

import csv
import difflib
import io
from importlib import resources

from .system import System, system_from_facts

#: The table, one system a row: presets.csv beside this module (shipped in the wheel as package data). Columns:
#: key, GPUs per node, GPU, NICs per node, GB/s per NIC per direction, features (space-separated: "nvls" NVLink
#: SHARP, "sharp" InfiniBand SHARP / CollNet, "arm" an Arm host CPU), name, source. Every row cites where its facts
#: are stated (`System.source`).
_TABLE_FILE = "presets.csv"
_COLUMNS = ["key", "gpus_per_node", "gpu", "nics_per_node", "nic_GBps_per_direction", "features", "name", "source"]
_FEATURES = {"nvls", "sharp", "arm"}


def _system(row: dict[str, str], where: str) -> System:
    """One row of presets.csv as a System; a malformed row raises ValueError naming the file and line."""
    features = set(row["features"].split())
    if features - _FEATURES:
        raise ValueError(f"{where}: unknown features {sorted(features - _FEATURES)}; known: {sorted(_FEATURES)}")
    if not row["source"].strip():
        raise ValueError(f"{where}: source is empty; every preset cites where its facts are stated")
    try:
        gpus, nics, nic_GBps = (
            int(row["gpus_per_node"]),
            int(row["nics_per_node"]),
            float(row["nic_GBps_per_direction"]),
        )
    except ValueError as err:
        raise ValueError(
            f"{where}: {err}; gpus_per_node and nics_per_node are whole numbers, nic_GBps a number"
        ) from None
    return system_from_facts(
        gpus_per_node=gpus,
        gpu=row["gpu"],
        nics_per_node=nics,
        nic_GBps=nic_GBps,
        nvls="nvls" in features,
        sharp="sharp" in features,
        cpu="arm" if "arm" in features else "intel",
        name=row["name"],
        source=row["source"],
    )


def _load(text: str, path: str = f"labkit/cluster/{_TABLE_FILE}") -> dict[str, System]:
    """key -> System from the text of presets.csv; a wrong header, a short row or a repeated key is a ValueError."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames != _COLUMNS:
        raise ValueError(f"{path}: header {reader.fieldnames} is not {_COLUMNS}")
    systems: dict[str, System] = {}
    for row in reader:
        where = f"{path} line {reader.line_num}"
        if None in row.values() or None in row:
            raise ValueError(f"{where}: expected {len(_COLUMNS)} fields ({', '.join(_COLUMNS)})")
        if row["key"] in systems:
            raise ValueError(f"{where}: system {row['key']!r} appears twice")
        systems[row["key"]] = _system(row, where)
    return systems


#: name -> System.
PRESETS: dict[str, System] = _load(resources.files(__package__).joinpath(_TABLE_FILE).read_text(encoding="utf-8"))


def preset(name: str) -> System:
    """The named system; an unknown name gets the three closest names."""
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name).lower().replace(" ", "_"), list(PRESETS), n=3, cutoff=0.0)
        raise KeyError(f"unknown system {name!r}; closest: {', '.join(close)} (all: labkit.cluster.PRESETS)")
    return PRESETS[name]
