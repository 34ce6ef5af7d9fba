"""labkit bench fidelity: labkit's pinned copy timing against a raw CUDA-runtime probe."""

import pytest

from labkit import reference
from labkit.copies import bench_fidelity, fidelity
from labkit.timing import Measurement


def _m(seconds, nbytes=2**28):
    return Measurement(tuple(seconds), 10, "cuda_event", "t", nbytes)


def test_ratio_and_tolerance():
    same = fidelity.Fidelity("h2d", 2**28, _m([5e-3] * 5), _m([5e-3] * 5), 63.02, "PCIe Gen5 x16")
    assert same.ratio == pytest.approx(1.0) and same.ok
    slow = fidelity.Fidelity("d2h", 2**28, _m([5.5e-3] * 5), _m([5e-3] * 5), None, None)
    assert slow.ratio == pytest.approx(5 / 5.5) and not slow.ok  # labkit 9% slower than the raw probe
    text = fidelity.summary([same, slow])
    assert "within" in text and "OUTSIDE" in text and "63.02 GB/s" in text


def test_without_cuda_the_probe_says_what_is_missing():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="labkit doctor"):
        fidelity.raw_copy(2**20, "h2d")
    with pytest.raises(ValueError, match="direction"):
        fidelity.raw_copy(2**20, "sideways")


def test_recorded_fidelity_on_the_h100_is_within_tolerance_and_consistent():
    f = reference.load("h100_vm_labkit_fidelity_points").frame
    for (direction, nbytes), g in f[f.timer != "spec"].groupby(["direction", "nbytes"]):
        ours = g[g.timer == "labkit"].value.item()
        raw = g[g.timer.str.startswith("raw")].value.item()
        ratio = g[g.timer == "ratio"].value.item()
        assert ratio == pytest.approx(ours / raw, rel=1e-12)
        assert abs(ratio - 1) <= fidelity.FIDELITY_TOLERANCE, (direction, nbytes, ratio)
        assert raw < f[f.timer == "spec"].value.item()  # below the link's theoretical limit


@pytest.mark.gpu
def test_gpu_fidelity_within_tolerance():
    results = fidelity.check(64 * 2**20)
    assert [r.direction for r in results] == ["h2d", "d2h"]
    for r in results:
        assert r.ok, fidelity.summary(results)


def test_to_frame_matches_the_point_schema_and_record_skips_without_gpu(tmp_path):
    import pandas as pd

    from labkit.schema import validate_frame

    f = fidelity.Fidelity("h2d", 2**28, _m([5e-3] * 5), _m([5.05e-3] * 5), 63.02, "PCIe Gen5 x16")
    frame = fidelity.to_frame([f])
    validate_frame(frame.copy(), {"kind": "point", "bandwidth_direction": "mixed"}, tmp_path / "x.csv")
    assert list(frame.timer) == ["labkit", "raw cudaMemcpyAsync + cudaEvent", "ratio", "spec"]
    assert frame.value[2] == pytest.approx(frame.value[0] / frame.value[1])
    assert pd.isna(frame.nbytes[3])
    assert bench_fidelity.record(tmp_path, True, {"cuda_available": False}) == []
