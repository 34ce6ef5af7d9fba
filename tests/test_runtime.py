import json

import pytest

from labkit import runtime


@pytest.mark.parametrize(
    "mode,experiment,gpus,expected",
    [
        ("auto", "h2d_sweep", 0, "reference"),
        ("auto", "h2d_sweep", 1, "live"),
        ("auto", "p2p_matrix", 1, "reference"),
        ("auto", "p2p_local", 1, "live"),
        ("auto", "p2p_matrix", 2, "live"),
        ("auto", "ring_gloo", 0, "live"),
        ("reference", "ring_gloo", 8, "live"),  # CPU experiments run in every mode
        ("reference", "host_copy_sweep", 0, "live"),
        ("reference", "h2d_sweep", 8, "reference"),
        ("live", "host_copy_sweep", 0, "live"),
        ("live", "h2d_sweep", 1, "live"),
    ],
)
def test_resolve_mode_per_experiment(mode, experiment, gpus, expected):
    assert runtime.resolve_mode(mode, experiment, gpus=gpus) == expected


def test_live_without_hardware_says_what_is_missing_and_what_to_do():
    with pytest.raises(runtime.LiveModeUnavailable) as e:
        runtime.resolve_mode("live", "p2p_matrix", gpus=1)
    msg = str(e.value)
    assert "two or more CUDA GPUs" in msg and "mode='auto'" in msg and "1 CUDA device" in msg


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown mode"):
        runtime.resolve_mode("fast", "h2d_sweep", gpus=0)
    with pytest.raises(ValueError):
        runtime.Session("x", mode="Live")


def test_session_writes_results(tmp_path):
    s = runtime.Session("01_test", mode="auto", quick=True, results_path=tmp_path / "r.json", gpus=0)
    assert s.mode_for("h2d_sweep") == "reference"
    assert s.mode_for("host_copy_sweep") == "live"
    s.shown("a", "b", "a")
    s.number("alpha_us", 5.0)
    s.check("fit_ok", True)
    data = s.save()
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert on_disk["experiments"]["h2d_sweep"]["mode"] == "reference"
    assert on_disk["datasets"] == ["a", "b"]
    assert on_disk["all_checks_passed"] is True
    assert data["numbers"]["alpha_us"] == 5.0


def test_unknown_experiment_is_an_error_not_a_live_run():
    with pytest.raises(ValueError, match="unknown experiment 'h2d_swep'.*h2d_sweep"):
        runtime.resolve_mode("auto", "h2d_swep", gpus=0)
    with pytest.raises(ValueError, match="unknown experiment"):
        runtime.Session("x", gpus=0).mode_for("p2p-matrix")


def test_require_cuda_says_what_is_missing_and_what_to_do(monkeypatch):
    monkeypatch.setattr(runtime, "gpu_count", lambda: 1)
    assert runtime.require_cuda("one GPU thing") == 1
    with pytest.raises(runtime.CudaUnavailable) as e:
        runtime.require_cuda("labkit bench p2p", gpus=2, hint=", or `labkit bench host`")
    msg = str(e.value)
    assert msg.startswith("labkit bench p2p needs 2 CUDA GPUs, but this machine has 1 CUDA device(s)")
    assert "mode='reference', or `labkit bench host`, or see `labkit doctor`" in msg
    monkeypatch.setattr(runtime, "gpu_count", lambda: 0)
    with pytest.raises(RuntimeError, match="needs a CUDA GPU, but torch sees no CUDA device"):
        runtime.require_cuda("time_cuda")


def _found(data, label, **kw):
    return lambda: runtime.Found(data, label, **kw)


def test_show_measures_live_where_it_can_else_replays_else_falls_back(tmp_path):
    live_gpu = runtime.Session("x", mode="auto", gpus=1, results_path=tmp_path / "a.json")
    s = live_gpu.show("h2d_sweep", live=_found([1], "measured here: GPU"), recorded=_found([2], "recorded: A — src"))
    assert (s.obtained, s.data, s.mode, s.kind, s.fell_back) == (runtime.MEASURED_HERE, [1], "live", "measured", False)
    cpu = runtime.Session("x", mode="auto", gpus=0)
    s = cpu.show(
        "h2d_sweep", live=_found([1], "measured here: GPU"), recorded=_found([2], "recorded: A", datasets=("a",))
    )
    assert (s.obtained, s.data, s.mode, s.kind) == (runtime.RECORDED, [2], "reference", "recorded")
    assert cpu.datasets == ["a"]
    e = cpu.experiments["h2d_sweep"]
    assert e == {"mode": "reference", "obtained": "recorded", "shown_as": "recorded", "source": "recorded: A"}
    s = cpu.show(
        "overlap",
        live=_found(1, "measured here"),
        recorded=lambda: None,
        fallback=_found(None, "model: α-β", note="no run recorded"),
    )
    assert (s.obtained, s.data, s.kind, s.fell_back, s.note) == (
        runtime.FELL_BACK,
        None,
        "model",
        True,
        "no run recorded",
    )
    assert cpu.experiments["overlap"]["note"] == "no run recorded"
    s = cpu.show("dataloader", recorded=lambda: None)
    assert (s.obtained, s.data, s.kind) == (runtime.NOTHING, None, "none")
    # experiments that need no GPU run live in reference mode too; their live getter may still find nothing
    ref = runtime.Session("x", mode="reference", gpus=0)
    s = ref.show("pin_cost", live=lambda: None, recorded=_found("r", "recorded: H100"))
    assert (s.mode, s.obtained) == ("live", runtime.RECORDED)
    with pytest.raises(ValueError, match="unknown experiment"):
        ref.show("h2d_swep", live=_found(1, "x"))


def test_every_figure_is_checked_and_recorded(tmp_path):
    from labkit import plots

    s = runtime.Session("x", gpus=0, results_path=tmp_path / "r.json")
    assert "figures_labelled" not in s.save()["checks"]  # no figure, no check
    fig, ax = plots.figure()
    ax.plot([1, 2], [1, 2], label="measured here: x")
    plots.finish(ax, "t", "size (bytes)", "time (s)")
    assert s.figure(fig) is fig
    assert s.save()["checks"]["figures_labelled"] is True
    bad, ax = plots.figure()
    ax.plot([1, 2], [1, 2])
    s.figure(bad)
    data = s.save()
    assert data["checks"]["figures_labelled"] is False and data["figures_checked"] == 2
    assert any("no title" in p for p in data["figure_problems"])


def test_references_are_what_reference_selects(capsys):
    s = runtime.Session("x", gpus=0, reference="h100_vm_labkit_nonblocking_pitfall")  # a dataset of another kind
    got = s.references("copy_sweep")
    assert got and all(d.kind == "copy_sweep" for d in got)
    assert "is a dataset of kind" in capsys.readouterr().out  # the note says why the shipped ones are shown


def test_without_an_nvidia_driver_torch_facts_need_no_torch_import():
    """Replaying recorded data on a laptop never pays torch's import; the facts match torch's own."""
    import subprocess
    import sys

    from labkit import system

    if not system.no_nvidia_driver():
        pytest.skip("this machine has an NVIDIA driver: torch is imported to count devices")
    code = (
        "import sys, json; from labkit import runtime, system; "
        "n = runtime.gpu_count(); f = system.torch_facts(); imported = 'torch' in sys.modules; "
        "import torch; print(json.dumps([n, imported, f['torch'], f['cuda_build'], torch.__version__, torch.version.cuda]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    n, imported, version, build, torch_version, torch_build = json.loads(out)
    assert (n, imported) == (0, False)
    assert (version, build) == (torch_version, torch_build)


def test_present_records_what_a_result_shows_and_returns_it(tmp_path):
    """Session.present: a result's figure is checked, its numbers/checks/notes/datasets land in the results JSON."""
    import matplotlib

    matplotlib.use("Agg")
    from labkit import plots
    from labkit.runtime import Session

    class Result:
        experiment = "demo"
        datasets = ("some_dataset",)

        def figure(self):
            fig, ax = plots.figure()
            plots.line(ax, [1, 2], [1, 2], "measured here: demo")
            plots.finish(ax, "Demo", "size (B)", "time (s)", source="measured here")
            return fig

        def report(self):
            return "a line of **Markdown**"

        def numbers(self):
            return {"alpha_us": 3.5}

        def checks(self):
            return {"alpha_positive": True, "beta_positive": False}

        def notes(self):
            return {"fit": "alpha-beta"}

    s = Session("demo", "reference", results_path=tmp_path / "r.json")
    r = Result()
    assert s.present(r) is r
    data = s.save()
    assert data["numbers"] == {"alpha_us": 3.5}
    assert data["checks"]["alpha_positive"] is True and data["checks"]["beta_positive"] is False
    assert data["all_checks_passed"] is False
    assert data["experiments"]["demo"] == {"fit": "alpha-beta"}
    assert data["datasets"] == ["some_dataset"]
    assert data["figures_checked"] == 1


def test_present_takes_a_result_with_only_some_methods():
    from labkit.runtime import Session

    class Numbers:
        def numbers(self):
            return {"n_half_bytes": 4096}

    s = Session("demo", "reference")
    s.present(Numbers())
    s.present(object())  # nothing to show is not an error
    assert s.numbers == {"n_half_bytes": 4096.0} and s.figures_checked == 0


def test_a_doubled_provenance_prefix_is_reported_though_tidy_hides_it():
    """tidy() shows 'recorded: recorded: x' as 'recorded: x', but the label was built wrong: the check still fails."""
    import matplotlib

    matplotlib.use("Agg")
    from labkit import plots
    from labkit.runtime import Session

    fig, ax = plots.figure()
    plots.line(ax, [1, 2], [1, 2], "recorded: recorded: some system")
    plots.finish(ax, "Demo", "size (B)", "time (s)", source="recorded")
    s = Session("demo", "reference")
    s.figure(fig)
    assert any("doubled prefix" in p for p in s.figure_problems)
    assert s.summary()["checks"]["figures_labelled"] is False
