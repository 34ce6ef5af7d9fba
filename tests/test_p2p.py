"""labkit.p2p: recorded matrices validate, the diagnosis reads them right, host staging and the
measurement loop work on the CPU with injected copies, and the GPU paths run where a GPU exists."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from labkit import plots, reference, timing
from labkit.p2p import bench_p2p, diagnosis, figures, matrices, measure, placement, staging, summaries
from labkit.tools import cli

#: The published logs behind data/, in the project (data/raw/README.md): nothing here needs ../shared.
SOURCES = Path(__file__).resolve().parents[1] / "data" / "raw"
RECORDED = reference.load_all(kind="p2p_matrix")
#: Datasets that print only some rows of a matrix (their title says so); every printed row is complete.
PARTIAL_ROWS = {"p2p_latency_partial_8xrtxpro6000_pcie5_switches_rtx6kpro"}


def _ids(ds):
    return ds.name[:48]


# --------------------------------------------------------------------------- recorded matrices
def test_the_systems_the_notebook_needs_are_recorded():
    names = " ".join(d.name for d in RECORDED)
    for needle in (
        "8xa100_sxm4_80gb_nvswitch",
        "2xh100_pcie_nvlink_bridge",
        "2xrtx2080ti",
        "rtxpro6000",
        "rtx5090",
        "uni_writes_8xa100",
        "uni_writes_8xh100",
        "gb200",
        "azure_nd96isr",
    ):
        assert needle in names, f"no p2p_matrix dataset matching {needle!r}"


@pytest.mark.parametrize("ds", RECORDED, ids=_ids)
def test_recorded_matrix_is_consistent(ds):
    assert matrices.validate(ds) == []
    assert matrices.metrics(ds), "no matrix at all"
    n = int(ds.meta["gpu_count"])
    for kind, state in matrices.metrics(ds):
        m = matrices.matrix(ds, kind, state)
        # square, unless the source printed only some rows (then each printed row is whole)
        if ds.name in PARTIAL_ROWS:
            printed = m.dropna(how="all")
            assert printed.notna().all(axis=1).all()
        else:
            assert matrices.is_square(ds, kind, state), f"{kind}/{state} is not square"
            assert len(m) <= n
        # the diagonal is printed for every row or for none (nvbandwidth prints N/A)
        diag = matrices.diagonal(m)
        assert not diag or set(diag) == set(m.dropna(how="all").index)
        values = m.to_numpy()[np.isfinite(m.to_numpy())]
        assert (values > 0).all()
        if matrices.is_bandwidth(kind) and diag:
            # a copy inside one GPU beats any link to another GPU
            assert min(diag.values()) > matrices.median_off_diagonal(m)


@pytest.mark.parametrize(
    "ds",
    [
        d
        for d in RECORDED
        if matrices.is_nvlink_system(d)
        and {("bandwidth_uni", "enabled"), ("bandwidth_bi", "enabled")} <= set(matrices.metrics(d))
    ],
    ids=_ids,
)
def test_bidirectional_at_least_unidirectional_on_nvlink_with_p2p(ds):
    uni, bi = matrices.matrix(ds, "bandwidth_uni", "enabled"), matrices.matrix(ds, "bandwidth_bi", "enabled")
    for i, j, v in matrices.off_diagonal(bi):
        assert v >= uni.loc[i, j], f"GPU{i}↔GPU{j}: bidirectional {v} < unidirectional {uni.loc[i, j]}"


def test_invariant_covers_the_nvlink_systems():
    covered = [
        d.name
        for d in RECORDED
        if matrices.is_nvlink_system(d)
        and {("bandwidth_uni", "enabled"), ("bandwidth_bi", "enabled")} <= set(matrices.metrics(d))
    ]
    assert any("a100" in n for n in covered) and any("h100_pcie" in n for n in covered)


@pytest.mark.parametrize("ds", [d for d in RECORDED if d.meta.get("topology")], ids=_ids)
def test_topology_parses_and_matches_the_matrix(ds):
    topo = matrices.gpu_topology(ds.meta["topology"])
    n = int(ds.meta["gpu_count"])
    assert len(topo) == n
    for kind, state in matrices.metrics(ds):
        assert len(matrices.matrix(ds, kind, state)) == n
    for i in range(n):
        assert matrices.link_label(topo, i, i) == "X"
    assert set(matrices.numa_of(topo)) == set(range(n))


def test_at_least_three_recorded_topologies():
    assert len([d for d in RECORDED if d.meta.get("topology")]) >= 3


def _number_in(text: str, v: float) -> bool:
    """Is v printed in text (allowing the trailing zeros a CSV round trip drops)?"""
    return re.search(rf"(?<![\d.]){re.escape(f'{v:g}')}0*(?![\d])", text) is not None


@pytest.mark.parametrize("ds", RECORDED, ids=_ids)
def test_every_recorded_number_is_printed_in_its_source(ds):
    path = SOURCES / ds.meta["source_file"]
    assert path.exists(), f"{ds.name}: its source file {path.name} is not in data/raw"
    text = path.read_text()
    col = {True: "bandwidth_GBps", False: "latency_us"}
    missing = [
        v
        for _, row in ds.frame.iterrows()
        for v in [row[col[matrices.is_bandwidth(row["matrix"])]]]
        if not _number_in(text, float(v))
    ]
    assert not missing, f"{len(missing)} numbers not found in {path.name}, e.g. {missing[:5]}"


# --------------------------------------------------------------------------- reading a matrix
def _frame(cells: dict, kind="bandwidth_uni", state="enabled"):
    col = "bandwidth_GBps" if matrices.is_bandwidth(kind) else "latency_us"
    return pd.DataFrame([{"matrix": kind, "p2p": state, "src": i, "dst": j, col: v} for (i, j), v in cells.items()])


def test_matrix_pivot_and_errors():
    f = _frame({(0, 0): 100.0, (0, 1): 10.0, (1, 0): 11.0, (1, 1): 101.0})
    m = matrices.matrix(f)
    assert m.loc[0, 1] == 10.0 and m.loc[1, 0] == 11.0 and list(m.index) == [0, 1]
    assert matrices.diagonal(m) == {0: 100.0, 1: 101.0}
    assert matrices.median_off_diagonal(m) == 10.5
    with pytest.raises(KeyError, match="no latency"):
        matrices.matrix(f, "latency_gpu", "enabled")
    with pytest.raises(ValueError, match="more than one value"):
        matrices.matrix(pd.concat([f, f]))
    with pytest.raises(ValueError):
        matrices.matrix(f, "bandwidth", "on")


def test_validate_names_the_problem():
    f = _frame({(0, 1): 10.0, (1, 0): 11.0, (0, 0): 100.0})  # diagonal for GPU0 only
    problems = matrices.validate(matrices.MatrixSource("t", f, "recorded: test", None, "", ""))
    assert any("diagonal printed for GPUs [0]" in p for p in problems)


# --------------------------------------------------------------------------- diagnosis
def _by_name(needle):
    return next(d for d in RECORDED if needle in d.name)


def test_diagnose_a100_names_the_slow_staged_pairs():
    found = diagnosis.diagnose(_by_name("8xa100_sxm4_80gb_nvswitch"))
    uni_off = [f for f in found if f.rule == "outlier_pair" and "unidirectional, P2P off" in f.message]
    pairs = {tuple(sorted(f.pairs[0])) for f in uni_off}
    assert pairs == {(4, 5), (6, 7)}
    text = next(f.message for f in uni_off if (4, 5) in f.pairs)
    assert text.startswith("GPU4↔GPU5 reaches 10.7 GB/s") and "GB/s for the other pairs" in text
    # NVLink is healthy: no peer-access or NVLink-promise warnings
    assert not [f for f in found if f.rule in ("peer_access", "nvlink_promise", "p2p_slower_than_staged")]


def test_diagnose_geforce_pairs_without_p2p():
    for needle, cause in (("2xrtx2080ti", "PIX"), ("2xrtx5090", "GeForce")):
        found = diagnosis.diagnose(_by_name(needle))
        access = [f for f in found if f.rule == "peer_access"]
        assert len(access) == 1 and access[0].level == "warn"
        assert "GPU0↔GPU1" in access[0].message and cause in access[0].message


def test_diagnose_healthy_nvlink_bridge_is_quiet():
    assert [f for f in diagnosis.diagnose(_by_name("2xh100_pcie_nvlink_bridge")) if f.level == "warn"] == []


TOPO_4 = """\
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity
GPU0     X      NV12    NV12    SYS     0-7             0
GPU1    NV12     X      NV12    SYS     0-7             0
GPU2    NV12    NV12     X      SYS     0-7             0
GPU3    SYS     SYS     SYS      X      8-15            1
"""


def _source(cells_by_metric, topology=None, gpu="test GPU"):
    f = pd.concat([_frame(c, k, s) for (k, s), c in cells_by_metric.items()], ignore_index=True)
    return matrices.MatrixSource("synthetic", f, "synthetic test input", topology, gpu, "")


def test_diagnose_nvlink_pair_at_pcie_speed_and_p2p_slower_than_staged():
    # synthetic test input: GPU0↔GPU2 says NV12 but runs at 20 GB/s; GPU3's P2P is slower than staging
    on = {(i, j): 250.0 for i, j in itertools.permutations(range(3), 2)}
    on.update(
        {(0, 2): 20.0, (2, 0): 20.0, (0, 3): 8.0, (3, 0): 8.0, (1, 3): 30.0, (3, 1): 30.0, (2, 3): 30.0, (3, 2): 30.0}
    )
    off = {(i, j): 12.0 for i, j in itertools.permutations(range(4), 2)}
    found = diagnosis.diagnose(_source({("bandwidth_uni", "enabled"): on, ("bandwidth_uni", "disabled"): off}, TOPO_4))
    rules = {f.rule: f for f in found}
    assert "GPU0↔GPU2" in rules["nvlink_promise"].message and "NV12" in rules["nvlink_promise"].message
    assert "GPU0↔GPU3" in rules["p2p_slower_than_staged"].message


def test_diagnose_takes_a_bare_frame_and_topology_text():
    a100 = _by_name("8xa100_sxm4_80gb_nvswitch")
    found = diagnosis.diagnose(a100.frame, topology=a100.meta["topology"])
    assert [f.message for f in found] == [f.message for f in diagnosis.diagnose(a100)]
    assert "on the same NUMA node" in found[0].message  # the topology's NUMA column was used
    assert "on the same NUMA node" not in " ".join(f.message for f in diagnosis.diagnose(a100.frame))


def test_diagnose_uses_an_access_matrix_and_flags_a_slow_gpu():
    on = {(i, j): 50.0 for i, j in itertools.permutations(range(5), 2)}
    on.update({(i, 4): 30.0 for i in range(4)} | {(4, j): 30.0 for j in range(4)})
    found = diagnosis.diagnose(_source({("bandwidth_uni", "enabled"): on}), access={(0, 1): False, (1, 0): False})
    assert any(f.rule == "peer_access" and "GPU0↔GPU1" in f.message for f in found)
    slow = [f for f in found if f.rule == "slow_gpu"]
    assert len(slow) == 1 and slow[0].message.startswith("GPU4:")


def test_doctor_findings_explain_each_blocked_pair():
    env = {
        "peer_access": {"0->1": False, "1->0": False, "0->2": True, "2->0": True, "1->2": True, "2->1": True},
        "cuda_devices": ["NVIDIA GeForce RTX 4090"] * 3,
        "topology": "        GPU0    GPU1    GPU2\nGPU0     X      PIX     SYS\nGPU1    PIX      X      SYS\n"
        "GPU2    SYS     SYS      X\n",
    }
    out = [(f.level, f.message) for f in diagnosis.doctor_findings(env)]
    warn = [m for lvl, m in out if lvl == "warn"]
    assert len(warn) == 1 and warn[0].startswith("GPU0↔GPU1 (PIX)") and "GeForce" in warn[0]
    assert any(lvl == "info" and "GPU0↔GPU2" in m for lvl, m in out)
    assert diagnosis.doctor_findings({}) == []


# --------------------------------------------------------------------------- tensor-parallel groups
def test_tp_groups_on_the_hypothetical_server():
    topo = placement.HYPOTHETICAL_PCIE_SERVER_TOPOLOGY
    assert placement.rank_tp_groups(topo, 2, include=[0])[0].gpus == (0, 2)  # the NVLink bridge, not the switch
    assert [g.gpus for g in placement.tp_partition(topo, 2)] == [(0, 2), (1, 3), (4, 6), (5, 7)]
    four = placement.tp_partition(topo, 4)
    assert [g.gpus for g in four] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert four[0].worst_link == "NODE" and four[0].numa_nodes == 1
    assert placement.rank_tp_groups(topo, 8)[0].worst_link == "SYS"


def test_tp_groups_on_recorded_a100_prefer_one_numa_node():
    topo = _by_name("8xa100_sxm4_80gb_nvswitch").meta["topology"]
    assert [g.gpus for g in placement.tp_partition(topo, 4)] == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_check_tp_group_statuses():
    topo = placement.HYPOTHETICAL_PCIE_SERVER_TOPOLOGY
    assert placement.check_tp_group("g", None, topo, 2, include=[0]).status == "not attempted"
    assert placement.check_tp_group("g", [2, 0], topo, 2, include=[0]).passed
    wrong = placement.check_tp_group("g", [0, 1], topo, 2, include=[0])
    assert not wrong.passed and "PIX" in wrong.message
    assert not placement.check_tp_group("g", [0, 1, 2], topo, 2).passed
    with pytest.raises(ValueError):
        placement.tp_partition(topo, 3)


def test_check_pair_accepts_either_orientation():
    assert diagnosis.check_pair("p", (5, 4), [(4, 5), (6, 7)]).passed
    assert not diagnosis.check_pair("p", (0, 1), [(4, 5)]).passed
    assert diagnosis.check_pair("p", None, [(4, 5)]).status == "not attempted"


# --------------------------------------------------------------------------- host staging, injected copies
def test_staged_copy_moves_every_byte_in_order_through_alternating_slots():
    src = torch.arange(1000, dtype=torch.int64).to(torch.uint8)  # 1000 bytes, a wrapping pattern
    dst = torch.zeros(1000, dtype=torch.uint8)
    buffers = [torch.zeros(256, dtype=torch.uint8) for _ in range(2)]
    log = []

    def d2h(buf, s, slot):
        log.append(("d2h", slot, s.numel()))
        buf.copy_(s)

    def h2d(d, buf, slot):
        log.append(("h2d", slot, d.numel()))
        d.copy_(buf)

    n = staging.staged_copy(dst, src, buffers, d2h=d2h, h2d=h2d)
    assert n == 4 and torch.equal(dst, src)
    assert [x[1] for x in log] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert [x[0] for x in log] == ["d2h", "h2d"] * 4
    assert [x[2] for x in log] == [256, 256, 256, 256, 256, 256, 232, 232]


def test_staged_copy_rejects_mismatches():
    s, d = torch.ones(10, dtype=torch.uint8), torch.zeros(9, dtype=torch.uint8)
    copy = lambda a, b, k: a.copy_(b)  # noqa: E731
    with pytest.raises(ValueError, match="destination"):
        staging.staged_copy(d, s, [torch.zeros(4, dtype=torch.uint8)], d2h=copy, h2d=copy)
    with pytest.raises(ValueError, match="does not fit"):
        staging.staged_copy(s, s.clone(), [torch.zeros(4, dtype=torch.uint8)], d2h=copy, h2d=copy, chunk_bytes=8)
    with pytest.raises(ValueError, match="at least one"):
        staging.staged_copy(s, s.clone(), [], d2h=copy, h2d=copy)
    assert staging.chunks(10, 4) == [(0, 4), (4, 8), (8, 10)]


class _HostPath:
    def __init__(self, staged, nbytes):
        self.staged = staged
        self.buffers = [torch.zeros(max(1, min(nbytes, 64)), dtype=torch.uint8) for _ in range(2)]
        self.calls = 0

    def fork(self, stream):
        pass

    def join(self, stream):
        pass

    def enqueue(self, dst, src):
        self.calls += 1
        if self.staged:
            staging.staged_copy(dst, src, self.buffers, d2h=lambda b, s, k: b.copy_(s), h2d=lambda d, b, k: d.copy_(b))
        else:
            dst.copy_(src)


class HostBackend:
    """Simulated GPUs in host memory: real copies, timed by a fake clock."""

    def __init__(self, n, access=None):
        self.access = access or [[True] * n for _ in range(n)]
        self.paths = []
        self.ticks = itertools.count()

    def clock(self):
        return next(self.ticks) * 5e-4  # each sample reads the clock twice: every call "takes" 0.5 ms

    def device_names(self, devices):
        return [f"simulated GPU{d}" for d in devices]

    def can_access(self, a, b):
        return a == b or self.access[a][b]

    def alloc(self, device, nbytes):
        return torch.full((nbytes,), device + 1, dtype=torch.uint8)

    def timing_stream(self, device):
        return None

    def path(self, a, b, staged, nbytes):
        self.paths.append(_HostPath(staged, nbytes))
        return self.paths[-1]

    def time(self, fn, *, nbytes, label, repeats, stream):
        return timing.time_host(
            fn, repeats=repeats, warmup=1, inner=1, nbytes=nbytes, label=label, clock=self.clock
        ), ()

    def time_latency(self, fn, *, nbytes, label, repeats, stream):
        return self.time(fn, nbytes=nbytes, label=label, repeats=repeats, stream=stream)

    def synchronize(self, devices):
        pass


def test_measure_with_injected_backend_builds_valid_matrices(tmp_path):
    backend = HostBackend(2, access=[[True, False], [False, True]])
    run = measure.measure([0, 1], nbytes=1000, latency_nbytes=16, repeats=3, backend=backend)
    f = run.to_frame()
    assert len(f) == 3 * 2 * 4  # 3 matrices × P2P on/off × 4 cells
    uni = run.matrix("bandwidth_uni", "enabled")
    # the fake clock makes every call last 0.5 ms: bytes counted decide the bandwidth
    assert uni.loc[0, 1] == pytest.approx(1000 / 5e-4 / 1e9)
    assert uni.loc[0, 0] == pytest.approx(2 * uni.loc[0, 1])  # read + write inside one GPU
    assert run.matrix("bandwidth_bi", "enabled").loc[0, 1] == pytest.approx(2 * uni.loc[0, 1])  # both directions
    assert run.matrix("latency_gpu", "disabled").loc[1, 0] == pytest.approx(500.0)
    modes = dict(zip(zip(f.matrix, f.p2p, f.src, f.dst), f["mode"]))
    assert modes[("bandwidth_uni", "enabled", 0, 1)] == "driver"  # no peer access: the driver stages it
    assert modes[("bandwidth_uni", "disabled", 0, 1)] == "host_staged"
    assert modes[("bandwidth_uni", "disabled", 0, 0)] == "local"
    assert any(p.staged and p.calls for p in backend.paths) and any(not p.staged and p.calls for p in backend.paths)
    # the frame is a valid p2p_matrix dataset and the diagnosis reads it
    meta = {
        "kind": "p2p_matrix",
        "title": "simulated",
        "system": "test",
        "gpu": "simulated",
        "gpu_count": 2,
        "nodes": 1,
        "interconnect": "none",
        "software": "pytest",
        "date": "2026-01-01",
        "method": "test",
        "source": "test",
        "source_file": "labkit record",
        "caveats": "simulated GPUs in host memory",
        "quality": "C",
        "bandwidth_direction": "mixed",
        "provenance": "measured",
    }
    reference.write_dataset(tmp_path, "p2p_sim", f, meta)
    ds = reference.load("p2p_sim", tmp_path)
    assert matrices.validate(ds) == []
    assert any(x.rule == "peer_access" for x in diagnosis.diagnose(run))


def test_single_device_run_adds_the_loopback_staged_copy():
    run = measure.measure([0], nbytes=512, repeats=2, backend=HostBackend(1), kinds=("bandwidth_uni", "latency_gpu"))
    f = run.to_frame()
    loop = f[f["mode"] == "host_staged_loopback"]
    assert set(loop["matrix"]) == {"bandwidth_uni", "latency_gpu"}
    assert len(run.matrix("bandwidth_uni", "disabled")) == 1  # the diagonal, loopback left out
    assert run.matrix("bandwidth_uni", "disabled", loopback=True).loc[0, 0] > 0
    assert run.label.startswith("measured here: 1× simulated GPU0")


def test_record_writes_a_profile_dataset_and_skips_without_gpu(tmp_path):
    assert bench_p2p.record(tmp_path, True, {"cuda_available": False}) == []
    env = {
        "cuda_available": True,
        "host": "testhost",
        "cpu": "test cpu",
        "cpu_count": 2,
        "labkit": "0",
        "torch": "x",
        "python": "3",
        "date": "2026-01-01T00:00:00+00:00",
        "gpus": [],
        "cuda_devices": ["simulated GPU"],
        "topology": "        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n",
    }
    names = bench_p2p.record(tmp_path, True, env, backend=HostBackend(2), devices=[0, 1], nbytes=4096)
    assert names == ["p2p_matrix"]
    ds = reference.load("p2p_matrix", tmp_path)
    assert ds.meta["provenance"] == "measured" and ds.meta["topology"].startswith("        GPU0")
    assert matrices.validate(ds) == []
    assert ds.label.startswith("measured here")


# --------------------------------------------------------------------------- command line without a GPU
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_bench_without_gpu_says_what_is_missing(capsys):
    args = argparse.Namespace(
        devices=None, size=None, latency_size="16B", matrices="uni", p2p="enabled", repeats=10, quick=True, json=True
    )
    with pytest.raises(RuntimeError, match="needs a CUDA GPU") as e:
        bench_p2p.bench(args)
    assert "mode='reference'" in str(e.value) and "labkit doctor" in str(e.value)
    assert cli.main(["bench", "p2p", "--json", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "labkit bench p2p: error: labkit bench p2p needs a CUDA GPU" in err


# --------------------------------------------------------------------------- figures
@pytest.mark.parametrize("ds", RECORDED, ids=_ids)
def test_heatmaps_are_labelled(ds):
    import matplotlib.pyplot as plt

    kind, state = matrices.metrics(ds)[0]
    fig = figures.plot_matrix(ds, kind, state)
    try:
        assert plots.figure_problems(fig) == []
        ax = fig.axes[0]
        assert ax.get_xlabel() == "destination GPU (index)" and ax.get_ylabel() == "source GPU (index)"
        assert "recorded:" in ax.get_title()
        assert ("GB/s" if matrices.is_bandwidth(kind) else "µs") in fig.axes[1].get_ylabel()
    finally:
        plt.close(fig)


def test_overview_figure_is_labelled():
    import matplotlib.pyplot as plt

    fig = figures.plot_overview(RECORDED)
    try:
        assert plots.figure_problems(fig) == []
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_gpu_single_device_quick_run():
    run = measure.measure([0], nbytes=8 << 20, repeats=3)
    uni = run.matrix("bandwidth_uni", "enabled")
    assert uni.loc[0, 0] > 50  # a copy inside any CUDA GPU's memory, read + write counted
    loop = run.matrix("bandwidth_uni", "disabled", loopback=True).loc[0, 0]
    assert 0.5 < loop < uni.loc[0, 0]
    lat = run.matrix("latency_gpu", "enabled").loc[0, 0]
    assert 0.1 < lat < 1000
    assert run.matrix("bandwidth_bi", "enabled").loc[0, 0] > 0


@pytest.mark.gpu
def test_gpu_staging_loopback_keeps_the_data():
    stager = staging.CudaStaging(0, 0, chunk_bytes=1 << 20)
    src = torch.randint(0, 255, (5 << 20 | 123,), dtype=torch.uint8, device="cuda:0")
    dst = torch.zeros_like(src)
    stager.copy(dst, src)
    torch.cuda.synchronize(0)
    assert torch.equal(dst, src)


@pytest.mark.gpu
def test_gpu_bench_yields_records():
    args = argparse.Namespace(
        devices="0",
        size="4MiB",
        latency_size="16B",
        matrices="uni,latency",
        p2p="enabled,disabled",
        repeats=3,
        quick=True,
        json=True,
    )
    recs = list(bench_p2p.bench(args))
    assert recs and all(r["experiment"] == "p2p" for r in recs)
    assert any("bandwidth_GBps" in r for r in recs) and any("latency_us" in r for r in recs)


@pytest.mark.multigpu
def test_multigpu_pair_run_and_staging():
    stager = staging.CudaStaging(0, 1, chunk_bytes=1 << 20)
    src = torch.randint(0, 255, (3 << 20 | 7,), dtype=torch.uint8, device="cuda:0")
    dst = torch.zeros(src.numel(), dtype=torch.uint8, device="cuda:1")
    stager.copy(dst, src)
    torch.cuda.synchronize(1)
    assert torch.equal(dst.cpu(), src.cpu())
    run = measure.measure([0, 1], nbytes=16 << 20, repeats=3)
    for kind in ("bandwidth_uni", "bandwidth_bi", "latency_gpu"):
        for state in matrices.P2P_STATES:
            m = run.matrix(kind, state)
            assert m.shape == (2, 2) and np.isfinite(m.to_numpy()).all()
    assert run.peer_access[0][1] == torch.cuda.can_device_access_peer(0, 1)


def test_link_summary_of_a_one_gpu_profile_is_an_empty_table_with_its_columns():
    """The H100 profile was recorded on one GPU: no pair, so no link to summarise (notebook 04 crashed on it)."""
    ds = reference.resolve_reference("h100_pcie5_vm_20261123", "p2p_matrix")[0]
    assert ds.name == "p2p_matrix" and set(ds.frame.src) == set(ds.frame.dst) == {0}
    t = summaries.link_summary(ds)
    assert t.empty and list(t.columns) == ["link", "matrix", "p2p", "pairs", "median", "min", "max", "unit"]


class _FakeTorch:
    """Just what measure._time_queued touches of torch: device/stream contexts and device-wide syncs."""

    class cuda:
        synced: list = []

        @staticmethod
        def device(_):
            return contextlib.nullcontext()

        @staticmethod
        def stream(_):
            return contextlib.nullcontext()

        @staticmethod
        def current_device():
            return 0

        @staticmethod
        def device_count():
            return 2

        @classmethod
        def synchronize(cls, d):
            cls.synced.append(d)


class _EarlyStream(timing.FakeStream):
    def query(self, event_t):  # the spin always ends before the queue is full
        return True


@pytest.mark.parametrize("early", [False, True])
def test_latency_timing_goes_through_timing_time_blocked(monkeypatch, early):
    """The GPU latency path (CudaBackend.time_latency) is timing.time_blocked on the timing stream; its warning
    becomes the cell's note. The CUDA stream is replaced by a simulated one (no GPU here)."""
    sim = (_EarlyStream if early else timing.FakeStream)(issue_s=7e-6, gpu_copy_s=2e-6)
    monkeypatch.setattr(_FakeTorch.cuda, "synced", [])  # per run: another run's syncs must not satisfy this one
    monkeypatch.setattr(timing, "CudaEventStream", lambda stream: sim)
    stream = argparse.Namespace(device=argparse.Namespace(index=1))
    m, notes = measure._time_queued(
        _FakeTorch, sim.copy, calls=100, repeats=3, nbytes=16, label="latency", stream=stream
    )
    assert m.timer == "cuda_event" and m.inner == 100 and m.nbytes == 16 and len(m.samples_s) == 3
    assert _FakeTorch.cuda.synced == [0, 1]  # every device drained afterwards, once
    if early:
        assert len(notes) == 1 and "includes host time" in notes[0]
    else:
        assert notes == () and m.median_s == pytest.approx(2e-6, rel=1e-9)
