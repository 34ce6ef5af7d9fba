"""Helpers for tests/test_browser.py: JupyterLab driven in Chromium through Playwright.

Three parts, usable on their own:

- `find_browser()` and `prepare_notebook()`: which Chromium to drive, and a copy of a notebook
  whose parameters cell is rewritten (reference mode, quick) — the committed notebook is untouched.
- `LabServer`: JupyterLab on 127.0.0.1 with a token, in its own process group, started WITHOUT
  LABKIT_HEADLESS/MPLBACKEND so kernels show live ipywidgets and inline figures; `stop()` shuts the
  kernels down, ends the whole group and anything it started, and reports what it had to kill.
- Page functions (`open_notebook`, `run_all_cells`, `wait_until_executed`, `problems`, `figures`,
  `exercise_widgets`, `screenshot_notebook`): what a person does in JupyterLab, with bounded waits.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil  # a dependency of ipykernel

# --- the browser ---------------------------------------------------------------------------------

BROWSER_CANDIDATES = (
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
    "/usr/bin/google-chrome-stable",
)
BROWSER_ENV = "LABKIT_CHROMIUM"  # point the test at another Chromium/Chrome binary

# Playwright adds its own automation flags; these keep Chromium off the network and quiet.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def find_browser() -> str | None:
    """The Chromium binary to drive: $LABKIT_CHROMIUM, Debian's /usr/bin/chromium, or one on PATH."""
    env = os.environ.get(BROWSER_ENV)
    if env:
        return env if os.access(env, os.X_OK) else None
    for path in BROWSER_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


# --- notebooks -----------------------------------------------------------------------------------


def rewrite_parameters(nb: dict, **values) -> dict:
    """Return `nb` with the named assignments in its `parameters` cell set to `values` (added if absent).

    Comments and other assignments stay; outputs and execution counts are cleared everywhere.
    """
    nb = json.loads(json.dumps(nb))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(params) != 1:
        raise ValueError(f"expected one cell tagged 'parameters', found {len(params)}")
    cell = params[0]
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    lines = source.splitlines()
    todo = dict(values)
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in todo:
                first, last = node.lineno - 1, node.end_lineno - 1
                lines[first : last + 1] = [f"{name} = {todo.pop(name)!r}"] + [""] * (last - first)
    lines += [f"{k} = {v!r}" for k, v in todo.items()]
    cell["source"] = "\n".join(lines)
    for c in cells:
        c["outputs"] = []
        c["execution_count"] = None
    return nb


def prepare_notebook(src: Path, dest_dir: Path, **values) -> Path:
    """Copy notebook `src` into `dest_dir` with its parameters rewritten; return the copy's path."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    nb = rewrite_parameters(json.loads(Path(src).read_text(encoding="utf-8")), **values)
    out = dest_dir / Path(src).name
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


# --- processes -----------------------------------------------------------------------------------


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Living descendants of `pid` (default: this process)."""
    try:
        return [p for p in psutil.Process(pid or os.getpid()).children(recursive=True) if _alive(p)]
    except psutil.NoSuchProcess:
        return []


def describe(procs) -> str:
    out = []
    for p in procs:
        try:
            out.append(f"{p.pid} {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            out.append(f"{p.pid} (gone)")
    return "; ".join(out)


def still_alive(procs) -> list[psutil.Process]:
    """Those of `procs` (snapshotted earlier, so orphans reparented to init count too) still running."""
    return [p for p in procs if _alive(p)]


def kill_all(procs, grace: float = 5.0) -> None:
    """SIGTERM, wait up to `grace` s, then SIGKILL — only the given processes, never our own group."""
    procs = [p for p in procs if p.pid != os.getpid() and _alive(p)]
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- JupyterLab ----------------------------------------------------------------------------------

# User settings for a reproducible, offline JupyterLab: no news/update pop-ups, every cell attached
# to the DOM (so outputs, prompts and figures of off-screen cells can be inspected and screenshotted).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": True,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none", "kernelShutdown": False},
    "@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"theme": "JupyterLab Light"},
}

# Variables that would make the kernels headless (labkit's static widget view, the Agg backend).
HEADLESS_VARS = ("LABKIT_HEADLESS", "MPLBACKEND")


@dataclass
class LabServer:
    """A JupyterLab server on 127.0.0.1 serving `root`, with token auth, in its own process group."""

    root: Path
    state: Path
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_hex(24))
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    _seen: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in HEADLESS_VARS}
        for var, sub in (
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("JUPYTERLAB_SETTINGS_DIR", "settings"),
            ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
            ("IPYTHONDIR", "ipython"),
        ):
            env[var] = str(self.state / sub)
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, timeout: float = 90.0) -> "LabServer":
        for rel, value in LAB_SETTINGS.items():
            p = self.state / "settings" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(value))
        self.port = self.port or free_port()
        self.log_path = self.state / "jupyterlab.log"
        cmd = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.allow_remote_access=False",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.terminals_enabled=False",
            "--MappingKernelManager.cull_idle_timeout=0",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # containers and CI runners often run as root
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.root,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status", timeout=2)
                return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.3)
        raise TimeoutError(f"JupyterLab did not answer on {self.url} within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except (OSError, AttributeError):
            return "(no log)"

    def api(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(self.url + path, method=method, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def remember_children(self) -> None:
        """Snapshot the server's descendants (kernels run in their own sessions and outlive a killed server)."""
        if self.proc is not None:
            for p in descendants(self.proc.pid):
                self._seen[p.pid] = p

    def kernels(self) -> list[dict]:
        return self.api("GET", "/api/kernels")

    def shutdown_kernel(self, kernel_id: str) -> None:
        """Shut one kernel down (the other notebooks' kernels keep running)."""
        self.remember_children()
        try:
            self.api("DELETE", f"/api/kernels/{kernel_id}", timeout=30)
        except (OSError, urllib.error.URLError):
            pass

    def shutdown_kernels(self) -> None:
        for k in self.kernels():
            self.shutdown_kernel(k["id"])

    def stop(self) -> list[str]:
        """Stop everything this server started; returns descriptions of processes that had to be killed."""
        if self.proc is None:
            return []
        killed = []
        self.remember_children()
        try:
            self.shutdown_kernels()
        except Exception:
            pass
        self.remember_children()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server, in its own group, shuts its kernels down
            self.proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        left = still_alive(self._seen.values())
        if left:
            killed.append(describe(left))
            kill_all(left)
        self.proc = None
        return killed


# --- driving JupyterLab --------------------------------------------------------------------------

NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"
CODE_CELL = f"{NOTEBOOK} .jp-CodeCell"
STDERR = '[data-mime-type="application/vnd.jupyter.stderr"]'


def open_notebook(page, server: LabServer, name: str, timeout_ms: int = 90_000) -> None:
    """Open `name` (relative to the server root) in JupyterLab; wait for its kernel to be idle."""
    # a workspace of its own: JupyterLab would otherwise reopen (and start kernels for) earlier tabs
    workspace = "t" + secrets.token_hex(6)
    page.goto(
        f"{server.url}/lab/workspaces/{workspace}/tree/{name}?token={server.token}",
        wait_until="domcontentloaded",
        timeout=timeout_ms,
    )
    page.wait_for_selector(f"{NOTEBOOK} .jp-Cell", timeout=timeout_ms)
    page.wait_for_function("() => !!window.jupyterapp", timeout=timeout_ms)
    # the notebook fills the window: file browser closed
    page.evaluate("""async () => {
        const app = window.jupyterapp;
        if (!app.shell.leftCollapsed) await app.commands.execute('application:toggle-left-area');
    }""")
    wait_kernel_idle(page, timeout_ms)


def open_another(page, name: str, timeout_ms: int = 90_000) -> None:
    """Open `name` in a new tab of the JupyterLab already on `page` (the file browser's command); wait for its
    cells and its kernel to be idle. It becomes the current tab."""
    page.evaluate("async name => { await window.jupyterapp.commands.execute('docmanager:open', {path: name}); }", name)
    page.wait_for_function(
        """name => {
        const w = window.jupyterapp.shell.currentWidget;
        return !!w && !!w.context && w.context.path === name && !!w.node.querySelector('.jp-Cell');
    }""",
        arg=name,
        timeout=timeout_ms,
    )
    wait_kernel_idle(page, timeout_ms)


def current_tab(page) -> str:
    """The id of the current tab's widget (what `show_tab` and `close_tab` take)."""
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.id")


def show_tab(page, tab: str, timeout_ms: int = 30_000) -> None:
    """Make `tab` the current tab (its notebook is then the one the page functions look at)."""
    page.evaluate("id => window.jupyterapp.shell.activateById(id)", tab)
    page.wait_for_function(
        "id => { const w = window.jupyterapp.shell.currentWidget; return !!w && w.id === id && w.isVisible; }",
        arg=tab,
        timeout=timeout_ms,
    )


def close_tab(page, tab: str) -> None:
    """Close `tab` without the "save your work?" dialog (its kernel keeps running: shut it down on the server).

    A dialog still open (a dead kernel's, say; `problems` reported it) is dismissed first: it is modal for the whole
    page, and would stand in the way of the notebooks in the other tabs."""
    page.evaluate(
        """id => {
        for (const d of Array.from(document.querySelectorAll('.jp-Dialog'))) {
            const b = d.querySelector('.jp-Dialog-footer .jp-mod-reject') || d.querySelector('.jp-Dialog-footer button');
            if (b) b.click();
        }
        for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
            if (w.id !== id) continue;
            if (w.context) w.context.model.dirty = false;
            w.dispose();
        }
    }""",
        tab,
    )


def kernel_status(page) -> str:
    """The notebook's kernel status as JupyterLab shows it ('idle', 'busy', 'starting', …)."""
    return page.evaluate("""() => {
        const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return k ? k.status : 'no kernel';
    }""")


def kernel_id(page) -> str | None:
    """The id of the notebook's kernel (what LabServer.shutdown_kernel takes)."""
    return page.evaluate("""() => {
        const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return k ? k.id : null;
    }""")


def wait_kernel_idle(page, timeout_ms: int) -> None:
    page.wait_for_function(
        """() => {
        const w = window.jupyterapp.shell.currentWidget;
        const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
        return !!k && k.status === 'idle';
    }""",
        timeout=timeout_ms,
        polling=250,
    )


def run_all_cells(page) -> None:
    """Run → Run All Cells, through the menu bar as a person would."""
    page.locator(".lm-MenuBar-item").filter(has_text=re.compile(r"^\s*Run\s*$")).first.click()
    label = page.locator(".lm-Menu-itemLabel").filter(has_text=re.compile(r"^\s*Run All Cells\s*$"))
    page.locator(".lm-Menu-item:visible").filter(has=label).first.click()


PROMPTS_JS = f"""() => Array.from(document.querySelectorAll('{CODE_CELL}')).map(c => {{
    const p = c.querySelector('.jp-InputArea-prompt');
    return p ? p.textContent.trim() : '';
}})"""


def prompts(page) -> list[str]:
    return page.evaluate(PROMPTS_JS)


def wait_until_executed(page, timeout_s: float) -> dict:
    """Wait until every code cell shows an execution count and the kernel is idle (or an error stopped
    the run); returns {'prompts', 'seconds', 'stopped_early'}. Raises TimeoutError with the prompts."""
    t0 = time.monotonic()
    stable = 0
    last = []
    started = False
    while time.monotonic() - t0 < timeout_s:
        last = prompts(page)
        done = all(p[1:-2].strip().isdigit() for p in last if p)  # '[12]:'
        running = any("*" in p for p in last)
        started = started or running or any(p[1:-2].strip().isdigit() for p in last)
        status = kernel_status(page)
        if started and last and status == "idle" and not running:
            # finished, or stopped at an error (later cells then keep '[ ]:')
            stable += 1
            if stable >= 3:
                return {"prompts": last, "seconds": time.monotonic() - t0, "stopped_early": not done}
        else:
            stable = 0
        time.sleep(0.4)
    raise TimeoutError(f"notebook still running after {timeout_s:.0f} s; prompts: {last}")


def problems(page) -> list[str]:
    """Error outputs, stderr text, and JupyterLab dialogs shown on the page."""
    return page.evaluate(f"""() => {{
        const out = [];
        document.querySelectorAll('{NOTEBOOK} .jp-OutputArea-output{STDERR}, {NOTEBOOK} .jp-RenderedText{STDERR}')
            .forEach(e => out.push('stderr/error output: ' + e.innerText.trim().slice(0, 1500)));
        document.querySelectorAll('.jp-Dialog').forEach(d =>
            out.push('dialog: ' + d.innerText.trim().slice(0, 500)));
        return Array.from(new Set(out));
    }}""")


def figures(page) -> dict:
    """Images in outputs: how many, and how many loaded with a real size."""
    return page.evaluate(f"""() => {{
        const imgs = Array.from(document.querySelectorAll('{NOTEBOOK} .jp-OutputArea-output img'));
        return {{total: imgs.length,
                 rendered: imgs.filter(i => i.complete && i.naturalWidth > 50 && i.naturalHeight > 50).length}};
    }}""")


# A labkit.widgets.interactive view is a VBox: [HTML title], HBox of controls, Output.
WIDGET = (
    f"{NOTEBOOK} .widget-vbox:has(.widget-output, .jupyter-widgets-output-area)"
    ":has(.widget-dropdown select, .widget-slider)"
)
WIDGET_OUTPUT = ".widget-output, .jupyter-widgets-output-area"

# Fraction of an image's pixels that are "ink": not (near-)white once drawn on white.
INK_JS = """async (img) => {
    try { await img.decode(); } catch (e) { return -1; }
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    if (!c.width || !c.height) return -1;
    const g = c.getContext('2d');
    g.fillStyle = '#fff'; g.fillRect(0, 0, c.width, c.height);
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < d.length; i += 4) if (Math.min(d[i], d[i + 1], d[i + 2]) < 235) ink++;
    return ink / (c.width * c.height);
}"""
MIN_INK = 0.005  # a matplotlib figure with axes, ticks, labels has ≳ 3% (a heatmap ~70%); a blank one ~0.1%
MIN_INK_RATIO = 0.35  # a redrawn figure with < 35% of the ink its earlier version had was cut short


def figure_ink(locator) -> list[float]:
    """Ink fraction of every output image under `locator` (-1: the image did not decode)."""
    imgs = locator.locator(".jp-OutputArea-output img")
    return [imgs.nth(i).evaluate(INK_JS) for i in range(imgs.count())]


def blank_figures(page) -> list[str]:
    """Output images that did not decode or hold (almost) nothing drawn."""
    ink = figure_ink(page.locator(NOTEBOOK))
    return [
        f"output image {i + 1} of {len(ink)} is " + ("not decodable" if v < 0 else f"blank ({100 * v:.2f}% ink)")
        for i, v in enumerate(ink)
        if v < MIN_INK
    ]


def _widget(page, i):
    return page.locator(WIDGET).nth(i)


def _output_state(box) -> str:
    return box.evaluate(f"""b => {{
        const o = b.querySelector('{WIDGET_OUTPUT}');
        return o ? o.innerHTML : '';
    }}""")


def _wait_change(page, box, before: str, timeout_s: float) -> bool:
    """True once the widget's output differs from `before`, holds something, the kernel is idle and
    the output has stopped changing (figures arrive after the printed text)."""
    t0 = time.monotonic()
    last, stable = None, 0
    while time.monotonic() - t0 < timeout_s:
        now = _output_state(box)
        if now != before and now.strip() and kernel_status(page) == "idle":
            stable = stable + 1 if now == last else 0
            if stable >= 2:
                return True
        last = now
        time.sleep(0.3)
    return False


def _wait_images(box, n: int, timeout_s: float) -> bool:
    """True once the widget's output area holds at least `n` loaded images (False after `timeout_s`)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        loaded = box.evaluate(f"""b => {{
            const o = b.querySelector('{WIDGET_OUTPUT}');
            return o ? Array.from(o.querySelectorAll('.jp-OutputArea-output img'))
                .filter(i => i.complete && i.naturalWidth > 0).length : 0;
        }}""")
        if loaded >= n:
            return True
        time.sleep(0.2)
    return False


def exercise_widgets(page, timeout_s: float = 30) -> list[dict]:
    """Move each live labkit widget's controls until its output area changes.

    For each widget: try its dropdowns (choose another option), then its sliders (arrow keys on the
    handle, then a mouse drag along the track). Returns one record per widget:
    {index, control, changed, ink_before, ink_after} (ink: see `figure_ink`).
    """
    results = []
    n = page.locator(WIDGET).count()
    for i in range(n):
        box = _widget(page, i)
        box.scroll_into_view_if_needed()
        out = box.locator(WIDGET_OUTPUT).first
        record = {"index": i, "control": None, "changed": False, "ink_before": figure_ink(out), "ink_after": None}
        attempts = []
        selects = box.locator(".widget-dropdown select")
        for j in range(selects.count()):
            attempts.append((f"dropdown {j}", "select", selects.nth(j)))
        sliders = box.locator(".widget-slider")
        for j in range(sliders.count()):
            attempts.append((f"slider {j}", "slider", sliders.nth(j)))
        for label, kind, control in attempts:
            before = _output_state(box)
            if kind == "select":
                options = control.evaluate("s => Array.from(s.options).map(o => o.value)")
                current = control.evaluate("s => s.value")
                others = [o for o in options if o != current]
                if not others:
                    continue
                control.select_option(others[len(others) // 2])
                changed = _wait_change(page, box, before, timeout_s)
            else:
                handle = control.locator(".noUi-handle").first
                changed = False
                for key in ("ArrowLeft", "ArrowRight"):  # one of them moves it, wherever it starts
                    handle.focus()
                    for _ in range(3):
                        handle.press(key)
                    if _wait_change(page, box, before, timeout_s / 3):
                        changed = True
                        break
                if not changed:
                    bb, track = handle.bounding_box(), control.locator(".noUi-target").first.bounding_box()
                    if bb and track:
                        y = bb["y"] + bb["height"] / 2
                        page.mouse.move(bb["x"] + bb["width"] / 2, y)
                        page.mouse.down()
                        page.mouse.move(track["x"] + track["width"] * 0.2, y, steps=8)
                        page.mouse.up()
                        changed = _wait_change(page, box, before, timeout_s / 3)
            if changed:
                # the printed text lands before the figure; give a figure rendered on a busy machine
                # its time (bounded) — a redraw with fewer or blank figures is reported by the caller
                _wait_images(box, len(record["ink_before"]), timeout_s)
                record.update(control=label, changed=True, ink_after=figure_ink(out))
                break
        results.append(record)
    return results


def widget_figure_problems(record: dict) -> list[str]:
    """A widget that redrew must show real figures: none blank, and as many as before."""
    before, after = record["ink_before"] or [], record["ink_after"] or []
    problems = []
    if len(after) < len(before):
        problems.append(
            f"widget {record['index']}: {len(before)} figure(s) before moving {record['control']}, {len(after)} after"
        )
    for k, v in enumerate(after):
        ref = before[k] if k < len(before) else None
        if v < MIN_INK or (ref and ref > 0 and v < MIN_INK_RATIO * ref):
            problems.append(
                f"widget {record['index']}: the figure redrawn after moving {record['control']} is "
                f"blank or partly drawn ({100 * v:.2f}% ink; before the move {100 * ref:.2f}%)"
                if ref is not None
                else f"widget {record['index']}: the figure redrawn after moving {record['control']} is "
                f"blank ({100 * v:.2f}% ink)"
            )
    return problems


def _settle(page) -> None:
    """Let images decode and two frames paint."""
    page.evaluate("""async () => {
        await Promise.all(Array.from(document.querySelectorAll('img')).map(i => i.decode().catch(() => null)));
        await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    }""")


def screenshot_widget(page, index: int, path: Path) -> None:
    """The widget (controls and output) alone; the window is made tall enough to hold all of it."""
    box = _widget(page, index)
    old = page.viewport_size
    height = box.bounding_box()["height"]
    try:
        if height + 200 > old["height"]:
            page.set_viewport_size({"width": old["width"], "height": int(height) + 200})
        box.evaluate("b => b.scrollIntoView({block: 'center'})")
        _settle(page)
        bb = box.bounding_box()
        vp = page.viewport_size
        x, y = max(0, bb["x"] - 8), max(0, bb["y"] - 8)
        page.screenshot(
            path=str(path),
            clip={
                "x": x,
                "y": y,
                "width": min(vp["width"] - x, bb["width"] + 16),
                "height": min(vp["height"] - y, bb["height"] + 16),
            },
        )
    finally:
        page.set_viewport_size(old)


#: The window is made this tall (at most) while the notebook is photographed: the six notebooks (12-22k px) then
#: fit in one picture, taken in 2-2.5 s here, instead of 12-25 scrolled 900 px windows stitched together (3-7 s).
#: Chromium draws the 22k px window whole (checked on notebook 05); a taller notebook is still stitched.
SCREENSHOT_WINDOW_PX = 24_000


def _notebook_geometry(page, scroller: str) -> dict:
    """Where the notebook's scrolling area is on screen, and how tall its cells are (scrolled back to the top)."""
    return page.evaluate(f"""() => {{
        const s = document.querySelector('{scroller}');
        const cells = s.querySelectorAll('.jp-Cell');
        const r = s.getBoundingClientRect();
        s.scrollTop = 0;
        const last = cells.length ? cells[cells.length - 1].getBoundingClientRect().bottom - r.top + 24 : s.scrollHeight;
        return {{x: r.left, y: r.top, width: r.width, height: r.height, content: Math.min(s.scrollHeight, Math.ceil(last))}};
    }}""")


def screenshot_notebook(page, path: Path, max_height: int = 60_000) -> None:
    """The whole notebook in one PNG, with JupyterLab's header above it.

    The window is stretched to hold up to SCREENSHOT_WINDOW_PX of the notebook, and put back after; a notebook
    taller than that is scrolled a window at a time and the pictures stitched together."""
    scroller = f"{NOTEBOOK.rsplit(' ', 1)[0]} .jp-WindowedPanel-outer"
    old = page.viewport_size
    geo = _notebook_geometry(page, scroller)
    around = old["height"] - geo["height"]  # menu, tabs, toolbar and status bar
    tall = int(min(geo["content"], max_height, SCREENSHOT_WINDOW_PX) + around)
    try:
        if tall > old["height"]:
            page.set_viewport_size({"width": old["width"], "height": tall})
            _settle(page)  # JupyterLab lays the notebook out again
        geo = _notebook_geometry(page, scroller)
        _settle(page)
        total = min(geo["content"], max_height)
        if total <= geo["height"]:
            page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": old["width"], "height": geo["y"] + total})
        else:
            _stitch(page, path, scroller, geo, total)
    finally:
        page.set_viewport_size(old)


def _stitch(page, path: Path, scroller: str, geo: dict, total: int) -> None:
    """Scroll the notebook a window at a time, photograph each, paste them under the header."""
    from PIL import Image  # Pillow comes with matplotlib

    vp = page.viewport_size
    step = int(geo["height"])
    header = Image.open(io.BytesIO(page.screenshot(clip={"x": 0, "y": 0, "width": vp["width"], "height": geo["y"]})))
    sheet = Image.new("RGB", (vp["width"], int(geo["y"]) + total), (238, 238, 238))
    sheet.paste(header, (0, 0))
    top = 0
    while top < total:
        page.evaluate(f"y => {{ document.querySelector('{scroller}').scrollTop = y; }}", top)
        _settle(page)
        actual = page.evaluate(f"() => document.querySelector('{scroller}').scrollTop")
        shot = Image.open(
            io.BytesIO(
                page.screenshot(clip={"x": geo["x"], "y": geo["y"], "width": geo["width"], "height": geo["height"]})
            )
        )
        offset = top - int(actual)  # the last window may stop short of `top`
        part = shot.crop((0, offset, shot.width, min(shot.height, offset + total - top)))
        sheet.paste(part, (int(geo["x"]), int(geo["y"]) + top))
        top += part.height if part.height > 0 else step
    sheet.save(path)


def unrendered_widgets(page) -> list[str]:
    """Widgets the front end could not show: ipywidgets' error text, or the plain-text repr it falls back to."""
    return page.evaluate(f"""() => {{
        const out = [];
        document.querySelectorAll('{NOTEBOOK} .jp-OutputArea-output').forEach(o => {{
            const t = (o.innerText || '').trim();
            if (/^Error displaying widget|^Failed to (load|render) (model|widget)/i.test(t) ||
                /^(VBox|HBox|Dropdown|\\w*Slider|Output|HTML)\\(/.test(t))
                out.push('widget not rendered: ' + t.slice(0, 300));
        }});
        return out;
    }}""")
