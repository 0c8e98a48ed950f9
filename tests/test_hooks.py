"""The hooks that remain beside the drivers, each through a real run: a plugin contributes environment to
every agent (``build_env``), adds a backend kind (``register_backends``) and a parser
(``parse_wrapper_events``); the core calls hooks only through the typed facade (``pm.hook``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT, SPECS, run_reference
from gripprobe_core import hookimpl
from gripprobe_core.backends import OracleBackend
from gripprobe_core.pluginmanager import make_plugin_manager
from gripprobe_core.specs import load_specs


class SiteEnv:
    """A site-wide setting every agent gets, and one that clashes with the driver's."""

    @hookimpl
    def build_env(self, agent, ctx):
        return {"GRIPPROBE_SITE_NOTE": f"{agent.id}/{ctx.phase}", "OPENAI_API_KEY": "site-key"}


class Declines:
    @hookimpl
    def build_env(self, agent, ctx):
        return None




def test_build_env_contributions_reach_every_phase_merged_over_the_drivers(tmp_path):
    """The reference agent's shell sees the contributed variable; a contribution wins over the driver's own."""
    specs = tmp_path / "specs"
    import shutil

    shutil.copytree(SPECS, specs)
    (specs / "tests" / "env_probe.yaml").write_text(
        "id: env_probe\ntitle: env\nprompt: print the env\nrequires: [execute]\n"
        "validators: [{kind: file_exists, path: env.txt}]\n"
        "reference: [{shell: 'printf \"%s %s\" \"$GRIPPROBE_SITE_NOTE\" \"$OPENAI_API_KEY\" > env.txt'}]\n")
    out = run_reference(tmp_path / "r", SiteEnv(), Declines(), tests=("env_probe",), specs=specs)
    (res,) = out.results
    assert res.verdict.status == "PASS"
    seen = (out.run_dir.case(res.case_id) / "workspace" / "env.txt").read_text()
    assert seen == "reference/measured site-key"


class Renamed(OracleBackend):
    """The embedded oracle under another kind: a plugin's backend, used through a model spec."""

    kind = "oracle-twin"


class TwinBackend:
    @hookimpl
    def register_backends(self, register):
        register(Renamed())


def test_a_plugin_backend_kind_serves_a_model_spec(tmp_path):
    specs = tmp_path / "specs"
    import shutil

    shutil.copytree(SPECS, specs)
    text = (specs / "models" / "oracle-perfect.yaml").read_text()
    (specs / "models" / "twin.yaml").write_text(text.replace("id: oracle-perfect", "id: twin")
                                                .replace("kind: oracle", "kind: oracle-twin"))
    out = run_reference(tmp_path / "r", TwinBackend(), models=("twin",), specs=specs)
    assert [r.verdict.status for r in out.results] == ["PASS"]
    # without the plugin the spec names a kind nobody registered: file:line, with the known kinds
    from gripprobe_core.errors import SpecError

    with pytest.raises(SpecError, match=r"twin\.yaml:\d+.*unknown backend kind 'oracle-twin'.*oracle"):
        load_specs(specs, registry=make_plugin_manager(load_entry_points=False).registry)


class CountsResponses:
    """A parser any plugin may add for every agent: one extra tier-D note per phase."""

    @hookimpl
    def parse_wrapper_events(self, driver, ctx, capture, transcript):
        from gripprobe_core.plugin import EventBuilder

        out = EventBuilder(ctx.phase, capture.stdout_path.name, tier="D", source="wrapper")
        out.add(None, event_type="model_response", status="success",
                payload={"note": f"{driver.name} said {len(transcript.events)} things"})
        return out.events


def test_parse_wrapper_events_contributions_join_the_timeline(tmp_path):
    out = run_reference(tmp_path, CountsResponses())
    (res,) = out.results
    events = (out.run_dir.case(res.case_id) / "artifacts" / "events.measured.jsonl").read_text()
    assert "reference said" in events and res.verdict.status == "PASS"


def test_the_core_calls_hooks_only_through_the_facade():
    """No call around pluggy: nothing in the core reaches ``get_hookimpls()`` to call ``impl.function``, and
    ``pm.hook`` is touched only by the facade (hooks.py) and the manager that builds it."""
    allowed = {ROOT / "src" / "gripprobe_core" / "hooks.py", ROOT / "src" / "gripprobe_core" / "pluginmanager.py"}
    offenders = []
    for path in (ROOT / "src" / "gripprobe_core").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "function":
                offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")  # impl.function(...)
            if isinstance(node, ast.Attribute) and node.attr == "hook" and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "pm" and path not in allowed:
                offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, offenders
