"""Widgets that work in JupyterLab and Colab, and render a static default when run headless.

Headless runs (papermill, `labkit run`, CI) set LABKIT_HEADLESS=1: then `interactive` calls the
view function once with the default values and displays its output directly in the cell, so the
executed notebook (and its HTML export) holds the figure. With a front end it shows the controls
and redraws into an Output area on every change. Nothing ever waits for a front end.

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

HEADLESS_ENV = "LABKIT_HEADLESS"

# One redraw at a time, whichever kernel thread (main shell or a subshell) delivers the change.
_REDRAW_LOCK = threading.RLock()


def headless() -> bool:
    return os.environ.get(HEADLESS_ENV, "") not in ("", "0", "false", "False")


def interactive(view: Callable[..., object], controls: dict, *, title: str = ""):
    """Show `controls` (name → ipywidgets widget) driving `view(**values)`; return the default result.

    `view` draws (a matplotlib figure, a table, text) and may return a value (e.g. predicted
    numbers) that the notebook records.
    """
    from IPython.display import display

    defaults = {k: w.value for k, w in controls.items()}
    if headless():
        if title:
            display(_markdown(f"**{title}** — static view at the default settings "
                              f"({', '.join(f'{k}={_fmt(v)}' for k, v in defaults.items())}); "
                              "open the notebook in JupyterLab or Colab to move the controls."))
        return _show(view, defaults)

    import ipywidgets as w

    out = w.Output()
    result = {}

    def redraw(_change=None):
        with _REDRAW_LOCK:
            values = {k: c.value for k, c in controls.items()}
            with out:
                out.clear_output(wait=True)
                result["value"] = _show(view, values)

    for c in controls.values():
        c.observe(redraw, names="value")
    header = [w.HTML(f"<b>{title}</b>")] if title else []
    display(w.VBox(header + [w.HBox(list(controls.values()), layout=w.Layout(flex_flow="row wrap")), out]))
    redraw()
    return result.get("value")


def _show(view, values):
    """Call `view`, then display the figures it drew — only those, each once — and return its value."""
    import matplotlib.pyplot as plt
    from matplotlib._pylab_helpers import Gcf

    from .plots import detached_figures

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
    return w.Dropdown(options=options, value=value if value is not None else (options[0][1] if isinstance(options[0], tuple) else options[0]),
                      description=description, style={"description_width": "initial"})


def log2_size_slider(lo_exp: int, hi_exp: int, value_exp: int, description: str = "size"):
    """A slider over powers of two, shown as KiB/MiB/GiB; its value is bytes."""
    import ipywidgets as w

    from .units import format_bytes

    opts = [(format_bytes(1 << e), 1 << e) for e in range(lo_exp, hi_exp + 1)]
    return w.SelectionSlider(options=opts, value=1 << value_exp, description=description,
                             style={"description_width": "initial"}, continuous_update=False)


def float_slider(value, lo, hi, step, description: str = ""):
    import ipywidgets as w

    return w.FloatSlider(value=value, min=lo, max=hi, step=step, description=description,
                         style={"description_width": "initial"}, continuous_update=False)


def int_slider(value, lo, hi, step=1, description: str = ""):
    import ipywidgets as w

    return w.IntSlider(value=value, min=lo, max=hi, step=step, description=description,
                       style={"description_width": "initial"}, continuous_update=False)
