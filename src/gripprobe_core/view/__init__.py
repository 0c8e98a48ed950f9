"""``gripprobe view``: a local web app showing the runs under a results folder while they run (docs/view.md).

The pages are the static reports' own (``reports/templates``, rendered by :mod:`gripprobe_core.reports.html`)
with a live bar and a script that polls small JSON answers; runs are read with the store's readers
(:mod:`.state`), served by :mod:`.routes` on 127.0.0.1 (:mod:`.server`)."""

from .routes import ViewConfig, make_app
from .server import ViewServer, is_loopback, serve, serve_in_thread
from .state import RunsIndex, RunState, run_state_name

__all__ = ["RunState", "RunsIndex", "ViewConfig", "ViewServer", "is_loopback", "make_app", "run_state_name", "serve",
           "serve_in_thread"]
