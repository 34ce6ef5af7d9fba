"""Widgets that work in JupyterLab and Colab, and render a static default when run headless.

Headless runs (papermill, `labkit run`, CI) set LABKIT_HEADLESS=1: then `interactive` calls the
view function once with the default values and displays its output directly in the cell, so the
executed notebook (and its HTML export) holds the figure. With a front end it shows the controls
and redraws into an Output area on every change. Nothing ever waits for a front end.
"""

from __future__ import annotations

import os
from typing import Callable

HEADLESS_ENV = "LABKIT_HEADLESS"


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
    import matplotlib.pyplot as plt

    value = view(**values)
    figs = plt.get_fignums()
    if figs:
        plt.show()
    return value


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
