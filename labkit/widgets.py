"""Widgets that work in JupyterLab and Colab, and render a static default where no front end listens.

Where nobody can move a control — a batch executor (papermill, `jupyter nbconvert --execute`,
`jupyter execute`, nbmake: all run cells through nbclient), `labkit run`, plain Python — `interactive`
calls the view once with the default values and displays its output directly in the cell, so the
executed notebook (and its HTML export) holds the figure. With a front end it shows the controls
and redraws into an Output area on every change. Nothing ever waits for a front end.

Why the executors must get the static view: nbclient mimics the front end's Output widget, and its
mimic answers every output captured by one with a comm message sent on the shell socket — while
another coroutine of the same client is waiting on that socket for the cell's `execute_reply`.
That send can swallow the wake-up of the wait (a zmq socket's file descriptor is edge-triggered),
so the executor waits for ever on a kernel that has finished (jupyter/nbclient#312; seen here with
nbclient 0.11, ipykernel 7.4, ipywidgets 8.1.9: notebooks 01, 04 and 06 hung under plain papermill).
`frontend_listening()` tells the two apart from the request that is running the cell: an
interactive front end (JupyterLab, Notebook, VS Code, Colab) executes cells with `allow_stdin` set,
because it can answer `input()`; nbclient executes with `allow_stdin=False`. `LABKIT_HEADLESS`
overrides the detection: `1` always static, `0` always live controls.

Views draw through `labkit.plots.figure()`. A view's figures are made off pyplot
(`plots.detached_figures`) and displayed here, one by one: a redraw runs in a comm handler, and in
JupyterLab ≥ 4.4 with ipykernel ≥ 7 comm messages arrive on kernel subshells, i.e. on other
threads, each followed by the inline backend's `flush_figures`, which draws and closes every
pyplot figure — a figure the redraw was still drawing came out blank or cut short. Redraws are
serialised by a lock, so two controls moved at once never interleave in one Output area.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

from .plots import detached_figures
from .units import format_bytes

HEADLESS_ENV = "LABKIT_HEADLESS"

# One redraw at a time, whichever kernel thread (main shell or a subshell) delivers the change.
_REDRAW_LOCK = threading.RLock()


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def headless() -> bool:
    """True where widgets render their static default view: no front end can move a control.

    `LABKIT_HEADLESS=1` forces the static view and `LABKIT_HEADLESS=0` the live controls; otherwise
    `frontend_listening()` decides.
    """
    forced = os.environ.get(HEADLESS_ENV, "").strip().lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    return not frontend_listening()


def frontend_listening() -> bool:
    """Whether the cell running now was sent by an interactive front end that can draw widgets.

    Outside an IPython kernel (plain Python, a terminal IPython) nothing can draw a widget: False.
    In a kernel, the request that is executing the cell says whether its sender can answer
    `input()` (`allow_stdin`): interactive front ends can, batch executors built on nbclient
    (papermill, nbconvert, `jupyter execute`, nbmake) send `allow_stdin=False`. A kernel that does
    not expose its request is assumed to have a front end (the old behaviour).
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return False
    parent = None
    try:
        parent = kernel.get_parent("shell")  # ipykernel >= 6
    except TypeError:
        parent = kernel.get_parent()
    except AttributeError:
        parent = getattr(kernel, "_parent_header", None)  # ipykernel 5 keeps the whole parent message
    except Exception:  # noqa: BLE001 - a kernel we do not know: keep the controls
        return True
    content = (parent or {}).get("content") or {}
    if (parent or {}).get("header", {}).get("msg_type") != "execute_request" or "allow_stdin" not in content:
        return True  # not a cell execution we can read (a comm handler, another kernel): keep the controls
    return bool(content["allow_stdin"])


def interactive(
    view: Callable[..., object], controls: dict, *, title: str = "", on_figure: Callable[[object], object] | None = None
):
    """Show `controls` (name → ipywidgets widget) driving `view(**values)`; return the default result.

    `view` draws (a matplotlib figure, a table, text) and may return a value (e.g. predicted
    numbers) that the notebook records. `on_figure` sees every figure a view draws before it is
    displayed (a notebook passes `session.figure`, which checks it).
    """
    from IPython.display import display

    defaults = {k: w.value for k, w in controls.items()}
    if headless():
        if title:
            display(
                _markdown(
                    f"**{title}** — static view at the default settings "
                    f"({', '.join(f'{k}={_fmt(v)}' for k, v in defaults.items())}); "
                    "open the notebook in JupyterLab or Colab to move the controls."
                )
            )
        return _show(view, defaults, on_figure)

    import ipywidgets as w

    out = w.Output()
    result = {}

    def redraw(_change=None):
        with _REDRAW_LOCK:
            values = {k: c.value for k, c in controls.items()}
            with out:
                out.clear_output(wait=True)
                result["value"] = _show(view, values, on_figure)

    for c in controls.values():
        c.observe(redraw, names="value")
    header = [w.HTML(f"<b>{title}</b>")] if title else []
    display(w.VBox(header + [w.HBox(list(controls.values()), layout=w.Layout(flex_flow="row wrap")), out]))
    redraw()
    return result.get("value")


def _show(view, values, on_figure=None):
    """Call `view`, then display the figures it drew — only those, each once — and return its value."""
    import matplotlib.pyplot as plt
    from matplotlib._pylab_helpers import Gcf

    before = set(plt.get_fignums())
    with detached_figures() as figs:
        value = view(**values)
    # a view that called pyplot itself: its new figures, not every open one (another cell's)
    for num in sorted(set(plt.get_fignums()) - before):
        manager = Gcf.get_fig_manager(num)
        if manager is not None:
            figs.append(manager.canvas.figure)
            plt.close(manager.canvas.figure)
    for fig in figs:
        if on_figure is not None:
            on_figure(fig)
        _display_figure(fig)
    return value


def _display_figure(fig) -> None:
    """Display one figure as the kernel's inline backend would (its formats), else as a PNG."""
    from IPython import get_ipython
    from IPython.display import Image, display

    shell = get_ipython()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", {})
    for mime in ("image/png", "image/svg+xml", "image/jpeg"):
        try:
            formatters[mime].lookup(fig)
        except (KeyError, TypeError):
            continue
        display(fig)
        return
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    display(Image(data=buf.getvalue(), format="png"))


def _fmt(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


def _markdown(text: str):
    from IPython.display import Markdown

    return Markdown(text)


def dropdown(options, value=None, description: str = ""):
    import ipywidgets as w

    options = list(options)
    return w.Dropdown(
        options=options,
        value=value if value is not None else (options[0][1] if isinstance(options[0], tuple) else options[0]),
        description=description,
        style={"description_width": "initial"},
    )


def log2_size_slider(lo_exp: int, hi_exp: int, value_exp: int, description: str = "size"):
    """A slider over powers of two, shown as KiB/MiB/GiB; its value is bytes."""
    import ipywidgets as w

    opts = [(format_bytes(1 << e), 1 << e) for e in range(lo_exp, hi_exp + 1)]
    return w.SelectionSlider(
        options=opts,
        value=1 << value_exp,
        description=description,
        style={"description_width": "initial"},
        continuous_update=False,
    )


def float_slider(value, lo, hi, step, description: str = ""):
    return _slider("FloatSlider", value, lo, hi, step, description)


def int_slider(value, lo, hi, step=1, description: str = ""):
    return _slider("IntSlider", value, lo, hi, step, description)


def _slider(kind: str, value, lo, hi, step, description: str):
    """An ipywidgets slider of `kind` that updates on release, its label at full width."""
    import ipywidgets as w

    return getattr(w, kind)(
        value=value,
        min=lo,
        max=hi,
        step=step,
        description=description,
        style={"description_width": "initial"},
        continuous_update=False,
    )
