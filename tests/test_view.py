"""`gripprobe view`: its routes against a real server on 127.0.0.1, on real runs of the reference agent.

One real run (reference × oracle-perfect and oracle-lazy × save_file) is copied into the shapes a run has
while it runs: a manifest saying `running` with one case landed, a second case folder appearing without its
case.json, then its case.json landing (written last, as the runner writes it), then the manifest rewritten
`complete` or `incomplete` (interrupted). Hostile shapes: URLs that climb out, a run folder and a case folder
that are links, a case.json that is a link to /etc/passwd, a folder that is no run, a run named with markup."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, gripprobe, run_reference, strip_signatures
from gripprobe_core.view import ViewConfig, serve_in_thread

PERFECT = "reference__oracle-perfect__oracle__tool__save_file"
LAZY = "reference__oracle-lazy__oracle__tool__save_file"


def get(url: str, *, host: str | None = None, method: str = "GET") -> tuple[int, dict, str]:
    req = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A real finished run folder (its own results root)."""
    res = run_reference(tmp_path_factory.mktemp("viewrun"), models=("oracle-perfect", "oracle-lazy"),
                        tests=("save_file",))
    assert sorted(r.verdict.status for r in res.results) == ["NO_TOOL_CALL", "PASS"]
    return res.run_dir.path


@pytest.fixture
def results(tmp_path, finished) -> Path:
    """A results root holding a copy of the finished run, as ``runs/done``."""
    shutil.copytree(finished, tmp_path / "runs" / "done", symlinks=True)
    return tmp_path


@pytest.fixture
def view(results):
    with serve_in_thread(ViewConfig(results, interval_s=0.2)) as url:
        yield url


def _live_copy(results: Path, finished: Path, name: str = "live") -> Path:
    """An in-progress run: the manifest as the runner writes it first (`running`, both cases planned), one case."""
    run = results / "runs" / name
    (run / "cases").mkdir(parents=True)
    manifest = json.loads((finished / "manifest.json").read_text())
    manifest.update(status="running", finished_at=None, counts={}, completed=0)
    manifest.pop("harness")  # the finished run's harness is gone; as if written on another machine: running
    (run / "manifest.json").write_text(json.dumps(manifest))
    shutil.copytree(finished / "cases" / PERFECT, run / "cases" / PERFECT)
    return run


def _land(finished: Path, run: Path, case: str) -> None:
    """A case landing the way the runner writes it: its folder and files first, case.json last."""
    dst = run / "cases" / case
    shutil.copytree(finished / "cases" / case, dst, ignore=shutil.ignore_patterns("case.json"))
    tmp = dst / ".case.json.tmp"
    shutil.copyfile(finished / "cases" / case / "case.json", tmp)
    os.replace(tmp, dst / "case.json")


def _table(html: str, table_id: str) -> str:
    m = re.search(rf'<table id="{table_id}".*?</table>', html, re.S)
    assert m, f"no table {table_id}"
    return m.group(0)


def _main(html: str) -> str:
    return html[html.index("<main>"):html.index("</main>")]


def test_index_lists_the_run_and_links_its_summary(view):
    status, headers, html = get(view)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert 'href="runs/done/summary.html"' in html and "complete" in html
    assert "connect-src 'self'" in html and "connect-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"
    status, _, body = get(view + "api/runs")
    data = json.loads(body)
    (run,) = data["runs"]
    assert (run["run"], run["state"], run["done"], run["planned"]) == ("done", "complete", 2, 2)
    assert run["counts"] == {"NO_TOOL_CALL": 1, "PASS": 1} and run["agents"] == ["reference"]


def test_summary_and_case_pages_are_the_static_reports(view, results):
    """The same templates: the case table of the view's summary is the static summary's, byte for byte, and a
    case page's content is the static case page's."""
    static = results / "runs" / "done" / "reports"
    status, headers, html = get(view + "runs/done/summary.html")
    assert status == 200 and headers["X-GripProbe-Version"]
    assert _table(html, "cases") == _table((static / "summary.html").read_text(), "cases")
    assert _table(html, "scores") == _table((static / "summary.html").read_text(), "scores")
    assert 'id="live-bar"' in html and 'id="live-config"' in html and "2 / 2 done" in html
    for case in (PERFECT, LAZY):
        assert f'href="cases/{case}.html"' in html
        status, _, page = get(f"{view}runs/done/cases/{case}.html")
        assert status == 200
        assert _main(page) == _main((static / "cases" / f"{case}.html").read_text())
        assert 'href="../summary.html"' in page and 'id="live-config"' not in page  # landed: no polling
    status, headers, _ = get(view + "runs/done/")
    assert status == 200  # the redirect to summary.html was followed


def test_a_run_in_progress_shows_cases_as_they_land(view, results, finished):
    run = _live_copy(results, finished)
    state = json.loads(get(view + "api/runs/live")[2])
    assert (state["state"], state["done"], state["planned"], state["counts"]) == ("running", 1, 2, {"PASS": 1})
    html = get(view + "runs/live/summary.html")[2]
    assert "1 / 2 done" in html and f"cases/{LAZY}.html" not in html

    # the second case's folder appears (its agent at work): under way, no row yet; its page waits for it
    shutil.copytree(finished / "cases" / LAZY, run / "cases" / LAZY, ignore=shutil.ignore_patterns("case.json"))
    s2 = json.loads(get(view + "api/runs/live")[2])
    assert s2["version"] != state["version"] and (s2["done"], s2["running_cases"]) == (1, 1)
    assert {"case": LAZY, "status": "running"} in s2["cases"]
    page = get(f"{view}runs/live/cases/{LAZY}.html")[2]
    assert "case.json missing" in page and 'id="live-config"' in page and '"reload": true' in page
    assert json.loads(get(f"{view}api/runs/live/cases/{LAZY}.html")[2]) == {"landed": False, "version": "pending"}

    # its case.json lands
    (run / "cases" / LAZY).rename(run / "cases" / "tmp")
    shutil.rmtree(run / "cases" / "tmp")
    _land(finished, run, LAZY)
    s3 = json.loads(get(view + "api/runs/live")[2])
    assert s3["version"] != s2["version"]
    assert (s3["done"], s3["running_cases"], s3["counts"]) == (2, 0, {"NO_TOOL_CALL": 1, "PASS": 1})
    assert json.loads(get(f"{view}api/runs/live/cases/{LAZY}.html")[2])["landed"] is True
    html = get(view + "runs/live/summary.html")[2]
    assert f'href="cases/{LAZY}.html"' in html and "2 / 2 done" in html and "running" in html

    # the runner's last word: complete, or interrupted by Ctrl-C
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "status": "complete"}))
    assert json.loads(get(view + "api/runs/live")[2])["state"] == "complete"
    (run / "manifest.json").write_text(json.dumps({**manifest, "status": "incomplete", "interrupted_by": "SIGINT"}))
    s4 = json.loads(get(view + "api/runs/live")[2])
    assert (s4["state"], s4["interrupted_by"]) == ("interrupted", "SIGINT")
    (run / "manifest.json").write_text(json.dumps({**manifest, "status": "<script>x</script>"}))
    assert json.loads(get(view + "api/runs/live")[2])["state"] == "invalid"


@pytest.mark.parametrize("path", [
    "runs/..%2F..%2F..%2Fetc%2Fpasswd/summary.html", "runs/done/cases/..%2F..%2Fmanifest.json",
    "runs/done/cases/%2e%2e%2fmanifest.json.html", "runs/done/cases/../manifest.json", "runs/done/manifest.json",
    "runs/done/cases/" + PERFECT + "/case.json", "runs/done/reports/summary.html", "etc/passwd", "runs/nosuch/summary.html",
    "api/runs/..%2F..", "compare?a=done&b=..%2F..%2Fetc", "runs/done/cases/%2Fetc%2Fpasswd",
])
def test_urls_that_climb_out_or_name_no_listed_file_are_404(view, path):
    status, _, body = get(view + path)
    assert status in (400, 404), (path, status)
    assert "root:" not in body and "run_id" not in body and len(body) < 200


def test_links_and_foreign_folders_are_not_served(tmp_path, results, finished):
    runs = results / "runs"
    (runs / "linked").symlink_to(runs / "done")                     # a run folder that is a link: no run
    (runs / "notarun").mkdir()                                      # a folder that is no run
    (runs / "notarun" / "secret.txt").write_text("secret")
    cases = runs / "done" / "cases"
    (cases / "evil").symlink_to("/etc")                               # a case folder that is a link: no case
    planted = cases / "planted"                                     # a case.json that is a link to /etc/passwd
    planted.mkdir()
    (planted / "case.json").symlink_to("/etc/passwd")
    (planted / "prompt.txt").symlink_to("/etc/passwd")
    hostile = runs / "x<img src=x onerror=alert(1)>"                # a run named with markup
    shutil.copytree(finished, hostile)
    with serve_in_thread(ViewConfig(results, interval_s=0.2)) as view:
        for path in ("runs/linked/summary.html", "runs/notarun/summary.html", "runs/notarun/secret.txt",
                     "runs/done/cases/evil.html", "api/runs/linked"):
            assert get(view + path)[0] == 404, path
        index = get(view)[2]
        assert "linked" not in index and "notarun" not in index
        assert "<img src=x" not in index and "x&lt;img src=x onerror=alert(1)&gt;" in index
        assert 'href="runs/x%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E/summary.html"' in index
        assert get(view + "runs/x%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E/summary.html")[0] == 200
        state = json.loads(get(view + "api/runs/done")[2])
        assert {"case": "planted", "status": "invalid"} in state["cases"] and state["counts"]["invalid"] == 1
        assert "evil" not in json.dumps(state)
        status, _, page = get(view + "runs/done/cases/planted.html")
        assert status == 200 and "root:x:0:0" not in page and "case.json unreadable" in page
        summary = get(view + "runs/done/summary.html")[2]
        assert "root:x:0:0" not in summary and 'href="cases/planted.html"' in summary


def test_host_and_method_are_checked(view):
    port = view.rsplit(":", 1)[1].strip("/")
    assert get(view, host="attacker.example")[0] == 421                    # DNS rebinding: another site's name
    assert get(view, host=f"attacker.example:{port}")[0] == 421
    assert get(view, host=f"localhost:{port}")[0] == 200
    assert get(view, method="POST")[0] == 405
    assert get(view, method="DELETE")[0] == 405


def test_compare_two_runs_chosen_in_the_index(view, results, finished):
    """Two copies of the run (a copy's signatures name the folder it was made in: unsigned copies compare)."""
    shutil.copytree(finished, results / "runs" / "again")
    for name in ("done", "again"):
        strip_signatures(results / "runs" / name)
    index = get(view)[2]
    assert 'id="cmp-a"' in index and 'id="cmp-b"' in index
    status, _, html = get(view + "compare?a=done&b=again")
    assert status == 200 and "Compare done vs again" in html and 'id="flips"' not in html  # nothing flipped
    assert 'id="no-flips"' in html and 'href="/"' in html
    # every trial links to this server's case page of its own run, and that page is served
    links = sorted(set(re.findall(r'href="(/runs/(?:done|again)/cases/[^"]+)"', html)))
    assert {link.split("/")[2] for link in links} == {"done", "again"} and len(links) == 4, links
    assert all(get(view + link.lstrip("/"))[0] == 200 for link in links)
    assert get(view + "compare?a=done")[0] == 400
    assert get(view + "compare?a=done&b=nosuch")[0] == 404
    (results / "runs" / "empty" / "cases").mkdir(parents=True)
    status, _, body = get(view + "compare?a=done&b=empty")
    assert status == 400 and "holds no case" in body


def test_an_empty_results_folder_shows_runs_as_they_appear(tmp_path, finished):
    (tmp_path / "runs").mkdir()
    with serve_in_thread(ViewConfig(tmp_path, interval_s=0.2)) as view:
        first = json.loads(get(view + "api/runs")[2])
        assert first["runs"] == [] and 'id="no-runs"' in get(view)[2]
        shutil.copytree(finished, tmp_path / "runs" / "new")
        second = json.loads(get(view + "api/runs")[2])
        assert second["version"] != first["version"] and [r["run"] for r in second["runs"]] == ["new"]


def test_cli_prints_the_url_serves_and_stops_on_ctrl_c(results):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    proc = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", "view", str(results), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        assert get(url + "api/runs")[0] == 200
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - t0 < 5
        err = proc.stderr.read()
        assert "stopped (SIGINT)" in err and "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """The real command line (``gripprobe_core.cli.main.main``) in this process: exit code, stdout, stderr."""
    from gripprobe_core.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.mark.parametrize("args, says", [
    (["/nonexistent/results"], "error: RESULTS /nonexistent/results: no such folder"),
    (["/etc/passwd"], "error: RESULTS /etc/passwd: this is a file, not a folder"),
    (["--host", "0.0.0.0"], "error: --host 0.0.0.0 is not a loopback address"),
    (["--host", "192.168.1.10", "--port", "1"], "error: --host 192.168.1.10 is not a loopback address"),
    (["--port", "70000"], "70000 is not in the range"),
    (["--interval", "nan"], "'nan' is not a finite number"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)  # no ./results here
    code, out, err = _cli(capsys, "view", *args)
    # ours: one line; click's own (a number out of range): its usage lines and one Error: line
    assert code == 2 and says in err.strip().splitlines()[-1], err
    assert "Traceback" not in err and out == ""
    if says.startswith("error:"):
        assert len(err.strip().splitlines()) == 1


def test_cli_default_results_is_the_results_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _cli(capsys, "view")
    assert code == 2 and err.startswith("error: RESULTS results: no such folder"), err


def test_cli_a_port_in_use_is_one_line(capsys, results):
    with serve_in_thread(ViewConfig(results)) as url:
        port = url.rsplit(":", 1)[1].strip("/")
        code, out, err = _cli(capsys, "view", str(results), "--port", port)
    assert code == 2 and "cannot listen there" in err and len(err.strip().splitlines()) == 1 and out == ""


def test_a_running_manifest_whose_harness_is_gone_is_stopped_and_a_live_one_is_running():
    """The manifest names the harness (pid, host, boot); a `running` run whose process is gone is `stopped`
    (SIGKILL leaves no other word), one still alive or from another machine stays `running`."""
    import subprocess

    from gripprobe_core.runner.run import harness_identity
    from gripprobe_core.view.state import run_state_name

    me = harness_identity()
    assert me["pid"] > 1 and me["hostname"] and me["boot_id"]
    # a gripprobe process that is alive (this test runs under python -m pytest: a child named gripprobe)
    child = subprocess.Popen([sys.executable, "-c", "import time, sys; sys.argv[0] = 'gripprobe'; time.sleep(30)",
                              "gripprobe"])
    try:
        alive = {**me, "pid": child.pid}
        deadline = time.monotonic() + 10
        while b"gripprobe" not in Path(f"/proc/{child.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)  # the child's exec under way
        assert run_state_name({"status": "running", "harness": alive}) == "running"
    finally:
        child.kill()
        child.wait()
    assert run_state_name({"status": "running", "harness": alive}) == "stopped"
    # a live process that is not gripprobe (a reused pid) counts as gone
    assert run_state_name({"status": "running", "harness": {**me, "pid": 1}}) == "running"  # pid 1 is refused
    other = subprocess.Popen(["sleep", "30"])
    try:
        assert run_state_name({"status": "running", "harness": {**me, "pid": other.pid}}) == "stopped"
    finally:
        other.kill()
        other.wait()
    # another machine, another boot, no record, or a forged record: not known to be gone
    for harness in ({**alive, "hostname": "elsewhere"}, {**alive, "boot_id": "0-0"}, None, {"pid": "1"},
                    {**alive, "pid": 2**40}, {**alive, "pid": True}):
        assert run_state_name({"status": "running", "harness": harness}) == "running", harness
    assert run_state_name({"status": "complete", "harness": alive}) == "complete"
