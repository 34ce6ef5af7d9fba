"""The shipped data are derived, not transcribed: every dataset whose source is a tool log is
re-derived from its raw log in data/raw/ by labkit.logs and must equal the committed CSV, cell by
cell as text (same rows, same digits). Datasets quoted from prose keep their quotes; recipes.json
lists each with the reason. Needs only the repository — nothing outside it, nothing skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from derive_helpers import RECIPES_FILE, as_text, derive, load_recipes, log_text

from labkit import reference

DATA = Path(__file__).resolve().parents[1] / "data"
RAW = DATA / "raw"
RECIPES = load_recipes(RAW)
NOT_DERIVED = json.loads((RAW / RECIPES_FILE).read_text())["not_derived"]
#: Columns a derived frame may hold beyond the committed CSV's (what the log prints that the
#: transcribers did not keep: the collective, its redop/root, the #wrong column).
EXTRA_OK = {"op", "redop", "root", "wrong", "testcase", "gpu", "bandwidth_direction"}


def _committed(name: str) -> pd.DataFrame:
    return pd.read_csv(DATA / f"{name}.csv", dtype=str, keep_default_na=False)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r["dataset"][:50])
def test_dataset_equals_what_its_raw_log_says(recipe):
    committed = _committed(recipe["dataset"])
    frame, parts = derive(recipe, RAW)
    got = as_text(frame)
    if recipe.get("match") == "values":
        assert list(got["value"]) == list(committed["value"])
        assert list(got["unit"]) == list(committed["unit"])
        assert list(got["bandwidth_direction"]) == list(committed["bandwidth_direction"])
        return
    assert set(committed.columns) <= set(got.columns), "the log lacks a committed column"
    if "bandwidth_direction" in got.columns and "bandwidth_direction" not in committed.columns:
        assert set(got["bandwidth_direction"]) == {reference.load(recipe["dataset"]).meta["bandwidth_direction"]}
    for col in set(got.columns) - set(committed.columns) - EXTRA_OK:  # e.g. latency_us of a bandwidth-only file
        assert (got[col] == "").all(), f"the log prints {col!r}, which the committed CSV lacks"
    got = got[list(committed.columns)]
    assert len(got) == len(committed), f"{len(got)} derived rows, {len(committed)} committed"
    diff = got.values != committed.values
    if diff.any():
        r, c = (int(x[0]) for x in diff.nonzero())
        pytest.fail(
            f"CSV line {r + 2}, column {committed.columns[c]!r}: committed {committed.iat[r, c]!r}, "
            f"the log says {got.iat[r, c]!r}"
        )


@pytest.mark.parametrize(
    "recipe", [r for r in RECIPES if r["format"] == "p2pbandwidthlatencytest"], ids=lambda r: r["dataset"][:50]
)
def test_topology_in_meta_is_the_logs_block(recipe):
    want = reference.load(recipe["dataset"]).meta.get("topology")
    _, parts = derive(recipe, RAW)
    got = parts[0].meta.get("topology")
    assert (want is None) == (got is None)
    if want:  # verbatim; a transcriber may have kept more of the page after the table (topo -p2p)
        assert want == got or want.startswith(got + "\n")


def test_every_raw_sourced_dataset_is_derived_or_says_why():
    derived = {r["dataset"] for r in RECIPES}
    raw_files = {p.name for p in RAW.glob("*.txt")}
    from_raw = {n for n in reference.list_datasets() if reference.load(n).meta["source_file"] in raw_files}
    assert derived <= from_raw, f"recipes for datasets not sourced from data/raw: {derived - from_raw}"
    assert not derived & set(NOT_DERIVED), "a dataset is both derived and listed as not derived"
    assert from_raw == derived | set(NOT_DERIVED), (
        f"no recipe and no reason: {sorted(from_raw - derived - set(NOT_DERIVED))}; "
        f"stale reasons: {sorted(set(NOT_DERIVED) - from_raw)}"
    )
    assert all(len(why) > 20 for why in NOT_DERIVED.values())


def test_every_raw_log_is_used_and_keeps_its_source_header():
    used = {reference.load(n).meta["source_file"] for n in reference.list_datasets()}
    for path in RAW.glob("*.txt"):
        assert path.name in used, f"{path.name} is the source of no dataset"
        head = path.read_text(encoding="utf-8").splitlines()[:20]
        assert head[0].startswith("# kind:") and any(h.startswith("# source:") for h in head)
        assert any("RAW DATA" in h for h in head), f"{path.name}: no '# RAW DATA' banner under its header"


def test_the_source_header_is_blanked_not_removed():
    path = RAW / RECIPES[0]["raw"]
    text, raw = log_text(path).splitlines(), path.read_text(encoding="utf-8").splitlines()
    assert len(text) == len(raw)
    assert not any(t.startswith("# kind:") for t in text)
    assert text[-5:] == raw[-5:]


def test_recipes_fill_only_what_the_log_leaves_empty():
    """A recipe that tried to overwrite a printed value would be refused (LogDataset.filled)."""
    recipe = next(r for r in RECIPES if r["dataset"] == "nccl_allreduce_2xrtx2080ti_pcie3_nop2p_autodl")
    bad = {**recipe, "parts": [{"index": 0, "fill": {"world_size": 4}}]}  # the rank lines say 2
    with pytest.raises(ValueError, match="never overwritten"):
        derive(bad, RAW)
