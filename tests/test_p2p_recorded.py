"""The shipped P2P matrices' invariants and what `diagnose` must find in them (notebook 04 shows these as checks).

Moved from notebook 04's cell of self-checks (issue 25 item 1): they are properties of the shipped data and of
labkit.p2p.diagnosis, so they are asserted here, on every system of kind p2p_matrix, whatever a run selects.
"""

import pytest

from labkit import reference
from labkit.p2p import diagnosis, matrices, summaries

WORKED = ("8xa100_sxm4_80gb_nvswitch", "2xh100_pcie_nvlink_bridge", "2xrtx2080ti", "2xrtx5090")


@pytest.fixture(scope="module")
def shipped():
    return [reference.load(n) for n in reference.list_datasets(kind="p2p_matrix")]


@pytest.fixture(scope="module")
def worked():
    return dict(zip(("a100", "bridge", "rtx2080", "rtx5090"), matrices.shipped_systems(*WORKED)))


def test_every_recorded_matrix_is_valid(shipped):
    assert {d.name: matrices.validate(d) for d in shipped if matrices.validate(d)} == {}


def test_bidirectional_is_at_least_unidirectional_on_every_nvlink_pair(shipped):
    assert summaries.bidirectional_at_least_unidirectional(shipped)


def test_bidirectional_check_fails_when_a_pair_drops_below_its_unidirectional_figure(worked):
    class Halved:  # the A100 set with its bidirectional matrix halved: a pair now sums below one direction
        meta, name, label = worked["a100"].meta, "halved", "8x A100, bidirectional halved (test)"
        frame = worked["a100"].frame.assign(
            bandwidth_GBps=lambda f: f["bandwidth_GBps"].where(f["matrix"] != "bandwidth_bi", f["bandwidth_GBps"] / 4)
        )

    assert not summaries.bidirectional_at_least_unidirectional([Halved()])


def test_diagnosis_finds_the_a100_staged_outliers(worked):
    assert summaries.staged_outlier_pairs(worked["a100"]) == {(4, 5), (6, 7)}


def test_diagnosis_finds_geforce_pairs_without_p2p(worked):
    for d in (worked["rtx2080"], worked["rtx5090"]):
        assert any(f.rule == "peer_access" for f in diagnosis.diagnose(d)), d.name


def test_diagnosis_is_quiet_on_the_healthy_nvlink_bridge(worked):
    assert [f for f in diagnosis.diagnose(worked["bridge"]) if f.level == "warn"] == []


def test_recorded_checks_report_what_the_tests_above_assert(shipped, worked):
    result = summaries.RecordedChecks(shipped, worked["a100"], worked["bridge"], (worked["rtx2080"], worked["rtx5090"]))
    assert result.checks() == dict.fromkeys(
        (
            "recorded_matrices_valid",
            "bidirectional_at_least_unidirectional_on_nvlink",
            "diagnosis_finds_a100_staged_outliers",
            "diagnosis_finds_geforce_without_p2p",
            "diagnosis_quiet_on_healthy_nvlink_bridge",
        ),
        True,
    )
    assert result.a100_odd_pairs == {(4, 5), (6, 7)}
