"""Issue 22, point 3: both phases and every trial see the phase's folder at one path inside the sandbox
(``SEEN_ROOT``), so what the agent sends its model is the same from one phase and trial to the next and a model
server's prompt cache serves the warmup's prefix to the measured phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from gripprobe_core.phase import SEEN_ROOT
from gripprobe_core.runner.phase import seen_paths

ROOT = Path(__file__).resolve().parents[1]


def test_the_rewrite_moves_whole_path_components_only():
    seen = seen_paths(Path("/tmp/gp-run-x/case/measured"), SEEN_ROOT)
    assert seen("/tmp/gp-run-x/case/measured/workspace") == f"{SEEN_ROOT}/workspace"
    assert seen("/tmp/gp-run-x/case/measured") == str(SEEN_ROOT)
    assert seen("--workspace=/tmp/gp-run-x/case/measured/workspace") == f"--workspace={SEEN_ROOT}/workspace"
    assert seen("cd '/tmp/gp-run-x/case/measured/home' && ls") == f"cd '{SEEN_ROOT}/home' && ls"
    assert seen("a:/tmp/gp-run-x/case/measured/home/bin:/usr/bin") == f"a:{SEEN_ROOT}/home/bin:/usr/bin"
    # another folder whose name begins the same is not this phase's
    assert seen("/tmp/gp-run-x/case/measured2/workspace") == "/tmp/gp-run-x/case/measured2/workspace"
    assert seen("/tmp/gp-run-x/case/measuredx") == "/tmp/gp-run-x/case/measuredx"
    assert seen(r"C:\x") == r"C:\x"


def _requests(record: Path) -> list[list[dict]]:
    return [json.loads(line)["x_gripprobe_request"]["messages"] for line in record.read_text().splitlines() if line]


@pytest.mark.e2e
def test_every_phase_and_trial_sends_the_same_conversation(tmp_path):
    out = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "run", "-a", "reference", "-m", "oracle-perfect",
                          "-t", "shell_pwd", "-t", "save_file", "--trials", "2", "--sandbox", "bwrap",
                          "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    run = next((tmp_path / "runs").iterdir())
    cases = sorted((run / "cases").iterdir())
    assert len(cases) == 4
    by_test: dict[str, list[list[list[dict]]]] = {}
    for case in cases:
        result = json.loads((case / "case.json").read_bytes())
        assert result["verdict"]["status"] == "PASS", (case.name, result["verdict"])  # pwd printed the seen path
        for phase in ("warmup", "measured"):
            ctx = json.loads((case / "artifacts" / f"{phase}.context.json").read_bytes())
            assert ctx["seen_at"] == str(SEEN_ROOT)
            conversation = _requests(case / "artifacts" / f"proxy.{phase}.http.jsonl")
            text = json.dumps(conversation)
            assert f"{SEEN_ROOT}/workspace" in text, "the agent names its working directory in its prompt"
            assert str(Path(ctx["workspace"]).parent) not in text, "the real scratch path reached the model"
            by_test.setdefault(result["key"]["test"], []).append(conversation)
    for test, conversations in by_test.items():
        assert len(conversations) == 4, test
        assert all(c == conversations[0] for c in conversations), f"{test}: phases or trials sent different requests"
    pwd = (run / "cases" / "reference__oracle-perfect__oracle__tool__shell_pwd" / "workspace" / "pwd.txt").read_text()
    assert pwd.strip() == f"{SEEN_ROOT}/workspace"


_ALPHABET = "/ab-_.x \t\n\u00a0\u2028\"'`:;,=)]}>|&(\\é"


@given(st.text(alphabet=_ALPHABET, max_size=60), st.text(alphabet=_ALPHABET.replace("/", ""), min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_the_rewrite_does_what_the_pattern_it_replaced_did(text, tail):
    """The scan against the regular expression it replaced (a mention counts when the end of the text, any Unicode
    whitespace or one of the path's delimiters follows it), on texts built around the folder's own name."""
    import re

    real = f"/tmp/g{tail}"
    pattern = re.compile(re.escape(real) + r"(?![^/\s\"'`:;,=)\]}>|&])")
    mixed = text.replace("x", real)  # many mentions, some followed by a name that goes on
    assert seen_paths(Path(real), SEEN_ROOT)(mixed) == pattern.sub(lambda _: str(SEEN_ROOT), mixed)
