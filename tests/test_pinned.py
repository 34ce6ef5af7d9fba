"""labkit.copies (notebook 02): the pinned-memory cap, recorded ratios, break-even arithmetic, the non_blocking pitfall."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from labkit import reference, schema, units
from labkit.copies import bench_pinned, dataloader, pin_cost, pinned, pinned_vs_pageable, pitfall
from labkit.units import PINNED_CAP_BYTES

ENV = {
    "host": "testhost",
    "cpu": "test cpu",
    "cpu_count": 2,
    "date": "2026-01-01T00:00:00+00:00",
    "cuda_available": False,
    "gpus": [],
}


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# --------------------------------------------------------------------------- the cap
def test_cap_is_checked_before_anything_is_allocated():
    assert units.check_pinned_request(PINNED_CAP_BYTES) == PINNED_CAP_BYTES
    with pytest.raises(units.PinnedCapError, match="PINNED_CAP_BYTES") as e:
        pinned.pinned_empty(PINNED_CAP_BYTES + 1)  # raises before touching CUDA, so it works on any machine
    assert "4 GiB" in str(e.value) and "cap=" in str(e.value)
    with pytest.raises(units.PinnedCapError):
        units.check_pinned_request(2 << 20, cap=1 << 20)
    with pytest.raises(ValueError):
        units.check_pinned_request(0)
    assert issubclass(units.PinnedCapError, ValueError)


@pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU message")
def test_pinning_without_cuda_says_what_is_missing():
    with pytest.raises(RuntimeError, match="needs a CUDA GPU.*mode='reference'"):
        pinned.pinned_empty(1024)
    assert pinned.can_pin() is False


# --------------------------------------------------------------------------- recorded ratios
def test_ratio_survey_on_the_recorded_systems():
    datasets = reference.load_all(kind="copy_sweep")
    ratios, only = pinned_vs_pageable.ratio_survey(datasets)
    with_ratio = set(ratios["dataset"])
    assert len(with_ratio) >= 3  # Quadro RTX 6000 sweep, DGX A100, A100 PCIe
    assert not with_ratio & set(only["dataset"])  # a system is in one list or the other
    for ds in datasets:  # every pinned-only host<->device dataset is listed as having no ratio
        hd = ds.frame[ds.frame["direction"].isin(["h2d", "d2h"])]
        if len(hd) and set(hd["memory"]) == {"pinned"}:
            assert ds.name in set(only["dataset"])
    # the ratio is exactly pinned / pageable as recorded, for every row
    for ds in datasets:
        r = ratios[ratios["dataset"] == ds.name]
        for row in r.itertuples():
            f = ds.frame[(ds.frame["direction"] == row.direction) & (ds.frame["nbytes"] == row.nbytes)]
            if "run" in f.columns:
                f = f[f["run"] == row.run]
            p = f[f["memory"] == "pinned"]["bandwidth_GBps"].iloc[0]
            q = f[f["memory"] == "pageable"]["bandwidth_GBps"].iloc[0]
            assert row.ratio == pytest.approx(p / q)
    big = pinned_vs_pageable.largest_size_ratios(ratios)
    assert (big["ratio"] > 1).all()  # invariant: pinned >= pageable at the largest recorded size
    assert big["ratio"].max() / big["ratio"].min() > 1.5  # not a constant "about 2x"


def test_ratio_frame_skips_values_with_too_few_digits():
    ds = reference.load("cse554_quadro_rtx6000_pageable_vs_pinned_1b_to_1mib")
    r = pinned_vs_pageable.ratio_frame(ds)
    console = r[r["run"] == "readme_console"]
    assert console["nbytes"].min() > 16  # '0.000' / '0.001' GB/s (1 significant digit) are left out
    assert r[r["run"] == "benchmark_csv"]["nbytes"].min() == 1  # full precision: every size has a ratio
    assert set(r["run"]) == set(ds.frame["run"])


def test_break_even_arithmetic():
    t = pin_cost.break_even_table({1: 10.0, 2: 1.0, 3: 5.0}, {1: 3.0, 2: 3.0, 3: 1.0}, {1: 1.0, 2: 1.0, 3: 2.0})
    t = t.set_index("nbytes")
    assert t.loc[1, "saved_per_copy_s"] == 2.0 and t.loc[1, "break_even_copies"] == 5.0
    assert not t.loc[1, "pays_for_one_copy"]
    assert t.loc[2, "break_even_copies"] == 0.5 and t.loc[2, "pays_for_one_copy"]
    assert math.isinf(t.loc[3, "break_even_copies"])  # pinned not faster: pinning never pays


def test_copy_times_from_a_recorded_sweep():
    ds = reference.load("cse554_quadro_rtx6000_pageable_vs_pinned_1b_to_1mib")
    pageable, pinned_s = pin_cost.copy_times_from_sweep(ds, "h2d", run="benchmark_csv")
    f = ds.frame[
        (ds.frame["run"] == "benchmark_csv") & (ds.frame["direction"] == "h2d") & (ds.frame["nbytes"] == 1 << 20)
    ]
    bw = f.set_index("memory")["bandwidth_GBps"]
    assert pageable[1 << 20] == pytest.approx((1 << 20) / (bw["pageable"] * 1e9))
    assert pinned_s[1 << 20] == pytest.approx((1 << 20) / (bw["pinned"] * 1e9))


def test_host_pin_part_and_its_rows():
    costs, note = pin_cost.measure_host_pin_part([64 << 10, 1 << 20], repeats=3)
    assert [c.nbytes for c in costs] == [64 << 10, 1 << 20]
    assert all(c.pin.median_s > 0 and len(c.pin.samples_s) == 3 for c in costs)
    assert "mlock" in note
    rows = pd.DataFrame([r for c in costs for r in c.to_rows()])
    meta = {"kind": "point", "bandwidth_direction": "none"}
    schema.validate_frame(rows, meta, "test")  # the recorder's rows are a valid `point` dataset


def test_recorded_pin_cost_reader(tmp_path):
    from labkit.provenance import measured_meta
    from labkit.timing import Measurement

    m = lambda s: Measurement((s, s, s), 1, "host", "", 1024)  # noqa: E731
    c = pin_cost.PinCost(1024, m(3e-3), pin_cost.COLD_PIN, m(1e-4), m(1e-4), m(4e-4))
    reference.write_dataset(
        tmp_path,
        "pin_cost",
        pd.DataFrame(c.to_rows()),
        measured_meta(ENV, kind="point", title="t", method="m", bandwidth_direction="none"),
    )
    pin_s, pageable, pinned_s, ds = pin_cost.recorded_pin_cost(reference.load_all(tmp_path, kind="point"))
    assert pin_s == {1024: 3e-3} and pageable == {1024: 4e-4} and pinned_s == {1024: 1e-4} and ds.name == "pin_cost"
    shipped = pin_cost.recorded_pin_cost(reference.load_all(kind="point"))  # the one recorded on the H100
    assert shipped is not None and shipped[3].name == "h100_vm_labkit_pin_cost"
    assert all(
        shipped[0][n] > shipped[2][n] for n in shipped[0]
    )  # pinning a fresh tensor costs more than a pinned copy
    others = [d for d in reference.load_all(kind="point") if "pin_cost" not in d.name]
    assert pin_cost.recorded_pin_cost(others) is None  # no pin-cost rows: nothing is made up


# --------------------------------------------------------------------------- the pitfall
def test_nonblocking_pitfall_on_host_threads():
    r = pitfall.nonblocking_pitfall_host(1 << 20)
    assert r.wrong_before_sync == 1.0  # read before synchronising: nothing has arrived
    assert r.wrong_after_sync == 0.0  # after: right
    assert r.source.startswith("measured here: host thread")


# --------------------------------------------------------------------------- bench and record without a GPU
@pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU behaviour")
def test_bench_pinned_without_gpu_fails_clearly(capsys):
    from labkit.tools.cli import main

    assert main(["bench", "pinned", "--json"]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and "no CUDA device" in err


def test_bench_pinned_rejects_unknown_what(capsys):
    from labkit.tools.cli import main

    assert main(["bench", "pinned", "--what", "nope"]) == 2
    assert "unknown --what" in capsys.readouterr().err


@pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU behaviour")
def test_record_pinned_without_gpu_writes_nothing(tmp_path):
    assert bench_pinned.record(tmp_path, True, ENV) == []
    assert list(tmp_path.iterdir()) == []


def test_figures_are_labelled():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from labkit.plots import figure_problems

    datasets = reference.load_all(kind="copy_sweep")
    ratios, _ = pinned_vs_pageable.ratio_survey(datasets)
    fig, (a, b, c) = plt.subplots(1, 3)
    pinned_vs_pageable.draw_ratios(a, ratios)
    pinned_vs_pageable.draw_sweeps(b, datasets, "h2d")
    pinned_vs_pageable.draw_sweeps(c, datasets, "d2h")
    assert figure_problems(fig) == []
    plt.close(fig)


# --------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_gpu_pinned_allocation_and_pitfall():
    t = pinned.pinned_empty(1 << 20)
    assert t.is_pinned() and t.numel() == 1 << 20
    r = pitfall.nonblocking_pitfall_gpu(16 << 20)
    assert r.wrong_before_sync > 0  # the copy had not landed when the host read it
    assert r.wrong_after_sync == 0.0


@pytest.mark.gpu
def test_gpu_pin_cost_and_dataloader():
    (c,) = pin_cost.measure_pin_cost([4 << 20], repeats=3)
    assert c.pin.median_s > 0 and c.pin_warm.median_s > 0
    assert c.pinned_copy.median_s < c.pageable_copy.median_s * 1.5
    for pm in (False, True):
        r = dataloader.measure_dataloader(pm, batches=5, workers=0)
        assert r["throughput_GBps"] > 0 and r["pin_memory"] is pm
    st = dataloader.measure_stages(batches=3, workers=0)
    assert list(st["stage"]) == list(dataloader.STAGES) and (st.seconds_per_batch > 0).all()


@pytest.mark.gpu
def test_gpu_bench_pinned_json(capsys):
    from labkit.tools.cli import main

    assert main(["bench", "pinned", "--json", "--sizes", "1MiB", "--repeats", "3", "--what", "sweep,pitfall"]) == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {r["test"] for r in recs} == {"sweep", "nonblocking_pitfall"}


def test_synthetic_images_dataset_is_picklable_for_spawned_workers():
    import pickle

    ds = dataloader.SyntheticImages(10, samples=4)
    assert len(ds) == 10 and tuple(ds[7].shape) == dataloader.SAMPLE_SHAPE
    assert (ds[7] == ds[3]).all()  # indices wrap around the samples held in RAM
    back = pickle.loads(pickle.dumps(ds))
    assert len(back) == 10 and (back[1] == ds[1]).all()


def test_dataloader_stages_without_a_gpu_time_the_workers_only_and_replay_as_a_dataset(tmp_path):
    from labkit.system import environment

    f = dataloader.measure_stages(batches=3, batch_size=4, workers=1, device=None)
    assert list(f["stage"]) == ["workers"]  # pinning and copying need CUDA: left out, never estimated
    r = f.iloc[0]
    assert r.seconds_per_batch > 0 and r.batches_per_s == pytest.approx(1 / r.seconds_per_batch)
    assert r.GBps == pytest.approx(4 * 3 * 224 * 224 / r.seconds_per_batch / 1e9)
    env = environment()
    reference.write_dataset(tmp_path, "dataloader_stages", dataloader.stages_as_points(f), dataloader.stages_meta(env))
    back = dataloader.stages_recorded(reference.load_all(tmp_path))
    assert back is not None and list(back.data["stage"]) == ["workers"]
    text = dataloader.pace_text(None, back.data)
    assert "ms per batch" in text and "need a CUDA GPU" in text


def test_dataloader_pace_text_reads_the_recorded_h100_pipelines():
    found = dataloader.recorded([reference.load("h100_vm_labkit_dataloader_throughput")])
    text = dataloader.pace_text(found.data, None)
    # 209 batches/s unpinned against 126 pinned: the workers reached 209, so they do not hold the pinned run
    assert "209 batches/s with pin_memory=False, 126 with pin_memory=True" in text
    assert "not what holds" in text
