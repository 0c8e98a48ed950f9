"""Stored runs holding hostile data: reports, list-runs, aggregate-reports and resume stay correct.

A real oracle run is made once; each test copies it and plants what an agent (or anything else that
can write the results tree) could leave there: FIFOs, device nodes, symlinks out, names that are not
UTF-8, a large binary, case.json files with statuses that do not exist, terminal escape sequences.
Everything goes through the real `gripprobe` command in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import threading
from pathlib import Path

import pytest

from conftest import SPECS, gripprobe, read_json, strip_signatures

pytestmark = pytest.mark.e2e

SELECTION = ["-m", "oracle-perfect", "-t", "save_file", "-t", "shell_pwd", "-t", "shell_file"]
CONTROL = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory) -> Path:
    res = gripprobe("run", *SELECTION, "--results", str(tmp_path_factory.mktemp("hostile") / "results"))
    assert res.returncode == 0, res.stderr[-3000:]
    return Path(res.stdout.strip().splitlines()[-1])


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "results" / "runs" / run.name
    shutil.copytree(run, dst, symlinks=True)
    return dst


def _case(run: Path, test: str) -> Path:
    return next(d for d in sorted((run / "cases").iterdir()) if d.name.endswith(f"__{test}"))


def _no_control(text: str) -> None:
    bad = sorted({repr(c) for c in text if c in CONTROL})
    assert not bad, f"control characters reached the terminal: {bad}"


class _FifoWriter:
    """Blocks in open(fifo, O_WRONLY) until some reader opens the FIFO: tells whether anyone did."""

    def __init__(self, path: Path) -> None:
        self.path, self.opened = path, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        self.opened.set()
        os.close(fd)

    def release(self) -> None:
        if not self.opened.is_set():  # open it for reading ourselves so the thread ends
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(5)
            os.close(fd)


# ------------------------------------------------------------------------------------ workspace

def _plant_workspace(ws: Path, outside: Path) -> dict[str, object]:
    os.mkfifo(ws / "pipe")
    os.mknod(ws / "null-device", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    os.symlink("/etc/passwd", ws / "passwd-link")
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET-42\n")
    os.symlink(outside, ws / "dir-link")
    os.symlink(outside / "secret.txt", ws / "secret-link")
    with open(os.fsencode(ws) + b"/bad\xffname\x1b[31m.txt", "wb") as fh:
        fh.write(b"shown content\n")
    (ws / "big.bin").write_bytes(os.urandom(5 * 1024 * 1024))
    return {"fifo": _FifoWriter(ws / "pipe")}


def test_case_page_survives_a_hostile_workspace(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)
    case = _case(run, "save_file")
    planted = _plant_workspace(case / "workspace", tmp_path / "outside")
    fifo: _FifoWriter = planted["fifo"]  # type: ignore[assignment]
    try:
        res = gripprobe("rebuild-reports", str(run), timeout=60)  # a FIFO read would hang here
        assert res.returncode == 0, res.stderr[-3000:]
        assert "Traceback" not in res.stderr
        assert not fifo.opened.is_set(), "the FIFO was opened"
    finally:
        fifo.release()
    page = (run / "reports" / "cases" / f"{case.name}.html").read_text(encoding="utf-8")
    ws = page[page.index('id="workspace"'):page.index('id="proxy"') if 'id="proxy"' in page else None]
    assert "bad\\xffname\\x1b[31m.txt" in ws and "shown content" in ws   # escaped name, content still shown
    assert "FIFO, not opened" in ws and "character device, not opened" in ws
    assert "symlink to /etc/passwd (not followed)" in ws
    assert f"symlink to {tmp_path / 'outside'} (not followed)" in ws
    assert "too large to show" in ws and "5242880" in ws
    assert "root:x:0:0" not in page and "OUTSIDE-SECRET-42" not in page   # nothing outside was read
    assert "dir-link/secret.txt" not in page
    assert "greeting.txt" in ws  # the agent's real file is still there
    _no_control(page)

    # aggregate-reports reads the same run without hanging or failing
    out = tmp_path / "agg"
    res = gripprobe("aggregate-reports", "--runs-root", str(run.parents[1]), "--output", str(out), timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads((out / "aggregate.json").read_text())["unreadable"] == 0


def test_hostile_case_directories_and_files(oracle_run, tmp_path):
    """FIFOs and symlinks where the reports expect case files, a case folder that is a symlink out, a
    case folder whose name is not UTF-8: rebuild-reports, aggregate-reports and list-runs finish."""
    run = _copy(oracle_run, tmp_path)
    fifo_case, link_ws_case, stdout_case = (_case(run, t) for t in ("save_file", "shell_pwd", "shell_file"))
    weird = os.fsencode(run / "cases") + b"/weird\xff\x1b[2Jcase"
    shutil.copytree(os.fsdecode(os.fsencode(stdout_case)), os.fsdecode(weird))
    (fifo_case / "case.json").unlink()
    os.mkfifo(fifo_case / "case.json")
    shutil.rmtree(link_ws_case / "workspace")
    os.symlink("/etc", link_ws_case / "workspace")
    (stdout_case / "measured.stdout").unlink()
    os.symlink("/etc/passwd", stdout_case / "measured.stdout")
    os.mkfifo(stdout_case / "prompt.txt.fifo")
    (stdout_case / "prompt.txt").unlink()
    os.symlink(stdout_case / "prompt.txt.fifo", stdout_case / "prompt.txt")
    os.symlink("/", run / "cases" / "zz-link-to-root")
    writers = [_FifoWriter(fifo_case / "case.json"), _FifoWriter(stdout_case / "prompt.txt.fifo")]
    try:
        res = gripprobe("rebuild-reports", str(run), timeout=60)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
        res = gripprobe("aggregate-reports", "--runs-root", str(run), "--output", str(tmp_path / "agg"), timeout=60)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
        listed = gripprobe("list-runs", "--results", str(run.parents[1]), timeout=60)
        assert listed.returncode == 0, listed.stderr[-3000:]
        assert not any(w.opened.is_set() for w in writers), "a FIFO was opened"
    finally:
        for w in writers:
            w.release()
    assert "invalid 1" in listed.stdout  # the FIFO case.json: present, not a valid result
    reports = run / "reports" / "cases"
    assert "workspace/: symlink" in (reports / f"{link_ws_case.name}.html").read_text()
    page = (reports / f"{stdout_case.name}.html").read_text()
    assert "root:x:0:0" not in page
    assert not (reports / "zz-link-to-root.html").exists()          # a symlinked case folder is not a case
    assert (reports / "weird\\xff\\x1b[2Jcase.html").is_file()          # the page of the odd name, escaped
    summary = (run / "reports" / "summary.html").read_text()
    assert 'href="cases/weird%5Cxff%5Cx1b%5B2Jcase.html"' in summary  # the link finds that page
    _no_control(summary)


# ------------------------------------------------------------------------------------- statuses

def _set_status(case: Path, status: object) -> None:
    data = read_json(case / "case.json")
    data["verdict"]["status"] = status
    (case / "case.json").write_text(json.dumps(data))


def test_unknown_statuses_are_invalid_everywhere_and_escapes_never_reach_the_terminal(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)
    a, b, c = (_case(run, t) for t in ("save_file", "shell_pwd", "shell_file"))
    _set_status(a, 123)
    _set_status(b, "<script>alert(1)</script>")
    _set_status(c, "PASS" + ESCAPES)
    original = read_json(run / "manifest.json")
    manifest = {**original, "suite": "suite" + ESCAPES, "status": "complete" + ESCAPES}
    (run / "manifest.json").write_text(json.dumps(manifest))
    results = run.parents[1]

    res = gripprobe("list-runs", "--results", str(results), env={"COLUMNS": "400"}, timeout=60)
    assert res.returncode == 0, res.stderr
    _no_control(res.stdout + res.stderr)
    shown = res.stdout.replace(str(run), "")  # the run's path is shown as is (pytest's tmp path may hold "123")
    assert "invalid 3" in shown and "<script>" not in shown and "123" not in shown
    assert "suite\\x1b]0;pwned" in res.stdout  # shown, escaped
    info = json.loads(gripprobe("list-runs", "--results", str(results), "--json").stdout)
    assert info["counts"] == {"invalid": 3} and info["status"] == "invalid" and info["done"] == 3

    res = gripprobe("rebuild-reports", str(run), timeout=60)
    assert res.returncode == 0, res.stderr
    md = (run / "reports" / "summary.md").read_text()
    head = md.split("Cases without")[0].replace(run.name, "")  # the run id is a time: it may hold "123"
    assert "123" not in head and "<script>" not in md and "status: invalid" in md
    html = (run / "reports" / "summary.html").read_text()
    assert "<script>alert" not in html and "status invalid" in html

    out = tmp_path / "agg"
    res = gripprobe("aggregate-reports", "--runs-root", str(results), "--output", str(out), timeout=60)
    assert res.returncode == 0, res.stderr
    data = json.loads((out / "aggregate.json").read_text())
    # the edited case.json files no longer verify: left out before they are read (unsigned runs with such
    # files count them unreadable: tests/test_aggregate.py)
    assert data["signatures"]["cases_left_out"] == 3 and data["unreadable"] == 0 and data["rows"] == []

    # an error quoting the manifest's suite is escaped (a manifest without its plan needs the suite's file)
    (run / "manifest.json").write_text(json.dumps({**manifest, "planned": []}))
    res = gripprobe("run-suite", "--resume", str(run), timeout=120)
    assert res.returncode == 2 and "unknown suite 'suite\\x1b]0;pwned" in res.stderr, res.stderr
    _no_control(res.stdout + res.stderr)

    # resume does not take an invalid case.json for a finished case: all three run again
    (run / "manifest.json").write_text(json.dumps(original))
    res = gripprobe("run-suite", "--resume", str(run), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    _no_control(res.stdout + res.stderr)
    assert "0 of 3 case(s) done, 3 to run" in res.stderr
    assert {read_json(d / "case.json")["verdict"]["status"] for d in (a, b, c)} == {"PASS"}


def test_recompute_lines_and_errors_quoting_disk_content_are_escaped(oracle_run, tmp_path):
    run = _copy(oracle_run, tmp_path)
    evil = run / "cases" / ("evil" + ESCAPES.replace("/", ""))
    evil.mkdir()
    (evil / "case.json").write_text("{")
    res = gripprobe("rebuild-reports", str(run), "--recompute", "--dry-run", timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "evil\\x1b]0;pwned" in res.stderr
    _no_control(res.stdout + res.stderr)


# ------------------------------------------------------------------------------------- values

def _strict_json(text: str):
    """JSON as RFC 8259 has it: NaN, Infinity and -Infinity are not JSON."""
    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


FORGED_VALUES = {  # case folder suffix -> (dotted path in case.json, value), each out of its range
    "nan-score": ("verdict.strict_pass_score", float("nan")),
    "huge-score": ("verdict.overall_score", 1e308),
    "huge-trial": ("key.trial", 10**18),
    "huge-usage": ("usage.prompt_tokens", 1e30),
    "inf-cost": ("usage.cost", float("inf")),
    "negative-duration": ("duration_s", -5.0),
    "lookalike-agent": ("key.agent", "r\u0435ference"),  # Cyrillic e: reads "reference"
    "bidi-model": ("key.model", "oracle-\u202etcefrep"),  # shown as "oracle-perfect"
    "invisible-test": ("key.test", "save\u200b_file"),
}


def test_values_out_of_range_are_invalid_never_published(oracle_run, tmp_path):
    """A case.json holding NaN or 1e308 scores, trial 1e18, usage 1e30, an infinite cost, a negative
    duration or a key id that reads like another (a Cyrillic letter, a bidi override, a zero-width space;
    three such rows once all read "reference") is not a valid result: summary.md/html list it as unreadable, list-runs counts it invalid, the
    aggregate counts it unreadable, and none of those numbers is published (as a number or as NaN)."""
    run = _copy(oracle_run, tmp_path)
    source = _case(run, "save_file")
    original = read_json(source / "case.json")
    for suffix, (dotted, value) in FORGED_VALUES.items():
        forged = run / "cases" / f"{source.name}-{suffix}"
        shutil.copytree(source, forged)
        data = json.loads(json.dumps(original))
        *parents, last = dotted.split(".")
        target = data
        for part in parents:
            target = target[part]
        target[last] = value
        (forged / "case.json").write_text(json.dumps(data))  # Python writes NaN / Infinity as JSON does not
    # Signed, these copies are simply changed cases (left out: tests/test_signed_runs.py). Unsigned, as a run of an
    # older version is, each must be read, checked and found invalid.
    strip_signatures(run)
    results = run.parents[1]

    res = gripprobe("rebuild-reports", str(run), timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    md = (run / "reports" / "summary.md").read_text()
    table, unreadable = md.split("Cases without")
    for suffix in FORGED_VALUES:
        assert f"{source.name}-{suffix}" in unreadable
    assert len(re.findall(r"^\| reference \|", table.split("## Cases")[1], re.M)) == 3  # the three real cases
    for shown in (r"\bnan\b", r"\binf", r"1e\+30", "1000000000000000000", "-5.00"):
        assert not re.search(shown, table, re.I), shown
    html = re.sub(r"<script.*?</script>", "", (run / "reports" / "summary.html").read_text(), flags=re.S)
    for shown in ("NaN", "Infinity", "1e+308", "1e+30", "1000000000000000000"):
        assert shown not in html, shown

    listed = gripprobe("list-runs", "--results", str(results), "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    info = _strict_json(listed.stdout)
    assert info["counts"] == {"PASS": 3, "invalid": len(FORGED_VALUES)}

    out = tmp_path / "agg"
    res = gripprobe("aggregate-reports", "--runs-root", str(results), "--output", str(out), timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    data = _strict_json((out / "aggregate.json").read_text())
    assert data["unreadable"] == len(FORGED_VALUES)
    (row,) = data["rows"]
    assert row["n"] == 3 and row["strict_pass_score"] == 1.0 and row["usage"]["cost"] is None
    agg_md = (out / "aggregate.md").read_text()
    for shown in (r"\bnan\b", r"\binf", r"1e\+30", "1000000000000000000"):
        assert not re.search(shown, agg_md, re.I), shown

    res = gripprobe("compare", str(oracle_run), str(run), "--json", timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    _strict_json(res.stdout)


# ------------------------------------------------------------------------------------- text

RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae\x8e\x8f]"
                         rb"|\xe2\x81[\xa6-\xa9]")
"""A raw control byte in a file: C0 but tab, newline and CR, DEL, C1 (UTF-8), U+2028/2029, bidi controls."""
BAD = "\x1b]0;pwned\x07\x0b\x1b[2J\x9b31m\u202e"


def _plant_text(case: Path) -> None:
    data = read_json(case / "case.json")
    v = data["verdict"]
    v["evaluator_reason_code"] = "none" + BAD
    v["evaluator_reason_text"] = "text" + BAD
    v["failure_reason"] = "why" + BAD
    data["tags"] = ["sanity", "t" + BAD]
    data["agent_version"] = "1.0" + BAD
    data["model_hash"] = "sha256:" + BAD
    data["skip_reason"], data["harness_error"], data["warnings"] = "skip" + BAD, "err" + BAD, ["warn" + BAD]
    for val in data["validators"]:
        val.update(message="msg" + BAD, expected="exp" + BAD, observed="obs" + BAD)
    for ph in data["phases"]:
        ph["process"]["command"] = ["agent", "--flag" + BAD]
        ph["process"]["error"] = "proc" + BAD
    (case / "case.json").write_text(json.dumps(data))
    (case / "measured.stdout").write_text("out" + BAD + "\n")
    events = case / "artifacts" / "events.measured.jsonl"
    lines = [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
    for e in lines:
        e["payload"] = {**e.get("payload", {}), "name": "write" + BAD, "output": "o" + BAD, "text": "t" + BAD}
        e["error_type"] = "boom" + BAD
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))


def test_control_characters_in_stored_text_never_reach_a_report(oracle_run, tmp_path):
    """ESC, BEL, VT, C1 and a bidi override in every text field of a stored case (and its stdout and events)
    reach no report as a raw byte: summary.html/md, the case page, compare.html/md, the aggregate's
    index.html, aggregate.md and aggregate.json, JUnit, ATIF, list-runs. They are shown escaped."""
    run = _copy(oracle_run, tmp_path)
    case = _case(run, "save_file")
    _plant_text(case)
    manifest = read_json(run / "manifest.json")
    (run / "manifest.json").write_text(json.dumps({**manifest, "suite": "s" + BAD}))
    strip_signatures(run)  # signed, the aggregate leaves the changed case out; unsigned it must show it, inert

    outputs = []
    res = gripprobe("rebuild-reports", str(run), timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    outputs += [run / "reports" / "summary.html", run / "reports" / "summary.md",
                run / "reports" / "cases" / f"{case.name}.html"]
    res = gripprobe("compare", str(oracle_run), str(run), "-o", str(tmp_path / "cmp"), timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert not RAW_CONTROL.search(res.stdout.encode() + res.stderr.encode())
    outputs += [tmp_path / "cmp" / n for n in ("compare.html", "compare.md", "compare.json")]
    res = gripprobe("aggregate-reports", "--runs-root", str(run), "-o", str(tmp_path / "agg"), timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    outputs += [tmp_path / "agg" / n for n in ("index.html", "aggregate.md", "aggregate.json")]
    for fmt, out in (("junit", tmp_path / "junit.xml"), ("atif", tmp_path / "atif")):
        res = gripprobe("export", str(run), "--format", fmt, "--out", str(out), timeout=60)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
        outputs += [out] if out.is_file() else sorted(out.rglob("*.json"))
    res = gripprobe("list-runs", "--results", str(run.parents[1]), env={"COLUMNS": "300"}, timeout=60)
    assert res.returncode == 0 and not RAW_CONTROL.search(res.stdout.encode()), res.stdout

    for path in outputs:
        raw = path.read_bytes()
        hit = RAW_CONTROL.search(raw)
        assert hit is None, (path.name, raw[max(0, hit.start() - 60):hit.end() + 20])
    page = (run / "reports" / "cases" / f"{case.name}.html").read_text()
    for shown in ("msg\\x1b]0;pwned\\x07\\x0b\\x1b[2J\\x9b31m\\u202e", "out\\x1b]0;pwned", "--flag\\x1b]0;pwned"):
        assert shown in page, shown  # escaped, still there to read
    assert "none\\x1b]0;pwned" in (run / "reports" / "summary.md").read_text()
    assert "1.0\\x1b]0;pwned" in (tmp_path / "agg" / "aggregate.md").read_text()


# ------------------------------------------------------------------- code a stored run holds (attack 30, 31)

MARKER_TEST = """\
id: marker_cmd
title: A command validator that also writes a marker outside the workspace
prompt: Write the file hello.txt containing exactly the word hello.
requires: [write]
validators:
  - kind: command_output
    command: [sh, -c, "echo ran-unconfined > {marker}; cat hello.txt"]
    expected: hello
reference:
  - write:
      path: hello.txt
      content: "hello\\n"
"""


def _no_bwrap_env(tmp_path: Path) -> dict[str, str]:
    """A PATH on which there is no bwrap (nor anything else): the sandbox is missing."""
    empty = tmp_path / "no-bwrap-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


def _recompute(run: Path, **kw) -> tuple[dict, object]:
    res = gripprobe("rebuild-reports", str(run), "--recompute", timeout=120, **kw)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr[-3000:]
    return read_json(next(run.glob("cases/*/case.json"))), res


def test_a_run_recorded_unsandboxed_is_recomputed_in_the_sandbox_or_not_at_all(tmp_path):
    """A genuine run with --sandbox none whose command_output validator also writes a marker on the host:
    live, by the user's choice, it ran unconfined (the marker appears). Its recompute runs the command in the
    sandbox (the marker never appears, the verdict is the same), and with no bubblewrap on PATH not at all."""
    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    host = tmp_path / "host"
    host.mkdir()
    marker = host / "MARKER"
    (specs / "tests" / "marker_cmd.yaml").write_text(MARKER_TEST.format(marker=marker))
    res = gripprobe("run", "--specs", str(specs), "--results", str(tmp_path / "r"), "-a", "reference",
                    "-m", "oracle-perfect", "-t", "marker_cmd", "--sandbox", "none", timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    run = Path(res.stdout.strip().splitlines()[-1])
    live = read_json(next(run.glob("cases/*/case.json")))
    assert (live["sandbox"], live["verdict"]["status"]) == ("none", "PASS")
    assert marker.read_text() == "ran-unconfined\n"  # unconfined, the command reaches the host
    marker.unlink()

    case, _ = _recompute(run)
    assert not marker.exists(), "recompute ran the stored command outside the sandbox"
    assert case["verdict"] == live["verdict"] and case["validators"] == live["validators"]

    case, out = _recompute(run, env=_no_bwrap_env(tmp_path))
    assert not marker.exists(), "recompute without bubblewrap ran the stored command"
    v = case["verdict"]
    assert (v["status"], v["failure_reason"]) == ("HARNESS_ERROR", "sandbox_unavailable")
    assert "validator 'command_output' runs code and was not run: bwrap is not installed" in case["harness_error"]
    assert case["validators"][0]["message"].startswith("validator not run: sandbox unavailable")
    assert "warning: no sandbox here (bwrap is not installed)" in out.stderr  # type: ignore[attr-defined]


def test_a_forged_stored_run_cannot_make_recompute_run_code_unconfined(oracle_run, tmp_path):
    """A sandboxed run edited after the fact (case.json says "sandbox": "none", case_inputs.json gains a
    command_output validator writing a marker on the host, the digests recomputed to match): recompute runs
    that command only inside the sandbox, and not at all without one. (Once runs are signed, the tamper gate
    refuses such a case before anything runs; either way the marker never appears.)"""
    from gripprobe_core.integrity.digests import evidence_digests

    run = _copy(oracle_run, tmp_path)
    case_dir = _case(run, "save_file")
    marker = tmp_path / "host" / "MARKER"
    marker.parent.mkdir()
    inputs = read_json(case_dir / "artifacts" / "case_inputs.json")
    inputs["test"]["validators"].append({"kind": "command_output", "command": [
        "sh", "-c", f"echo ran-unconfined > {marker}; echo fine"], "expected": "fine"})
    inputs["agent"]["sandbox"] = "none"
    (case_dir / "artifacts" / "case_inputs.json").write_text(json.dumps(inputs))
    data = read_json(case_dir / "case.json")
    data["sandbox"] = "none"
    data["evidence"] = evidence_digests(case_dir)
    (case_dir / "case.json").write_text(json.dumps(data))
    for env in ({}, _no_bwrap_env(tmp_path)):
        res = gripprobe("rebuild-reports", str(run), "--recompute", timeout=120, env=env)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
        assert not marker.exists(), f"recompute ran a stored command outside the sandbox (env {env})"
    case = read_json(case_dir / "case.json")
    assert case["verdict"]["status"] == "HARNESS_ERROR"
    assert case["verdict"]["failure_reason"] in ("sandbox_unavailable", "artifact_tampered")


# --------------------------------------------------------------- links planted in a stored run (attack 32)

CANARY = "HOST-CANARY-7f3e"


def test_a_stored_workspace_linked_to_root_leaks_nothing_of_the_host(oracle_run, tmp_path):
    """``cases/X/workspace`` replaced by a link to ``/`` and the stored validators pointed at ``etc/passwd``
    (the issue's attack, digests dropped as from a run before them); another case's ``artifacts/`` replaced by
    a link to a host folder holding a final answer and events with a canary; a third case's workspace linked to
    ``/`` with its digests kept (the tamper check must not walk the host). Recompute, the reports and the
    exports read nothing through any of them, and write nothing through them."""
    run = _copy(oracle_run, tmp_path)
    ws_case, art_case, digest_case = (_case(run, t) for t in ("save_file", "shell_pwd", "shell_file"))
    inputs = read_json(ws_case / "artifacts" / "case_inputs.json")
    inputs["test"]["validators"] = [{"kind": "file_equals", "path": "etc/passwd", "expected": "x"},
                                    {"kind": "file_exists", "path": "etc/hostname"}]
    (ws_case / "artifacts" / "case_inputs.json").write_text(json.dumps(inputs))
    for case in (ws_case, art_case):
        data = read_json(case / "case.json")
        data.pop("evidence", None)
        (case / "case.json").write_text(json.dumps(data))
    for case in (ws_case, digest_case):
        shutil.rmtree(case / "workspace")
        os.symlink("/", case / "workspace")
    host = tmp_path / "host-folder"
    shutil.copytree(art_case / "artifacts", host)
    (host / "measured.final.txt").write_text(f"{CANARY} final answer\n")
    with open(host / "events.measured.jsonl", "a") as fh:
        fh.write(json.dumps({"event_type": "model_response", "event_id": "x", "sequence": 99, "source_tier": "B",
                             "source": "agent_output", "payload": {"text": CANARY}}) + "\n")
    before = sorted(p.name for p in host.iterdir())
    shutil.rmtree(art_case / "artifacts")
    os.symlink(host, art_case / "artifacts")

    res = gripprobe("rebuild-reports", str(run), "--recompute", timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr[-3000:]
    assert sorted(p.name for p in host.iterdir()) == before, "a recompute wrote through the artifacts/ link"
    for case, what in ((ws_case, "workspace/ is a symlink"), (art_case, "artifacts/ is a symlink"),
                       (digest_case, "workspace/")):
        data = read_json(case / "case.json")
        assert data["verdict"]["status"] == "HARNESS_ERROR", (case.name, data["verdict"])
        # the link is named; or (cases without digests, once a run's version writes them) the tamper gate
        # refused the case first: either way nothing behind the link was read
        assert what in (data["harness_error"] or "") or (
            case is not digest_case and data["verdict"]["failure_reason"] == "artifact_tampered"), \
            (case.name, data["harness_error"])
    assert read_json(digest_case / "case.json")["verdict"]["failure_reason"] == "artifact_tampered"

    for fmt in ("junit", "atif"):
        out = gripprobe("export", str(run), "--format", fmt, "--out", str(tmp_path / f"export-{fmt}"), timeout=120)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    texts = {p: p.read_text(errors="replace") for p in [
        *(c / n for c in (ws_case, art_case, digest_case) for n in ("case.json", "observed.txt")),
        *(run / "reports").rglob("*.html"), *(run / "reports").rglob("*.md"),
        *(p for p in tmp_path.glob("export-*/**/*") if p.is_file())]}
    assert len(texts) > 8
    for path, text in texts.items():
        assert "root:x:0:0" not in text and CANARY not in text, f"host content in {path}"
    # nor are reports written through a link: reports/ pointing at a host folder is one line, exit 2
    shutil.rmtree(run / "reports")
    os.symlink(host, run / "reports")
    res = gripprobe("rebuild-reports", str(run), timeout=120)
    assert res.returncode == 2 and "reports is a symlink, not a folder" in res.stderr, res.stderr[-3000:]
    assert sorted(p.name for p in host.iterdir()) == before
