"""The ``gripprobe`` command. The group comes from a factory; each command lives in its own module."""

from __future__ import annotations

import errno
import sys

import click

from ..errors import SpecError, UserError
from ..textsafe import safe_name, safe_text


def make_cli() -> click.Group:
    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="gripprobe-core", prog_name="gripprobe")
    def cli() -> None:
        """GripProbe: did the CLI agent really do the job with its tools?"""

    from .agents_cmd import agents_group, doctor_command
    from .aggregate_cmd import aggregate_command
    from .compare_cmd import compare_command
    from .export_cmd import export_command
    from .plugins_cmd import plugins_command
    from .run_cmd import run_command, run_suite_command
    from .runs_cmd import backfill_command, list_runs_command, rebuild_reports_command
    from .validate_cmd import schema_command, validate_command
    from .verify_cmd import verify_command
    from .view_cmd import view_command

    for cmd in (run_command, run_suite_command, rebuild_reports_command, list_runs_command, backfill_command,
                compare_command, verify_command, view_command):
        cli.add_command(cmd)
    for cmd in (validate_command, schema_command, plugins_command, agents_group, doctor_command, aggregate_command,
                export_command):
        cli.add_command(cmd)
    return cli


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user errors are one line (or one line per spec error) and exit 2.

    Error text may quote file content, so control characters in it are escaped (``safe_text``)."""
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
