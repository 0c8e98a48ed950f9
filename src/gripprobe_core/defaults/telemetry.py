"""Default plugin ``telemetry``: the generic tier C (text markers) and tier D (self-report) parsers.

Both answer ``parse_wrapper_events`` for every agent, as two separate implementations, so the runner
gets their events as two groups (the merge deduplicates across groups only):

* tier C applies the agent driver's :meth:`~gripprobe_core.drivers.AgentDriver.markers` to the phase's
  stdout/stderr (:func:`gripprobe_core.telemetry.tier_c.parse_markers`), tool names normalized with the
  driver's table; it returns None when the driver declares no markers;
* tier D reads the agent's final answer (``transcript.final_text``, from the driver's parse) for claims
  such as "I created hello.txt" (:func:`gripprobe_core.telemetry.tier_d.parse_claims`); it returns None
  when there is no text. Its events reference ``<phase>.final.txt:<line>``.
"""

from __future__ import annotations

from .. import hookimpl
from ..drivers import AgentDriver
from ..models.events import Event
from ..phase import PhaseCapture, PhaseContext, Transcript
from ..telemetry.tier_c import parse_markers
from ..telemetry.tier_d import parse_claims

FINAL_TEXT_ARTIFACT = "{phase}.final.txt"
"""Name the tier D events use in ``raw_artifact_ref`` for the final answer text."""


@hookimpl(specname="parse_wrapper_events")
def parse_marker_events(driver: AgentDriver, ctx: PhaseContext, capture: PhaseCapture) -> list[Event] | None:
    """Tier C: the agent's text markers (None when its driver declares none)."""
    patterns = list(driver.markers(ctx.agent) or ())
    if not patterns:
        return None
    return parse_markers(patterns, capture.stdout_path, capture.stderr_path, ctx.phase, driver.tool_names)


@hookimpl(specname="parse_wrapper_events")
def parse_self_report_events(ctx: PhaseContext, transcript: Transcript) -> list[Event] | None:
    """Tier D: claims in the agent's final answer (None when there is no final text)."""
    text = transcript.final_text
    if not isinstance(text, str) or not text.strip():
        return None
    return parse_claims(text, ctx.phase, FINAL_TEXT_ARTIFACT.format(phase=ctx.phase))
