"""``command_output``: run a command in the measured workspace and compare what it prints.

The command runs the agent's work, so it runs confined like the agent (the run's sandbox), in a scratch
copy of the stored workspace: whatever it writes (``__pycache__``, caches) never changes the evidence.
Sandboxed, the copy appears at the path where the agent saw its workspace (a script that names its own
absolute paths still finds them); unsandboxed (a live run with ``--sandbox none``) it stays where it is.
It is marked :func:`~.context.runs_code`: on a stored run's data (a recompute) it runs only in the sandbox,
and where there is none it is not run at all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import Field

from .context import ValidatorContext, runs_code
from ..models.results import ValidatorResult
from ..runvalues import render
from ..store.trees import scratch_folder
from . import (
    ExpectedRef, Options, WorkspacePath, agent_workspace, clip, invalid_options, normalize_text, parse_options,
    render_path, resolve_expected, variables, with_options, workspace_directory,
)

__all__ = ["command_output"]

MAX_OUTPUT_BYTES = 1024 * 1024


class CommandOutputOptions(Options):
    command: list[str] = Field(min_length=1)
    """argv (each item rendered); no shell is involved."""
    expected: str | ExpectedRef
    """Expected stdout (see ``file_equals``)."""
    cwd: WorkspacePath = "."
    """Working directory, relative to the workspace (symlinks in it are followed only inside the workspace)."""
    strip: bool = True
    exit_code: int | None = 0
    """Required exit status; None accepts any."""
    timeout_s: float = Field(default=10.0, gt=0, le=60)


def _run(argv: list[str], workspace: Path, cwd_rel: PurePosixPath, timeout_s: float,
         sandbox: Any = None, seen_at: str | None = None) -> tuple[int | None, str, str]:
    """(exit code or None on timeout, stdout, problem) — the whole process group dies on timeout."""
    from ..store.copytree import copy_workspace

    # the agent's code runs here and may leave any tree (3,000 deep, chmod 000): removed without recursion
    with scratch_folder("gripprobe-validate-") as scratch, tempfile.TemporaryFile() as out:
        home, work = scratch / "home", scratch / "workspace"
        home.mkdir()
        copied = copy_workspace(workspace, work)  # the harness's walk: no link followed, the root's path included
        if copied.error:
            return None, "", f"the workspace was not copied ({copied.error})"
        cwd = work / cwd_rel
        if sandbox is not None:  # confined; unconfined only where the run chose none; never where none is here
            inside = Path(seen_at or work) if sandbox.confined else work
            argv = sandbox.wrap(argv, cwd=inside / cwd_rel, rw=[home], rw_at=[(work, inside)])
        path = os.environ.get("PATH", "/usr/bin:/bin")
        env = {"PATH": sandbox.shown_path(path, binds=[home, work]) if sandbox is not None else path, "HOME": str(home), "TMPDIR": str(home),
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        if "TZ" in os.environ:
            env["TZ"] = os.environ["TZ"]
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            return None, "", f"cannot start {argv[0]!r}: {exc.strerror or type(exc).__name__}"
        try:
            code: int | None = proc.wait(timeout=timeout_s)
            problem = ""
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            code, problem = None, f"timed out after {timeout_s:g}s"
        out.seek(0)
        data = out.read(MAX_OUTPUT_BYTES)
    return code, data.decode("utf-8", errors="replace"), problem


@runs_code
@with_options(CommandOutputOptions)
def command_output(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """The command's stdout equals ``expected`` (and it exits with ``exit_code``)."""
    kind = "command_output"
    opts = parse_options(CommandOutputOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    values = variables(ctx)
    argv = [render(a, values) for a in opts.command]
    cwd_rel, bad_path = render_path(kind, opts.cwd, values)
    if bad_path:
        return bad_path
    accepted, problem = resolve_expected(ctx, opts.expected)
    if problem:
        return invalid_options(kind, problem)
    shown_expected = clip(accepted[0])
    cwd = workspace_directory(ctx, cwd_rel)
    if isinstance(cwd, str):
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=f"<{cwd}>",
                               message=f"working directory {cwd_rel}: {cwd}")
    inner = PurePosixPath(cwd.relative_to(ctx.workspace).as_posix())
    code, stdout, problem = _run(argv, Path(ctx.workspace), inner, opts.timeout_s, ctx.sandbox, agent_workspace(ctx))
    shown_command = " ".join(argv)
    if problem:
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=clip(stdout),
                               message=f"{shown_command}: {problem}")
    observed = normalize_text(stdout, strip=opts.strip)
    problems = []
    if not any(observed == normalize_text(a, strip=opts.strip) for a in accepted):
        problems.append("output differs from the expected output")
    if opts.exit_code is not None and code != opts.exit_code:
        problems.append(f"exit code {code}, expected {opts.exit_code}")
    passed = not problems
    message = f"{shown_command}: " + ("prints the expected output" if passed else "; ".join(problems))
    return ValidatorResult(kind=kind, passed=passed, expected=shown_expected, observed=clip(observed),
                           message=message)
