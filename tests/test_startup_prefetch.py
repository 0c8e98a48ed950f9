"""What a command starts early or looks up late so that its start costs less, behaving as before."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import ROOT


def _fresh(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_the_store_finds_syncfs_on_first_flush_not_at_import():
    out = _fresh("""
        import sys
        from pathlib import Path
        import tempfile
        import gripprobe_core.store.layout as layout
        print("ctypes.util" in sys.modules, layout._syncfs.cache_info().currsize)
        d = Path(tempfile.mkdtemp()); (d / "f").write_text("x")
        layout.flush_folder(d)
        print(layout._syncfs() is not None, "ctypes.util" in sys.modules)
    """)
    assert out.splitlines() == ["False 0", "True False"]  # Linux: libc's syncfs, without ldconfig's lookup


def test_a_prefetched_sandbox_probe_gives_the_same_sandbox_once():
    out = _fresh("""
        from gripprobe_core.runner import sandbox
        sandbox.prefetch_probe()
        box = sandbox.resolve_sandbox("auto")  # waits for the thread's probe, or probes itself: one answer
        again = sandbox.resolve_sandbox("auto")
        print(box.kind, box is again, sandbox._resolved["probe"].box is box)
    """)
    assert out.split() == ["bwrap", "True", "True"]


def test_the_first_agent_phase_starts_loading_the_reports_and_every_event_still_reaches_the_watcher():
    """A run's watcher is wrapped (runner/run.py): the first agent phase to start loads what judging and the
    reports need (the result validators, the judge, tier D's patterns, the report modules and the run's
    templates) on a thread of its own, once; every event still reaches the caller's watcher, and the
    interpreter's switch interval is its own again once they are loaded."""
    out = _fresh("""
        import sys, threading
        from gripprobe_core.models.results import CaseKey
        from gripprobe_core.runner.live import CaseEvent
        from gripprobe_core.runner.run import _WarmWhileAgentsRun

        seen = []
        warm = _WarmWhileAgentsRun(seen.append, 2)
        key = CaseKey(agent="reference", model="oracle-perfect", backend="oracle", format="tool", test="save_file")
        warm(CaseEvent("c1", key, "judging", 0.0))  # not an agent phase: nothing loads
        print("gripprobe_core.reports.html" in sys.modules, warm._thread is None)
        warm(CaseEvent("c1", key, "warmup", 1.0))
        first = warm._thread
        warm(CaseEvent("c1", key, "measured", 2.0))
        warm.join()
        from gripprobe_core.reports import html
        from gripprobe_core.reports.warm import RUN_TEMPLATES
        env = html._env()
        loaded = {name for (_, name) in env.cache.keys()} if env.cache is not None else set()
        print(warm._thread is first, not first.is_alive(), sorted(set(RUN_TEMPLATES) - loaded),
              [e.phase for e in seen], sys.getswitchinterval())
        from gripprobe_core.models.results import CaseResult
        from gripprobe_core.telemetry import tier_d
        print(CaseResult.__pydantic_complete__, tier_d._rules.cache_info().currsize, "gripprobe_core.runner.judge" in sys.modules)
    """)
    # the short switch interval lasts only while the reports load (Python's default 5 ms after); the judge's
    # first-case costs (result validators, its modules, tier D's patterns) are paid on the thread too
    assert out.splitlines() == ["False True", "True True [] ['judging', 'warmup', 'measured'] 0.005", "True 1 True"]


def test_a_run_without_a_watcher_gets_the_same_reports():
    """No caller's watcher (the API's default): the wrapper still loads the reports ahead and passes nothing on."""
    out = _fresh("""
        from gripprobe_core.models.results import CaseKey
        from gripprobe_core.runner.live import CaseEvent
        from gripprobe_core.runner.run import _WarmWhileAgentsRun

        warm = _WarmWhileAgentsRun(None, 1)
        key = CaseKey(agent="reference", model="oracle-perfect", backend="oracle", format="tool", test="save_file")
        warm(CaseEvent("c1", key, "measured", 0.0))
        warm.join()
        import sys
        print("gripprobe_core.reports.summary_md" in sys.modules)
    """)
    assert out == "True"


def test_the_recorder_is_released_once_the_last_case_is_judged_and_reaped_before_the_run_returns(tmp_path):
    """Every phase of every case has flushed its records when the last case is judged: the proxies' recorder
    is released then (it exits while that case is written and the reports are), and is gone, reaped, when
    the run returns; the case is judged on the same records."""
    out = _fresh(f"""
        import json, os
        from pathlib import Path
        from gripprobe_core.pluginmanager import make_plugin_manager
        from gripprobe_core.proxy import recorder_client
        from gripprobe_core.runner import RunSettings, execute_run, plan_cases
        from gripprobe_core.specs import load_specs

        plugins = make_plugin_manager(load_entry_points=False)
        cases = plan_cases(load_specs(Path("specs"), registry=plugins.registry), agents=["reference"],
                           models=["oracle-perfect"], tests=["save_file", "shell_pwd"])
        seen = []
        watch = lambda e: seen.append((e.case_id[-9:], e.phase, recorder_client._CLIENT is None))
        outcome = execute_run(cases, plugins, RunSettings(results_root=Path({str(tmp_path)!r})), on_event=watch)
        print([(c, p, released) for c, p, released in seen if p == "judging"])
        print(sorted(r.verdict.status for r in outcome.results))
        try:
            os.waitpid(-1, os.WNOHANG)
            print("a child is left")
        except ChildProcessError:
            print("no child left")
    """)
    judged, statuses, children = out.splitlines()
    assert judged == "[('save_file', 'judging', False), ('shell_pwd', 'judging', True)]"  # released at the last
    assert statuses == "['PASS', 'PASS']" and children == "no child left"
