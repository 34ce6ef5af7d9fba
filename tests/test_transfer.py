"""Copy sweeps on the CPU: host-memory sweep, OOM handling with an injected allocator, the pinned cap."""

import pytest

from labkit import timing, units
from labkit.copies import sweeps
from labkit.units import GiB, MiB


def test_host_copy_sweep_measures_every_size():
    s = sweeps.host_copy_sweep([1024, 1 << 20], repeats=3)
    assert s.nbytes == [1024, 1 << 20]
    assert all(bw > 0 for bw in s.bandwidth_GBps)
    f = s.to_frame()
    assert set(f.columns) >= {"direction", "memory", "nbytes", "bandwidth_GBps", "time_s", "samples_s"}
    assert (f["direction"] == "host").all()


class FakeOOM(RuntimeError):
    pass


def test_oom_skips_the_sizes_that_do_not_fit_and_keeps_the_rest():
    budget = 8 * MiB  # an injected "device" with 8 MiB free

    def measure_one(n):
        if 2 * n > budget:  # source and destination buffers
            raise FakeOOM(f"cannot allocate {n}")
        return timing.Measurement((1e-6 * n / MiB,) * 3, 1, "host", nbytes=n)

    released = []
    sizes = [1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB]
    got, skipped = sweeps.sweep_sizes(
        sizes, measure_one, is_oom=lambda e: isinstance(e, FakeOOM), on_oom=lambda: released.append(1)
    )
    assert [m.nbytes for m in got] == [1 * MiB, 2 * MiB, 4 * MiB]
    assert len(skipped) == 2 and all("out of memory" in s for s in skipped)
    assert "8 MiB" in skipped[0] and "16 MiB" in skipped[1]
    assert len(released) == 2  # the cache is released after each failure


def test_a_real_error_is_not_mistaken_for_oom():
    def measure_one(n):
        raise ValueError("broken copy")

    with pytest.raises(ValueError, match="broken copy"):
        sweeps.sweep_sizes([1024], measure_one, is_oom=lambda e: isinstance(e, FakeOOM))


def test_pinned_allocation_above_the_cap_is_refused_before_allocating():
    with pytest.raises(ValueError, match="PINNED_CAP_BYTES"):
        sweeps.gpu_copy_sweep([units.PINNED_CAP_BYTES + 1], "h2d", "pinned")
    assert units.check_pinned_request(1 * GiB) == 1 * GiB


@pytest.mark.parametrize("kw", [dict(direction="sideways"), dict(memory="managed")])
def test_bad_sweep_arguments(kw):
    with pytest.raises(ValueError):
        sweeps.gpu_copy_sweep([1024], **kw)


@pytest.mark.parametrize("bad", [[0], [-4], [128 * GiB]])
def test_bad_sizes_are_rejected(bad):
    with pytest.raises(ValueError):
        sweeps.gpu_copy_sweep(bad, "h2d", "pageable")


@pytest.mark.gpu
def test_gpu_sweep_bandwidth_grows_with_size():
    s = sweeps.gpu_copy_sweep([4, 1 << 16, 1 << 24], "h2d", "pinned", repeats=5)
    bw = s.bandwidth_GBps
    assert bw[0] < bw[1] < bw[2]
    fit = sweeps.Sweep("h2d", "pinned", s.measurements, s.device).fit()
    assert 0.5e-6 < fit.latency_s < 50e-6


@pytest.mark.gpu
def test_pinned_is_at_least_as_fast_as_pageable_for_large_copies():
    n = 64 << 20
    pinned = sweeps.gpu_copy_sweep([n], "h2d", "pinned", repeats=5).bandwidth_GBps[0]
    pageable = sweeps.gpu_copy_sweep([n], "h2d", "pageable", repeats=5).bandwidth_GBps[0]
    assert pinned >= 0.95 * pageable
