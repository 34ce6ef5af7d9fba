"""Overlap recorded elsewhere: GPU overlap runs, nvbandwidth's full-duplex points, and the link sweep a model is fitted to."""

from __future__ import annotations

import re

from .. import reference as ref
from ..models import fit_alpha_beta_from_bandwidth
from ..reference import precise_rows
from ..runtime import Found


def recorded_duplex(datasets) -> "object":
    """Recorded full-duplex points: a direction alone vs the same direction while the other runs.

    Reads nvbandwidth `point` datasets that hold both `<dir>_memcpy_ce` (unidirectional) and
    `<dir>_bidirectional_memcpy_ce` (the named direction while the opposite one runs) for the same
    GPU. Returns one row per (dataset, direction, GPU) with `retained` = while-both / alone — 1.0
    would be a perfect full-duplex link. Nothing is derived beyond that ratio.
    """
    import pandas as pd

    rows = []
    for ds in datasets:
        f = ds.frame
        if ds.kind != "point" or "quantity" not in f.columns:
            continue
        for direction, key in (("h2d", "host_to_device"), ("d2h", "device_to_host")):
            uni = f[f["quantity"].str.contains(f"{key}_memcpy_ce", regex=False)]
            bi = f[f["quantity"].str.contains(f"{key}_bidirectional_memcpy_ce", regex=False)]
            gpu_of = lambda q: (re.search(r"GPU (\d+)", q) or [None, "0"])[1]  # noqa: E731
            alone = {gpu_of(q): v for q, v in zip(uni["quantity"], uni["value"])}
            for q, v in zip(bi["quantity"], bi["value"]):
                g = gpu_of(q)
                if g in alone:
                    rows.append(
                        {
                            "dataset": ds.name,
                            "label": ds.label,
                            "title": ds.meta["title"],
                            "direction": direction,
                            "gpu": int(g),
                            "alone_GBps": float(alone[g]),
                            "while_other_runs_GBps": float(v),
                            "retained": float(v) / float(alone[g]),
                        }
                    )
    return pd.DataFrame(rows, columns=DUPLEX_COLUMNS)


DUPLEX_COLUMNS = ["dataset", "label", "title", "direction", "gpu", "alone_GBps", "while_other_runs_GBps", "retained"]


def recorded_duplex_for(reference):
    """(recorded_duplex rows, note) for a notebook's `reference=` (see reference.select): a reference
    whose own point data hold no full-duplex pair gives the shipped ones, and the note says so."""
    sets, note = ref.select(
        reference,
        "point",
        usable=lambda own: not recorded_duplex(own).empty,
        needs="nvbandwidth's `*_bidirectional_memcpy_ce` beside `*_memcpy_ce`",
    )
    return recorded_duplex(sets), note


def reference_sets(reference, kind: str) -> list:
    """The datasets of `kind` a notebook's `reference=` selects (see `reference.resolve_reference`).

    A `reference` naming a dataset of another kind (say a copy sweep, for a notebook that also
    shows overlap runs) selects nothing of this kind, so the shipped datasets of `kind` are used.
    """
    return ref.select(reference, kind)[0]


def _on_a_gpu(ds) -> bool:
    return ds.meta.get("gpu", "none") != "none"


def recorded_gpu_run(reference):
    """(dataset, note) of the recorded GPU overlap run a notebook's `reference=` selects.

    Its own run comes first (a profile recorded on a GPU); a reference that holds none — a copy sweep,
    a host-only profile, an nvbandwidth log — gives the shipped runs, and `note` says so (see
    reference.select). (None, None) when no GPU overlap run exists at all.
    """
    sets, note = ref.select(
        reference, "overlap_run", usable=lambda own: any(map(_on_a_gpu, own)), needs="a run on a GPU"
    )
    runs = [d for d in sets if _on_a_gpu(d)]
    return (runs[0], note) if runs else (None, None)


_QUALITY_RANK = {"A": 0, "B": 1, "C": 2}


def pick_link_sweep(datasets, batch_bytes: int, direction: str = "h2d"):
    """(dataset, α-β fit) of the pinned `direction` sweep best suited to model copies of `batch_bytes`.

    Preference: measured by labkit (a profile) over published; sweeps that reach `batch_bytes`
    (no extrapolation) over those that stop short; better quality grade; more sizes. Fits use
    `models.fit_alpha_beta_from_bandwidth` on rows printed with at least two significant digits.
    Returns (None, None) when no dataset has at least five sizes.
    """
    best = None
    for ds in datasets:
        if ds.kind != "copy_sweep" or ds.meta.get("bandwidth_direction") != "unidirectional":
            continue
        f = precise_rows(ds)
        f = f[(f["direction"] == direction) & (f["memory"] == "pinned")]
        if "run" in f.columns and len(f):
            f = f[f["run"] == sorted(set(f["run"]))[0]]
        if f["nbytes"].nunique() < 5:
            continue
        key = (
            ds.meta.get("provenance") != "measured",
            f["nbytes"].max() < batch_bytes,
            _QUALITY_RANK.get(ds.meta.get("quality"), 3),
            -len(f),
        )
        if best is None or key < best[0]:
            best = (key, ds, f)
    if best is None:
        return None, None
    _, ds, f = best
    return ds, fit_alpha_beta_from_bandwidth(f["nbytes"].to_numpy(), f["bandwidth_GBps"].to_numpy())


# --------------------------------------------------------------------------- what notebook 03 shows
def link_model(datasets, batch_bytes: int):
    """(dataset, α-β fit) of the link a model copies `batch_bytes` over: from `datasets`, else the shipped sweeps."""
    ds, fit = pick_link_sweep(datasets, batch_bytes)
    if ds is None:  # the selected reference holds no sweep (single sizes only): use the shipped ones
        ds, fit = pick_link_sweep(ref.load_all(kind="copy_sweep"), batch_bytes)
    return ds, fit


def gpu_run(reference):
    """The recorded GPU overlap run `reference=` selects (Found, with the note when it fell back), or None."""
    run, note = recorded_gpu_run(reference)
    return None if run is None else Found(run.frame, run.label, (run.name,), note)


def model_instead(model_src: str) -> Found:
    """No GPU here and no recorded GPU run: the notebook's GPU timelines are the α-β model, and says so."""
    return Found(
        None,
        model_src,
        note=(
            "**No recorded GPU overlap run in `data/` yet, and no GPU here.** The GPU timelines in this notebook "
            f"are the α-β **model** of section 1 ({model_src}); the efficiency measured here comes from host threads. "
            "To see CUDA-event timelines, run this notebook on a GPU, or record one there "
            "(`labkit record --out profiles/<node>`) and pass `reference='profiles/<node>'`."
        ),
    )
