"""Plugin discovery: built-ins through the same manager, third-party distributions via entry points."""

from __future__ import annotations

import json

import pytest

from conftest import gripprobe
from gripprobe_core import hookimpl
from gripprobe_core.errors import PluginError
from gripprobe_core.pluginmanager import DEFAULT_PLUGINS, make_plugin_manager


def test_builtins_register_through_the_manager():
    gpm = make_plugin_manager(load_entry_points=False)
    names = [p.name for p in gpm.records()]
    assert names[: len(DEFAULT_PLUGINS)] == list(DEFAULT_PLUGINS)
    reg = gpm.registry
    assert list(reg.agents) == ["reference"] and reg.agents["reference"].name == "reference"
    assert set(reg.backends) == {"oracle", "openai-compatible", "ollama", "anthropic", "replay"}
    assert {"file_equals", "patch_applied", "web_nonce_proof", "web_search_result", "weekly_plan_task",
            "file_exists", "command_output"} <= set(reg.validators)
    assert {"nonce", "search"} <= set(reg.challenges)
    assert reg.dialects == {}  # the oracle's generic ``tools`` dialect is its own; drivers bring the others


def test_fresh_manager_each_time():
    a, b = make_plugin_manager(load_entry_points=False), make_plugin_manager(load_entry_points=False)
    assert a.pm is not b.pm


class _ClashingDriver:
    """Registers a second driver named ``reference``."""

    @hookimpl
    def register_agents(self, register):
        from gripprobe_core.plugin import AgentCommand, BaseAgentDriver

        class Reference(BaseAgentDriver):
            name = "reference"
            description = "a second reference agent"

            def command(self, ctx):
                return AgentCommand(["true"])

        register(Reference())


def test_duplicate_registration_names_both_owners():
    gpm = make_plugin_manager(load_entry_points=False, extra=[_ClashingDriver()])
    with pytest.raises(PluginError) as exc:
        _ = gpm.registry
    msg = str(exc.value)
    assert "'reference'" in msg and "gripprobe-core[reference]" in msg and "(in-process)[_ClashingDriver]" in msg


def test_an_object_that_is_not_a_driver_is_refused_naming_what_it_lacks():
    class NotADriver:
        @hookimpl
        def register_agents(self, register):
            register(type("Half", (), {"name": "half"})())

    gpm = make_plugin_manager(load_entry_points=False, extra=[NotADriver()])
    with pytest.raises(PluginError, match=r"lacks .*command.*BaseAgentDriver"):
        _ = gpm.registry


def test_third_party_plugin_is_discovered(installed_plugins):
    res = gripprobe("plugins", "--json", pythonpath=[installed_plugins["gripprobe_fixture_agent"]])
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    mine = [p for p in data["plugins"] if p["name"] == "fixture_agent"]
    assert mine and mine[0]["distribution"] == "gripprobe-fixture-agent" and mine[0]["version"] == "0.0.1"
    assert mine[0]["hooks"] == ["register_agents"]  # everything else is its driver's
    assert "fixture-bash" in data["agents"]
    assert not data["failures"]


def test_plugins_human_listing(installed_plugins):
    res = gripprobe("plugins", pythonpath=[installed_plugins["gripprobe_fixture_agent"]])
    assert res.returncode == 0
    assert "fixture_agent  (gripprobe-fixture-agent 0.0.1)" in res.stdout
    assert "reference  (built-in)" in res.stdout and "backends: anthropic, ollama, openai-compatible, oracle" in res.stdout


def test_broken_plugin_is_named_and_others_keep_working(installed_plugins):
    pp = [installed_plugins["gripprobe_fixture_broken"], installed_plugins["gripprobe_fixture_agent"]]
    res = gripprobe("plugins", pythonpath=pp)
    assert res.returncode == 0
    assert "BROKEN gripprobe-fixture-broken[broken]: ModuleNotFoundError" in res.stdout
    assert "fixture_agent" in res.stdout
    res = gripprobe("validate", pythonpath=pp)
    assert res.returncode == 0, res.stderr
    assert "gripprobe-fixture-broken[broken]" in res.stderr


def test_strict_mode_makes_a_broken_plugin_fatal(installed_plugins):
    res = gripprobe("plugins", pythonpath=[installed_plugins["gripprobe_fixture_broken"]],
                    env={"GRIPPROBE_STRICT_PLUGINS": "1"})
    assert res.returncode == 2
    assert "gripprobe-fixture-broken[broken]" in res.stderr and "Traceback" not in res.stderr


def test_installed_duplicate_agent_name_is_an_error_naming_both(installed_plugins):
    res = gripprobe("plugins", pythonpath=[installed_plugins["gripprobe_fixture_dup"]])
    assert res.returncode == 2
    assert "gripprobe-core[reference]" in res.stderr
    assert "gripprobe-fixture-dup[dup]" in res.stderr
    assert "Traceback" not in res.stderr


FIXTURE_AGENT_SPEC = """\
id: fixture-bash
plugin: fixture-bash
executable: python3
formats: [tool]
tool_kinds: [execute]
timeout_s: 30
"""


def test_third_party_agent_runs_end_to_end_without_core_changes(installed_plugins, tmp_path):
    """A sixth agent from a third party: its distribution + one spec file, no change to core."""
    import shutil
    from pathlib import Path

    from conftest import SPECS, read_json

    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    (root / "cli_agents" / "fixture-bash.yaml").write_text(FIXTURE_AGENT_SPEC)
    res = gripprobe("run", "--specs", str(root), "--results", str(tmp_path / "r"), "-a", "fixture-bash",
                    "-m", "oracle-perfect", "-m", "oracle-lazy", "-t", "shell_pwd", "-t", "save_file",
                    pythonpath=[installed_plugins["gripprobe_fixture_agent"]])
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    status = {p.parent.name: read_json(p)["verdict"] for p in (run_dir / "cases").glob("*/case.json")}
    assert status["fixture-bash__oracle-perfect__oracle__tool__shell_pwd"]["status"] == "PASS"
    case = read_json(run_dir / "cases" / "fixture-bash__oracle-perfect__oracle__tool__shell_pwd" / "case.json")
    # the proxy confirms at tier A (the plugin's tier C events are the same calls: merged into them)
    assert case["telemetry"]["telemetry_source_tier"] == "A"
    # phase_artifacts: the session file the agent kept under its (deleted) HOME was copied per phase
    kept = run_dir / "cases" / case["case_id"] / "artifacts"
    assert (kept / "warmup.session.jsonl").is_file() and (kept / "measured.session.jsonl").is_file()
    assert "tool_calls" in (kept / "measured.session.jsonl").read_text()
    assert status["fixture-bash__oracle-lazy__oracle__tool__shell_pwd"]["status"] == "FAIL" or \
        status["fixture-bash__oracle-lazy__oracle__tool__shell_pwd"]["status"] == "NO_TOOL_CALL"
    # it declares no write tool: save_file is TOOL_UNSUPPORTED without running
    v = status["fixture-bash__oracle-perfect__oracle__tool__save_file"]
    assert v["status"] == "TOOL_UNSUPPORTED" and v["failure_reason"] == "agent_tool_unsupported"
    assert not (run_dir / "cases" / "fixture-bash__oracle-perfect__oracle__tool__save_file" / "measured.stdout").exists()
    # without the proxy, the plugin's own text markers (tier C) confirm
    res = gripprobe("run", "--specs", str(root), "--results", str(tmp_path / "r2"), "-a", "fixture-bash",
                    "-m", "oracle-perfect", "-t", "shell_pwd", "--telemetry-proxy", "off",
                    pythonpath=[installed_plugins["gripprobe_fixture_agent"]])
    assert res.returncode == 0, res.stderr[-3000:]
    case = read_json(next(Path(res.stdout.strip().splitlines()[-1]).glob("cases/*/case.json")))
    assert case["verdict"]["status"] == "PASS" and case["telemetry"]["telemetry_source_tier"] == "C"


# ------------------------------------------------------------------ hook implementations matching no hook

class _Misspelt:
    @hookimpl
    def register_agent(self, register):  # the hook is register_agents
        raise AssertionError("never called")


def test_a_hook_implementation_matching_no_hook_is_refused_naming_plugin_and_hook():
    with pytest.raises(PluginError) as exc:
        make_plugin_manager(load_entry_points=False, strict=True, extra=[_Misspelt()])
    msg = str(exc.value)
    assert "(in-process)[_Misspelt]" in msg and "'register_agent' matches no GripProbe hook" in msg
    assert "did you mean 'register_agents'?" in msg
    gpm = make_plugin_manager(load_entry_points=False, strict=False, extra=[_Misspelt()])
    assert [f.name for f in gpm.failures] == ["_Misspelt"] and "register_agent" in gpm.failures[0].error
    assert "_Misspelt" not in [p.name for p in gpm.records()]  # skipped, like a plugin that failed to import


def test_every_builtin_hook_implementation_matches_a_hook():
    from gripprobe_core.pluginmanager import _unknown_hooks

    gpm = make_plugin_manager(load_entry_points=False, strict=True)
    for name, plugin in gpm.pm.list_name_plugin():
        assert _unknown_hooks(gpm.pm, plugin) == [], name


def test_strict_loading_refuses_an_installed_plugin_with_a_misspelt_hook(installed_plugins):
    pp = [installed_plugins["gripprobe_fixture_typo"]]
    res = gripprobe("plugins", pythonpath=pp, env={"GRIPPROBE_STRICT_PLUGINS": "1"})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "gripprobe-fixture-typo[typo]" in res.stderr
    assert "'register_validator' matches no GripProbe hook (did you mean 'register_validators'?" in res.stderr
    # not strict: listed among the failures, the rest keeps working
    res = gripprobe("plugins", "--json", pythonpath=pp)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [(f["name"], f["distribution"]) for f in data["failures"]] == [("typo", "gripprobe-fixture-typo")]
    assert "register_validator" in data["failures"][0]["error"] and "typo_always" not in data["validators"]
    assert "typo" not in [p["name"] for p in data["plugins"]]
    res = gripprobe("plugins", pythonpath=pp)
    assert "BROKEN gripprobe-fixture-typo[typo]: hook implementation 'register_validator'" in res.stdout


def test_a_plugins_name_and_version_are_read_as_the_metadata_parser_reads_them(tmp_path):
    """The plugin list's (name, version) come from the METADATA headers read directly, not the email parser:
    the same answer for every distribution installed here, and for odd files the parser's own answer."""
    from importlib import metadata

    from gripprobe_core.pluginmanager import _name_version

    dists = list(metadata.distributions())
    assert len(dists) > 20
    for dist in dists:
        assert _name_version(dist) == (dist.metadata["Name"], dist.metadata["Version"]), dist._path

    def dist_with(text: str | None, pkg_info: str | None = None) -> metadata.PathDistribution:
        folder = tmp_path / f"d{len(list(tmp_path.iterdir()))}.dist-info"
        folder.mkdir()
        if text is not None:
            (folder / "METADATA").write_text(text)
        if pkg_info is not None:
            (folder / "PKG-INFO").write_text(pkg_info)
        return metadata.PathDistribution(folder)

    assert _name_version(dist_with("Metadata-Version: 2.1\nName:  spaced \nVersion: 1.0\n\nName: body\n")) == \
        ("spaced", "1.0")
    assert _name_version(dist_with("Metadata-Version: 2.1\nVersion: 2\nname: lower\n")) == ("lower", "2")
    assert _name_version(dist_with(None, "Name: old\nVersion: 0.1\n")) == ("old", "0.1")
    # no version among the headers (it sits after the blank line): the parser decides, as before
    odd = dist_with("Name: x\n\nVersion: 3\n")
    assert _name_version(odd) == (odd.metadata["Name"], odd.metadata["Version"])
    assert _name_version(None) == ("unknown", "unknown")


def test_the_manager_finds_exactly_the_hook_implementations_pluggy_finds():
    """The manager passes over a module's names that cannot be hooks without pluggy's per-name lookup: for the
    core's own plugins, every installed plugin and modules made to confuse it, the same implementations as a
    plain pluggy manager registers, with the same options."""
    import types
    from importlib import import_module, metadata

    import pluggy

    from gripprobe_core import hookspecs
    from gripprobe_core.pluginmanager import ENTRY_POINT_GROUP, _Manager

    odd = types.ModuleType("odd")
    exec("import os\nfrom gripprobe_core import hookimpl\nX = 1\n"
         "@hookimpl\ndef register_agents(register): pass\n"
         "def helper(): pass\n"
         "helper.gripprobe_impl = 'not options'\n"          # a marker that is no dict: pluggy ignores it
         "class K:\n    @staticmethod\n    @hookimpl\n    def register_backends(register): pass\n"
         "register_backends = K.register_backends\n"
         "@hookimpl(tryfirst=True)\ndef build_env(agent, ctx): return {}\n"
         "sm = staticmethod(build_env)\n", odd.__dict__)
    plugins = [import_module(m) for m in DEFAULT_PLUGINS.values()]
    plugins += [ep.load() for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)]
    plugins.append(odd)
    assert len(plugins) > 10

    def found(pm: pluggy.PluginManager) -> list:
        pm.add_hookspecs(hookspecs)
        for i, plugin in enumerate(plugins):
            pm.register(plugin, name=f"p{i}")
        return sorted((name, impl.plugin_name, impl.function.__qualname__, impl.tryfirst, impl.trylast,
                       impl.wrapper, impl.hookwrapper, impl.optionalhook)
                      for name in dir(pm.hook) if not name.startswith("_")
                      for impl in getattr(pm.hook, name).get_hookimpls())

    ours, pluggys = found(_Manager("gripprobe")), found(pluggy.PluginManager("gripprobe"))
    assert ours == pluggys
    assert len(ours) > 20 and ("build_env", f"p{len(plugins) - 1}", "build_env", True, False, False, False,
                               False) in ours
