"""labkit.copies.numa: NUMA topology from sysfs, first-touch placement, the page check, and the child process."""

import os

import numpy as np
import pytest

from labkit import plots
from labkit.copies import numa
from labkit.units import MiB


@pytest.fixture(scope="module")
def here():
    """The real topology of this machine, quick size, measured once (the caller's affinity recorded around it)."""
    before = os.sched_getaffinity(0)
    df = numa.local_vs_remote(quick=True)
    return df, before, os.sched_getaffinity(0)


@pytest.fixture(scope="module")
def two_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to fake two NUMA nodes")
    return cpus[:2]


@pytest.fixture(scope="module")
def fake_two(two_cpus):
    """Two "nodes" mapped to two real CPUs of (probably) one real node: the two-node path, honestly checked."""
    return numa.local_vs_remote(nodes={0: [two_cpus[0]], 1: [two_cpus[1]]}, nbytes=8 * MiB, repeats=3)


def _real_node(cpu):
    return next(n for n, cs in numa.numa_nodes().items() if cpu in cs)


def test_numa_nodes_parses_ranges_commas_and_cpu_less_nodes(tmp_path):
    for name, text in {"node0": "0-3,8-11\n", "node1": "4-7,12\n", "node2": "\n", "node10": "13\n"}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "cpulist").write_text(text)
    (tmp_path / "node3").mkdir()  # no cpulist at all: a memory-only node too
    (tmp_path / "possible").write_text("0-10\n")  # files and other folders beside the nodes are not nodes
    (tmp_path / "power").mkdir()
    nodes = numa.numa_nodes(tmp_path)
    assert nodes == {0: [0, 1, 2, 3, 8, 9, 10, 11], 1: [4, 5, 6, 7, 12], 2: [], 3: [], 10: [13]}
    assert list(nodes) == [0, 1, 2, 3, 10]


def test_numa_nodes_without_sysfs_is_one_node_of_this_process_cpus(tmp_path):
    assert numa.numa_nodes(tmp_path / "missing") == {0: sorted(os.sched_getaffinity(0))}
    assert numa.numa_nodes(tmp_path) == {0: sorted(os.sched_getaffinity(0))}  # a folder with no node in it


def test_numa_balancing_is_read_and_explained(tmp_path):
    f = tmp_path / "numa_balancing"
    f.write_text("1\n")
    assert numa.numa_balancing(f) == 1
    assert "migrate" in numa.balancing_note(1) and "ON" in numa.balancing_note(1)
    assert numa.numa_balancing(tmp_path / "missing") is None
    assert "off" in numa.balancing_note(0)


def test_classify_never_calls_unverified_or_misplaced_pages_remote():
    assert numa._classify("remote", 1, {1: 100}, 0) == ("remote", 1.0, 1)
    assert numa._classify("local", 0, {0: 100}, 0) == ("local", 1.0, 0)
    placement, frac, node = numa._classify("remote", 1, {0: 100}, 0)
    assert placement.startswith("local, not remote") and frac == 0.0 and node == 0
    assert numa._classify("remote", 1, None, 0)[0] == "remote (placement not verified)"
    assert "not verified" in numa._classify("remote", 1, {0: 50, 1: 50}, 0)[0]
    assert "not verified" in numa._classify("remote", 1, {1: 100}, None)[0]
    assert numa._classify("remote", 2, {1: 100}, 0)[0] == "remote, but pages on node 1, not 2"


def test_numa_maps_counts_only_for_a_mapping_that_is_the_buffer_alone():
    ps = os.sysconf("SC_PAGE_SIZE")
    lo, n = 0x7F0000000000, 64 * ps
    maps = f"{lo:x}-{lo + n:x} rw-p 00000000 00:00 0\n"
    nm = f"{lo:x} default anon=64 dirty=64 N0=40 N1=24 kernelpagesize_kB=4\n"
    assert numa.numa_maps_counts(lo, n, maps, nm) == {0: 40, 1: 24}
    merged = f"{lo:x}-{lo + 4 * n:x} rw-p 00000000 00:00 0\n"  # merged with a neighbour: counts would mix
    assert numa.numa_maps_counts(lo, n, merged, nm) is None
    assert numa.numa_maps_counts(lo + 8 * n, n, maps, nm) is None


def test_page_nodes_of_a_buffer_here():
    a = np.ones(4 * MiB, np.uint8)
    counts, method = numa.page_nodes(a)
    if method is None:
        assert counts is None  # "placement not verified"
        return
    assert method in ("move_pages", "numa_maps")
    assert sum(counts.values()) > 0 and set(counts) <= set(numa.numa_nodes())


def test_local_row_here_and_the_callers_affinity_is_unchanged(here):
    df, before, after = here
    assert after == before
    assert df.attrs["affinity_restored"] is True
    local = df[df.cpu_node == df.memory_node]
    assert len(local) >= 1
    assert (local.GBps > 0).all() and (local.vs_local == 1.0).all()
    assert (local.nbytes == numa.QUICK_NBYTES).all()
    assert all(label.startswith("measured here: ") for label in df.label)
    assert numa.BYTES_COUNTED in df.attrs["notes"]
    for r in local.itertuples():
        if r.verification is None:
            assert r.placement == "local (placement not verified)" and np.isnan(r.pages_on_node_fraction)
        else:
            assert r.placement == "local" and r.pages_on_node_fraction >= numa.PLACED_FRACTION
    if len([c for c in numa.numa_nodes().values() if c]) == 1:
        assert len(df) == 1 and df.attrs["one_node"]
        assert numa.one_node_message() in df.attrs["notes"]
        assert "placement" in numa.one_node_message() and "P100" in numa.one_node_message()


def test_fake_two_nodes_are_measured_and_checked_honestly(fake_two, two_cpus):
    df = fake_two
    assert list(df.columns[: len(numa.COLUMNS)]) == numa.COLUMNS
    assert sorted(zip(df.cpu_node, df.memory_node)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert not df.attrs["one_node"]
    assert df.attrs["affinity_restored"] is True  # the child was pinned to one CPU last, then restored
    assert (df.GBps > 0).all() and (df.nbytes == 8 * MiB).all()
    for c in (0, 1):
        assert float(df[(df.cpu_node == c) & (df.memory_node == c)].vs_local.iloc[0]) == 1.0
    remote = df[df.intended == "remote"]
    assert len(remote) == 2
    real = {_real_node(c) for c in two_cpus}
    if len(real) > 1:
        pytest.skip("the two CPUs are on two real nodes: the fake topology is real here")
    (node,) = real
    assert (df.thread_on_node == node).all()
    if df.attrs["verification"] is None:
        assert (remote.placement == "remote (placement not verified)").all()
        return
    # the page check sees the real node: the "remote" rows are flagged as local, never reported as remote
    assert (df.placement != "remote").all()
    assert (remote.placement == f"local, not remote: thread on node {node}, pages on node {node}").all()
    assert (remote.page_node == node).all()
    row01 = df[(df.cpu_node == 0) & (df.memory_node == 1)].iloc[0]
    assert row01.pages_on_node_fraction == (1.0 if node == 1 else 0.0)
    assert "local, not remote" in row01.label


def test_plot_has_title_units_and_source(fake_two):
    with plots.detached_figures() as figs:
        ax = numa.plot_local_vs_remote(fake_two)
    assert len(figs) == 1 and plots.figure_problems(figs[0]) == []
    assert "GB/s" in ax.get_ylabel() and "measured here" in ax.get_title()
    assert len(ax.patches) == len(fake_two)
    assert any(t.get_text().startswith("measured here") for t in ax.get_legend().get_texts())


def test_child_failure_is_reported(two_cpus):
    with pytest.raises(RuntimeError, match="NUMA measurement failed"):
        numa.run_child(nodes={0: [two_cpus[0]]}, nbytes=-5, repeats=0)


def test_plot_of_this_machine_says_when_there_is_no_remote_node(here):
    df = here[0]
    with plots.detached_figures() as figs:
        ax = numa.plot_local_vs_remote(df)
    assert plots.figure_problems(figs[0]) == []
    title = ax.get_legend().get_title().get_text()
    assert ("no remote node" in title) == bool(df.attrs["one_node"])
