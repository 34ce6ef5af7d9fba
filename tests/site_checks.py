"""What a reader of the built site sees, checked in Chromium with the network closed to all but the site.

`serve(folder)` serves a built site on 127.0.0.1 (a context manager yielding its origin);
`site_problems(page, origin, pages, forbidden)` opens the home page, every notebook page and the
search page, and returns what is wrong, one line each: a request that left the site, a figure not
drawn, raw TeX (`$$`, `\\frac`) left on screen, a build-machine path, a missing link or title, search
that does not find "busbw". Used by tests/test_site_browser.py (the CI stage after the suite).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading

#: what a reader must never see: unrendered TeX
RAW_TEX = ("$$", "\\frac", "\\alpha", "\\(", "\\[")

WAIT_MATHJAX = """() => new Promise(resolve => {
  if (!window.MathJax || !window.MathJax.Hub) { resolve("no mathjax"); return; }
  window.MathJax.Hub.Queue(() => resolve("typeset"));
})"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder):
    """Serve `folder` on a free port of 127.0.0.1; yields the origin ("http://127.0.0.1:PORT")."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def block_all_but(page, origin: str) -> list[str]:
    """Abort every request that does not go to `origin`; returns the (growing) list of those aborted."""
    left = []

    def route(r):
        if r.request.url.startswith(origin + "/"):
            r.continue_()
        else:
            left.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return left


def page_problems(page, url: str, expect_figures: int, forbidden) -> list[str]:
    """Problems of one loaded page: title, figures drawn, MathJax done with no raw TeX, no build paths."""
    problems = []
    page.goto(url, wait_until="load")
    state = page.evaluate(WAIT_MATHJAX)
    name = url.rsplit("/", 1)[-1]
    title = page.title()
    if not title or title.startswith("Notebook"):
        problems.append(f"{name}: <title> is {title!r}")
    text = page.evaluate("() => document.body.innerText")
    html = page.content()
    for raw in RAW_TEX:
        if raw in text:
            at = text.index(raw)
            problems.append(
                f"{name}: raw TeX {raw!r} on screen (MathJax {state}): …{text[max(0, at - 60) : at + 60]!r}"
            )
    for path in forbidden:
        for where, body in (("text", text), ("html", html)):
            if path in body:
                at = body.index(path)
                problems.append(
                    f"{name}: build-machine path {path!r} in the {where}: …{body[max(0, at - 80) : at + 80]!r}"
                )
                break
    drawn = page.eval_on_selector_all(
        "img[src*='_images/']", "els => els.filter(e => e.complete && e.naturalWidth > 100).length"
    )
    if drawn != expect_figures:
        problems.append(f"{name}: {drawn} of {expect_figures} figures drawn")
    return problems


def site_problems(page, origin: str, pages, forbidden, colab_urls: dict) -> list[str]:
    """Everything wrong with the site a reader opens at `origin` (empty: nothing)."""
    left = block_all_but(page, origin)
    problems = page_problems(page, f"{origin}/index.html", 0, forbidden)
    sidebar = page.eval_on_selector_all(
        "nav.bd-docs-nav a.reference.internal", "els => els.map(e => e.innerText.trim())"
    )
    titles = [p.title for p in pages]
    if [t for t in sidebar if t in titles] != titles:
        problems.append(f"index: the sidebar's learning path is {sidebar}, not {titles}")
    for i, p in enumerate(pages, 1):
        if not p.title.startswith(f"{i} · "):
            problems.append(f"{p.file}: title {p.title!r} is not numbered '{i} · …'")
        problems += page_problems(page, f"{origin}/{p.file}", p.figures, forbidden)
        if not page.title().startswith(p.title):
            problems.append(f"{p.file}: <title> {page.title()!r} does not start with {p.title!r}")
        on_page = page.eval_on_selector_all("#pst-page-toc-nav a", "els => els.map(e => e.getAttribute('href'))")
        if len(on_page) < min(3, len(p.sections)):
            problems.append(f"{p.file}: the page's sections are not in the sidebar ({on_page})")
        colab = page.eval_on_selector_all("a.labkit-colab", "els => els.map(e => e.href)")
        if colab != [colab_urls[p.notebook]]:
            problems.append(f"{p.file}: Open in Colab links {colab}, expected {colab_urls[p.notebook]}")
        download = page.eval_on_selector_all("a.labkit-download", "els => els.map(e => e.href)")
        if len(download) != 1:
            problems.append(f"{p.file}: {len(download)} download links")
        else:
            r = page.request.get(download[0])
            if not r.ok or '"nbformat"' not in r.text():
                problems.append(f"{p.file}: the download link {download[0]} gives {r.status}, not a notebook")
        if page.locator(".cell.tag_parameters, .cell.tag_injected-parameters, .cell.tag_colab-install").count():
            problems.append(f"{p.file}: a parameters or install cell is shown")
    page.goto(f"{origin}/search.html?q=busbw", wait_until="load")
    try:
        page.wait_for_selector("#search-results ul.search li", timeout=30_000)
        found = page.eval_on_selector_all(
            "#search-results ul.search li a", "els => els.map(e => e.getAttribute('href'))"
        )
    except Exception as e:  # playwright's TimeoutError
        found = []
        problems.append(f"search: no result for 'busbw' ({type(e).__name__})")
    if found and not any("05_ring_allreduce_by_hand" in f for f in found):
        problems.append(f"search: 'busbw' does not find notebook 5 ({found})")
    if left:
        problems.append(f"requests that left the site: {sorted(set(left))[:5]}")
    return problems
