"""Plots: every figure has a title, axis labels with units, and its data source in the legend.

Styles say what a line is: measured here = solid with filled markers; recorded = thin with open
markers; model = dashed, its label starting with "model:"; spec = dotted horizontal line.
"""

from __future__ import annotations

import contextlib
import contextvars
import re

import numpy as np

from .units import format_bytes

MEASURED, RECORDED, MODEL, SPEC = "measured", "recorded", "model", "spec"

#: the smallest legend text a reader can read on a laptop screen or a projector (points)
LEGEND_FONTSIZE = 8
#: colours for series that would otherwise look alike: matplotlib's tab10, then the darker tab20b/tab20c
#: shades (twenty in all, each told apart from the others and from white)
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363",
)  # fmt: skip
# "recorded: recorded: x" → "recorded: x" (a label built from a label that already said where it came from)
_DOUBLED_PREFIX = re.compile(r"^((?:recorded|measured here|measured|model|spec): )(?:\1)+", re.I)

# Inside `detached_figures()`: the list that collects the figures `figure()` makes, off pyplot.
_detached: contextvars.ContextVar[list | None] = contextvars.ContextVar("labkit_detached_figures", default=None)


def figure(nrows: int = 1, ncols: int = 1, width: float = 7.0, height: float = 4.2):
    """A figure and its axes (one Axes, or a flat array of them); a pyplot figure unless detached."""
    figsize = (width * ncols, height * nrows)
    collected = _detached.get()
    if collected is None:
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
    else:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        collected.append(fig)
    return fig, (axes[0, 0] if nrows * ncols == 1 else axes.ravel())


@contextlib.contextmanager
def detached_figures():
    """Within this block (in this thread), `figure()` makes figures that pyplot does not know about.

    Yields the list they are appended to. Nothing else can show, draw or close them behind the
    caller's back: pyplot's registry is global to the process, and in a Jupyter kernel other
    threads use it — JupyterLab sends widget messages over kernel subshells (threads, ipykernel
    ≥ 7), and every comm message ends with the inline backend's `flush_figures`, which draws and
    closes *every* open pyplot figure. `labkit.widgets` draws its views this way and displays the
    figures itself.
    """
    figs: list = []
    token = _detached.set(figs)
    try:
        yield figs
    finally:
        _detached.reset(token)


def size_axis(ax, axis: str = "x") -> None:
    """Log2 axis of message sizes with KiB/MiB/GiB tick labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    a.set_major_locator(LogLocator(base=2, numticks=40))
    a.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v).replace(" ", "\u2009") if v >= 1 else ""))
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    span = np.log2(max(hi, 2)) - np.log2(max(lo, 1))
    if span > 12:  # keep every 4th power of two so labels do not collide
        a.set_major_locator(LogLocator(base=16, numticks=20))


def line(ax, x, y, label: str, how: str = MEASURED, **kw):
    """Draw a series in the style that says where its numbers came from."""
    styles = {
        MEASURED: dict(lw=2.0, marker="o", ms=4),
        RECORDED: dict(lw=1.2, marker="s", ms=3.5, mfc="none"),
        MODEL: dict(lw=1.5, ls="--"),
    }
    if how not in styles:
        raise ValueError(f"how must be one of {list(styles)}")
    if how == MODEL and not label.startswith("_") and not label.lower().startswith("model"):
        label = f"model: {label}"
    style = {**styles[how], **kw}
    return ax.plot(x, y, label=label, **style)[0]


def spec_line(ax, s, *, per_direction: bool = True, **kw):
    """A horizontal line at a spec's peak, labelled with direction and source."""
    value = s.per_direction_GBps() if per_direction else s.bandwidth_GBps
    direction = "per direction" if per_direction or s.direction == "unidirectional" else s.direction
    return ax.axhline(
        value, ls=":", lw=1.2, label=f"spec: {s.name}, {value:g} GB/s {direction}", **{"color": "0.4", **kw}
    )


def finish(ax, title: str, xlabel: str, ylabel: str, source: str | None = None, legend: bool = True):
    """Set title and labels (units required: each label must hold a '(' unit ')' ), add the legend."""
    for what, text in (("xlabel", xlabel), ("ylabel", ylabel)):
        if "(" not in text or ")" not in text:
            raise ValueError(f"{what} {text!r} has no unit in parentheses")
    ax.set_title(title if source is None else f"{title}\n{source}", fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=LEGEND_FONTSIZE, loc="best")
    return ax


def _look(artist) -> tuple | None:
    """How a legend entry looks (colour, line style, marker, marker fill); None for what is not a line."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D

    if not isinstance(artist, Line2D):
        return None
    fill = artist.get_markerfacecolor()
    fill = "none" if isinstance(fill, str) and fill == "none" else "filled"
    return (to_hex(artist.get_color()), artist.get_linestyle(), artist.get_marker(), fill)


def _recolour(artist, colour) -> None:
    artist.set_color(colour)
    artist.set_markeredgecolor(colour)
    if not (isinstance(artist.get_markerfacecolor(), str) and artist.get_markerfacecolor() == "none"):
        artist.set_markerfacecolor(colour)


def _tidy_legend(legend, artists: list) -> None:
    """One legend: single provenance prefixes, no two lines that look alike, text at least LEGEND_FONTSIZE."""
    from matplotlib.colors import to_hex

    texts = legend.get_texts()
    shown = list(zip(artists, texts, legend.legend_handles))
    used = {look[0] for a, _, _ in shown if a is not None and (look := _look(a))}
    seen = set()
    for artist, text, proxy in shown:
        label = _DOUBLED_PREFIX.sub(r"\1", text.get_text())
        if label != text.get_text():
            text.set_text(label)
            if artist is not None:
                artist.set_label(label)
        if text.get_fontsize() < LEGEND_FONTSIZE:
            text.set_fontsize(LEGEND_FONTSIZE)
        look = _look(artist) if artist is not None else None
        if look is None:
            continue
        if look in seen:  # a reader could not tell this line from an earlier one: give it a colour of its own
            colour = next((c for c in PALETTE if c not in used), None)
            if colour is not None:
                used.add(colour)
                _recolour(artist, colour)
                if proxy is not None and hasattr(proxy, "set_markeredgecolor"):
                    _recolour(proxy, colour)
                look = _look(artist)
        seen.add(look)
        used.add(to_hex(artist.get_color()))
    if legend.get_title().get_text() and legend.get_title().get_fontsize() < LEGEND_FONTSIZE:
        legend.get_title().set_fontsize(LEGEND_FONTSIZE)


def _legend_artists(legend, candidates) -> list:
    """The artists a legend stands for, in its order (matched by label, as matplotlib made it)."""
    by_label = {}
    for a in candidates:
        by_label.setdefault(a.get_label(), a)
    return [by_label.get(t.get_text()) for t in legend.get_texts()]


def tidy(fig):
    """Make a figure's legends legible; return the figure.

    Every legend entry keeps one provenance prefix ("recorded: recorded: x" → "recorded: x"), lines
    that would look the same in a legend (colour, style, marker) get colours of their own from
    PALETTE, legend text is at least LEGEND_FONTSIZE points, and an entry that would run into the axes on
    its right is wrapped onto two lines (the line's own label is unchanged). Nothing about the data changes.
    `runtime.Session.figure` calls this for every figure a notebook draws.
    """
    every = [a for ax in fig.axes for a in ax.get_children() if hasattr(a, "get_label")]
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            _tidy_legend(legend, _legend_artists(legend, [a for a in ax.get_children() if hasattr(a, "get_label")]))
    for legend in fig.legends:
        _tidy_legend(legend, _legend_artists(legend, every))
    _fit_legends(fig)
    return fig


def _fit_legends(fig) -> None:
    """Wrap the entries of a legend that would run into the axes (or their legend) on its right.

    Only a legend whose axes have another axes to their right can run into one, and the axes' positions
    say which without laying out any text: a figure with none (one column of panels, or a legend on the
    right-hand panel only) asks for no renderer. The text laid out for the others is cached with the
    canvas's renderer, so a draw at the figure's own dpi (the inline backend's PNG) reuses it.
    """
    import textwrap

    beside = []  # (legend, the x in pixels it must stay left of)
    for ax in fig.axes:
        if ax.get_legend() is None:
            continue
        right = [o.bbox.x0 for o in fig.axes if o is not ax and o.get_visible() and o.bbox.x0 > ax.bbox.x1 - 1]
        if right:  # axes side by side: the nearest one starting right of this one
            beside.append((ax.get_legend(), min(right) - 6))
    get_renderer = getattr(fig.canvas, "get_renderer", None)  # Agg canvases (inline, PNG); others: left as is
    if not beside or get_renderer is None:
        return
    renderer = get_renderer()
    for legend, limit in beside:
        box = legend.get_window_extent(renderer)
        if box.x1 <= limit:
            continue
        room = limit - box.x0  # pixels from the legend's left edge to the next axes
        texts = legend.get_texts()
        widths = [t.get_window_extent(renderer).width for t in texts]
        handle = box.width - max(widths)  # swatch, padding and border
        for t, width in zip(texts, widths):
            if width > room - handle > 0:
                chars = max(20, int(len(t.get_text()) * (room - handle) / width))
                t.set_text(textwrap.fill(t.get_text(), chars, subsequent_indent="  "))


def legend_problems(fig) -> list[str]:
    """What makes a figure's legends hard to read: doubled prefixes, look-alike lines, text under 8 pt."""
    problems = []
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for i, legend in enumerate(legends):
        looks = {}
        for text, proxy in zip(legend.get_texts(), legend.legend_handles):
            label = text.get_text()
            if _DOUBLED_PREFIX.match(label):
                problems.append(f"legend {i}: doubled prefix in {label!r}")
            if text.get_fontsize() < LEGEND_FONTSIZE:
                problems.append(f"legend {i}: {label!r} in {text.get_fontsize():g} pt text")
            look = _look(proxy) if proxy is not None else None
            if look is not None:
                if look in looks:
                    problems.append(f"legend {i}: {label!r} looks like {looks[look]!r}")
                looks.setdefault(look, label)
    return problems


def figure_problems(fig) -> list[str]:
    """What a figure lacks (title, labelled axes with units, a legend or a source line) — for tests."""
    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.has_data() and not ax.images:
            continue
        if getattr(ax, "_colorbar", None) is not None or ax.get_label() == "<colorbar>":
            continue
        if not ax.get_title():
            problems.append(f"axes {i}: no title")
        for what in ("xlabel", "ylabel"):
            text = getattr(ax, f"get_{what}")()
            if not text or "(" not in text:
                problems.append(f"axes {i}: {what} {text!r} has no unit")
        has_source = (
            ax.get_legend() is not None
            or bool(fig.legends)
            or any(w in ax.get_title().lower() for w in ("measured", "recorded", "model", "source"))
        )
        if not has_source:
            problems.append(f"axes {i}: no legend or source in the title")
    return problems
