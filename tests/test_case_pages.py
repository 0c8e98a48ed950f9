"""A run renders each case's report page as the case ends (runner/case_pages.py) and writes it with the reports at
its end: the same page a rebuild writes, used only while its case.json is the file it was made from, kept in
memory up to a budget (past it the page is rendered at the end, as before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT, gripprobe, run_reference


def _pages(run_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "reports" / "cases").iterdir())}


def test_a_run_writes_the_case_pages_a_rebuild_writes(tmp_path):
    run = run_reference(tmp_path, models=("oracle-perfect", "oracle-lazy"), tests=("shell_pwd", "save_file"))
    ahead = _pages(run.run_dir.path)
    assert len(ahead) == 4
    res = gripprobe("rebuild-reports", str(run.run_dir.path))
    assert res.returncode == 0, res.stderr
    assert _pages(run.run_dir.path) == ahead  # byte for byte
    verified = gripprobe("verify", str(run.run_dir.path))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_run_renders_its_case_pages_beside_its_agents_not_at_its_end(tmp_path):
    """Every case page of a local run is rendered on a worker thread as its case ends (the run's end, on the
    main thread, only writes them), and each lands in the report written at the end."""
    code = textwrap.dedent(f"""
        import json, threading
        from pathlib import Path
        from gripprobe_core.reports import html
        made = []
        render = html.render_case_html
        def counted(*a, **k):
            made.append(threading.current_thread() is threading.main_thread())
            return render(*a, **k)
        html.render_case_html = counted
        from conftest import run_reference
        run = run_reference(Path({str(tmp_path)!r}), tests=("shell_pwd", "save_file", "shell_file"))
        print(json.dumps({{"on_main": made, "pages": len(list((run.run_dir.path / "reports" / "cases").iterdir()))}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                         cwd=ROOT / "tests", stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"on_main": [False, False, False], "pages": 3}


def test_a_kept_page_is_used_only_while_its_case_json_is_unchanged_and_only_within_the_budget(tmp_path):
    from gripprobe_core.models.results import CaseResult
    from gripprobe_core.reports.html import render_case_html
    from gripprobe_core.runner.case_pages import CasePages
    from gripprobe_core.store.layout import atomic_write_bytes

    run = run_reference(tmp_path, tests=("shell_pwd", "save_file"))
    folder = run.run_dir
    names = folder.case_names()
    stored = [folder.stored_case(n) for n in names]
    results = [CaseResult.model_validate_json((folder.case(n) / "case.json").read_bytes()) for n in names]

    pages = CasePages(folder.run_id)
    assert pages.add(names[0], stored[0], results[0]) and pages.size > 0
    assert pages.take(names[0], stored[0]) == render_case_html(stored[0], results[0], run_id=folder.run_id)
    assert pages.take(names[0], stored[0]) is None and pages.size == 0  # taken once

    pages.add(names[0], stored[0], results[0])
    case_json = folder.case(names[0]) / "case.json"
    atomic_write_bytes(case_json, case_json.read_bytes())  # the same bytes, another file: rendered again
    assert pages.take(names[0], stored[0]) is None

    small = CasePages(folder.run_id)
    small.MAX_BYTES = 1
    assert small.add(names[0], stored[0], results[0]) is True  # under the budget when it was added
    assert small.add(names[1], stored[1], results[1]) is False  # past it: rendered at the end
    assert small.take(names[1], stored[1]) is None

    os.unlink(folder.case(names[1]) / "case.json")  # no case.json: nothing kept
    assert CasePages(folder.run_id).add(names[1], stored[1], results[1]) is False
