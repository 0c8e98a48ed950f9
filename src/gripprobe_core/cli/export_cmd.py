"""``gripprobe export``: a stored run as JUnit XML, OpenTelemetry GenAI spans over OTLP/HTTP, or ATIF."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import click

from ..errors import UserError
from ..textsafe import safe_name, safe_text
from .params import FiniteFloat, PathArg

CTX = {"help_option_names": ["-h", "--help"]}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


def _headers(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _HEADER_NAME.fullmatch(name):
            raise UserError(f"--otlp-header {safe_text(name or item)[:60]}...: give KEY=VALUE with an HTTP header "
                            f"name as KEY (e.g. --otlp-header 'Authorization=Basic <base64 of public:secret key>')")
        if any(c in value for c in "\r\n\0"):
            raise UserError(f"--otlp-header {safe_text(name)}: the value holds a line break or NUL")
        out[name] = value.strip()
    return out


def _endpoint(url: str | None) -> str:
    from ..export import DEFAULT_ENDPOINT
    from ..export.otlp import shown_url

    if not url:
        base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        url = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
               or (f"{base.rstrip('/')}/v1/traces" if base else DEFAULT_ENDPOINT))
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        ok = False
    if not ok:
        raise UserError(f"--otlp-endpoint {safe_text(shown_url(url))}: not an http(s) URL; give the traces URL of an "
                        f"OTLP/HTTP receiver, e.g. http://127.0.0.1:4318/v1/traces")
    return url


@click.command("export", context_settings=CTX)
@click.argument("run_dir", type=PathArg(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["junit", "otlp", "atif"]), required=True,
              help="junit: JUnit XML (one testcase per case); otlp: OpenTelemetry GenAI spans sent over OTLP/HTTP "
                   "(needs the extra gripprobe-core[otlp]); atif: one Harbor ATIF trajectory per case.")
@click.option("--out", type=PathArg(path_type=Path),
              help="junit: the XML file (default RUN_DIR/reports/junit.xml); atif: the folder for <case_id>.json "
                   "(default RUN_DIR/exports/atif). Not for otlp.")
@click.option("--otlp-endpoint", help="OTLP/HTTP traces URL (default: env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
                                      "env OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else "
                                      "http://127.0.0.1:4318/v1/traces).")
@click.option("--otlp-header", "otlp_headers", multiple=True, metavar="KEY=VALUE",
              help="An HTTP header sent with every OTLP request, e.g. for auth (repeatable). Added to those of env "
                   "OTEL_EXPORTER_OTLP_TRACES_HEADERS (else OTEL_EXPORTER_OTLP_HEADERS). Values are never printed.")
@click.option("--otlp-timeout", type=FiniteFloat(min=0.1, max=600), default=10.0, show_default=True,
              help="Seconds for each OTLP request, retries included.")
@click.option("--include-content", is_flag=True,
              help="otlp: also record prompts, model texts, tool arguments and results (gen_ai.input.messages, "
                   "gen_ai.output.messages, gen_ai.tool.call.arguments/result). Off by default: they can hold "
                   "workspace data.")
def export_command(run_dir: Path, fmt: str, out: Path | None, otlp_endpoint: str | None,
                   otlp_headers: tuple[str, ...], otlp_timeout: float, include_content: bool) -> None:
    """Export a stored run: JUnit XML for CI, OpenTelemetry GenAI spans for trace viewers (Jaeger, Phoenix,
    Langfuse), or ATIF trajectories. Only the measured phase is exported.

    A case whose case.json is missing or corrupt is skipped with a note on stderr (in JUnit it is an
    <error>); unreadable event lines are left out. See docs/export.md.
    """
    from ..export import export_otlp, load_cases, write_atif, write_junit
    from .runs_cmd import reseal_after
    from ..export.otlp import shown_url
    from ..store import RunFolder, check_run_dir

    if fmt != "otlp" and (otlp_endpoint or otlp_headers or include_content):
        raise UserError("--otlp-endpoint, --otlp-header and --include-content apply to --format otlp only")
    if fmt == "otlp" and out is not None:
        raise UserError("--out does not apply to --format otlp (spans are sent to --otlp-endpoint)")
    run = RunFolder(check_run_dir(run_dir))
    cases = load_cases(run)

    def note(line: str) -> None:
        click.echo(safe_text(line), err=True)

    if fmt == "junit":
        if out is not None and out.is_dir():
            out = out / "junit.xml"
        try:
            target, summary = write_junit(run, cases, out)
        except OSError as exc:
            raise UserError(_cannot_write(exc, out or run.reports)) from None
        reseal_after(run, [target], "exports")
        for case in cases:
            if case.result is None:
                note(f"{case.name}: {case.problem} (an <error> in the XML)")
        c = summary.counts
        click.echo(f"junit: {summary.tests} test case(s) in {summary.suites} suite(s): {c['passed']} passed, "
                   f"{c['failure']} failed, {c['error']} errors, {c['skipped']} skipped -> {safe_name(target)}")
    elif fmt == "atif":
        try:
            folder, written = write_atif(run, cases, out, note=note)
        except OSError as exc:
            raise UserError(_cannot_write(exc, out or run.path / "exports" / "atif")) from None
        reseal_after(run, [folder / f"{c.name}.json" for c in cases if (folder / f"{c.name}.json").is_file()],
                     "exports")
        click.echo(f"atif: {written} trajectory file(s) -> {safe_name(folder)}")
    else:
        endpoint = _endpoint(otlp_endpoint)
        summary = export_otlp(run.run_id, cases, endpoint=endpoint, headers=_headers(otlp_headers) or None,
                              timeout_s=otlp_timeout, include_content=include_content, note=note)
        click.echo(f"otlp: {summary.spans} span(s) of {summary.cases} case(s) ({summary.chat_spans} chat, "
                   f"{summary.tool_spans} execute_tool) sent to {safe_text(shown_url(endpoint))}")


def _cannot_write(exc: OSError, where: Path) -> str:
    target = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, (str, bytes)) else where
    return f"cannot write {safe_name(target)} ({exc.strerror or exc}); pass --out with a place you can write to"
