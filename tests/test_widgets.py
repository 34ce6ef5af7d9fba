"""labkit.widgets: a view's figures are drawn off pyplot and shown once, whatever else uses pyplot.

In JupyterLab (≥ 4.4, ipykernel ≥ 7) a widget's redraw runs in a comm handler while other comm
messages are handled on subshell threads, each followed by the inline backend's `flush_figures`,
which draws and closes every open pyplot figure. These tests put that interference inside the view.
"""

import io
import threading
import time

import matplotlib.pyplot as plt
import numpy as np
import pytest

from labkit import plots, widgets


@pytest.fixture
def shown(monkeypatch):
    """What the widget displays (outside a kernel: figures as PNG Images)."""
    import IPython.display

    out = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: out.append(obj))
    plt.close("all")
    yield out
    plt.close("all")


def _images(objs):
    from IPython.display import Image

    return [o for o in objs if isinstance(o, Image)]


def _ink(image) -> float:
    """Fraction of the PNG's pixels that are not (near-)white."""
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(image.data)).convert("RGB"))
    return float((a.min(axis=2) < 235).mean())


def _draw(n):
    fig, ax = plots.figure(width=4, height=3)
    ax.plot(np.arange(n), np.arange(n) ** 2, "o-", label="model: n²")
    plots.finish(ax, "test view", "n (count)", "n² (count)", source="model")
    return fig


def test_a_views_figure_stays_out_of_pyplot_and_is_shown_once(shown):
    seen = {}

    def view(n):
        _draw(n)
        seen["pyplot_figures"] = plt.get_fignums()
        return n * 2

    assert widgets._show(view, {"n": 5}) == 10
    assert seen["pyplot_figures"] == [], "the view's figure went into pyplot's registry"
    images = _images(shown)
    assert len(images) == 1 and _ink(images[0]) > 0.02


def test_another_thread_closing_every_pyplot_figure_mid_draw_does_not_blank_the_view(shown):
    """What a comm message on a kernel subshell does (inline backend's flush_figures → close('all'))."""

    def view(n):
        fig = _draw(n)
        other = threading.Thread(target=lambda: (plt.show(), plt.close("all")))
        other.start()
        other.join()
        fig.axes[0].set_xlim(0, n)  # the view goes on drawing
        return n

    widgets._show(view, {"n": 6})
    images = _images(shown)
    assert len(images) == 1, f"{len(images)} figures shown"
    assert _ink(images[0]) > 0.02, "the figure came out blank"


def test_a_figure_left_open_by_other_code_is_neither_shown_nor_closed(shown):
    mine, _ = plots.figure()  # e.g. a figure a cell is drawing right now
    widgets._show(lambda n: _draw(n) and None, {"n": 3})
    assert len(_images(shown)) == 1
    assert plt.fignum_exists(mine.number), "the widget closed a figure it did not draw"


def test_a_view_that_calls_pyplot_itself_gets_its_figure_shown_and_closed(shown):
    def view(n):
        plt.figure(figsize=(3, 2))
        plt.plot(range(n), label="model")
        plt.title("model: pyplot")

    widgets._show(view, {"n": 4})
    assert len(_images(shown)) == 1
    assert plt.get_fignums() == []


def test_headless_interactive_shows_the_default_view(shown, monkeypatch):
    monkeypatch.setenv(widgets.HEADLESS_ENV, "1")
    got = widgets.interactive(lambda n: _draw(n) and n, {"n": widgets.int_slider(3, 1, 8)}, title="t")
    assert got == 3
    assert len(_images(shown)) == 1


def test_live_redraws_are_serialised_across_threads(shown, monkeypatch):
    """Two controls moved at once (their comm messages on two kernel threads) never overlap a redraw."""
    monkeypatch.setenv(widgets.HEADLESS_ENV, "0")
    active, overlaps, errors = [0], [], []

    def view(a, b):
        active[0] += 1
        if active[0] > 1:
            overlaps.append((a, b))
        _draw(3)
        time.sleep(0.05)
        active[0] -= 1
        return a + b

    controls = {"a": widgets.int_slider(1, 0, 10), "b": widgets.int_slider(1, 0, 10)}
    assert widgets.interactive(view, controls, title="t") == 2

    def move(name, value):
        try:
            controls[name].value = value
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=move, args=("a", 5)), threading.Thread(target=move, args=("b", 7))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not overlaps, (errors, overlaps)
    assert len(_images(shown)) == 3  # the first view, then one per move


class _FakeKernel:
    def __init__(self, parent):
        self._parent = parent

    def get_parent(self, channel="shell"):
        return self._parent


def _in_kernel(monkeypatch, parent):
    import IPython

    shell = type("Shell", (), {"kernel": _FakeKernel(parent)})()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)


def _execute_request(allow_stdin):
    return {"header": {"msg_type": "execute_request"}, "content": {"code": "", "allow_stdin": allow_stdin}}


def test_outside_a_kernel_no_front_end_listens(monkeypatch):
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    assert not widgets.frontend_listening()
    assert widgets.headless()


@pytest.mark.parametrize("allow_stdin, listening", [(True, True), (False, False)])
def test_a_cell_sent_by_a_batch_executor_gets_the_static_view(monkeypatch, allow_stdin, listening):
    """nbclient (papermill, nbconvert, jupyter execute, nbmake) executes with allow_stdin=False."""
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    _in_kernel(monkeypatch, _execute_request(allow_stdin))
    assert widgets.frontend_listening() is listening
    assert widgets.headless() is (not listening)


def test_a_request_that_says_nothing_keeps_the_controls(monkeypatch):
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    _in_kernel(monkeypatch, {"header": {"msg_type": "comm_msg"}, "content": {}})
    assert widgets.frontend_listening()


@pytest.mark.parametrize("value, headless", [("1", True), ("true", True), ("0", False), ("off", False)])
def test_the_variable_overrides_the_detection(monkeypatch, value, headless):
    _in_kernel(monkeypatch, _execute_request(not headless))
    monkeypatch.setenv(widgets.HEADLESS_ENV, value)
    assert widgets.headless() is headless


def test_under_a_batch_executor_interactive_draws_the_default_and_makes_no_widget(shown, monkeypatch):
    monkeypatch.delenv(widgets.HEADLESS_ENV, raising=False)
    _in_kernel(monkeypatch, _execute_request(False))
    got = widgets.interactive(lambda n: _draw(n) and n, {"n": widgets.int_slider(4, 1, 8)}, title="t")
    assert got == 4
    assert len(_images(shown)) == 1
    import ipywidgets

    assert not [o for o in shown if isinstance(o, ipywidgets.Widget)]
