import pytest
from stand_ins import NeverHeld

from labkit import timing


class FakeClock:
    """A clock that advances by a scripted amount on every call of the timed function."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_time_host_uses_injected_clock_and_keeps_raw_samples():
    clock = FakeClock()
    durations = iter([1e-3] * 100)

    def op():
        clock.t += next(durations)

    m = timing.time_host(op, repeats=5, warmup=2, inner=3, clock=clock, nbytes=1000, label="op")
    assert m.inner == 3 and len(m.samples_s) == 5
    assert m.median_s == pytest.approx(1e-3)
    assert m.iqr_s == pytest.approx(0.0, abs=1e-12)
    assert m.bandwidth_GBps == pytest.approx(1000 / 1e-3 / 1e9)
    assert m.warnings == []


def test_setup_runs_untimed_before_every_call_and_sample():
    clock, log = FakeClock(), []

    def setup():
        log.append("setup")
        clock.t += 1.0  # untimed: must not reach the samples

    def op():
        log.append("op")
        clock.t += 1e-3

    m = timing.time_host(op, repeats=3, warmup=1, inner=1, clock=clock, setup=setup)
    assert log == ["setup", "op"] * 4
    assert m.samples_s == pytest.approx((1e-3,) * 3)


def test_sync_runs_once_per_sample_inside_the_timing():
    clock, log = FakeClock(), []

    def op():  # only enqueues: the work is paid for by sync
        log.append("op")

    def sync():
        log.append("sync")
        clock.t += 4e-3  # four calls' device work, drained

    m = timing.time_host(op, repeats=2, warmup=1, inner=4, clock=clock, sync=sync)
    assert log == ["op"] + (["op"] * 4 + ["sync"]) * 2  # warm-up calls are not synchronised
    assert m.samples_s == pytest.approx((1e-3, 1e-3))


def test_inner_for_sizes_a_sample_to_min_sample_s_within_bounds():
    assert timing.inner_for(1e-4) == 10  # 10 × 0.1 ms = 1 ms
    assert timing.inner_for(1.0) == 1
    assert timing.inner_for(0.0, max_inner=200) == 200
    assert timing.inner_for(1e-9, max_inner=200) == 200


def test_blocked_timing_measures_the_device_and_the_host_apart():
    s = timing.FakeStream(issue_s=7e-6, gpu_copy_s=2e-6)
    r = timing.time_blocked(s, s.copy, calls=50, repeats=4, label="4 B", nbytes=4)
    assert r.gpu.timer == "cuda_event" and r.gpu.inner == 50 and r.gpu.nbytes == 4
    assert r.gpu.median_s == pytest.approx(2e-6, rel=1e-9)
    assert r.issue_s == pytest.approx((7e-6,) * 4)
    assert r.pipelined_s == () and r.retries == 0 and r.warnings == []


def test_measurement_warns_about_spread():
    m = timing.Measurement((1.0, 1.0, 2.0, 3.0, 1.0, 2.5), inner=1, timer="host", label="noisy")
    assert any("IQR" in w for w in m.warnings)
    few = timing.Measurement((1.0,), inner=1, timer="host")
    assert any("samples" in w for w in few.warnings)


def test_inner_loop_is_sized_to_the_time_budget():
    clock = FakeClock()

    def op():
        clock.t += 1e-6

    m = timing.time_host(op, repeats=3, warmup=0, clock=clock, min_sample_s=1e-3)
    assert m.inner == 1000


def test_time_host_rejects_zero_repeats():
    with pytest.raises(ValueError):
        timing.time_host(lambda: None, repeats=0)


def test_time_cuda_without_gpu_says_what_to_do():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="mode='reference'"):
        timing.time_cuda(lambda: None)


@pytest.mark.gpu
def test_time_cuda_measures_a_copy():
    import torch

    src = torch.empty(1 << 24, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(1 << 24, dtype=torch.uint8, device="cuda")
    m = timing.time_cuda(lambda: dst.copy_(src, non_blocking=True), repeats=5, nbytes=1 << 24)
    assert m.timer == "cuda_event" and 0.5 < m.bandwidth_GBps < 1000


def test_a_spin_that_never_holds_does_not_grow_from_sample_to_sample():
    s = NeverHeld(issue_s=7e-6, gpu_copy_s=2e-6)
    r = timing.time_blocked(s, s.copy, calls=10, repeats=5, spin_s=1e-3)
    per_sample = [1e-3 * 2**k for k in range(timing.MAX_SPIN_RETRIES + 1)]
    assert s.spins == pytest.approx(per_sample * 5)  # bounded: each sample retries from the same spin
    assert r.released_early == 5 and r.retries == 5 * timing.MAX_SPIN_RETRIES


class _FakeCudaForCalibration:
    """torch.cuda as spin_cycles_per_s uses it, on a simulated device clock: a spin of c cycles lasts c / hz, and the
    first launch of the spin kernel first waits `load_s` on the device's timeline (lazy kernel loading while the
    stream already stands past the start event)."""

    def __init__(self, hz, load_s):
        self.hz, self.load_s, self.t, self.loaded = hz, load_s, 0.0, False
        sim = self

        class Event:
            def __init__(self, enable_timing):
                self.t = None

            def record(self):
                self.t = sim.t

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return (end.t - self.t) * 1e3  # ms

        self.Event = Event

    def device(self, index):
        import contextlib

        return contextlib.nullcontext()

    def _sleep(self, cycles):
        if not self.loaded:
            self.t, self.loaded = self.t + self.load_s, True
        self.t += cycles / self.hz


def test_spin_calibration_does_not_time_the_first_launch(monkeypatch):
    import torch

    fake = _FakeCudaForCalibration(hz=1.5e9, load_s=1e-3)
    for name in ("Event", "device", "_sleep"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name), raising=False)
    monkeypatch.setattr(timing, "_SPIN_CYCLES_PER_S", {})
    assert timing.spin_cycles_per_s(0) == pytest.approx(1.5e9, rel=1e-9)  # cycles per second, not per ms
    fake.hz = 1.0  # cached: measured once per device
    assert timing.spin_cycles_per_s(0) == pytest.approx(1.5e9, rel=1e-9)
