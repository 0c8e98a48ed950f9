"""What writing a run's reports needs loaded, loaded ahead: the report modules, Jinja and the run's templates.

A run calls :func:`warm_run_reports` on a thread of its own while its first agent runs (runner/run.py), when
the harness is only waiting; the reports at the end then find everything imported and compiled (~25 ms of a
one-case run's tail). It writes nothing and renders nothing: the pages are the same with or without it, and
a failure here only means the reports load as they would have anyway.
"""

from __future__ import annotations

#: The templates a run's reports render (summary and case pages) and the ones they extend, import or include.
RUN_TEMPLATES = ("base.html", "macros.html", "style.css", "summary.html", "table.js", "case.html", "timeline.js")
#: The aggregate page's template and the ones it extends, imports or includes.
AGGREGATE_TEMPLATES = ("base.html", "macros.html", "style.css", "aggregate.html", "_fidelity.html", "table.js")


def warm_run_reports() -> None:
    """Import the run reports' modules and load their templates into the environment they render with."""
    from . import summary_md  # noqa: F401  (imported for what it imports)

    _load_templates(RUN_TEMPLATES)


def warm_aggregate_page() -> None:
    """Load Jinja and the aggregate page's templates (``aggregate-reports`` calls it while its worker processes
    read the runs and the command itself only waits: ~30 ms that are then not spent after the reading)."""
    _load_templates(AGGREGATE_TEMPLATES)


def _load_templates(names: tuple[str, ...]) -> None:
    """Load (compile, or read from the bytecode cache) each of ``names`` into the environment the pages render
    with; a name the environment does not know is left out."""
    from . import html

    env = html._env()
    known = set(env.list_templates())
    for name in names:
        if name in known:
            env.get_template(name)
