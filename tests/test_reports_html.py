"""HTML reports without a browser: written by every run, self-contained, inert, honest about missing data."""

from __future__ import annotations

import json
import re
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser.reportdata import HOSTILE, LAZY, PERFECT, aggregate_data, derive_case, real_run
from gripprobe_core.models import CaseResult
from gripprobe_core.reports import COLUMNS, SCORE_COLUMNS, render_aggregate_html, render_run_html, write_run_reports
from gripprobe_core.store import RunFolder

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> RunFolder:
    return real_run(tmp_path_factory.mktemp("results"))


@pytest.fixture(scope="module")
def derived(run, tmp_path_factory) -> RunFolder:
    """A copy of the real run plus a case with hostile agent output, re-rendered like a rebuild would."""
    copy = RunFolder(tmp_path_factory.mktemp("derived") / run.run_id)
    shutil.copytree(run.path, copy.path)
    derive_case(copy, PERFECT, "evil__case", agent="evil", text=HOSTILE)
    write_run_reports(copy)
    return copy


class _Tables(HTMLParser):
    """Collects the text of every table row (th/td cells) and every tag's attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.tags: list[tuple[str, dict]] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(path: Path) -> _Tables:
    p = _Tables()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _pages(run: RunFolder) -> list[Path]:
    return [run.reports / "summary.html", *sorted((run.reports / "cases").glob("*.html"))]


def test_every_run_writes_summary_and_case_pages(run):
    case_dirs = sorted(d.name for d in run.cases.iterdir())
    assert (run.reports / "summary.md").is_file() and (run.reports / "summary.html").is_file()
    assert sorted(p.stem for p in (run.reports / "cases").glob("*.html")) == case_dirs
    links = [a["href"] for tag, a in _parse(run.reports / "summary.html").tags if tag == "a" and "href" in a]
    assert sorted(links) == sorted(f"cases/{c}.html" for c in case_dirs)
    for link in links:
        assert (run.reports / link).is_file()


def test_pages_are_self_contained_and_offline(derived):
    for page in _pages(derived):
        html = page.read_text(encoding="utf-8")
        parsed = _parse(page)
        for tag, attrs in parsed.tags:
            for name in ("src", "href", "action", "data", "poster", "srcset"):
                value = (attrs.get(name) or "").strip().lower()
                assert not re.match(r"^(https?:)?//", value), (page.name, tag, name, value)
            assert not (tag == "script" and "src" in attrs), page.name
            assert tag not in ("link", "iframe", "object", "embed", "img", "base"), (page.name, tag)
        assert "default-src 'none'" in html  # the CSP forbids fetching anything
        assert "@import" not in html and "url(" not in html


def test_hostile_agent_output_is_escaped(derived):
    page = derived.reports / "cases" / "evil__case.html"
    html = page.read_text(encoding="utf-8")
    assert HOSTILE not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in html  # prompt, stdout, observed
    assert "\\u003cscript\\u003ewindow.__pwned=1" in html  # the tool call arguments in the events JSON
    scripts = [a for tag, a in _parse(page).tags if tag == "script"]
    assert scripts == [{"type": "application/json", "id": "events-data"}, {}]
    assert not any(tag == "b" for tag, _ in _parse(page).tags)
    summary = (derived.reports / "summary.html").read_text(encoding="utf-8")
    assert "<b>" not in summary


def test_events_json_is_nested_under_the_spawning_response(run):
    html = (run.reports / "cases" / f"{PERFECT}.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="events-data">(.*?)</script>', html, re.S)[1])
    assert set(data) == {"warmup", "measured"}
    events = data["measured"]
    raw = [json.loads(line) for line in (run.case(PERFECT) / "artifacts/events.measured.jsonl").read_text().splitlines()]
    assert len(events) == len(raw)
    current = None
    for e in events:
        if e["depth"] == 0:
            current = e["id"]
        else:
            assert e["parent"] == current, e
    assert any(e["depth"] == 1 and e["type"] == "tool_call_start" for e in events)


def test_validator_links_to_timeline_iff_source_pointer(run):
    seen_link = seen_none = False
    for d in sorted(run.cases.iterdir()):
        r = CaseResult.model_validate_json((d / "case.json").read_bytes())
        rows = [a for tag, a in _parse(run.reports / "cases" / f"{d.name}.html").tags]
        links = [a["href"] for a in rows if a.get("class") == "tl-link"]
        want = [f"#event-{v.source.phase}-{v.source.sequence}" for v in r.validators if v.source]
        assert links == want, d.name
        seen_link |= bool(want)
        seen_none |= any(v.source is None for v in r.validators)
    assert seen_link and seen_none, "the default suite should have validators with and without a source"


def _md_table(md: str, heading: str) -> list[list[str]]:
    section = md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            for line in section.splitlines() if line.startswith("| ")]


def test_summary_md_and_html_have_the_same_tables(derived):
    page = _parse(derived.reports / "summary.html")
    md = (derived.reports / "summary.md").read_text(encoding="utf-8")
    html_rows, md_rows = page.tables["cases"], _md_table(md, "Cases")
    assert html_rows[0] == md_rows[0] == list(COLUMNS)
    assert html_rows[1:] == md_rows[1:]
    assert len(md_rows) - 1 == len(list(derived.cases.iterdir()))
    scores_html, scores_md = page.tables["scores"], _md_table(md, "Scores")
    assert scores_html[0] == scores_md[0] == list(SCORE_COLUMNS)
    # the same rows, cell for cell, except usage and flaky, which the page lays out as lines and marks
    skip = {SCORE_COLUMNS.index("usage"), SCORE_COLUMNS.index("flaky")}
    assert [[c for i, c in enumerate(r) if i not in skip] for r in scores_html[1:]] == \
        [[c for i, c in enumerate(r) if i not in skip] for r in scores_md[1:]]


def test_missing_and_corrupt_artifacts_never_crash(run, tmp_path):
    broken = RunFolder(tmp_path / "runs" / "20260101T000000Z")
    shutil.copytree(run.path, broken.path)
    shutil.rmtree(broken.reports)
    gone = broken.case(PERFECT)
    for rel in ("artifacts/events.measured.jsonl", "measured.stdout", "prompt.txt"):
        (gone / rel).unlink()
    shutil.rmtree(gone / "workspace")
    (gone / "artifacts" / "events.warmup.jsonl").write_text("{not json\n[1, 2]\n")
    (gone / "artifacts" / "proxy.measured.http.jsonl").write_text("garbage\n")
    (broken.case(LAZY) / "case.json").write_text("{\"half\": ")
    (broken.cases / "unfinished__case" / "artifacts").mkdir(parents=True)
    readable = len(list(broken.cases.iterdir())) - 2
    broken.manifest.write_text("not json")

    write_run_reports(broken)
    page = (broken.reports / "cases" / f"{PERFECT}.html").read_text()
    assert "events.measured.jsonl: missing" in page and "events.warmup.jsonl: unreadable" in page
    assert "measured.stdout: missing" in page and "prompt.txt: missing" in page
    assert "workspace/: missing" in page and "proxy.measured.http.jsonl: unreadable" in page
    assert "case.json unreadable" in (broken.reports / "cases" / f"{LAZY}.html").read_text()
    assert "case.json missing" in (broken.reports / "cases" / "unfinished__case.html").read_text()
    md = (broken.reports / "summary.md").read_text()
    assert "- unfinished__case" in md and f"- {LAZY}" in md
    summary = (broken.reports / "summary.html").read_text()
    assert 'href="cases/unfinished__case.html"' in summary
    assert len(_parse(broken.reports / "summary.html").tables["cases"]) == 1 + readable


def test_render_run_html_returns_every_page(run, tmp_path):
    copy = RunFolder(tmp_path / run.run_id)
    shutil.copytree(run.path, copy.path)
    shutil.rmtree(copy.reports)
    written = render_run_html(copy)
    assert written[0] == copy.reports / "summary.html"
    assert sorted(written[1:]) == sorted(copy.reports / "cases" / f"{d.name}.html" for d in copy.cases.iterdir())
    assert all(p.is_file() for p in written)


def test_aggregate_page_groups_escapes_and_keeps_policy_violations_apart():
    html = render_aggregate_html(aggregate_data())
    assert "GripProbe aggregate &lt;test&gt;" in html and "<test>" not in html
    table = _Tables()
    table.feed(html)
    rows = table.tables["groups"]
    assert rows[0][:11] == ["agent", "model", "format", "hardware", "coverage", "n", "statuses", "strict", "overall",
                            "pass@k · pass^k", "usage"]
    assert rows[0][11:] == ["save_file", "shell_pwd"]
    assert len(rows) == 3
    assert rows[1][7] == "0.750 [0.30, 0.95]"
    assert rows[1][9] == "pass@1 0.75 · pass@3 1.00 pass^3 0.25 1 flaky"  # k = 1 and the largest k
    assert rows[1][10] == "calls 8 tokens 12.0k in / 800 out cost 0.0123 USD ttft 140 ms out 42 tok/s agent 3.5 s/case"
    assert "flaky" in rows[1][12] and "flaky" not in rows[1][11]
    assert rows[2][4] == "1/2 tests" and rows[2][10] == "—"
    assert "PASS+PV 4" in rows[2][6] and rows[2][3] == "(unknown)" and "not attempted" in rows[2][12]
    assert 'class="badge st-PASS_WITH_POLICY_VIOLATION"' in html and 'class="badge st-PASS"' in html
    assert {a.get("id") for tag, a in table.tags if tag == "select"} == {
        "filter-agent", "filter-model", "filter-format", "filter-hardware"}


def test_aggregate_page_scales_linearly():
    """Four times the rows cost about four times the CPU, not sixteen: compared in this process, on CPU time
    (what another job on the machine does not change), best of three, so the test holds on a loaded machine."""
    data = aggregate_data()
    base = data["rows"][0]
    tests = [f"test_{i}" for i in range(30)]

    def cpu(rows: int) -> float:
        page = dict(data, tests=tests, rows=[dict(base, agent=f"agent{i}", cells={t: base["cells"]["save_file"]
                                                                               for t in tests}) for i in range(rows)])
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            html = render_aggregate_html(page)
            best = min(best, time.process_time() - t0)
        assert html.count("<tr data-f-agent=") == rows
        return best

    small, large = cpu(75), cpu(300)
    assert large / max(small, 1e-3) < 9, (small, large)  # linear: ~4; quadratic: ~16


def test_line_separators_inside_event_text_do_not_break_the_timeline(run, tmp_path):
    """Events are written as JSON lines with ensure_ascii=False: a U+2028 or U+0085 in agent text
    stays inside its line, and the case page must not take it for a line end."""
    copy = RunFolder(tmp_path / run.run_id)
    shutil.copytree(run.path, copy.path)
    events_path = copy.case(PERFECT) / "artifacts/events.measured.jsonl"
    events = [json.loads(line) for line in events_path.read_bytes().splitlines()]
    events[0].setdefault("payload", {})["text"] = "one\u2028two\x85three\u2029four"
    events_path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    write_run_reports(copy)
    html = (copy.reports / "cases" / f"{PERFECT}.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="events-data">(.*?)</script>', html, re.S)[1])
    assert len(data["measured"]) == len(events)
    assert "unreadable line" not in html and "could not be parsed" not in html


# ------------------------------------------------------------------------------- expected vs observed

ONE_WORD = ("Hello, GripProbe!\nThis file was saved with the write tool.\n",
            "Hello, Gripprobe!\nThis file was saved with the write tool.")


def test_the_case_page_marks_where_expected_and_observed_differ(run, tmp_path):
    """One word and a trailing newline differ: the table wraps exactly those in <del> (expected) and <ins>
    (observed), the rest stays plain; the diff below marks its lines the same way; markup stays text."""
    copy = RunFolder(tmp_path / run.run_id)
    shutil.copytree(run.path, copy.path)
    derive_case(copy, PERFECT, "diff__case", agent="diff", values=ONE_WORD)
    derive_case(copy, PERFECT, "evil__diff", agent="evil", values=("a <b>safe</b> x", "a <b>gone</b> & x"))
    derive_case(copy, PERFECT, "same__case", agent="same", values=("same\n", "same\n"))
    write_run_reports(copy)
    html = (copy.reports / "cases" / "diff__case.html").read_text(encoding="utf-8")
    row = re.search(r'<tr class="validator" id="validator-1">(.*?)</tr>', html, re.S)[1]
    cells = re.findall(r"<td>(.*?)</td>", row, re.S)
    expected, observed = cells[4], cells[5]
    assert re.findall(r"<del[^>]*>(.*?)</del>", expected, re.S) == ["GripProbe", "\n"]
    assert re.findall(r"<ins[^>]*>(.*?)</ins>", observed, re.S) == ["Gripprobe"]
    assert '<del class="nl">\n</del>' in expected  # a changed newline is made visible (CSS ↵)
    assert re.sub(r"<[^>]+>", "", expected) == ONE_WORD[0]  # the same text, only marked
    assert "differs from line 1, column 12" in observed
    udiff = re.search(r'<pre class="udiff">(.*?)</pre>', html, re.S)[1]
    assert "<del>-Hello, GripProbe!\n</del>" in udiff and "<ins>+Hello, Gripprobe!\n</ins>" in udiff
    assert "first difference at line 1, column 12" in html
    # markup in the values is text, inside and outside the marks
    evil = (copy.reports / "cases" / "evil__diff.html").read_text(encoding="utf-8")
    row = re.search(r'<tr class="validator" id="validator-1">(.*?)</tr>', evil, re.S)[1]
    assert '<del class="ch">safe</del>' in row and '<ins class="ch">gone</ins>' in row
    assert "a &lt;b&gt;" in row and "&amp;" in row and "<b>" not in row
    # equal values: no marks
    same = (copy.reports / "cases" / "same__case.html").read_text(encoding="utf-8")
    table = same.split('<table class="validators">')[1].split("</table>")[0]
    assert "<del" not in table and "<ins" not in table and "differs from" not in table


def test_marked_segments_rebuild_both_texts_and_mark_only_what_differs():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gripprobe_core.reports.textdiff import first_difference, mark_differences

    text = st.text(alphabet=st.sampled_from(list("ab c,\n<&é")), max_size=60)

    @settings(max_examples=300, deadline=None)
    @given(text, text)
    def check(a, b):
        left, right = mark_differences(a, b)
        assert "".join(s.text for s in left) == a and "".join(s.text for s in right) == b
        assert all(s.text for s in left + right)
        unchanged_a = "".join(s.text for s in left if not s.changed)
        unchanged_b = "".join(s.text for s in right if not s.changed)
        assert unchanged_a == unchanged_b  # what is not marked is common to both, in order
        if a == b:
            assert not any(s.changed for s in left + right) and first_difference(a, b) is None
        else:
            assert any(s.changed for s in left + right)
            line, col = first_difference(a, b)
            assert line >= 1 and col >= 1

    check()
    left, right = mark_differences("sum: 76127\nok\n", "sum: 76128\nok\n")
    assert [s.text for s in left if s.changed] == ["76127"] and [s.text for s in right if s.changed] == ["76128"]


def test_marking_a_large_value_stays_fast():
    from gripprobe_core.reports.textdiff import mark_differences

    a = "".join(f"line {i} of the expected text\n" for i in range(2000))
    b = "x y z " * 10_000  # one huge changed line against many: marked whole, not token by token
    t0 = time.monotonic()
    left, right = mark_differences(a, b)
    assert time.monotonic() - t0 < 2
    assert "".join(s.text for s in left) == a and "".join(s.text for s in right) == b


def test_a_loaded_template_is_not_looked_at_on_disk_again():
    """The report templates are the package's own files: once loaded, a page is rendered from the loaded
    template without asking the file whether it changed (``auto_reload`` off: ~5 stat calls a case page)."""
    from gripprobe_core.reports.html import _env

    env = _env()
    first = env.get_template("case.html")
    first._uptodate = lambda: False  # as if its file had changed since
    assert env.get_template("case.html") is first
