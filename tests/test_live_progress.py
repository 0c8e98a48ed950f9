"""A line per running case while a run goes (issue 22: with a slow model nothing was printed until the first
case ended). Not on a terminal: ``started ...`` when a case's first agent starts, ``still running ...`` every
GRIPPROBE_PROGRESS_INTERVAL seconds, then its finished line, no escape sequence. On a terminal (a real
pseudo-terminal): a line per running case below the bar, redrawn in place, gone when the case ends. Through
real `gripprobe run` processes of slow oracle profiles; the events and the record tally through a real run in
this process; the formatting as pure functions."""

from __future__ import annotations

import asyncio
import fcntl
import io
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import SPECS, gripprobe
from gripprobe_core.cli.progress import (PlainReporter, elapsed_text, key_text, live_detail, progress_interval)
from gripprobe_core.errors import UserError
from gripprobe_core.models.results import CaseKey
from gripprobe_core.proxy import read_records
from gripprobe_core.runner.live import WATCH, CaseEvent, OpenCalls, RecordTally, emit, reply_end

KEY = "reference oracle-stall tool save_file"
STARTED = re.compile(rf"^started {KEY}: (warmup|measured)$")
STILL = re.compile(rf"^still running {KEY}: (\d+)s, (warmup|measured|judging)(?:, (.*))?$")
FINISHED = re.compile(rf"^\[1/1\] {KEY}: TIMEOUT \(timeout, [\d.]+s\)$")


# ------------------------------------------------------------------------------- not a terminal

@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """oracle-stall: each phase's agent waits on a model that never answers until its 2 s timeout."""
    t0 = time.monotonic()
    res = gripprobe("run", "-a", "reference", "-m", "oracle-stall", "-t", "save_file", "--timeout", "2",
                    "--results", str(tmp_path_factory.mktemp("live")), env={"GRIPPROBE_PROGRESS_INTERVAL": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    return res, time.monotonic() - t0


def test_not_on_a_terminal_a_case_says_it_started_and_still_runs_before_its_finished_line(plain_run):
    res, wall = plain_run
    lines = res.stderr.splitlines()
    started = [i for i, line in enumerate(lines) if STARTED.match(line)]
    finished = [i for i, line in enumerate(lines) if FINISHED.match(line)]
    assert len(started) == 1 and len(finished) == 1, res.stderr
    assert STARTED.match(lines[started[0]])[1] == "warmup"
    still = [(i, STILL.match(line)) for i, line in enumerate(lines) if line.startswith("still running")]
    assert still and all(m for _, m in still), res.stderr
    assert all(started[0] < i < finished[0] for i, _ in still), res.stderr  # nothing after the finished line
    seconds = [int(m[1]) for _, m in still]
    assert seconds == sorted(seconds) and len(set(seconds)) == len(seconds), res.stderr  # one line a second
    assert len(still) <= wall + 1, res.stderr  # never a flood: at most one a second (the interval)
    assert {m[2] for _, m in still} >= {"warmup", "measured"}, res.stderr
    # the stalled call has no record until its agent is stopped (then the phase is collected): 0, then 1;
    # while it waits the proxy has it open, with no output
    opened = re.compile(r"model call open (\d+)s \(no output yet\)")
    assert all(m[3] == "no model call yet" or opened.fullmatch(m[3])
               or re.fullmatch(r"1 model call, 0 tool calls, last reply \d+s ago", m[3]) for _, m in still), res.stderr
    assert still[0][1][3] == "no model call yet" or opened.fullmatch(still[0][1][3]), res.stderr
    waiting = [(int(m[1]), int(opened.fullmatch(m[3])[1])) for _, m in still if m[3] and opened.fullmatch(m[3])]
    assert waiting, res.stderr  # the open call is shown before it ends
    assert all(age <= case_s for case_s, age in waiting), res.stderr  # open no longer than the case runs
    assert "\x1b" not in res.stderr and "\r" not in res.stderr


def test_a_bad_interval_is_one_line_and_exit_2(tmp_path):
    res = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "--results", str(tmp_path),
                    env={"GRIPPROBE_PROGRESS_INTERVAL": "soon\x1b[31m\nnext line"})
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "\x1b" not in res.stderr
    assert "GRIPPROBE_PROGRESS_INTERVAL=soon\\x1b[31m\\x0anext line: not a number" in res.stderr.strip().splitlines()[-1]
    assert not list(tmp_path.glob("runs/*/cases/*/case.json"))  # nothing ran


def test_the_counts_come_from_the_running_phase_as_its_calls_end(tmp_path):
    """oracle-slow-stream: two calls a phase, each streamed over ~0.6 s; two trials, lines every second."""
    res = gripprobe("run", "-a", "reference", "-m", "oracle-slow-stream", "-t", "save_file", "--trials", "2",
                    "--results", str(tmp_path), env={"GRIPPROBE_PROGRESS_INTERVAL": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    line = re.compile(r"^still running reference oracle-slow-stream tool save_file(?: \(trial 2\))?: \d+s, "
                      r"(warmup|measured|judging)(?:, (\d) model calls?, (\d) tool calls?)?"
                      r"(?:, no model call yet|, last reply \d+s ago|, model call open \d+s(?: \(no output yet\)|"
                      r"(, last output \d+s ago)))?$")
    still = [line.match(x) for x in res.stderr.splitlines() if x.startswith("still running")]
    assert still and all(still), res.stderr
    counted = [(int(m[2]), int(m[3])) for m in still if m[2]]
    assert counted, res.stderr  # a line fell after a call's end
    assert all(1 <= calls <= 2 and tools <= 1 for calls, tools in counted), res.stderr  # per phase: its own calls
    assert any(m[4] for m in still), res.stderr  # a line fell while a call streamed: its last output shown
    assert len([x for x in res.stderr.splitlines() if x.startswith("started ")]) == 2


# ------------------------------------------------------------------------------------ a terminal

def _on_a_terminal(*args: str, env: dict) -> tuple[int, str, str]:
    """Run gripprobe with stderr on a real pseudo-terminal (160 columns); (exit code, stdout, terminal output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    e = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    e.update(env, TERM="xterm-256color", COLUMNS="160")
    proc = subprocess.Popen([sys.executable, "-m", "gripprobe_core.cli", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=e)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other side is closed
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        stdout = proc.communicate(timeout=30)[0]
    return proc.returncode, stdout.decode(), out.decode("utf-8", "replace")


def test_on_a_terminal_a_running_case_has_a_line_below_the_bar_that_goes_when_it_ends(tmp_path):
    code, stdout, screen = _on_a_terminal("run", "-a", "reference", "-m", "oracle-stall", "-t", "save_file",
                                          "--timeout", "2", "--results", str(tmp_path), env={})
    assert code == 0, screen[-3000:]
    assert "\x1b[" in screen  # redrawn in place: rich's cursor moves, on a terminal only
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    shown = [x.strip() for x in re.split(r"[\r\n]", plain)]
    live = [i for i, x in enumerate(shown) if re.fullmatch(
        rf"{KEY}: \d+s, (warmup|measured), (no model call yet|model call open \d+s \(no output yet\))", x)]
    done = [i for i, x in enumerate(shown) if re.fullmatch(rf"{KEY}: TIMEOUT \(timeout, [\d.]+s\)", x)]
    assert live and len(done) == 1, plain[-3000:]
    assert {shown[i].split(", ")[1] for i in live} == {"warmup", "measured"}, plain[-3000:]
    assert any("model call open" in shown[i] for i in live), plain[-3000:]  # the stalled call, redrawn
    bars = [i for i, x in enumerate(shown) if re.match(r"gripprobe .* 1/1 ", x)]
    assert bars and done[0] < bars[0], plain[-3000:]
    assert max(live) < bars[0], plain[-3000:]  # once the case is counted the bar is drawn without its line
    assert not any(x.startswith("started ") or x.startswith("still running") for x in shown)  # the plain lines
    assert Path(stdout.strip().splitlines()[-1]).is_dir()


# ------------------------------------------------------------------------ the runner's events

def _run_with_events(results: Path, **settings) -> tuple[list[CaseEvent], object]:
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner import RunSettings, execute_run, plan_cases
    from gripprobe_core.specs import load_specs

    plugins = make_plugin_manager(load_entry_points=False)
    cases = plan_cases(load_specs(SPECS, registry=plugins.registry), agents=["reference"],
                       models=["oracle-perfect"], tests=["save_file"])
    events: list[CaseEvent] = []
    outcome = execute_run(cases, plugins, RunSettings(results_root=results, **settings), on_event=events.append)
    assert WATCH.get() is None  # the watcher was the run's only
    return events, outcome


def test_the_runner_tells_each_phase_before_its_agent_and_the_judging(tmp_path):
    events, outcome = _run_with_events(tmp_path)
    (res,) = outcome.results
    assert [e.phase for e in events] == ["warmup", "measured", "judging"]
    assert {e.case_id for e in events} == {res.case_id} and all(e.key == res.key for e in events)
    assert [e.at for e in events] == sorted(e.at for e in events)
    artifacts = outcome.run_dir.case(res.case_id) / "artifacts"
    assert [e.record for e in events] == [artifacts / "proxy.warmup.http.jsonl",
                                          artifacts / "proxy.measured.http.jsonl", None]
    tally = RecordTally(events[1].record)  # the measured phase's record, as the display reads it
    tally.look()
    assert (tally.model_calls, tally.tool_calls) == (2, 1)  # the oracle's plan: write, then the answer
    assert tally.last_reply_at is not None and tally.last_reply_at <= time.time()


def test_without_a_warmup_or_a_proxy_the_events_say_so(tmp_path):
    events, _ = _run_with_events(tmp_path / "a", warmup=False)
    assert [e.phase for e in events] == ["measured", "judging"]
    events, _ = _run_with_events(tmp_path / "b", proxy_mode="off")
    assert [e.phase for e in events] == ["warmup", "measured", "judging"] and all(e.record is None for e in events)


def test_a_watcher_that_fails_costs_nothing_and_none_is_asked_outside_a_run():
    key = CaseKey(agent="reference", model="oracle-perfect", backend="oracle", format="tool", test="save_file")
    emit("c", key, "warmup")  # no watcher: nothing
    token = WATCH.set(lambda ev: 1 / 0)
    try:
        emit("c", key, "warmup")  # logged, not raised
    finally:
        WATCH.reset(token)


# ----------------------------------------------------------------------------- the record tally

def _record(protocol: str | None = "chat_completions", tools: int = 0, text_tools: int = 0,
            stamp: str = "2026-11-27T13:22:44.608Z", duration_ms: float = 1000.0) -> bytes:
    return json.dumps({"x_gripprobe_protocol": protocol, "x_gripprobe_tool_call_count": tools,
                       "x_gripprobe_tool_call_nonstructured_count": text_tools, "x_gripprobe_timestamp": stamp,
                       "x_gripprobe_duration_ms": duration_ms}).encode() + b"\n"


def test_the_tally_reads_only_whole_new_lines_and_counts_model_calls_and_their_tool_calls(tmp_path):
    path = tmp_path / "proxy.measured.http.jsonl"
    tally = RecordTally(path, min_period_s=0)
    tally.look()  # no file yet: the proxy writes it with its first record
    assert (tally.model_calls, tally.tool_calls, tally.last_reply_at) == (0, 0, None)
    first = _record(tools=1)
    path.write_bytes(first[:20])  # a line being written: not counted yet
    tally.look()
    assert tally.model_calls == 0
    with path.open("ab") as f:
        f.write(first[20:] + _record(protocol=None) + _record(text_tools=2, stamp="2026-11-27T13:22:50.000Z"))
        f.write(b"not json\n" + b"[1]\n")
    tally.look()
    assert (tally.model_calls, tally.tool_calls) == (2, 3)  # GET /models and junk are no model call
    assert tally.last_reply_at == pytest.approx(reply_end(json.loads(_record(stamp="2026-11-27T13:22:50.000Z"))))
    path.write_bytes(_record())  # rewritten from the start: counted again
    tally.look()
    assert (tally.model_calls, tally.tool_calls) == (1, 0)


def test_the_tally_looks_at_most_once_a_period_and_never_through_a_link(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(_record())
    tally = RecordTally(path, min_period_s=1.0)
    tally.look(now=100.0)
    path.write_bytes(_record() * 2)
    tally.look(now=100.5)
    assert tally.model_calls == 1
    tally.look(now=101.0)
    assert tally.model_calls == 2
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    linked = RecordTally(link, min_period_s=0)
    linked.look()
    assert linked.model_calls == 0
    assert not RecordTally(None).recorded


def test_a_reply_end_is_its_start_plus_its_duration():
    assert reply_end({"x_gripprobe_timestamp": "1970-01-01T00:00:01.500Z", "x_gripprobe_duration_ms": 500}) == 2.0
    for bad in ({}, {"x_gripprobe_timestamp": "yesterday", "x_gripprobe_duration_ms": 1},
                {"x_gripprobe_timestamp": "1970-01-01T00:00:01", "x_gripprobe_duration_ms": 1},
                {"x_gripprobe_timestamp": "1970-01-01T00:00:01Z", "x_gripprobe_duration_ms": -1},
                {"x_gripprobe_timestamp": "1970-01-01T00:00:01Z", "x_gripprobe_duration_ms": True}):
        assert reply_end(bad) is None


# ---------------------------------------------------------------------- the plain reporter's clock

def _event(phase: str, at: float, record: Path | None = None, case_id: str = "c1", trial: int = 1) -> CaseEvent:
    key = CaseKey(agent="reference", model="oracle-stall", backend="oracle", format="tool", test="save_file",
                  trial=trial)
    return CaseEvent(case_id, key, phase, at, record)


def test_plain_lines_come_once_an_interval_per_running_case_and_stop_with_it(tmp_path):
    from gripprobe_core.models import CaseResult

    out = io.StringIO()
    rep = PlainReporter(2, stream=out, interval=30.0)  # not entered: the test turns the clock itself
    rep.case_event(_event("judging", 0.0, case_id="never-ran"))  # no agent ran: no started line
    rep.case_event(_event("warmup", 100.0, tmp_path / "warmup.jsonl"))  # proxied: counts shown
    rep.case_event(_event("warmup", 110.0, case_id="c2", trial=2))      # no proxy: none
    for now in (101.0, 129.9, 130.0, 135.0, 140.0):
        rep.tick(now)
    rep.case_event(_event("measured", 150.0, tmp_path / "measured.jsonl"))
    (tmp_path / "measured.jsonl").write_bytes(_record(tools=1))
    rep.tick(160.0)
    rep.case_event(_event("judging", 161.0))
    rep.tick(190.0)
    lines = out.getvalue().splitlines()
    assert lines[:4] == [f"started {KEY}: warmup", f"started {KEY} (trial 2): warmup",
                         f"still running {KEY}: 30s, warmup, no model call yet",
                         f"still running {KEY} (trial 2): 30s, warmup"]
    reply = r"1 model call, 1 tool call, last reply \S+ ago"
    assert re.fullmatch(rf"still running {KEY}: 1m00s, measured, {reply}", lines[4]), lines
    assert re.fullmatch(rf"still running {KEY}: 1m30s, judging, {reply}", lines[5]), lines  # measured's counts
    assert lines[6:] == [f"still running {KEY} (trial 2): 1m20s, warmup"]
    # its finished line ends a case's lines
    res = CaseResult.model_validate_json(_a_case_json(tmp_path)).model_copy(update={"case_id": "c1"})
    rep.case_done(res)
    rep.tick(250.0)
    lines = out.getvalue().splitlines()[7:]
    assert len(lines) == 2 and lines[0].startswith("[1/2] ") and "still running" in lines[1], lines
    assert lines[1] == f"still running {KEY} (trial 2): 2m20s, warmup"


def _a_case_json(tmp_path: Path) -> bytes:
    """A real case.json (the reference agent on oracle-perfect)."""
    _, outcome = _run_with_events(tmp_path / "one")
    return (outcome.run_dir.case(outcome.results[0].case_id) / "case.json").read_bytes()


# ---------------------------------------------------------------------------------- formatting

@pytest.mark.parametrize("seconds, text", [(0, "0s"), (0.99, "0s"), (59.9, "59s"), (60, "1m00s"), (150, "2m30s"),
                                           (3599, "59m59s"), (3600, "1h00m00s"), (3725, "1h02m05s"),
                                           (-5, "0s"), (float("nan"), "0s"),
                                           (float("inf"), "0s")])
def test_elapsed_text(seconds, text):
    assert elapsed_text(seconds) == text


@given(st.floats(min_value=0, max_value=10 ** 7, allow_nan=False))
def test_elapsed_text_reads_back_as_the_whole_seconds(seconds):
    m = re.fullmatch(r"(?:(?:(\d+)h)?(\d{1,2})m)?(\d{1,2})s", elapsed_text(seconds))
    assert m, elapsed_text(seconds)
    h, mins, s = (int(x) if x else 0 for x in m.groups())
    assert h * 3600 + mins * 60 + s == int(seconds)
    assert (mins < 60 and s < 60) and (m[2] is None or h == 0 or len(m[2]) == 2)


@pytest.mark.parametrize("args, text", [
    (("warmup", 5.2), "5s, warmup"),
    (("measured", 150, 0), "2m30s, measured, no model call yet"),
    (("measured", 150, 1, 1, 12.5), "2m30s, measured, 1 model call, 1 tool call, last reply 12s ago"),
    (("judging", 61, 3, 0, 0.2), "1m01s, judging, 3 model calls, 0 tool calls, last reply 0s ago"),
    (("measured", 1, 2, 5), "1s, measured, 2 model calls, 5 tool calls"),
    (("measured", 150, 0, 0, None, 1, 130.4), "2m30s, measured, model call open 2m10s (no output yet)"),
    (("measured", 160, 0, 0, None, 1, 160, 1.5), "2m40s, measured, model call open 2m40s, last output 1s ago"),
    (("measured", 90, 2, 1, 30, 1, 20, None),
     "1m30s, measured, 2 model calls, 1 tool call, model call open 20s (no output yet)"),  # open: not the reply
    (("warmup", 9, 0, 0, None, 2, 8, 0), "9s, warmup, 2 model calls open, oldest 8s, last output 0s ago"),
    (("warmup", 9, 0, 0, None, 1, None, None), "9s, warmup, model call open (no output yet)"),
])
def test_live_detail(args, text):
    assert live_detail(*args) == text


def test_every_shown_value_is_safe_text():
    evil = CaseKey.model_construct(agent="a\x1b[2J", model="m\r", backend="b", format="tool", test="t\n", trial=1)
    assert "\x1b" not in key_text(evil) and "\r" not in key_text(evil)
    assert "\x1b" not in live_detail("measured\x1b]0;x\x07", 1)


def test_the_interval_is_seconds_from_1_to_3600():
    assert progress_interval({}) == 30.0
    assert progress_interval({"GRIPPROBE_PROGRESS_INTERVAL": " 2.5 "}) == 2.5
    for bad in ("0", "0.5", "3601", "nan", "inf", "-1", "30s"):
        with pytest.raises(UserError, match="GRIPPROBE_PROGRESS_INTERVAL"):
            progress_interval({"GRIPPROBE_PROGRESS_INTERVAL": bad})


# ------------------------------------------------------------------ the proxy's open calls

def test_the_proxy_shows_a_call_open_from_its_start_to_its_end_and_when_it_last_relayed_output(tmp_path):
    """A real recording proxy (the runner's handle) relaying a stream from a real aiohttp upstream on
    127.0.0.1 that holds its first bytes, then its end: the activity view, read from another thread as the
    display does, counts the call open (0, 1, 0) with no output, then output; the phase's event carries the
    view the runner hands it (the handle's ``activity``)."""
    from aiohttp import ClientSession, web

    from gripprobe_core.defaults.proxy import RecordingProxyHandle
    from gripprobe_core.proxy.recorder_client import close_recorder
    from proxy_helpers import run, serving

    record = tmp_path / "proxy.measured.http.jsonl"
    key = CaseKey(agent="reference", model="m", backend="b", format="tool", test="t")

    async def main() -> list:
        first, last, arrived = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def stream(request: web.Request) -> web.StreamResponse:
            await request.read()
            arrived.set()
            await first.wait()  # "prefilling": the headers and the first bytes wait
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"data: {}\n\n")
            await last.wait()
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp

        app = web.Application()
        app.router.add_post("/v1/chat/completions", stream)
        seen: list = []
        events: list[CaseEvent] = []
        async with serving(app) as up:
            handle = RecordingProxyHandle(up, record, None)
            await handle.start()
            try:
                seen.append(await asyncio.to_thread(handle.activity))
                token = WATCH.set(events.append)
                try:
                    emit("c", key, "measured", record, activity=handle.activity)
                finally:
                    WATCH.reset(token)
                async with ClientSession() as s:
                    post = asyncio.ensure_future(s.post(handle.base_url + "/v1/chat/completions", json={"model": "m"}))
                    await asyncio.wait_for(arrived.wait(), 10)
                    await asyncio.sleep(0.3)
                    seen.append(await asyncio.to_thread(events[0].activity))  # open, nothing relayed yet
                    first.set()
                    async with await post as r:
                        assert await r.content.readuntil(b"\n\n") == b"data: {}\n\n"
                        await asyncio.sleep(0.2)
                        seen.append(await asyncio.to_thread(handle.activity))  # open, output relayed
                        last.set()
                        await r.read()
                seen.append(await asyncio.to_thread(handle.activity))
            finally:
                await handle.stop()
            token = WATCH.set(events.append)
            try:
                emit("c", key, "judging", record)  # judging: no view handed
            finally:
                WATCH.reset(token)
        assert events[0].activity == handle.activity and events[1].activity is None
        return seen

    try:
        before, waiting, streaming, after = run(main())
    finally:
        close_recorder()
    assert before == {"open": 0, "open_s": None, "output_s": None}
    assert waiting["open"] == 1 and waiting["open_s"] >= 0.3 and waiting["output_s"] is None, waiting
    assert streaming["open"] == 1 and streaming["open_s"] > waiting["open_s"], streaming
    assert 0.2 <= streaming["output_s"] < streaming["open_s"] - 0.3, streaming
    assert after == {"open": 0, "open_s": None, "output_s": None}
    assert len(read_records(record)) == 1  # recorded as ever


def test_open_calls_ask_the_view_at_most_once_a_period_and_age_between_looks():
    answers = [{"open": 1, "open_s": 10.0, "output_s": None}, {"open": 1, "open_s": 12.0, "output_s": 0.5},
               {"open": "x"}, RuntimeError("gone"), None]
    asked: list[int] = []

    def view():
        asked.append(1)
        answer = answers[len(asked) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    calls = OpenCalls(view, min_period_s=1.0)
    assert (calls.open, calls.ages(0.0)) == (0, (None, None))  # not looked yet
    calls.look(100.0)
    calls.look(100.5)  # too soon: not asked
    assert len(asked) == 1 and calls.open == 1
    assert calls.ages(102.0) == (12.0, None)  # the age moves on between looks
    calls.look(101.0)
    assert calls.ages(101.0) == (12.0, 0.5)
    calls.look(102.0)  # nonsense: none open
    assert (calls.open, calls.ages(102.0)) == (0, (None, None))
    calls.look(103.0)  # a view that fails shows what it showed
    calls.look(104.0)  # no answer: likewise
    assert len(asked) == 5 and calls.open == 0
    none = OpenCalls(None)
    none.look()
    assert (none.open, none.ages()) == (0, (None, None))
