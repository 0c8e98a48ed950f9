"""A call the model wrote as text is the diagnosis: the case page says so at the top and on the response
that carried it (issue 22), from a real run of the oracle's text-tools profile."""

from __future__ import annotations

import pytest

from conftest import read_json, run_reference

pytestmark = pytest.mark.e2e


def test_the_case_page_names_the_calls_written_as_text(tmp_path):
    res = run_reference(tmp_path / "t", models=("oracle-text-tools", "oracle-perfect"), tests=("save_file",))
    pages = {p.stem: p.read_text() for p in (res.run_dir.path / "reports" / "cases").glob("*.html")}
    text_page = next(v for k, v in pages.items() if "text-tools" in k)
    case = read_json(next(res.run_dir.path.glob("cases/*text-tools*/case.json")))
    n = case["telemetry"]["telemetry_proxy_tool_call_nonstructured_count"]
    assert n >= 1
    head = text_page[:text_page.index('id="timeline-')]  # before the timeline: the verdict's cards
    assert f'id="text-calls" class="mark-unsandboxed">the model wrote {n} call(s) as text: write' in head
    assert 'class="note text-calls">the model wrote 1 call(s) as text: write</div>' in text_page
    perfect = next(v for k, v in pages.items() if "perfect" in k)
    assert 'id="text-calls"' not in perfect and "text-calls" not in perfect
