"""JUnit XML: one ``<testsuite>`` per agent × model × format row, one ``<testcase>`` per case.

The document is built with :mod:`xml.etree.ElementTree`, which escapes markup; what it does not do is
drop characters XML 1.0 cannot hold at all (C0 controls, lone surrogates, U+FFFE/U+FFFF), so every
text and attribute value from disk goes through :func:`xml_text` first (control characters become
visible ``\\xNN`` escapes).

Status mapping: PASS passes; PASS_WITH_POLICY_VIOLATION, FAIL, NO_TOOL_CALL, TIMEOUT, SHELL_ERROR are a
``<failure type="STATUS">``; HARNESS_ERROR (and a case whose case.json cannot be read) is an
``<error>``; TOOL_UNSUPPORTED and SKIPPED are ``<skipped>``.

The document is valid against the Jenkins xUnit plugin's ``junit-10.xsd`` (the schema pytest checks its
own output against): ``<testsuites>`` carries only ``name``, ``tests``, ``failures``, ``errors`` and
``time``, and a ``<testcase>`` holds no ``<properties>``. What is known about one case goes into its
``<system-out>`` as ``key: value`` lines (each value on one line); what is the same for a whole suite
goes into the suite's ``<properties>``, each name prefixed with the suite's name
(``gripprobe.reference.oracle-perfect.tool.agent_version``) so that no two suites share a property name:
readers that merge every suite's properties into one table (xunitparser) would otherwise refuse the file.
"""

from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..models.results import CaseResult
from ..store import RunFolder
from ..textsafe import safe_name, safe_text
from .common import ExportCase, case_label, when, write_file

__all__ = ["FAILURE_STATUSES", "JUnitSummary", "render_junit", "write_junit", "xml_text"]

FAILURE_STATUSES = ("PASS_WITH_POLICY_VIOLATION", "FAIL", "NO_TOOL_CALL", "TIMEOUT", "SHELL_ERROR")
ERROR_STATUSES = ("HARNESS_ERROR",)
SKIPPED_STATUSES = ("TOOL_UNSUPPORTED", "SKIPPED")
#: Longest failure body / property value written (characters).
BODY_LIMIT = 16 * 1024
_NOT_XML = re.compile("[\ufffe\uffff]")


def xml_text(value: Any, limit: int | None = None) -> str:
    """Text XML 1.0 can hold: control characters and lone surrogates escaped (``safe_text``), the two
    non-characters U+FFFE/U+FFFF too; newlines and tabs kept. Cut to ``limit`` characters."""
    s = _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", safe_text(value))
    if limit is not None and len(s) > limit:
        s = s[:limit] + f"… ({len(s) - limit} more characters)"
    return s


def _one_line(value: Any) -> str:
    """A value for a ``key: value`` line: every control character escaped, newlines and tabs too."""
    return xml_text(safe_name(value if isinstance(value, str) else str(value)), BODY_LIMIT)


def _part(value: str) -> str:
    """One component of a dotted classname: its own dots become ``_`` (a viewer splits on dots)."""
    return value.replace(".", "_")


def _seconds(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return "0.000"
    return f"{float(value):.3f}"


@dataclass
class JUnitSummary:
    """What the document holds, for the command's one-line report."""

    tests: int = 0
    counts: Counter = field(default_factory=Counter)  # passed / failures / errors / skipped
    suites: int = 0


def _outcome(result: CaseResult | None) -> str:
    if result is None:
        return "error"
    status = result.verdict.status
    if status == "PASS":
        return "passed"
    if status in FAILURE_STATUSES:
        return "failure"
    if status in SKIPPED_STATUSES:
        return "skipped"
    return "error"  # HARNESS_ERROR and anything unknown


def _message(result: CaseResult) -> str:
    v = result.verdict
    text = v.evaluator_reason_text or v.evaluator_reason_code
    if v.status in SKIPPED_STATUSES and result.skip_reason:
        text = f"{result.skip_reason}: {text}" if text else result.skip_reason
    elif v.failure_reason:
        text = f"{v.failure_reason}: {text}" if text else v.failure_reason
    return xml_text(text, 1024)


def _body(result: CaseResult) -> str:
    v, t = result.verdict, result.telemetry
    lines = [f"status: {v.status} ({v.evaluator_reason_code})", f"reason: {v.evaluator_reason_text}"]
    if v.failure_reason:
        lines.append(f"failure_reason: {v.failure_reason}")
    lines.append(f"tool_event_verdict: {v.tool_event_verdict} ({v.tool_event_verdict_reason}); "
                 f"telemetry tier {t.telemetry_source_tier}, {t.telemetry_tool_call_count} tool call(s), "
                 f"{t.telemetry_tool_result_count} result(s)")
    if result.harness_error:
        lines.append(f"harness_error: {result.harness_error}")
    if result.skip_reason:
        lines.append(f"skip_reason: {result.skip_reason}")
    for p in result.phases:
        if p.phase == "measured" and p.process.status != "ok":
            lines.append(f"measured process: {p.process.status} (exit code {p.process.exit_code})"
                         + (f": {p.process.error}" if p.process.error else ""))
    for val in result.validators:
        if not val.passed:
            lines.append(f"validator {val.kind} failed: {val.message}".rstrip(": ")
                         + (f"\n  expected: {val.expected!r}\n  observed: {val.observed!r}"
                            if val.expected or val.observed else ""))
    return xml_text("\n".join(lines), BODY_LIMIT)


def _case_properties(case: ExportCase) -> list[tuple[str, Any]]:
    r = case.result
    props: list[tuple[str, Any]] = [("case_id", case.name)]
    if r is None:
        return props
    v, t = r.verdict, r.telemetry
    props += [("status", v.status), ("evaluator_reason_code", v.evaluator_reason_code),
              ("failure_reason", v.failure_reason), ("trajectory", v.trajectory), ("invoked", v.invoked),
              ("tool_event_verdict", v.tool_event_verdict), ("tool_event_verdict_reason", v.tool_event_verdict_reason),
              ("strict_pass_score", v.strict_pass_score), ("overall_score", v.overall_score),
              ("artifact_match", v.artifact_match), ("protocol_match", v.protocol_match),
              ("verdict_source", v.verdict_source),
              ("telemetry_source_tier", t.telemetry_source_tier), ("event_capture_status", t.event_capture_status),
              ("telemetry_proxy_status", t.telemetry_proxy_status),
              ("telemetry_tool_call_count", t.telemetry_tool_call_count),
              ("telemetry_tool_result_count", t.telemetry_tool_result_count),
              ("tiers_present", ",".join(t.tiers_present)), ("sandbox", r.sandbox),
              ("agent_version", r.agent_version), ("model_hash", r.model_hash), ("backend", r.key.backend),
              ("report", f"reports/cases/{case.name}.html")]
    props.append(("trial", r.key.trial))
    return props


def _present(props: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in props if v is not None and v != ""]


def _properties(suite: ET.Element, prefix: str, props: list[tuple[str, Any]]) -> None:
    """The suite's ``<properties>``, each name as ``<prefix>.<key>`` (unique in the whole document)."""
    props = _present(props)
    if not props:
        return
    el = ET.SubElement(suite, "properties")
    for name, value in props:
        ET.SubElement(el, "property", name=f"{prefix}.{name}", value=xml_text(value, BODY_LIMIT))


def _system_out(tc: ET.Element, props: list[tuple[str, Any]]) -> None:
    """The case's facts as ``key: value`` lines in its ``<system-out>`` (junit-10.xsd has no
    ``<properties>`` inside a ``<testcase>``)."""
    lines = [f"{name}: {_one_line(value)}" for name, value in _present(props)]
    if lines:
        ET.SubElement(tc, "system-out").text = "\n".join(lines) + "\n"


def _same(values: list[Any]) -> Any:
    """The one value every readable case of a suite has, else None (then it is only per case)."""
    distinct = set(values)
    return values[0] if len(distinct) == 1 else None


def _testcase(suite: ET.Element, case: ExportCase, classname: str) -> tuple[str, float]:
    r = case.result
    label = case_label(case)
    name = label["test"]
    if r is not None and r.key.trial > 1:  # as case ids: trial 1 keeps the plain name
        name = f"{name}[trial {r.key.trial}]"
    duration = _seconds(r.duration_s if r is not None else None)
    tc = ET.SubElement(suite, "testcase", classname=xml_text(classname), name=xml_text(name), time=duration)
    outcome = _outcome(r)
    if r is None:
        el = ET.SubElement(tc, "error", type="UNREADABLE", message=xml_text(case.problem or "unreadable"))
        el.text = xml_text(f"{case.name}: {case.problem}")
    elif outcome == "failure":
        el = ET.SubElement(tc, "failure", type=r.verdict.status, message=_message(r))
        el.text = _body(r)
    elif outcome == "error":
        el = ET.SubElement(tc, "error", type=xml_text(r.verdict.status), message=_message(r))
        el.text = _body(r)
    elif outcome == "skipped":
        ET.SubElement(tc, "skipped", message=_message(r))
    _system_out(tc, _case_properties(case))  # after the outcome: a reader may start a new case at <failure>
    return outcome, float(duration)


def render_junit(run: RunFolder, cases: list[ExportCase]) -> tuple[bytes, JUnitSummary]:
    """The JUnit XML document of a run's cases (UTF-8 bytes) and what it counts."""
    manifest = run.read_manifest()
    rows: dict[tuple[str, str, str, str], list[ExportCase]] = defaultdict(list)
    for case in cases:
        lab = case_label(case)
        rows[(lab["agent"], lab["model"], lab["format"], lab["backend"])].append(case)
    backends: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for agent, model, fmt, backend in rows:
        backends[(agent, model, fmt)].add(backend)

    summary = JUnitSummary()
    total_time = 0.0
    used: set[str] = set()
    root = ET.Element("testsuites", name=xml_text(f"gripprobe {run.run_id}"))
    for (agent, model, fmt, backend), row in sorted(rows.items()):
        model_part = _part(model) if len(backends[(agent, model, fmt)]) == 1 else f"{_part(model)}@{_part(backend)}"
        classname = xml_text(f"gripprobe.{_part(agent)}.{model_part}.{_part(fmt)}")
        if classname in used:  # e.g. models `a.b` and `a_b`: suite and property names stay unique
            classname = next(f"{classname}~{n}" for n in range(2, len(rows) + 2) if f"{classname}~{n}" not in used)
        used.add(classname)
        suite = ET.SubElement(root, "testsuite", name=classname)
        starts = [s for c in row if c.result is not None and (s := when(c.result.started_at)) is not None]
        if starts:
            suite.set("timestamp", datetime.fromtimestamp(min(starts), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
        readable = [c.result for c in row if c.result is not None]
        _properties(suite, classname, [
            ("run_id", run.run_id), ("agent", agent), ("model", model), ("backend", backend), ("format", fmt),
            ("agent_version", _same([r.agent_version for r in readable])),
            ("model_hash", _same([r.model_hash for r in readable])),
            ("gripprobe_version", manifest.get("gripprobe_version")), ("suite", manifest.get("suite"))])
        counts: Counter = Counter()
        total = 0.0
        for case in sorted(row, key=lambda c: (case_label(c)["test"], c.name)):
            outcome, seconds = _testcase(suite, case, classname)
            counts[outcome] += 1
            total += seconds
        suite.set("tests", str(len(row)))
        for attr, key in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
            suite.set(attr, str(counts[key]))
        suite.set("time", f"{total:.3f}")
        total_time += total
        summary.counts.update(counts)
        summary.tests += len(row)
        summary.suites += 1
    # junit-10.xsd allows no `skipped` here (the suites carry it)
    root.set("tests", str(summary.tests))
    for attr, key in (("failures", "failure"), ("errors", "error")):
        root.set(attr, str(summary.counts[key]))
    root.set("time", f"{total_time:.3f}")
    tree = ET.ElementTree(root)
    ET.indent(tree)
    buf = io.BytesIO()
    tree.write(buf, encoding="utf-8", xml_declaration=True)
    buf.write(b"\n")
    return buf.getvalue(), summary


def write_junit(run: RunFolder, cases: list[ExportCase], out: Path | None = None) -> tuple[Path, JUnitSummary]:
    """Render and write the document: to ``out``, or ``<RUN_DIR>/reports/junit.xml`` by default."""
    data, summary = render_junit(run, cases)
    if out is None:
        target = run.reports / "junit.xml"
        write_file(target, data, inside=run.path)
    else:
        target = out
        write_file(target, data)
    return target, summary
