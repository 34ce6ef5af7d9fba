"""Re-derive a shipped dataset from its raw log (for tests/test_data_derivation.py and the log tests):
the raw file in data/raw/, read by `labkit.logs.parse_log`, and a recipe — data, not code — saying
which of the file's tables make the dataset and what the log does not print (a configuration label,
a world size the transcriber took from the page's prose).

Recipes live in data/raw/recipes.json, one per derived dataset:

    {"dataset": "<name>", "raw": "<file in data/raw>", "format": "nccl-tests",
     "parts": [{"index": 0, "fill": {"config": "default", "world_size": 8, "nodes": 1}}],
     "match": "table"}

`index` counts the tables of `format` in the file, in order. `fill` only fills cells the log left
empty (LogDataset.filled refuses to overwrite a printed value). `match` is "table" (the committed
CSV must equal the derived rows, column by column, as text) or "values" (a `point` dataset whose
labels are prose: the printed values and units must match, in order).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from labkit.logs import parse_log

RECIPES_FILE = "recipes.json"
#: The last line of the `#` source header the raw files carry (see data/raw/README.md).
_HEADER_END = re.compile(r"^#\s*RAW DATA\b")


def log_text(path: str | os.PathLike) -> str:
    """A raw file's text with its `#` source header blanked out (line numbers stay as in the file)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    end = next((i for i, ln in enumerate(lines) if _HEADER_END.match(ln)), None)
    if end is None:
        return "\n".join(lines)
    if end + 1 < len(lines) and set(lines[end + 1].strip()) <= {"#", "="}:
        end += 1  # the '#=====' rule under the banner
    return "\n".join([""] * (end + 1) + lines[end + 1 :])


def load_recipes(raw_dir: str | os.PathLike) -> list[dict]:
    return json.loads((Path(raw_dir) / RECIPES_FILE).read_text(encoding="utf-8"))["recipes"]


def derive(recipe: dict, raw_dir: str | os.PathLike):
    """The dataset a recipe describes: (frame, [LogDataset parts])."""
    import pandas as pd

    parsed = parse_log(log_text(Path(raw_dir) / recipe["raw"]), format=recipe["format"])
    tables = list(parsed)
    parts = []
    for part in recipe["parts"]:
        if part["index"] >= len(tables):
            raise ValueError(
                f"{recipe['dataset']}: {recipe['raw']} has {len(tables)} {recipe['format']} tables, "
                f"no index {part['index']}"
            )
        ds = tables[part["index"]]
        if part.get("fill"):
            ds = ds.filled(**part["fill"])
        parts.append(ds)
    frame = pd.concat([p.frame for p in parts], ignore_index=True)
    return frame, parts


def as_text(frame) -> "object":
    """Every cell as the text a CSV holds ('' for empty), to compare digits as printed."""
    return frame.astype(object).where(frame.notna(), "").map(lambda v: "" if v is None else str(v))
