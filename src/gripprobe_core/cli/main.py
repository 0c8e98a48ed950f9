"""The ``gripprobe`` command. The group comes from a factory; each command lives in its own module."""

from __future__ import annotations

import atexit
import errno
import gc
import os
import sys
import threading
from collections.abc import Iterator, MutableMapping
from importlib import import_module

import click

from ..errors import SpecError, UserError
from ..textsafe import safe_name, safe_text


#: command name → (module under ``gripprobe_core.cli``, attribute). A command's module is imported only when
#: that command runs (or ``--help`` lists them all), so ``gripprobe validate`` never imports the runner,
#: the proxy or aiohttp, and ``gripprobe --version`` imports none of them.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run_cmd", "run_command"),
    "run-suite": ("run_cmd", "run_suite_command"),
    "rebuild-reports": ("runs_cmd", "rebuild_reports_command"),
    "list-runs": ("runs_cmd", "list_runs_command"),
    "backfill-model-hashes": ("runs_cmd", "backfill_command"),
    "compare": ("compare_cmd", "compare_command"),
    "verify": ("verify_cmd", "verify_command"),
    "view": ("view_cmd", "view_command"),
    "validate": ("validate_cmd", "validate_command"),
    "schema": ("validate_cmd", "schema_command"),
    "plugins": ("plugins_cmd", "plugins_command"),
    "agents": ("agents_cmd", "agents_group"),
    "doctor": ("agents_cmd", "doctor_command"),
    "aggregate-reports": ("aggregate_cmd", "aggregate_command"),
    "export": ("export_cmd", "export_command"),
}


#: Commands whose set-up (imports, plugins, specs: objects that live as long as the command) runs with the cyclic
#: garbage collector held back (:func:`hold_gc`): a one-case run spent ~50 ms in ~150 collections that found
#: nothing to free, most of them before its first case. ``run`` releases it (:func:`release_gc`) before its cases.
HOLD_GC = frozenset({"run", "run-suite", "validate"})
GC_HELD = (100_000, 50, 1_000)
"""The collector's thresholds while held: it still runs (every 100k net allocations), so memory stays bounded."""
_GC_DEFAULT = gc.get_threshold()


def hold_gc() -> None:
    """Collect rarely while a command sets up (see :data:`HOLD_GC`)."""
    gc.set_threshold(*GC_HELD)


def release_gc() -> None:
    """The set-up is over: what it made lives for the whole command, so it leaves the collector's generations
    (``gc.freeze``: later collections never scan it) and collection is back to Python's thresholds."""
    gc.freeze()
    gc.set_threshold(*_GC_DEFAULT)


class _LazyCommands(MutableMapping):
    """The group's ``commands``: names known up front, each command imported on first lookup.

    click reads a group's commands only through ``commands.get(name)``, ``commands[name] = cmd`` and
    ``sorted(commands)``, so a mapping that imports on ``__getitem__`` keeps every click behaviour."""

    def __init__(self, where: dict[str, tuple[str, str]]):
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attr = self._where[name]  # KeyError for an unknown name, as a dict
            if name not in HOLD_GC:
                release_gc()
            cmd = getattr(import_module(f"{__package__}.{module}"), attr)
            if cmd.name != name:
                raise RuntimeError(f"cli.{module}.{attr} is named {cmd.name!r}, listed as {name!r}")
            self._loaded[name] = cmd
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: click.Command) -> None:
        self._loaded[name] = cmd
        self._where.setdefault(name, ("", ""))

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:  # without importing the command
        return name in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def make_cli() -> click.Group:
    @click.group(context_settings={"help_option_names": ["-h", "--help"]}, commands=_LazyCommands(COMMANDS))
    @click.version_option(package_name="gripprobe-core", prog_name="gripprobe")
    def cli() -> None:
        """GripProbe: did the CLI agent really do the job with its tools?"""

    return cli


def entry() -> None:
    """The ``gripprobe`` console script: :func:`main`, then :func:`leave` with its exit status. (Tests and
    embedders call :func:`main`, which ends in ``SystemExit`` as any click program does.)

    pydantic's own plugins (the ``pydantic`` entry point group: observability hooks on validation) are off in
    the command unless ``PYDANTIC_DISABLE_PLUGINS`` is set already (to ``""`` to have them): the command's
    models are its own, and looking for such plugins scans every installed distribution (~2-3 ms of start-up)."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        main()
    except SystemExit as exc:
        leave(exc.code)
    leave(0)


def leave(code: object) -> None:
    """End the process as ``sys.exit(code)`` would, without the interpreter's teardown.

    Python's teardown (a last collection, then every module's objects freed one by one) takes ~15 ms after a
    run: time the user waits for and nothing needs, since every result file is written, flushed and sealed by
    then. What the teardown does that matters is done here first, in Python's order: the ``atexit`` functions
    (logging's flush, finalizers of temporary folders, Ray's disconnect), then the standard streams are flushed
    (a closed pipe is exit 120, as Python reports it). A thread that is not a daemon still running means
    someone expects Python to wait for it: then this is plain ``sys.exit``."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status & 0xFF)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors are one line (or one line per spec error) and exit 2.

    Error text may quote file content, so control characters in it are escaped (``safe_text``)."""
    hold_gc()
    cli = make_cli()
    try:
        code = cli.main(args=argv, prog_name="gripprobe", standalone_mode=False)
    except SpecError as exc:
        for line in exc.errors:
            click.echo(safe_text(line), err=True)
        click.echo(f"{len(exc.errors)} spec error(s); fix them and run `gripprobe validate`", err=True)
        sys.exit(2)
    except UserError as exc:
        click.echo(f"error: {safe_text(exc)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:
        # Path options are checked where they enter (cli/params.py); a name made too long elsewhere (an
        # environment variable, a folder inside a given one) is still one line, never a traceback.
        if exc.errno != errno.ENAMETOOLONG:
            raise
        from ..store.names import path_problem

        name = exc.filename if isinstance(exc.filename, (str, bytes)) else ""
        why = (path_problem(name) if name else None) or "a name in it is too long for the file system"
        click.echo(f"error: {safe_name(name) if name else 'a path'}: {why}", err=True)
        sys.exit(2)
    # With standalone_mode=False click *returns* the code given to ctx.exit(n) instead of raising it.
    sys.exit(code if isinstance(code, int) else 0)
