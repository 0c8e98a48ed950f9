"""The reference agent waits on its backend as long as its phase may last (a slow model on a CPU may take
minutes to its first token), not its own 300 s default."""

from __future__ import annotations

import pytest

from conftest import read_json, run_reference
from gripprobe_core.runner.sandbox import inner_argv

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("timeout_s, shown", [(612.5, "612.5"), (1800.0, "1800")])
def test_the_request_timeout_follows_the_phase(tmp_path, timeout_s, shown):
    res = run_reference(tmp_path, tests=("save_file",), timeout_s=timeout_s)
    case = read_json(next(res.run_dir.path.glob("cases/*/case.json")))
    assert case["verdict"]["status"] == "PASS"
    for phase in case["phases"]:
        argv = inner_argv(phase["process"]["command"])
        assert argv[argv.index("--request-timeout") + 1] == shown, argv
