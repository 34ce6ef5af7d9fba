"""labkit.overlap: efficiency arithmetic, timelines (Gantt data), host streams, the double-buffered loader."""

from __future__ import annotations

import json
import math
import threading
import time

import numpy as np
import pytest

from labkit import timing
from labkit.overlap import bench_overlap, figures, measure, recorded, streams, timelines
from labkit.overlap.timelines import Span, Timeline

ENV = {
    "host": "testhost",
    "cpu": "test cpu",
    "cpu_count": 2,
    "date": "2026-01-01T00:00:00+00:00",
    "cuda_available": False,
    "gpus": [],
    "labkit": "test",
    "torch": "test",
    "python": "3",
}


# --------------------------------------------------------------------------- efficiency arithmetic
@pytest.mark.parametrize(
    "t_copy, t_compute, t_both, expected",
    [
        (2.0, 4.0, 4.0, 1.0),  # the copy hides completely under the compute
        (2.0, 4.0, 6.0, 0.0),  # serialised
        (2.0, 4.0, 5.0, 0.5),  # half of the shorter job hidden
        (4.0, 2.0, 5.0, 0.5),  # symmetric in copy and compute
        (3.0, 3.0, 3.0, 1.0),
        (2.0, 4.0, 7.0, -0.5),  # both at once slower than one after the other: they fought
    ],
)
def test_overlap_efficiency(t_copy, t_compute, t_both, expected):
    assert timelines.overlap_efficiency(t_copy, t_compute, t_both) == pytest.approx(expected)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), None, "1"])
def test_overlap_efficiency_rejects_non_positive_or_non_numbers(bad):
    with pytest.raises(ValueError):
        timelines.overlap_efficiency(bad, 1.0, 1.0)
    with pytest.raises(ValueError):
        timelines.overlap_efficiency(1.0, 1.0, bad)


def test_step_time():
    assert timelines.step_time_s(2e-3, 3e-3, overlapped=False) == pytest.approx(5e-3)
    assert timelines.step_time_s(2e-3, 3e-3, overlapped=True) == pytest.approx(3e-3)
    assert timelines.step_time_s(2e-3, 3e-3, overlapped=True, d2h_s=4e-3) == pytest.approx(4e-3)
    assert timelines.step_time_s(2e-3, 3e-3, overlapped=False, d2h_s=4e-3) == pytest.approx(9e-3)
    with pytest.raises(ValueError):
        timelines.step_time_s(-1.0, 1.0, overlapped=True)


# --------------------------------------------------------------------------- spans and timelines
def test_span_validation():
    assert Span("copy", "copy 0", 1.0, 3.0).duration_s == 2.0
    with pytest.raises(ValueError, match="ends .* before it starts"):
        Span("copy", "copy 0", 3.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        Span("copy", "copy 0", 0.0, float("nan"))
    with pytest.raises(ValueError, match="no spans"):
        Timeline("empty", (), "model: x")


def _tl():
    return Timeline(
        "t",
        (
            Span("copy", "copy 0", 0.0, 2.0),
            Span("copy", "copy 1", 2.0, 4.0),
            Span("compute", "compute 0", 2.0, 5.0),
            Span("compute", "compute 1", 5.0, 8.0),
        ),
        "model: hand-made",
    )


def test_timeline_quantities():
    tl = _tl()
    assert tl.makespan_s == 8.0
    assert tl.streams == ["copy", "compute"]
    assert tl.busy_s("copy") == 4.0
    assert tl.busy_s("compute") == 6.0
    assert tl.concurrent_s == pytest.approx(2.0)  # copy 1 under compute 0
    assert tl.step_s("compute") == pytest.approx(3.0)
    assert [s.name for s in tl.on("compute")] == ["compute 0", "compute 1"]
    shifted = dataclass_shift = tl.shifted()
    assert shifted.start_s == 0.0 and dataclass_shift.makespan_s == tl.makespan_s
    with pytest.raises(ValueError, match="fewer than two"):
        Timeline("one", (Span("compute", "c", 0, 1),), "model: x").step_s("compute")


def test_busy_counts_overlapping_spans_once():
    tl = Timeline("t", (Span("a", "x", 0, 3), Span("a", "y", 1, 2), Span("a", "z", 5, 6)), "model: x")
    assert tl.busy_s("a") == pytest.approx(4.0)
    assert tl.concurrent_s == pytest.approx(0.0)


def test_timeline_frame_round_trip_and_schema(tmp_path):
    from labkit import reference
    from labkit.provenance import measured_meta

    tl = _tl()
    frame = tl.to_frame(repeat=0)
    assert list(frame.columns[:5]) == ["scenario", "event", "stream", "start_s", "end_s"]
    back = Timeline.from_frame(frame, "recorded: x")
    assert sorted(back.spans, key=lambda s: s.name) == sorted(tl.spans, key=lambda s: s.name)
    meta = measured_meta(ENV, kind="overlap_run", title="t", method="m", bandwidth_direction="none")
    reference.write_dataset(tmp_path, "t_overlap", frame, meta)
    ds = reference.load("t_overlap", tmp_path)
    assert ds.kind == "overlap_run" and len(ds.frame) == 4
    with pytest.raises(ValueError, match="no rows"):
        Timeline.from_frame(frame, "x", scenario="nope")


# --------------------------------------------------------------------------- the pipeline model
@pytest.mark.parametrize("copy_s, compute_s", [(2.0, 3.0), (3.0, 2.0), (1.0, 1.0)])
def test_pipeline_model_makespans(copy_s, compute_s):
    n = 6
    serial = timelines.pipeline_timeline(n, copy_s, compute_s, overlapped=False)
    assert serial.makespan_s == pytest.approx(n * (copy_s + compute_s))
    assert serial.concurrent_s == pytest.approx(0.0)
    over = timelines.pipeline_timeline(n, copy_s, compute_s, overlapped=True)
    assert over.makespan_s == pytest.approx(copy_s + compute_s + (n - 1) * max(copy_s, compute_s))
    assert over.step_s("compute") == pytest.approx(timelines.step_time_s(copy_s, compute_s, overlapped=True))
    assert serial.step_s("compute") == pytest.approx(timelines.step_time_s(copy_s, compute_s, overlapped=False))
    assert over.makespan_s < serial.makespan_s  # invariant: overlapped < serial
    one = timelines.pipeline_timeline(n, copy_s, compute_s, overlapped=True, buffers=1)
    assert one.makespan_s == pytest.approx(serial.makespan_s)  # one buffer cannot overlap


def test_pipeline_model_respects_dependencies():
    tl = timelines.pipeline_timeline(8, 1.5, 1.0, buffers=2, d2h_s=0.5)
    copies, comps, backs = tl.on("copy (H2D)"), tl.on("compute"), tl.on("copy (D2H)")
    assert len(copies) == len(comps) == len(backs) == 8
    for i in range(8):
        assert comps[i].start_s >= copies[i].end_s - 1e-12  # compute waits for its copy
        assert backs[i].start_s >= comps[i].end_s - 1e-12  # copy back waits for the compute
        if i >= 2:
            assert copies[i].start_s >= comps[i - 2].end_s - 1e-12  # no buffer refilled while in use
    for spans in (copies, comps, backs):  # one engine per stream: no overlap within a stream
        assert all(a.end_s <= b.start_s + 1e-12 for a, b in zip(spans, spans[1:]))


def test_pipeline_model_rejects_bad_input():
    with pytest.raises(ValueError):
        timelines.pipeline_timeline(0, 1, 1)
    with pytest.raises(ValueError):
        timelines.pipeline_timeline(2, -1, 1)
    with pytest.raises(ValueError):
        timelines.pipeline_timeline(2, 1, 1, buffers=0)


def _eff_frame(rows):
    """overlap_run rows from (ratio, repeat, t_copy, t_compute, t_both)."""
    import pandas as pd

    out = []
    for ratio, rep, tc, tk, tb in rows:
        for scenario, spans in (
            (timelines.COPY_ALONE, [("copy", 0, tc)]),
            (timelines.COMPUTE_ALONE, [("compute", 0, tk)]),
            (timelines.BOTH, [("copy", 0, tc), ("compute", 0, tb)]),
        ):
            for stream, a, b in spans:
                out.append(
                    {
                        "scenario": scenario,
                        "event": stream,
                        "stream": stream,
                        "start_s": a,
                        "end_s": b,
                        "compute_to_copy": ratio,
                        "repeat": rep,
                        "nbytes": 1,
                        "memory": "host",
                    }
                )
    return pd.DataFrame(out)


def test_efficiency_counts_from_the_submission_origin():
    """A job that starts late (a thread waking up) costs its delay: times run from t = 0 (submission)."""
    f = _eff_frame([(1.0, 0, 2.0, 2.0, 3.0)])
    f.loc[(f.scenario == timelines.COPY_ALONE), "start_s"] = 1.0  # the copy started 1 s after submission...
    f.loc[(f.scenario == timelines.COPY_ALONE), "end_s"] = 3.0  # ...and took 2 s: T_copy = 3 s
    t = timelines.efficiency_table(f)
    assert t["t_copy_s"].iloc[0] == pytest.approx(3.0)
    assert t["efficiency"].iloc[0] == pytest.approx((3 + 2 - 3) / 2)


def test_efficiency_table_from_spans():
    f = _eff_frame([(1.0, 0, 2.0, 2.0, 3.0), (1.0, 1, 2.0, 2.0, 3.0), (1.0, 2, 2.0, 2.0, 4.0), (4.0, 0, 1.0, 4.0, 4.0)])
    t = timelines.efficiency_table(f).set_index("compute_to_copy")
    assert t.loc[1.0, "efficiency"] == pytest.approx(0.5)  # median of the per-repeat 0.5, 0.5, 0.0
    assert t.loc[1.0, "t_both_s"] == pytest.approx(3.0)
    assert t.loc[1.0, "repeats"] == 3
    assert t.loc[1.0, "efficiency_q1"] <= t.loc[1.0, "efficiency"] <= t.loc[1.0, "efficiency_q3"]
    assert t.loc[4.0, "efficiency"] == pytest.approx(1.0)
    assert t.loc[4.0, "measured_ratio"] == pytest.approx(4.0)
    with pytest.raises(ValueError, match="not an efficiency"):
        timelines.efficiency_table(f[f["scenario"] == "nope"])


# --------------------------------------------------------------------------- host streams
def test_host_stream_runs_in_order_and_returns_results():
    order = []
    with streams.HostStream("s") as s:
        futs = [s.run(lambda i=i: order.append(i) or i * i) for i in range(20)]
        s.synchronize()
    assert order == list(range(20))
    assert [f.result() for f in futs] == [i * i for i in range(20)]


def test_host_stream_wait_holds_later_work_but_not_the_caller():
    ran = threading.Event()
    with streams.HostStream("s") as s:
        gate = streams.HostEvent()
        s.wait(gate)
        s.run(ran.set)
        t0 = time.perf_counter()
        done = s.record()
        assert time.perf_counter() - t0 < 0.5  # the caller did not block
        time.sleep(0.05)
        assert not ran.is_set() and not done.query()
        gate.fire()
        done.synchronize(timeout=5)
        assert ran.is_set() and done.time_s >= gate.time_s


@pytest.mark.parametrize("make", [streams.InlineStream, streams.HostStream])
def test_host_streams_have_the_timing_stream_interface(make):
    """labkit.timing's event timer runs on a host stream: the time between two recorded events spans the work."""
    s = make()
    try:
        per_call = timing.time_events(s, lambda: s.run(lambda: time.sleep(0.01)), 3)
        assert per_call >= 0.01  # sleep lasts at least what it was asked for
        ev = s.record()
        s.synchronize()
        assert s.query(ev)
    finally:
        s.close()


def test_host_stream_exception_goes_to_the_future():
    with streams.HostStream("s") as s:
        fut = s.run(lambda: 1 / 0)
        after = s.run(lambda: "still running")
        with pytest.raises(ZeroDivisionError):
            fut.result(timeout=5)
        assert after.result(timeout=5) == "still running"


def test_host_stream_close_releases_a_stuck_wait():
    s = streams.HostStream("s")
    s.wait(streams.HostEvent())  # never fired
    t0 = time.perf_counter()
    s.close(timeout=5)
    assert not s._thread.is_alive() and time.perf_counter() - t0 < 2
    with pytest.raises(RuntimeError, match="closed"):
        s.run(lambda: None)


def test_tracer_spans_from_threads():
    main = streams.InlineStream("compute")
    tr = streams.Tracer(main)
    with streams.HostStream("copy") as cs:
        cs.run(lambda: time.sleep(0.02), name="copy", tracer=tr)
        main.run(lambda: time.sleep(0.02), name="compute", tracer=tr)
        cs.synchronize()
    tl = tr.timeline("both", "measured here: test")
    assert {s.stream for s in tl.spans} == {"copy", "compute"}
    assert all(s.start_s >= 0 and s.duration_s >= 0.015 for s in tl.spans)
    assert tl.concurrent_s > 0.005  # sleeping threads do overlap


class _FakeCudaEvent:
    """A CUDA timing event as cudaEventElapsedTime sees it: complete only once its own stream has reached it."""

    def __init__(self, stream, t_s):
        self.stream, self.t_s = stream, t_s

    @property
    def done(self):
        return self.t_s <= self.stream.reached_s

    def synchronize(self):  # cudaEventSynchronize: the host waits until this event's stream reaches it
        self.stream.reached_s = max(self.stream.reached_s, self.t_s)

    def elapsed_time(self, end):
        if not (self.done and end.done):
            raise RuntimeError("CUDA error: device not ready")  # cudaErrorNotReady
        return (end.t_s - self.t_s) * 1e3  # milliseconds, as torch.cuda.Event.elapsed_time


class _FakeCudaStream:
    def __init__(self, busy_until_s):
        self.reached_s, self.t_s = -1.0, busy_until_s

    def mark(self):
        return _FakeCudaEvent(self, self.t_s)


def test_tracer_waits_for_the_origin_event_as_well_as_the_mark():
    main, copy = _FakeCudaStream(busy_until_s=0.5), _FakeCudaStream(busy_until_s=0.0)
    tr = streams.Tracer(main)  # the origin fires when the compute stream gets to it, at 0.5 s
    tr.add("copy", "copy", _FakeCudaEvent(copy, 0.6), _FakeCudaEvent(copy, 0.9))  # on the copy stream
    (span,) = tr.timeline("copy alone", "measured here: test").spans
    assert (span.start_s, span.end_s) == pytest.approx((0.1, 0.4))  # seconds from the origin


# --------------------------------------------------------------------------- the double-buffered loader
class _Tagged:
    """Host 'device buffers' and a copy that writes batch i's tag, slowly, into a slot."""

    def __init__(self, buffers=2, n=64 * 1024, copy_sleep=0.002):
        self.buf = [np.zeros(n, dtype=np.int64) for _ in range(buffers)]
        self.copy_sleep = copy_sleep
        self.copies = []

    def copy(self, batch, slot):
        self.copies.append((batch, slot))
        self.buf[slot][: len(self.buf[slot]) // 2] = batch
        time.sleep(self.copy_sleep)  # a copy that takes a while: the second half lands later
        self.buf[slot][len(self.buf[slot]) // 2 :] = batch
        return self.buf[slot]


@pytest.mark.parametrize("buffers", [2, 3])
def test_double_buffered_yields_every_batch_once_in_order_with_intact_data(buffers):
    t = _Tagged(buffers)
    seen = []
    with streams.HostStream("copy") as cs:
        for buf in streams.double_buffered(
            range(12), t.copy, copy_stream=cs, compute_stream=streams.InlineStream(), buffers=buffers
        ):
            first = int(buf[0])
            assert (buf == first).all(), "consumer got a buffer whose copy had not finished"
            time.sleep(0.004)  # a slow consumer: the loader must not refill this buffer meanwhile
            assert (buf == first).all(), "the buffer was refilled while the consumer still held it"
            seen.append(first)
    assert seen == list(range(12))
    assert sorted(b for b, _ in t.copies) == list(range(12))
    assert all(slot == i % buffers for i, (_, slot) in enumerate(t.copies))


def test_double_buffered_overlaps_copy_with_compute():
    tr = streams.Tracer(streams.InlineStream())
    main = streams.InlineStream("compute")
    t = _Tagged(copy_sleep=0.02)
    with streams.HostStream("copy") as cs:
        for i, _ in enumerate(
            streams.double_buffered(range(5), t.copy, copy_stream=cs, compute_stream=main, tracer=tr)
        ):
            main.run(lambda: time.sleep(0.02), name=f"compute {i}", tracer=tr)
    tl = tr.timeline("loader", "measured here: test")
    assert len(tl.on("copy")) == 5 and len(tl.on("compute")) == 5
    assert tl.concurrent_s > 0.03  # copies of later batches ran under the compute of earlier ones
    for c, k in zip(tl.on("copy"), tl.on("compute")):
        assert k.start_s >= c.end_s  # never computes on a batch before its copy is done


def test_double_buffered_edge_cases():
    t = _Tagged(copy_sleep=0)
    with streams.HostStream("copy") as cs:
        assert list(streams.double_buffered([], t.copy, copy_stream=cs, compute_stream=streams.InlineStream())) == []
        with pytest.raises(ValueError, match="at least 2"):
            next(
                streams.double_buffered(
                    range(3), t.copy, copy_stream=cs, compute_stream=streams.InlineStream(), buffers=1
                )
            )
        gen = streams.double_buffered(range(100), t.copy, copy_stream=cs, compute_stream=streams.InlineStream())
        assert int(next(gen)[0]) == 0
        gen.close()  # the consumer stops early: nothing hangs, no copy left running
        assert len(t.copies) <= 3


class _LogStream:
    """A fake stream that logs what the loader asks of it (CUDA-like: nothing runs until 'synchronize')."""

    def __init__(self, name, log):
        self.name, self.log, self.n = name, log, 0

    def run(self, fn, *, name=None, tracer=None):
        self.log.append((self.name, "run", name))
        return streams._Done(fn())

    def record(self):
        self.n += 1
        ev = f"{self.name}-ev{self.n}"
        self.log.append((self.name, "record", ev))
        return ev

    def wait(self, ev):
        self.log.append((self.name, "wait", ev))

    def synchronize(self):
        self.log.append((self.name, "sync", None))


def test_double_buffered_waits_on_the_right_events():
    """Rule 1: compute waits on the event recorded right after that batch's copy. Rule 2: a slot is
    refilled only after a wait on an event the compute stream recorded after the slot's last use."""
    log = []
    cs, ks = _LogStream("copy", log), _LogStream("compute", log)
    slots = []
    for i, slot in enumerate(streams.double_buffered(range(6), lambda b, s: s, copy_stream=cs, compute_stream=ks)):
        slots.append(slot)
        log.append(("consumer", "use", i))
    recorded = set()
    ready_of = {}  # copy i -> the copy-stream event recorded right after it
    last_use = {}  # slot -> index in log of the consumer's last use
    slot_of = dict(enumerate(slots))
    for k, (who, what, arg) in enumerate(log):
        if what == "record":
            recorded.add(arg)
        if who == "copy" and what == "run":
            i = int(arg.split()[1])
            nxt = log[k + 1]
            assert nxt[:2] == ("copy", "record")
            ready_of[i] = nxt[2]
            if i >= 2:  # slot reuse: the previous wait on the copy stream must be on a compute event
                prev = log[k - 1]
                assert prev[:2] == ("copy", "wait") and prev[2].startswith("compute") and prev[2] in recorded
                assert last_use[slot_of[i]] < k
        if who == "consumer":
            last_use[slot_of[arg]] = k
            waits = [a for w, x, a in log[:k] if w == "compute" and x == "wait"]
            assert waits[-1] == ready_of[arg]  # the last compute-stream wait before use: this batch's copy
    assert slots == [0, 1, 0, 1, 0, 1]
    assert log[-1] == ("copy", "sync", None)


# --------------------------------------------------------------------------- the host experiment
def test_measure_host_overlap_small():
    f = measure.measure_host_overlap(1 << 20, (1.0,), repeats=2, loader_batches=3)
    assert {"scenario", "event", "stream", "start_s", "end_s"} <= set(f.columns)
    assert set(f["scenario"]) == {*timelines.EFFICIENCY_SCENARIOS, timelines.LOADER_SERIAL, timelines.LOADER_DOUBLE}
    t = timelines.efficiency_table(f)
    assert len(t) == 1 and math.isfinite(t["efficiency"].iloc[0])
    tls = timelines.loader_timelines(f, "measured here: test")
    assert len(tls[timelines.LOADER_DOUBLE].on("compute")) == 3
    assert len(tls[timelines.LOADER_SERIAL].on("copy")) == 3
    assert tls[timelines.LOADER_SERIAL].concurrent_s == pytest.approx(0.0, abs=1e-9)


def test_record_writes_host_overlap_run_without_gpu(tmp_path):
    from labkit import reference

    names = bench_overlap.record(tmp_path, True, ENV)
    assert names == ["host_overlap_run"]
    ds = reference.load("host_overlap_run", tmp_path)
    assert ds.kind == "overlap_run" and ds.meta["provenance"] == "measured" and ds.meta["gpu"] == "none"
    assert ds.label.startswith("measured here:")
    assert len(timelines.efficiency_table(ds.frame)) == len(measure.QUICK_RATIOS)


def test_recorded_gpu_run_says_when_the_reference_has_none(tmp_path):
    shipped, note = recorded.recorded_gpu_run(None)
    assert shipped.name == "h100_vm_labkit_gpu_overlap_run" and note is None
    # a profile recorded on a GPU: its own run, no note
    own, note = recorded.recorded_gpu_run("h100_pcie5_vm_20261123")
    assert own.name == "gpu_overlap_run" and own.meta["gpu"] != "none" and note is None
    # an nvbandwidth log (another kind): the shipped run, and a note naming both kinds
    name = "nvbandwidth_8xh200_pcie5_nvlink_mlengineering_points"
    ds, note = recorded.recorded_gpu_run(name)
    assert ds.name == shipped.name
    assert note.startswith(f"`reference={name!r}` is a dataset of kind `point`; this part shows `overlap_run`")
    # a host-only profile: an overlap run of its own, but not on a GPU — the shipped run, and a note saying why
    assert bench_overlap.record(tmp_path, True, ENV) == ["host_overlap_run"]  # gpu "none": not a GPU run
    ds, note = recorded.recorded_gpu_run(tmp_path)
    assert ds.name == shipped.name
    assert note == (
        f"`reference={str(tmp_path)!r}` holds no `overlap_run` data this part can draw (a run on a "
        "GPU), so the shipped `overlap_run` datasets are shown."
    )


def test_bench_overlap_host_json(capsys):
    from labkit.tools.cli import main

    rc = main(
        ["bench", "overlap", "--backend", "host", "--json", "--size", "1MiB", "--ratios", "0.5,2", "--repeats", "1"]
    )
    assert rc == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    eff = [r for r in recs if r["test"] == "efficiency"]
    assert [r["compute_to_copy"] for r in eff] == [0.5, 2.0]
    assert all(r["backend"] == "host" and r["nbytes"] == 1 << 20 for r in eff)
    assert {r["scenario"] for r in recs if r["test"] == "loader"} == {timelines.LOADER_SERIAL, timelines.LOADER_DOUBLE}


def test_bench_overlap_rejects_bad_ratios(capsys):
    from labkit.tools.cli import main

    assert main(["bench", "overlap", "--backend", "host", "--ratios", "0,1", "--repeats", "1"]) == 2
    assert "ratios must be positive" in capsys.readouterr().err


def test_recorded_duplex_points():
    from labkit import reference

    d = recorded.recorded_duplex(reference.load_all(kind="point"))
    assert len(d) >= 2
    assert (d["retained"] > 0).all() and (d["retained"] < 1.0).all()  # no recorded link is a perfect duplex
    assert set(d["direction"]) <= {"h2d", "d2h"}


def test_recorded_duplex_for_a_reference_without_duplex_points_falls_back_and_says_so():
    shipped, note = recorded.recorded_duplex_for(None)
    assert len(shipped) >= 2 and note is None
    # an nvbandwidth log without the bidirectional pair (it crashed notebook 03 before: no 'dataset' column)
    name = "nvbandwidth_8xh200_pcie5_nvlink_mlengineering_points"
    assert recorded.recorded_duplex(recorded.reference_sets(name, "point")).empty
    rows, note = recorded.recorded_duplex_for(name)
    assert rows.equals(shipped) and note.startswith(
        f"`reference={name!r}` holds no `point` data this part can draw "
        "(nvbandwidth's `*_bidirectional_memcpy_ce` beside `*_memcpy_ce`)"
    )
    # a reference of another kind: the shipped point data, and a note naming both kinds
    rows, note = recorded.recorded_duplex_for("h100_vm_labkit_gpu_overlap_run")
    assert rows.equals(shipped) and "is a dataset of kind `overlap_run`; this part shows `point` data" in note
    assert list(recorded.recorded_duplex([]).columns) == recorded.DUPLEX_COLUMNS


def test_draw_gantt_figure_is_labelled():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from labkit.plots import figure_problems

    fig, ax = plt.subplots()
    figures.draw_gantt(ax, timelines.pipeline_timeline(4, 1e-3, 2e-3, source="model: test"))
    assert figure_problems(fig) == []
    assert "model" in ax.get_title()
    plt.close(fig)


@pytest.mark.gpu
def test_gpu_overlap_and_loader():
    import torch

    f = measure.measure_gpu_overlap(4 << 20, (1.0,), repeats=2, loader_batches=4)
    t = timelines.efficiency_table(f).set_index("memory")
    assert t.loc["pinned", "efficiency"] > 0.5  # pinned copies overlap with matmuls on a GPU
    assert t.loc["pinned", "efficiency"] > t.loc["pageable", "efficiency"]
    d = timelines.duplex_table(f)
    assert len(d) == 1 and d["bidirectional_GBps"].iloc[0] > 0
    tls = timelines.loader_timelines(f, "x")
    assert tls[timelines.LOADER_DOUBLE].makespan_s < tls[timelines.LOADER_SERIAL].makespan_s
    # the loader on CUDA streams hands over the right data
    src = [torch.full((1 << 20,), i, dtype=torch.uint8).pin_memory() for i in range(6)]
    dst = [torch.empty(1 << 20, dtype=torch.uint8, device="cuda") for _ in range(2)]
    main = streams.CudaStream("compute", torch.cuda.current_stream())
    seen = []
    for buf in streams.double_buffered(
        src,
        lambda b, s: dst[s].copy_(b, non_blocking=True),
        copy_stream=streams.CudaStream("copy"),
        compute_stream=main,
    ):
        torch.cuda._sleep(1_000_000)  # slow consumer work on the compute stream
        seen.append(int(buf.float().mean().item()))
    assert seen == list(range(6))
