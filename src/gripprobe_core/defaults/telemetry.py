"""In-tree default plugin: the generic tier C (text markers) and tier D (self-report) parsers.

Both answer ``parse_wrapper_events`` for every agent, as two separate implementations, so the runner
gets their events as two groups (the merge deduplicates across groups only):

* tier C applies ``ctx.marker_patterns`` — the :class:`~gripprobe_core.phase.MarkerPattern` list
  the runner collected from every plugin's ``tier_c_patterns`` hook — to the phase's stdout/stderr
  (:func:`gripprobe_core.telemetry.tier_c.parse_markers`); it returns None when there are no patterns;
* tier D reads ``outputs.final_text`` — the agent's final answer the runner got from the
  ``final_output_text`` hook — for claims such as "I created hello.txt"
  (:func:`gripprobe_core.telemetry.tier_d.parse_claims`); it returns None when there is no text.
  Its events reference ``<phase>.final.txt:<line>``.
"""

from __future__ import annotations

from gripprobe_core import hookimpl
from gripprobe_core.phase import PhaseContext, PhaseCapture
from gripprobe_core.models.events import Event
from gripprobe_core.telemetry.tier_c import parse_markers
from gripprobe_core.telemetry.tier_d import parse_claims

FINAL_TEXT_ARTIFACT = "{phase}.final.txt"
"""Name the tier D events use in ``raw_artifact_ref`` for the final answer text."""


@hookimpl(specname="parse_wrapper_events")
def parse_marker_events(ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    """Tier C: the agent's text markers (None when no plugin declared any for this agent)."""
    patterns = list(getattr(ctx, "marker_patterns", None) or [])
    if not patterns:
        return None
    return parse_markers(patterns, outputs.stdout_path, outputs.stderr_path, ctx.phase)


@hookimpl(specname="parse_wrapper_events")
def parse_self_report_events(ctx: PhaseContext, outputs: PhaseCapture) -> list[Event] | None:
    """Tier D: claims in the agent's final answer (None when there is no final text)."""
    text = getattr(outputs, "final_text", None)
    if not isinstance(text, str) or not text.strip():
        return None
    return parse_claims(text, ctx.phase, FINAL_TEXT_ARTIFACT.format(phase=ctx.phase))
