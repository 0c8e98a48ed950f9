"""Every Python snippet of docs/plugin-guide.md compiles, uses only names it defines or imports (or Python's
builtins, or the short list below), and imports from gripprobe_core only public names (what a plugin may
import: docs/plugin-guide.md "The public API", tests/test_public_api.py)."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import symtable

import pytest

from conftest import ROOT

GUIDE = ROOT / "docs" / "plugin-guide.md"
PUBLIC_MODULES = ("gripprobe_core", "gripprobe_core.plugin", "gripprobe_core.testing")

ASSUMED: frozenset[str] = frozenset({"__file__"})
"""Names a snippet may use without defining them: ``__file__`` (a snippet is a plugin module's text).
Keep this short: a snippet a reader copies should run as it stands."""

BUILTINS = frozenset(dir(builtins))


def snippets(text: str) -> list[tuple[int, str]]:
    """``(line in the guide, source)`` of every ```python block."""
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


def _all_tables(table: symtable.SymbolTable):
    yield table
    for child in table.get_children():
        yield from _all_tables(child)


def undefined_names(source: str) -> list[str]:
    """Names ``source`` uses that nothing in it binds at module level (a def, class, import or assignment),
    that are not builtins and not :data:`ASSUMED`: what would raise ``NameError`` when the code runs."""
    top = symtable.symtable(source, "<snippet>", "exec")
    defined = {s.get_name() for s in top.get_symbols()
               if s.is_assigned() or s.is_imported() or s.is_namespace() or s.is_parameter()}
    missing = set()
    for table in _all_tables(top):
        for sym in table.get_symbols():
            if not sym.is_referenced():
                continue
            name = sym.get_name()
            at_top = table is top
            unbound_here = at_top or sym.is_global() or (table.get_type() == "class" and not sym.is_assigned())
            if unbound_here and name not in defined and name not in BUILTINS and name not in ASSUMED:
                missing.add(name)
    return sorted(missing)


def private_imports(source: str) -> list[str]:
    """Imports of gripprobe_core that are not public: another module than :data:`PUBLIC_MODULES`, or a name
    not in the module's ``__all__``."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "gripprobe_core":
            if node.module not in PUBLIC_MODULES:
                problems.append(f"from {node.module} import …: not a public module")
                continue
            public = set(importlib.import_module(node.module).__all__)
            problems += [f"{node.module}.{a.name} is not public" for a in node.names if a.name not in public]
        elif isinstance(node, ast.Import):
            problems += [f"import {a.name}: not a public module" for a in node.names
                         if a.name.split(".")[0] == "gripprobe_core" and a.name not in PUBLIC_MODULES]
    return problems


GUIDE_SNIPPETS = snippets(GUIDE.read_text(encoding="utf-8"))


def test_the_guide_has_snippets_to_check():
    assert len(GUIDE_SNIPPETS) >= 6


@pytest.mark.parametrize("line, source", GUIDE_SNIPPETS, ids=[f"line{n}" for n, _ in GUIDE_SNIPPETS])
def test_a_guide_snippet_compiles_defines_what_it_uses_and_imports_only_public_names(line, source):
    try:
        compile(source, f"docs/plugin-guide.md:{line}", "exec")
    except SyntaxError as exc:
        pytest.fail(f"the snippet at docs/plugin-guide.md:{line} does not compile: {exc}")
    assert undefined_names(source) == [], f"docs/plugin-guide.md:{line} uses names it never defines or imports"
    assert private_imports(source) == [], f"docs/plugin-guide.md:{line}"
    run(source, line)  # and it runs: its imports resolve, its classes and functions are defined


def run(source: str, line: int) -> dict:
    """The snippet executed as a plugin module would be; its namespace."""
    namespace = {"__name__": f"guide_snippet_{line}", "__file__": str(ROOT / "plugin.py")}
    exec(compile(source, f"docs/plugin-guide.md:{line}", "exec"), namespace)
    return namespace


def test_the_guides_parser_gives_a_start_and_its_result_with_every_documented_field(tmp_path):
    """The "structured output" snippet on a log of one failed command: the builder keeps both events (it drops
    an event whose field has the wrong type), the result carries what "Tool-result events" says."""
    from gripprobe_core import CliAgentSpec, ProcessResult
    from gripprobe_core.plugin import PhaseCapture
    from gripprobe_core.testing import phase_context

    line, source = next((n, s) for n, s in GUIDE_SNIPPETS if "class JsonLogDriver" in s)
    driver = run(source, line)["JsonLogDriver"]()
    stdout = tmp_path / "stdout.log"
    stdout.write_text('{"type": "tool_call", "id": "call_1", "name": "exec_command", "args": {"cmd": "false"}}\n'
                      'not json\n'
                      '{"type": "tool_result", "id": "call_1", "name": "exec_command", "exit_code": 2, "ms": 12.5,'
                      ' "output": "boom"}\n'
                      '{"type": "answer", "text": "It failed."}\n')
    (tmp_path / "stderr.log").write_text("")
    agent = CliAgentSpec(id="x", plugin="x", executable="x", tool_kinds=["execute"])
    capture = PhaseCapture(stdout, tmp_path / "stderr.log", ProcessResult(status="ok"))
    transcript = driver.parse(phase_context(tmp_path / "phase", agent), capture)
    start, result = transcript.events
    assert transcript.final_text == "It failed."
    assert (start.event_type, start.tool_call_id, start.payload["name"], start.payload["kind"]) == (
        "tool_call_start", "call_1", "shell", "execute")
    assert (result.event_type, result.tool_call_id, result.status, result.exit_code, result.error_type,
            result.latency_ms, result.payload["output"], result.raw_artifact_ref) == (
        "tool_call_result", "call_1", "error", 2, "tool_error", 12.5, "boom", "stdout.log:3")


def test_the_checks_catch_what_the_guide_had():
    """The snippets the guide used to hold: a parser naming ToolNames without importing it, a plugin module
    using sys and AGENT, a name the kit does not export, a private module."""
    assert undefined_names('from gripprobe_core.plugin import EventBuilder\n\n'
                           'TOOL_NAMES = ToolNames({"x": ("shell", "execute")})\n\n'
                           'def parse(self, ctx, capture):\n    return EventBuilder(ctx.phase, sys.argv[0])\n') \
        == ["ToolNames", "sys"]
    assert undefined_names("class D:\n    def command(self, ctx):\n        return [AGENT, ctx]\n") == ["AGENT"]
    assert undefined_names("import sys\nfor i in range(3):\n    print(sys.argv[i], __file__)\n") == []
    assert private_imports("from gripprobe_core.testing import DriverContract, Nope\n"
                           "from gripprobe_core.runner.env import base_env\nimport gripprobe_core.oracle\n") == [
        "gripprobe_core.testing.Nope is not public", "from gripprobe_core.runner.env import …: not a public module",
        "import gripprobe_core.oracle: not a public module"]
