"""`labkit compare`: like-for-like series from synthetic profiles, refusals that name both sides, figures."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from labkit import plots
from labkit.reference import PROFILE_FILE, write_dataset
from labkit.schema import SCHEMA_VERSION
from labkit.tools import cli
from labkit.tools.compare import compare, save_figures
from labkit.tools.compare_groups import PLATEAU_SIZES
from labkit.tools.compare_inputs import CompareError
from labkit.units import GB, pow2_sizes

ALPHA_S = 5e-6  # per-copy latency of both synthetic machines
SIZES = pow2_sizes(4, 64 << 20)  # 4 B … 64 MiB


def meta(kind: str, host: str, direction: str = "unidirectional", **extra) -> dict:
    return {
        "kind": kind,
        "title": f"synthetic {kind} on {host}",
        "system": f"{host}: test machine",
        "gpu": "none",
        "gpu_count": 1,
        "nodes": 1,
        "interconnect": "synthetic",
        "software": "labkit tests",
        "date": "2025-01-02",
        "method": "α-β law, exact",
        "source": f"labkit record on {host}",
        "source_file": "labkit record",
        "caveats": "synthetic numbers for tests",
        "quality": "A",
        "bandwidth_direction": direction,
        "provenance": "measured",
        **extra,
    }


def copy_rows(beta_GBps: float, sizes=SIZES, directions=(("h2d", "pinned"), ("d2h", "pinned"))) -> pd.DataFrame:
    """Bandwidths that follow t = α + n/β exactly, so the fit must give back n½ = α·β."""
    rows = []
    for direction, memory in directions:
        for n in sizes:
            t = ALPHA_S + n / (beta_GBps * GB)
            rows.append(
                {"direction": direction, "memory": memory, "nbytes": n, "bandwidth_GBps": n / t / GB, "time_s": t}
            )
    return pd.DataFrame(rows)


def profile(folder, host: str, datasets: dict) -> str:
    """A profile folder as `labkit record` writes it: datasets + profile.json."""
    for name, (frame, m) in datasets.items():
        write_dataset(folder, name, frame, m)
    (folder / PROFILE_FILE).write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "created": "2025-01-02T10:00:00+00:00",
                "host": host,
                "experiments": {"copy": list(datasets)},
                "environment": {"host": host},
            }
        )
    )
    return str(folder)


@pytest.fixture
def two_profiles(tmp_path):
    before = profile(tmp_path / "before", "node-a", {"gpu_copy_sweep": (copy_rows(12.0), meta("copy_sweep", "node-a"))})
    # the fix doubles β; this machine also swept one size further and has a host-memory series
    after_rows = pd.concat(
        [copy_rows(24.0, SIZES + [128 << 20]), copy_rows(80.0, SIZES, directions=(("host", "host"),))],
        ignore_index=True,
    )
    after = profile(tmp_path / "after", "node-b", {"gpu_copy_sweep": (after_rows, meta("copy_sweep", "node-b"))})
    return before, after


def test_compare_table_uses_plateau_and_n_half_on_common_sizes(two_profiles):
    result = compare(two_profiles)
    rows = result.to_frame()
    h2d = rows[rows.group == "direction=h2d, memory=pinned"]
    assert list(h2d.source) == ["before", "after"]
    assert set(h2d.host) == {"node-a", "node-b"}
    # the plateau is the median of the largest sizes *both* measured (128 MiB is only in "after")
    top = SIZES[-PLATEAU_SIZES:]
    expect = [float(np.median([n / (ALPHA_S + n / (b * GB)) / GB for n in top])) for b in (12.0, 24.0)]
    assert h2d.plateau.tolist() == pytest.approx(expect, rel=1e-9)
    assert h2d.plateau_sizes.iloc[0] == "16 MiB – 64 MiB"
    # n½ = α·β comes back from the α-β fit
    assert h2d.n_half_bytes.tolist() == pytest.approx([ALPHA_S * 12e9, ALPHA_S * 24e9], rel=1e-3)
    assert h2d.vs_first_pct.iloc[1] == pytest.approx(100 * (expect[1] / expect[0] - 1))
    # the series only one profile has is listed, not silently dropped
    assert any("direction=host" in n and "only in after" in n for n in result.not_compared)
    text = result.table()
    for needle in (
        "before — node-a, 2025-01-02",
        "after — node-b, 2025-01-02",
        "plateau bandwidth (GB/s)",
        "n½",
        "not compared:",
    ):
        assert needle in text


def test_bidirectional_is_not_compared_with_unidirectional(tmp_path):
    uni = profile(tmp_path / "uni", "node-a", {"gpu_copy_sweep": (copy_rows(12.0), meta("copy_sweep", "node-a"))})
    bi = profile(
        tmp_path / "bi",
        "node-b",
        {"gpu_copy_sweep": (copy_rows(24.0), meta("copy_sweep", "node-b", direction="bidirectional"))},
    )
    with pytest.raises(CompareError) as e:
        compare([uni, bi])
    msg = str(e.value)
    assert uni in msg and bi in msg and "gpu_copy_sweep" in msg
    assert "unidirectional" in msg and "bidirectional" in msg


def test_refuses_different_unit_columns_and_disjoint_sizes(tmp_path):
    def allreduce(column: str, sizes):
        f = pd.DataFrame({"nbytes": sizes, "world_size": 4, "nodes": 1, "config": "gloo ring"})
        f[column] = [1.0 + i for i in range(len(sizes))]
        return f

    a = profile(tmp_path / "a", "a", {"allreduce": (allreduce("busbw_GBps", SIZES[10:]), meta("allreduce_sweep", "a"))})
    b = profile(tmp_path / "b", "b", {"allreduce": (allreduce("time_us", SIZES[10:]), meta("allreduce_sweep", "b"))})
    with pytest.raises(CompareError, match=r"busbw_GBps.*time_us.*no value column with the same unit"):
        compare([a, b])
    c = profile(
        tmp_path / "c", "c", {"allreduce": (allreduce("busbw_GBps", [3000, 5000]), meta("allreduce_sweep", "c"))}
    )
    with pytest.raises(CompareError, match="no message size in common") as e:
        compare([a, c])
    assert a in str(e.value) and c in str(e.value)


def test_profile_against_a_shipped_reference_dataset(tmp_path):
    """A dataset name pairs by kind; only the sizes both have are compared (here bandwidthTest's 32 MB)."""
    mine = profile(
        tmp_path / "mine",
        "node-a",
        {
            "gpu_copy_sweep": (
                copy_rows(12.0, SIZES + [32_000_000], directions=(("h2d", "pinned"),)),
                meta("copy_sweep", "node-a"),
            )
        },
    )
    result = compare([mine, "bandwidthtest_pinned_pageable_a100_80gb_pcie_dell"])
    rows = result.to_frame()
    assert set(rows.group) == {"direction=h2d, memory=pinned"}
    assert rows.common.iloc[0] == "1 size, 30.52 MiB"
    assert rows.plateau.iloc[1] == 17.3  # the published number, exactly
    assert rows.n_half_bytes.isna().all()  # one size cannot be fitted, and says so
    assert "too few for an α-β fit" in result.table()
    assert any("d2h" in n for n in result.not_compared)


def test_figures_have_titles_units_and_sources(two_profiles, tmp_path):
    result = compare(two_profiles)
    figs = result.figures()
    assert list(figs) == ["copy_sweep"]
    fig = figs["copy_sweep"]
    assert plots.figure_problems(fig) == []
    ax = fig.axes[0]
    assert ax.get_title() and "(bytes" in ax.get_xlabel() and "(GB/s" in ax.get_ylabel()
    labels = ax.get_legend_handles_labels()[1]
    assert "before — node-a, 2025-01-02" in labels and "after — node-b, 2025-01-02" in labels
    out = save_figures(result, tmp_path / "cmp.png")
    assert out == [tmp_path / "cmp.png"] and out[0].stat().st_size > 10_000


def test_cli_compare_json_and_refusal(two_profiles, tmp_path, capsys):
    assert cli.main(["compare", *two_profiles, "--json", "--plot", str(tmp_path / "c.png")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["sources"]] == ["before", "after"]
    assert {r["group"] for r in data["comparisons"]} == {"direction=h2d, memory=pinned", "direction=d2h, memory=pinned"}
    assert (tmp_path / "c.png").exists()
    assert cli.main(["compare", two_profiles[0]]) == 2
    assert "at least two" in capsys.readouterr().err


def test_points_compare_by_quantity_and_unit(tmp_path):
    def points(values):
        return pd.DataFrame(
            {
                "quantity": ["pin_memory() cost", "pin_memory() cost", "loader throughput"],
                "value": values,
                "unit": ["s", "s", "GB/s"],
                "bandwidth_direction": ["none", "none", "unidirectional"],
                "nbytes": [1 << 20, 1 << 24, None],
            }
        )

    a = profile(tmp_path / "a", "a", {"pin_cost": (points([1e-4, 1e-3, 5.0]), meta("point", "a", direction="mixed"))})
    b = profile(tmp_path / "b", "b", {"pin_cost": (points([2e-4, 2e-3, 10.0]), meta("point", "b", direction="mixed"))})
    rows = compare([a, b]).to_frame()
    cost = rows[rows.group == "quantity=pin_memory() cost, unit=s"]
    assert cost.cells.tolist() == [2, 2] and cost.vs_first_pct.iloc[1] == pytest.approx(100.0)
    loader = rows[rows.group == "quantity=loader throughput, unit=GB/s"]
    assert loader.bandwidth_direction.tolist() == ["unidirectional"] * 2 and loader["median"].tolist() == [5.0, 10.0]
