"""Safe by default for drivers: an agent's own log never confirms a call the wire did not carry, unless its
driver names the format in ``calls_off_wire`` and says why (docs/plugin-guide.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import SPECS, gripprobe, read_json
from gripprobe_core import hookimpl
from gripprobe_core.drivers import EVERY_FORMAT, calls_off_wire_problems, off_wire_reason
from gripprobe_core.errors import PluginError
from gripprobe_core.plugin import AgentCommand, BaseAgentDriver
from gripprobe_core.pluginmanager import make_plugin_manager


def driver(calls_off_wire=None, name="textual"):
    class Textual(BaseAgentDriver):
        description = "an agent whose edits are reply text"

        def command(self, ctx):
            return AgentCommand(["true"])

    d = Textual()
    d.name = name
    if calls_off_wire is not None:
        d.calls_off_wire = calls_off_wire
    return d


class Registers:
    def __init__(self, d):
        self.d = d

    @hookimpl
    def register_agents(self, register):
        register(self.d)


# ------------------------------------------------------------------------------------------- the field

def test_the_default_is_witnessed_in_every_format():
    d = driver()
    assert dict(d.calls_off_wire) == {} and calls_off_wire_problems(d) == []
    assert all(off_wire_reason(d, f) is None for f in ("tool", "markdown", "xml", "whole"))
    reg = make_plugin_manager(load_entry_points=False).registry
    assert all(off_wire_reason(reg.agents[a], "tool") is None for a in reg.agents)  # the reference agent too


def test_an_opt_out_names_its_formats_with_the_reason():
    d = driver({"markdown": "edits are ```save blocks in the reply text"})
    assert off_wire_reason(d, "markdown") == "edits are ```save blocks in the reply text"
    assert off_wire_reason(d, "tool") is None
    every = driver({EVERY_FORMAT: "it sends no tools", "whole": "whole-file edits in the reply"})
    assert off_wire_reason(every, "diff") == "it sends no tools"
    assert off_wire_reason(every, "whole") == "whole-file edits in the reply"
    reg = make_plugin_manager(load_entry_points=False, extra=[Registers(d)]).registry
    assert reg.agents["textual"] is d


@pytest.mark.parametrize("bad, says", [
    ({"markdown": ""}, "gives no reason"),
    ({"markdown": "   "}, "gives no reason"),
    ({"markdown": None}, "gives no reason"),
    ({"markdown": True}, "gives no reason"),
    ({"": "why"}, "is not a format name"),
    ({" tool": "why"}, "is not a format name"),
    ({3: "why"}, "is not a format name"),
    (("markdown",), "must be a mapping"),
    ("markdown", "must be a mapping"),
])
def test_an_opt_out_without_a_reason_is_refused_at_registration(bad, says):
    d = driver(bad)
    assert any(says in p for p in calls_off_wire_problems(d))
    assert off_wire_reason(d, "markdown") is None  # never honoured, should it get this far
    with pytest.raises(PluginError, match=says) as exc:
        _ = make_plugin_manager(load_entry_points=False, extra=[Registers(d)]).registry
    assert "Registers" in str(exc.value) and "'textual'" in str(exc.value) and "calls_off_wire" in str(exc.value)


def test_an_installed_plugin_without_a_reason_stops_gripprobe_with_one_line(installed_plugins):
    res = gripprobe("plugins", pythonpath=[installed_plugins["gripprobe_fixture_optout"]])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "gripprobe-fixture-optout[optout]" in res.stderr and "calls_off_wire['markdown'] gives no reason" \
        in res.stderr


# ----------------------------------------------------------------------------- a driver from the docs

LIAR_SPECS = """\
id: {id}
plugin: {id}
executable: python3
formats: [tool, markdown]
tool_kinds: [write]
timeout_s: 30
"""


def test_a_driver_from_the_docs_cannot_print_its_way_to_pass(installed_plugins, tmp_path):
    """gripprobe-fixture-liar, written from the plugin guide with no calls_off_wire: against oracle-lazy (which
    never asks for a tool) its agent writes greeting.txt itself and prints a write_file call and result with
    the oracle's own call id. The real ``gripprobe run``: at most PASS_WITH_POLICY_VIOLATION, in the tool
    format and in markdown alike; the same agent against oracle-perfect runs the model's call and PASSes
    (its log and the wire agree). Its twin driver fixture-textual declares markdown off the wire, with a
    reason: there, and only there, its word stands."""
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    for agent in ("fixture-liar", "fixture-textual"):
        (root / "cli_agents" / f"{agent}.yaml").write_text(LIAR_SPECS.format(id=agent))
    res = gripprobe("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-a", "fixture-liar",
                    "-a", "fixture-textual", "-m", "oracle-lazy", "-m", "oracle-perfect", "-t", "save_file",
                    "-f", "tool", "-f", "markdown", "-j", "2", pythonpath=[installed_plugins["gripprobe_fixture_liar"]])
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    cases = {}
    for p in (run_dir / "cases").glob("*/case.json"):
        case = read_json(p)
        key = case["key"]
        cases[(key["agent"], key["model"], key["format"])] = case
    assert len(cases) == 8, sorted(cases)
    for fmt in ("tool", "markdown"):
        lie = cases[("fixture-liar", "oracle-lazy", fmt)]
        assert lie["validators"][0]["passed"] is True  # the agent did write the file, itself
        assert lie["verdict"]["status"] == "PASS_WITH_POLICY_VIOLATION", (fmt, lie["verdict"])
        assert lie["telemetry"]["telemetry_tool_call_unwitnessed_count"] == 1
        assert lie["telemetry"]["telemetry_invoked_confidence"] == 0.0
        honest = cases[("fixture-liar", "oracle-perfect", fmt)]
        assert honest["verdict"]["status"] == "PASS" and honest["telemetry"]["telemetry_source_tier"] == "A", fmt
        assert honest["telemetry"]["telemetry_tool_call_unwitnessed_count"] == 0
    # the opt-out, with its reason, takes the agent's word in markdown only
    assert cases[("fixture-textual", "oracle-lazy", "tool")]["verdict"]["status"] == "PASS_WITH_POLICY_VIOLATION"
    word = cases[("fixture-textual", "oracle-lazy", "markdown")]
    assert word["verdict"]["status"] == "PASS" and word["telemetry"]["telemetry_source_tier"] == "B"
    assert cases[("fixture-textual", "oracle-perfect", "markdown")]["verdict"]["status"] == "PASS"
