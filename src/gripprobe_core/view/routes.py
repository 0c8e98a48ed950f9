"""The view's pages and JSON, as aiohttp routes (docs/view.md).

| route | what |
|---|---|
| ``GET /`` | the index: every run under the results folder, kept current |
| ``GET /api/runs`` | the index's state: a version and one small object per run |
| ``GET /runs/{run}/`` | redirects to the run's summary |
| ``GET /runs/{run}/summary.html`` | the run's summary (the static page's template, with the cases present now) |
| ``GET /api/runs/{run}`` | the run's state: version, state, done / planned, counts by status |
| ``GET /runs/{run}/cases/{page}`` | a case page (the static page's template), for every case folder present |
| ``GET /api/runs/{run}/cases/{page}`` | whether that case has landed (a waiting case page reloads when it does) |
| ``GET /compare?a=RUN&b=RUN`` | the comparison of two runs (the static compare page) |

``{run}`` and ``{page}`` are looked up among the names the store lists (a run's display-safe folder name, a
case page's ``<case>.html``), never joined to a path, so no URL can name a file outside the results folder;
anything else is a plain ``404``. Every page is rendered by :mod:`gripprobe_core.reports.html` from the one set
of templates, every stored value escaped there. Reading and rendering run in worker threads.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from ..errors import UserError
from ..reports.html import render_view_page
from ..textsafe import inert, safe_name, safe_text
from .state import RunsIndex, RunState

__all__ = ["ViewConfig", "make_app"]

#: Sent with every answer: the pages fetch nothing but this server (connect-src 'self'), are never framed,
#: cached, or sniffed as another type.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                               "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Cross-Origin-Resource-Policy": "same-origin",
}
@dataclass
class ViewConfig:
    """What the app serves and how."""

    root: Path
    """The results folder (or runs/ folder, or one run folder) as the user named it."""
    interval_s: float = 1.0
    """How often the pages poll."""
    keys: set[str] | None = None
    """The fingerprints a compared run must be signed with (None: each run's own; see ``gripprobe compare``)."""
    key_label: str = ""
    allowed_hosts: set[str] | None = None
    """The Host headers answered (None: any); set by the server to its own address, so a page on another site
    whose name was made to point at 127.0.0.1 (DNS rebinding) gets nothing."""
    index: RunsIndex = field(init=False)

    def __post_init__(self) -> None:
        self.index = RunsIndex(self.root)


CONFIG = web.AppKey("gripprobe_view", ViewConfig)


def _not_found() -> web.Response:
    return web.Response(status=404, text="not found\n")


def _html(text: str, version: str | None = None) -> web.Response:
    headers = {"X-GripProbe-Version": version} if version else None
    return web.Response(text=text, content_type="text/html", charset="utf-8", headers=headers)


def _json(obj: Any) -> web.Response:
    return web.Response(text=json.dumps(inert(obj), ensure_ascii=True, sort_keys=True),
                        content_type="application/json", charset="utf-8")


def _cfg(request: web.Request) -> ViewConfig:
    return request.app[CONFIG]


def _run_href(slug: str) -> str:
    return f"runs/{quote(slug, safe='')}/summary.html"


def _live(st: RunState, interval_s: float, slug_url: str) -> dict[str, Any]:
    s = st.summary()
    s["config"] = {"state": f"/api/runs/{slug_url}", "page": f"/runs/{slug_url}/summary.html",
                   "interval": int(interval_s * 1000), "version": st.version}
    return s


def _index_data(cfg: ViewConfig) -> tuple[str, list[dict[str, Any]]]:
    rows = []
    for run in cfg.index.runs():
        st = cfg.index.state(run)
        row = st.summary()
        row["href"] = _run_href(st.slug)
        row["ad_hoc"] = isinstance(st.manifest.get("selection"), dict)
        rows.append(row)
    version = "-".join(r["version"] for r in rows) or "empty"
    import hashlib

    return hashlib.sha256(version.encode()).hexdigest()[:16], rows


async def index(request: web.Request) -> web.Response:
    cfg = _cfg(request)

    def render() -> tuple[str, str]:
        version, rows = _index_data(cfg)
        live = {"config": {"state": "/api/runs", "page": "/", "interval": int(cfg.interval_s * 1000),
                           "version": version}}
        return render_view_page("view_index.html", live=live, root=safe_name(cfg.root), runs=rows), version

    text, version = await asyncio.to_thread(render)
    return _html(text, version)


async def api_runs(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    version, rows = await asyncio.to_thread(_index_data, cfg)
    return _json({"version": version, "runs": rows, "idle_s": min((r["idle_s"] for r in rows
                                                                    if r["idle_s"] is not None), default=None)})


async def run_redirect(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    slug = request.match_info["run"]
    if await asyncio.to_thread(cfg.index.find, slug) is None:
        return _not_found()
    return web.Response(status=302, headers={"Location": f"/runs/{quote(slug, safe='')}/summary.html"})


async def run_summary(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    slug = request.match_info["run"]

    def render() -> tuple[str, str] | None:
        run = cfg.index.find(slug)
        if run is None:
            return None
        st = cfg.index.state(run)
        live = _live(st, cfg.interval_s, quote(slug, safe=""))
        return render_view_page("view_summary.html", live=live,
                                summary=(run.run_id, st.manifest, st.entries)), st.version

    out = await asyncio.to_thread(render)
    return _not_found() if out is None else _html(*out)


async def api_run(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    slug = request.match_info["run"]

    def state() -> dict | None:
        run = cfg.index.find(slug)
        if run is None:
            return None
        st = cfg.index.state(run)
        out = st.summary()
        out["cases"] = [{"case": safe_name(name), "status": r.verdict.status if r is not None else
                         ("running" if name in st.pending else "invalid")} for name, r in st.entries]
        return out

    out = await asyncio.to_thread(state)
    return _not_found() if out is None else _json(out)


def _case_version(cfg: ViewConfig, slug: str, page: str) -> tuple[Any, ...] | None:
    run = cfg.index.find(slug)
    if run is None:
        return None
    found = cfg.index.case(run, page)
    if found is None:
        return None
    name, _ = found
    try:
        st = (run.stored_case(name) / "case.json").lstat()
        return (run, name, f"{st.st_ino}-{st.st_size}-{st.st_mtime_ns}")
    except OSError:
        return (run, name, "pending")


async def case_page(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    slug, page = request.match_info["run"], request.match_info["page"]

    def render() -> str | None:
        run = cfg.index.find(slug)
        if run is None:
            return None
        found = cfg.index.case(run, page)
        if found is None:
            return None
        name, result = found
        live: dict[str, Any] = {"config": None}
        if result is None:  # not landed yet (or not a valid result): the page reloads when that changes
            v = _case_version(cfg, slug, page)
            url = f"/api/runs/{quote(slug, safe='')}/cases/{quote(page, safe='')}"
            live["config"] = {"state": url, "page": "", "interval": int(cfg.interval_s * 1000), "reload": True,
                              "version": v[2] if v else "pending"}
        return render_view_page("view_case.html", live=live, case=(run.stored_case(name), result, run.run_id))

    text = await asyncio.to_thread(render)
    return _not_found() if text is None else _html(text)


async def api_case(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    v = await asyncio.to_thread(_case_version, cfg, request.match_info["run"], request.match_info["page"])
    if v is None:
        return _not_found()
    return _json({"version": v[2], "landed": v[2] != "pending"})


def _view_links(data: dict[str, Any], slugs: dict[str, str]) -> None:
    """Point every trial's case-page link at this server's case page of its run (compare links the static
    pages, relative to a report folder; the view serves a page for every case folder, written or not)."""
    from ..reports.html import page_name

    for cell in data.get("cells", []):
        for side, slug in slugs.items():
            s = cell.get(side) or {}
            s["pages"] = [f"/runs/{quote(slug, safe='')}/cases/{quote(page_name(case.split('/', 1)[-1]), safe='')}"
                          for case in s.get("cases", [])]


async def compare(request: web.Request) -> web.Response:
    cfg = _cfg(request)
    a_slug, b_slug = request.query.get("a"), request.query.get("b")
    if not a_slug or not b_slug or len(request.query) != 2:
        return web.Response(status=400, text="compare takes two runs: /compare?a=RUN&b=RUN\n")

    def render() -> tuple[int, str]:
        from ..reports.compare import Side, compare_sides

        a, b = cfg.index.find(a_slug), cfg.index.find(b_slug)
        if a is None or b is None:
            return 404, "not found\n"
        try:
            data = compare_sides(Side(safe_name(a.run_id), (a.path,)), Side(safe_name(b.run_id), (b.path,)),
                                 keys=cfg.keys, key_label=cfg.key_label)
        except UserError as exc:  # a side holding no case yet
            return 400, f"cannot compare: {safe_text(exc)}\n"
        _view_links(data, {"a": a_slug, "b": b_slug})
        return 200, render_view_page("view_compare.html", live={}, compare=data)

    status, text = await asyncio.to_thread(render)
    if status != 200:
        return web.Response(status=status, text=text)
    return _html(text)


@web.middleware
async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) \
        -> web.StreamResponse:
    """Only GET and HEAD, only for this server's own host name; the security headers on every answer."""
    cfg = _cfg(request)
    if request.method not in ("GET", "HEAD"):
        resp: web.StreamResponse = web.Response(status=405, text="method not allowed\n", headers={"Allow": "GET, HEAD"})
    elif cfg.allowed_hosts is not None and request.host not in cfg.allowed_hosts:
        resp = web.Response(status=421, text="this server answers only to its own address\n")
    else:
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            if exc.status >= 400:  # aiohttp's own 404/405 pages: plain, naming nothing
                resp = web.Response(status=exc.status, text=f"{exc.reason.lower()}\n")
            else:
                resp = exc
    for k, v in SECURITY_HEADERS.items():
        resp.headers.setdefault(k, v)
    return resp


def make_app(cfg: ViewConfig) -> web.Application:
    """The view's aiohttp application (docs/view.md)."""
    app = web.Application(middlewares=[guard])
    app[CONFIG] = cfg
    app.router.add_get("/", index)
    app.router.add_get("/api/runs", api_runs)
    app.router.add_get("/runs/{run}/", run_redirect)
    app.router.add_get("/runs/{run}", run_redirect)
    app.router.add_get("/runs/{run}/summary.html", run_summary)
    app.router.add_get("/api/runs/{run}", api_run)
    app.router.add_get("/runs/{run}/cases/{page}", case_page)
    app.router.add_get("/api/runs/{run}/cases/{page}", api_case)
    app.router.add_get("/compare", compare)
    return app
