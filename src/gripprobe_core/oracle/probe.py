"""The words of the tool-call probe (``gripprobe doctor --model``): what backends/toolprobe.py sends to any
backend, and what the embedded oracle recognizes and answers as one ``read`` of :data:`PROBE_PATH`
(docs/oracle.md), so each profile answers the probe in its own character. Here, below both, so that the
oracle need not import the backends."""

from __future__ import annotations

__all__ = ["PROBE_PATH", "PROBE_PROMPT", "PROBE_TOOL_NAME"]

PROBE_TOOL_NAME = "read_file"
PROBE_PATH = "gripprobe-probe.txt"
PROBE_PROMPT = (f"Use the {PROBE_TOOL_NAME} tool to read the file {PROBE_PATH}. "
                "Call the tool now; do not answer in text.")
