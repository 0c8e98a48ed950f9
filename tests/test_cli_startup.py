"""What the command line imports before it knows which command runs: only the command that runs is
imported (cli/main.py), so a bare start never pulls in aiohttp, the proxy, the oracle, the runner or the
reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("aiohttp", "gripprobe_core.proxy", "gripprobe_core.oracle", "gripprobe_core.runner",
         "gripprobe_core.reports", "gripprobe_core.export", "pydantic")


def imported_after(code: str) -> list[str]:
    """The HEAVY modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
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
