"""What the command line imports before it knows which command runs: only the command that runs is
imported (cli/main.py), so a bare start never pulls in aiohttp, the proxy, the oracle, the runner or the
reports. Then what each command pays for: the plugin API loads its names on first use, so ``validate``
(every plugin registered, every spec checked) imports no web server, runner or report; and a one-case run
imports only what its case uses (no challenge server, no Ray, no aggregate, compare or export)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("aiohttp", "gripprobe_core.proxy", "gripprobe_core.oracle", "gripprobe_core.runner",
         "gripprobe_core.reports", "gripprobe_core.export", "pydantic")


def imported_after(code: str, heavy: tuple[str, ...] = HEAVY, **env_vars: str) -> list[str]:
    """The ``heavy`` modules in ``sys.modules`` after running ``code`` in a fresh interpreter (``env_vars`` added
    to its environment)."""
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps(sorted(m for m in {list(heavy)!r} if m in sys.modules)))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")} | env_vars
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_importing_the_cli_imports_no_heavy_module():
    assert imported_after("import gripprobe_core.cli.main") == []


def test_version_imports_no_heavy_module():
    code = ("from gripprobe_core.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code")
    assert imported_after(code) == []


def test_a_command_imports_its_own_module_only():
    code = ("from gripprobe_core.cli.main import make_cli\n"
            "cli = make_cli()\n"
            "assert 'run' in cli.commands and sorted(cli.commands) == sorted(cli.list_commands(None))\n"
            "cli.commands['verify']\n"
            "assert 'gripprobe_core.cli.verify_cmd' in sys.modules\n"
            "assert 'gripprobe_core.cli.run_cmd' not in sys.modules")
    assert "aiohttp" not in imported_after(code)


def test_every_listed_command_loads_under_its_name():
    from gripprobe_core.cli.main import COMMANDS, make_cli

    cli = make_cli()
    for name in COMMANDS:
        assert cli.commands[name].name == name


#: What registering the agent plugins does not load: each agent's parser (its patterns, compiled when one of its
#: phases is read) and the interaction modules that read denials with it.
AGENTS_PARSERS = tuple(f"gripprobe_{p}.parse" for p in ("acp", "aider", "claude", "cline", "codex", "continue", "gptme",
                                                        "miniswe", "opencode", "pi", "qwen")) + (
    "gripprobe_aider.interaction", "gripprobe_cline.interaction", "gripprobe_continue.interaction",
    "gripprobe_opencode.policy", "gripprobe_claude.session")

#: What registering every plugin and checking every spec needs none of: a web server (the oracle's, a challenge
#: server's, aiohttp), the runner, the reports and their templates, the signing library, the ACP library.
NOT_FOR_VALIDATE = ("aiohttp", "gripprobe_core.oracle.server", "gripprobe_core.oracle.profiles",
                    "gripprobe_core.challenges.http", "gripprobe_core.challenges.nonce",
                    "gripprobe_core.challenges.search", "gripprobe_core.runner", "gripprobe_core.reports",
                    "gripprobe_core.export", "jinja2", "uvloop", "cryptography", "acp")

#: What a one-case run of the reference agent on the oracle (save_file: no challenge) does not use: the oracle is
#: served by oracle/http.py and the proxy by its own relay, so no aiohttp at all.
NOT_FOR_ONE_CASE = ("aiohttp", "gripprobe_core.challenges.http", "gripprobe_core.challenges.nonce",
                    "gripprobe_core.challenges.search", "gripprobe_core.runner.rayexec",
                    "gripprobe_core.runner.raywork", "ray", "gripprobe_core.reports.aggregate",
                    "gripprobe_core.reports.compare", "gripprobe_core.export", "gripprobe_core.view", "acp",
                    *AGENTS_PARSERS)

CALL_MAIN = ("from gripprobe_core.cli.main import main\n"
             "try:\n    main({argv!r})\nexcept SystemExit as e:\n    assert e.code == 0, e.code")


def test_the_plugin_api_loads_its_names_on_first_use():
    """Importing the plugin API imports nothing heavy; a name loads its own module only (a dialect's
    helpers never start the oracle's server or aiohttp)."""
    assert imported_after("import gripprobe_core.plugin") == []
    heavy = ("aiohttp", "gripprobe_core.oracle.server", "gripprobe_core.challenges.http", "pydantic")
    assert imported_after("from gripprobe_core.plugin import ChatRequest, ToolsDialect, ChallengeServer",
                          heavy) == ["pydantic"]  # the reference actions are models; no server
    assert imported_after("from gripprobe_core.plugin import hookimpl, json_lines, utc_now_iso", heavy) == []


def test_the_lazy_packages_give_every_public_name():
    """plugin, oracle, models and challenges load names on first use: each name in ``__all__`` resolves, to
    the object its own module defines, and an unknown name is an AttributeError."""
    import importlib

    import pytest

    for package in ("gripprobe_core.plugin", "gripprobe_core.oracle", "gripprobe_core.models",
                    "gripprobe_core.challenges"):
        mod = importlib.import_module(package)
        for name in mod.__all__:
            assert getattr(mod, name) is not None, f"{package}.{name}"
        assert sorted(dir(mod)) == sorted(mod.__all__) or package == "gripprobe_core.challenges"
        with pytest.raises(AttributeError):
            getattr(mod, "NoSuchName")


@pytest.mark.parametrize("name", ["gripprobe_core.plugin", "gripprobe_core.models", "gripprobe_core.oracle",
                                  "gripprobe_core.telemetry"])
def test_a_lazy_modules_table_matches_what_type_checkers_see(name):
    """A lazy module (``_lazy.lazy_names``) lists its names twice (the imports a type checker reads, the table
    loaded at run time): the two must agree name for name and module for module."""
    import ast
    import importlib

    from gripprobe_core._lazy import TABLES

    mod = importlib.import_module(name)
    tree = ast.parse(open(mod.__file__, encoding="utf-8").read())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {(a.asname or a.name): ("." * n.level + (n.module or ""), a.name)
            for n in guarded.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert seen == TABLES[name]
    assert set(mod.__all__) - {"hookimpl"} == set(seen)


def test_registering_the_agent_plugins_loads_no_agents_parser():
    """Every installed agent driver registers (names, tool names, dialects) without its parser; a driver's
    parse loads it: the same tool table either way."""
    code = ("from gripprobe_core.pluginmanager import make_plugin_manager\n"
            "reg = make_plugin_manager(strict=True).registry\n"
            "assert len(reg.agents) > 1 and reg.dialects\n")
    assert imported_after(code, AGENTS_PARSERS) == []
    same = ("import importlib\n"
            "from gripprobe_core.pluginmanager import make_plugin_manager\n"
            "reg = make_plugin_manager(strict=True).registry\n"
            "for name, driver in reg.agents.items():\n"
            "    package = type(driver).__module__.rsplit('.', 1)[0]\n"
            "    if package + '.parse' in " + repr(AGENTS_PARSERS) + ":\n"
            "        parse = importlib.import_module(package + '.parse')\n"
            "        assert getattr(parse, 'TOOL_NAMES', driver.tool_names) is driver.tool_names, name\n")
    out = imported_after(same, AGENTS_PARSERS)
    import importlib.util

    installed = sorted(m for m in AGENTS_PARSERS if m.endswith(".parse") and importlib.util.find_spec(m.split(".")[0]))
    assert out == installed  # each parser loads when asked for, and holds the very table its driver registered


def test_validate_imports_no_web_server_runner_or_report():
    assert imported_after(CALL_MAIN.format(argv=["validate"]), NOT_FOR_VALIDATE) == []


def test_a_one_case_run_imports_only_what_its_case_uses(tmp_path):
    argv = ["run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "--results", str(tmp_path)]
    assert imported_after(CALL_MAIN.format(argv=argv), NOT_FOR_ONE_CASE) == []
    [case] = list((tmp_path / "runs").glob("*/cases/*/case.json"))
    assert json.loads(case.read_text())["verdict"]["status"] == "PASS"
    # the host's platform string is found on a thread of its own while the run sets up: the same value
    import platform

    [manifest] = list((tmp_path / "runs").glob("*/manifest.json"))
    assert json.loads(manifest.read_text())["host"]["platform"] == platform.platform()


def test_the_recorder_process_imports_no_model():
    """The proxies' recorder child (``python -m gripprobe_core.proxy.recorder``) imports what observing an
    exchange needs, not pydantic or the models: it starts with the first model call of a run."""
    code = "import gripprobe_core.proxy.recorder, gripprobe_core.proxy.observe"
    assert imported_after(code, ("pydantic", "gripprobe_core.models.events", "aiohttp")) == []


def test_validate_with_the_spec_cache_warm_reads_no_yaml(tmp_path):
    """The first validate parses every spec (ruamel.yaml); the next reads the cache and never imports the parser,
    nor compiles tier D's claim patterns (no case is judged)."""
    cache = {"XDG_CACHE_HOME": str(tmp_path)}
    heavy = ("ruamel.yaml",)  # (the cache's fingerprint finds the parser's version without importing it)
    assert imported_after(CALL_MAIN.format(argv=["validate"]), heavy, **cache) == ["ruamel.yaml"]
    code = CALL_MAIN.format(argv=["validate"]) + "\nfrom gripprobe_core.telemetry import tier_d\nassert tier_d._rules.cache_info().currsize == 0"
    assert imported_after(code, heavy, **cache) == []


def _gc_after(argv: list[str], tmp_path) -> dict:
    """``gc`` thresholds and frozen count after ``main(argv)`` in a fresh interpreter."""
    code = (CALL_MAIN.format(argv=argv) + "\nimport gc\n"
            "print(json.dumps({'threshold': list(gc.get_threshold()), 'frozen': gc.get_freeze_count()}))")
    probe = f"import sys, json\n{code}\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120,
                         stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_set_up_runs_with_the_collector_held_and_a_run_releases_it_before_its_cases(tmp_path):
    """validate (bounded work) keeps the held thresholds to its end; a run freezes what its set-up made and
    collects at Python's thresholds while its cases run; any other command is released as it loads."""
    import gc

    from gripprobe_core.cli.main import GC_HELD

    default = list(gc.get_threshold())
    assert _gc_after(["validate"], tmp_path)["threshold"] == list(GC_HELD)
    run = _gc_after(["run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "--results",
                     str(tmp_path / "r")], tmp_path)
    assert run["threshold"] == default and run["frozen"] > 10_000
    other = _gc_after(["plugins"], tmp_path)
    assert other["threshold"] == default


#: What a one-case run loads only once its first agent has started (on the run's loading thread, runner/run.py):
#: the judge and what only it uses. None of them is needed to start an agent.
AFTER_THE_FIRST_AGENT = ("gripprobe_core.runner.judge", "gripprobe_core.telemetry.summary",
                         "gripprobe_core.telemetry.usage", "gripprobe_core.telemetry.permissions",
                         "gripprobe_core.reports.html", "jinja2")

#: Records which of AFTER_THE_FIRST_AGENT are loaded when the run first asks the kernel to start a sandbox
#: (``bwrap``, a Popen the audit hook sees; the start-of-run probe's comes from its own thread) on the loop's
#: thread, and whether each result model's validator was built by then; then runs the command.
_FIRST_SPAWN_PROBE = """
import json, sys, threading
seen = {{}}
def hook(event, args):
    if (event == "subprocess.Popen" and "bwrap" in str(args[0]) and "at_spawn" not in seen
            and threading.current_thread().name != "gripprobe-sandbox-probe"):
        from gripprobe_core.models import results
        seen["at_spawn"] = sorted(m for m in {heavy!r} if m in sys.modules)
        seen["built"] = sorted(n for n, v in vars(results).items() if isinstance(v, type)
                               and issubclass(v, results._M) and v is not results._M and v.__pydantic_complete__)
sys.addaudithook(hook)
from gripprobe_core.cli.main import main
try:
    main({argv!r})
except SystemExit as e:
    assert e.code == 0, e.code
seen["at_end"] = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps(seen))
"""


def test_a_run_starts_its_first_agent_before_loading_the_judge(tmp_path):
    """The judge's modules and the result models' validators are not built before the first agent starts
    (a few per cent of a one-case run's start-up), and are there, the case judged, by the run's end."""
    argv = ["run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "--results", str(tmp_path),
            "--sandbox", "bwrap"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    res = subprocess.run([sys.executable, "-c", _FIRST_SPAWN_PROBE.format(heavy=AFTER_THE_FIRST_AGENT, argv=argv)],
                         capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    assert seen["at_spawn"] == []
    assert "CaseResult" not in seen["built"] and "ProcessResult" not in seen["built"]
    assert seen["at_end"] == sorted(AFTER_THE_FIRST_AGENT)
    [case] = list((tmp_path / "runs").glob("*/cases/*/case.json"))
    assert json.loads(case.read_text())["verdict"]["status"] == "PASS"


def test_result_models_build_their_validators_on_first_use_and_all_at_once_the_same():
    """The result models are deferred (their validators built on first use, or by ``build_validators``); a
    built model validates and refuses as it did: a non-finite duration is refused either way."""
    out = _leave_probe("""
        from gripprobe_core.models import results
        models = [v for v in vars(results).values() if isinstance(v, type) and issubclass(v, results._M)
                  and v is not results._M]
        print(sum(m.__pydantic_complete__ for m in models))
        try:
            results.ProcessResult(status="ok", duration_s=float("nan"))
        except Exception as exc:
            print(type(exc).__name__)
        print(results.ProcessResult.__pydantic_complete__, results.CaseResult.__pydantic_complete__)
        results.build_validators()
        print(all(m.__pydantic_complete__ for m in models), len(models) > 10)
    """)
    assert out.stdout.split() == ["0", "ValidationError", "True", "False", "True", "True"]


def _leave_probe(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    import textwrap

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the streams buffered, as by default
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=env)


def test_leave_runs_the_exit_functions_and_flushes_before_the_process_ends():
    """``leave`` (the console script's way out, without Python's teardown) still runs what ``atexit`` holds
    (logging's flush, finalizers of temporary folders) and flushes both streams; the status is the code's."""
    out = _leave_probe("""
        import atexit, sys, tempfile, weakref, os
        from gripprobe_core.cli.main import leave
        d = tempfile.TemporaryDirectory()
        open(os.path.join(d.name, "f"), "w").close()
        atexit.register(lambda: sys.stderr.write("exit function ran\\n"))
        sys.stdout.write("x" * 300_000)  # more than a pipe holds: only a flush gets it all out
        sys.stderr.write(d.name + "\\n")
        leave(3)
        print("never")
    """)
    assert out.returncode == 3
    assert out.stdout == "x" * 300_000
    folder, said = out.stderr.splitlines()[:2]
    assert said == "exit function ran" and not os.path.exists(folder)  # the folder's finalizer ran


def test_leave_keeps_python_s_meaning_of_an_exit_code():
    for code, status, err in (("None", 0, ""), ("0", 0, ""), ("2", 2, ""), ("'bad input'", 1, "bad input\n"),
                              ("256 + 7", 7, "")):
        out = _leave_probe(f"from gripprobe_core.cli.main import leave\nleave({code})")
        assert (out.returncode, out.stderr) == (status, err), code


def test_leave_waits_like_python_for_a_thread_that_is_no_daemon():
    """A non-daemon thread still running is waited for, as Python's own exit does (then the plain exit)."""
    out = _leave_probe("""
        import threading, time, sys
        from gripprobe_core.cli.main import leave
        def late():
            time.sleep(0.3)
            print("thread done", flush=True)
        threading.Thread(target=late).start()
        leave(4)
    """)
    assert (out.returncode, out.stdout) == (4, "thread done\n")


def test_the_console_script_ends_with_the_command_s_status(tmp_path):
    """The installed ``gripprobe`` script (cli.main:entry) exits with the command's status and prints all
    of its output: 0 and the version, 2 and one line for a bad option."""
    script = Path(sys.executable).parent / "gripprobe"
    ok = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith("gripprobe, version ")
    bad = subprocess.run([str(script), "run", "--jobs", "0", "--results", str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--jobs" in bad.stderr


#: The threads that start the proxies' recorder processes in a command (a Popen of ``gripprobe_core.proxy.recorder``).
_RECORDER_PROBE = """
import json, sys, threading
started = []
def hook(event, args):
    if event == "subprocess.Popen" and "gripprobe_core.proxy.recorder" in [str(a) for a in args[1]]:
        started.append(threading.current_thread().name)
sys.addaudithook(hook)
from gripprobe_core.cli.main import main
try:
    main({argv!r})
except SystemExit as e:
    assert e.code == 0, e.code
print(json.dumps(started))
"""


@pytest.mark.parametrize("proxy, expected", [("auto", ["gripprobe-recorder-start"]), ("off", [])])
def test_a_run_starts_one_recorder_early_and_none_without_a_proxy(tmp_path, proxy, expected):
    """A run starts its proxies' recorder process as it begins (runner's CLI: beside the plugins' and specs'
    loading, on a thread of its own), once: the first proxy uses that one. With the proxy off, no recorder starts."""
    argv = ["run", "-a", "reference", "-m", "oracle-perfect", "-t", "save_file", "--results", str(tmp_path),
            "--telemetry-proxy", proxy]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    res = subprocess.run([sys.executable, "-c", _RECORDER_PROBE.format(argv=argv)], capture_output=True, text=True,
                         env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == expected
    [case] = list((tmp_path / "runs").glob("*/cases/*/case.json"))
    assert json.loads(case.read_text())["verdict"]["status"] == "PASS"


@pytest.mark.parametrize("setting, loaded", [(None, False), ("", True)])
def test_pydantic_plugins_are_off_in_the_command_unless_asked_for(tmp_path, setting, loaded):
    """An installed distribution with a ``pydantic`` plugin (its module leaves a file when imported): the
    ``gripprobe`` command does not load it, unless PYDANTIC_DISABLE_PLUGINS is set (to "" here) by the user."""
    site = tmp_path / "site"
    info = site / "fakeplug-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nfake = fakeplug_mod:plugin\n")
    mark = tmp_path / "loaded"
    (site / "fakeplug_mod.py").write_text(
        f"open({str(mark)!r}, 'w').close()\n"
        "class Plugin:\n    def new_schema_validator(self, *args, **kwargs):\n        return None, None, None\n"
        "plugin = Plugin()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRIPPROBE_", "PYDANTIC_"))}
    env["PYTHONPATH"] = str(site)
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    script = Path(sys.executable).with_name("gripprobe")
    res = subprocess.run([str(script), "validate"], capture_output=True, text=True, env=env, timeout=120,
                         stdin=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[1])
    assert res.returncode == 0, res.stdout + res.stderr
    assert mark.exists() is loaded
