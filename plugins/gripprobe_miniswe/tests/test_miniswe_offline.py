"""Nothing mini-swe-agent does phones home: the REAL mini (installed at its pinned version by the kit) runs
with the driver's environment and command against the real oracle, with a Python audit hook in its process
recording every name it resolves and every address it connects to (``socket.getaddrinfo`` /
``socket.connect``; anything but the loopback is refused on the spot, so a call home fails fast instead of
waiting for a network this machine does not have). The control run drops the driver's switches and must
show the check would see litellm fetching its price map from GitHub."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from gripprobe_core.plugin import TestSpec
from gripprobe_core.testing import oracle_server, phase_context
from gripprobe_miniswe.config import QUIET_ENV

pytestmark = pytest.mark.e2e

#: Runs mini's ``mini`` entry point (``minisweagent.run.mini:app``) with an audit hook; the log path comes in
#: ``GP_AUDIT_LOG``. Arguments after ``-c`` are mini's.
AUDITED_MINI = r"""
import json, os, socket, sys
LOG = open(os.environ.pop("GP_AUDIT_LOG"), "a", buffering=1)
LOCAL = {"127.0.0.1", "localhost", "::1"}
def hook(event, args):
    if event == "socket.getaddrinfo":
        host = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        LOG.write(json.dumps({"event": event, "host": host}) + "\n")
        if host not in LOCAL:
            raise OSError("gripprobe test: no network beyond the loopback")
    elif event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else str(address)
        LOG.write(json.dumps({"event": event, "host": str(host)}) + "\n")
        if isinstance(address, tuple) and host not in LOCAL:
            raise OSError("gripprobe test: no network beyond the loopback")
sys.addaudithook(hook)
sys.argv = ["mini", *sys.argv[1:]]
from minisweagent.run.mini import app
app()
"""

TEST = TestSpec.model_validate({"id": "hello", "title": "hello", "prompt": "Create hello.txt saying hello.",
                                "validators": [{"kind": "file_exists", "path": "hello.txt"}],
                                "reference": [{"write": {"path": "hello.txt", "content": "hello\n"}}]})


def run_audited(agent_driver, agent_spec, base: Path, executable: Path, fmt: str, drop: tuple[str, ...] = ()):
    """One real mini process (the driver's environment minus ``drop``, its command) against the real oracle;
    returns the phase context, the oracle's ground truth, the process and the audit log."""
    started, stop = threading.Event(), threading.Event()
    box: dict[str, object] = {}

    async def serve() -> None:
        async with oracle_server(TEST.reference, format=fmt) as oracle:
            box["oracle"] = oracle
            started.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert started.wait(30), "the oracle did not start"
    oracle = box["oracle"]
    log = base / "audit.jsonl"
    try:
        ctx = phase_context(base, agent_spec, executable=executable, base_url=oracle.base_url, test=TEST, fmt=fmt)
        env = {k: v for k, v in agent_driver.environment(ctx).items() if k not in drop}
        env.update({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(ctx.home), "TMPDIR": str(ctx.tmpdir),
                    "LANG": "C.UTF-8", **ctx.xdg, "GP_AUDIT_LOG": str(log)})
        argv = agent_driver.command(ctx).argv
        python = Path(argv[0]).parent / "python"
        proc = subprocess.run([str(python), "-c", AUDITED_MINI, *argv[1:]], env=env, cwd=ctx.workspace,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=240)
    finally:
        stop.set()
        thread.join(30)
    seen = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return ctx, list(oracle.ground_truth), proc, seen


@pytest.mark.parametrize("fmt", ["markdown", "tool"])
def test_mini_reaches_nothing_but_the_phases_model_server(agent_driver, agent_spec, agent_install, tmp_path, fmt):
    ctx, truth, proc, seen = run_audited(agent_driver, agent_spec, tmp_path, agent_install.executable, fmt)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (ctx.workspace / "hello.txt").read_text() == "hello\n"
    assert [t["name"] for t in truth] == ([] if fmt == "markdown" else ["bash", "bash"])
    assert seen, "the audit hook saw no connection at all: it did not work"
    assert {s["host"] for s in seen} <= {"127.0.0.1", "localhost", "::1"}, seen


def test_the_control_run_without_the_switches_reaches_for_github(agent_driver, agent_spec, agent_install, tmp_path):
    """Without LITELLM_LOCAL_MODEL_COST_MAP litellm fetches its price map from raw.githubusercontent.com at
    import: the audit hook sees it (so the test above can fail)."""
    _, _, proc, seen = run_audited(agent_driver, agent_spec, tmp_path, agent_install.executable, "markdown",
                                   drop=("LITELLM_LOCAL_MODEL_COST_MAP",))
    assert "raw.githubusercontent.com" in {s["host"] for s in seen}, (seen, proc.stderr[-2000:])
    assert set(QUIET_ENV) >= {"LITELLM_LOCAL_MODEL_COST_MAP"}
