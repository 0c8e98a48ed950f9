"""Generate the parts of docs/ that must never drift from the code: hook reference and CLI help.

``python -m gripprobe_core._docgen`` rewrites them; tests/test_docs.py fails when they are stale.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

from click.testing import CliRunner

from . import hookspecs

HOOKS_HEADER = """# Hook reference

Generated from `src/gripprobe_core/hookspecs.py` by `python -m gripprobe_core._docgen`; a test fails when
this page and the code disagree. Implement hooks with `from gripprobe_core.plugin import hookimpl`; an
implementation may take any subset of a hook's arguments. Every hook is synchronous (a coroutine function
implementing one is refused when its plugin loads), and an implementation whose name matches no hook below
(`register_agent` for `register_agents`: pluggy alone would load it and never call it) is refused too. A
refused plugin is skipped and listed among `gripprobe plugins`' failures, naming the plugin and the hook;
with `GRIPPROBE_STRICT_PLUGINS=1` (CI's isolation runs that way) every command stops there, exit 2.

Three groups, and no agent hook: an agent is a **driver object** a plugin registers
(`gripprobe_core.drivers.AgentDriver`, see `plugin-guide.md`); the runner looks the driver up by name
and calls it.

- **Registration**: hand the core what the plugin provides (drivers, backend kinds, validator and
  challenge kinds, evaluators a suite may name as its judge).
- **Contributions**: every implementation is called, for every agent, and its answer is added
  (`build_env` merged, `parse_wrapper_events` collected).
- **Decisions** *(first result)*: who handles this; the core's default answers last, a plugin answers
  first to override it. The verdict is not one: a case is judged by the evaluator its suite names
  (`register_evaluators`), never by whichever plugin answers first.

Where each hook fires in a run: `architecture.md`.
"""

CLI_HEADER = """# Command reference

Generated from the commands' own `--help` by `python -m gripprobe_core._docgen`; a test keeps it current.
"""


def hook_names() -> list[str]:
    return [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(fn, "gripprobe_spec")]


def _in_source_order() -> list[str]:
    src = inspect.getsource(hookspecs)
    names = hook_names()
    return sorted(names, key=lambda n: src.index(f"def {n}("))


def _section_of(name: str) -> str:
    src = inspect.getsource(hookspecs)
    pos = src.index(f"def {name}(")
    heads = [(m.start(), m.group(1)) for m in re.finditer(r"^# -+ ?(\w+)$", src, re.M)]
    current = "hooks"
    for start, title in heads:
        if start < pos:
            current = title
    return current


def render_hook_reference() -> str:
    out = [HOOKS_HEADER]
    section = None
    for name in _in_source_order():
        fn = getattr(hookspecs, name)
        sec = _section_of(name)
        if sec != section:
            out.append(f"\n## {sec.capitalize()}\n")
            section = sec
        opts = fn.gripprobe_spec
        first = " *(first result)*" if opts.get("firstresult") else ""
        sig = str(inspect.signature(fn)).replace("'", "").replace('"', "")
        out.append(f"### `{name}`{first}\n\n```python\ndef {name}{sig}\n```\n\n{inspect.getdoc(fn)}\n")
    return "\n".join(out).rstrip() + "\n"


def render_cli_reference() -> str:
    from .cli.main import make_cli
    cli = make_cli()
    runner = CliRunner()
    out = [CLI_HEADER]
    names = [None, *sorted(cli.commands)]
    for name in names:
        args = [name, "--help"] if name else ["--help"]
        res = runner.invoke(cli, args, prog_name="gripprobe", terminal_width=100)
        title = f"gripprobe {name}" if name else "gripprobe"
        out.append(f"\n## `{title}`\n\n```text\n{res.output.rstrip()}\n```\n")
    return "\n".join(out).rstrip() + "\n"


TARGETS = {"docs/hooks.md": render_hook_reference, "docs/cli.md": render_cli_reference}


def main(root: str = ".") -> int:
    for rel, fn in TARGETS.items():
        path = Path(root) / rel
        path.write_text(fn(), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
