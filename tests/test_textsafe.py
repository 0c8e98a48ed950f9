"""safe_text / safe_name: nothing they return can steer a terminal or fail an encoder."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from gripprobe_core.textsafe import BIDI_CONTROLS, inert, safe_cell, safe_name, safe_text

# every code point, lone surrogates included (st.text() alone leaves them out)
ANY_CHAR = st.characters(codec=None, categories=None)
HOSTILE = st.sampled_from(["\x1b[31m", "\x1b]0;pwned\x07", "\x1b]8;;http://x\x1b\\", "\x9b2J", "\x7f", "\x00",
                           "\r", "\x08", "\udcff", "\ud800", "\u0085", "\n", "\t", "\x0b", "\u202e", "\u2066",
                           "\u200f", "\u2028"])
TEXTS = st.lists(st.one_of(st.text(alphabet=ANY_CHAR, max_size=20), HOSTILE), max_size=8).map("".join)


def _control(c: str) -> bool:
    o = ord(c)
    return ((o < 0x20 and c not in "\n\t") or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xDFFF or c in BIDI_CONTROLS
            or c in "\u2028\u2029")


@given(TEXTS)
def test_safe_text_never_returns_a_control_character(s):
    out = safe_text(s)
    assert not any(_control(c) for c in out), repr(out)
    out.encode("utf-8")  # never raises: no lone surrogate left
    assert "\x1b" not in out and "\x9b" not in out


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cc"],
                                     exclude_characters=BIDI_CONTROLS + "\u2028\u2029"), max_size=50))
def test_safe_text_leaves_ordinary_text_alone(s):
    assert safe_text(s) == s
    assert safe_text(s + "\n\tx") == s + "\n\tx"


@given(TEXTS)
def test_safe_text_is_idempotent(s):
    once = safe_text(s)
    assert safe_text(once) == once


@given(st.one_of(TEXTS, st.binary(max_size=40)))
def test_safe_name_is_one_line_without_control_characters(name):
    out = safe_name(name)
    assert not any(_control(c) or c in "\n\t" for c in out), repr(out)
    out.encode("utf-8")


@given(st.binary(max_size=40))
def test_safe_name_of_bytes_shows_undecodable_bytes_escaped(raw):
    out = safe_name(raw)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert "\\x" in out  # an undecodable byte is shown as \xNN, never dropped or replaced
    else:
        assert out == safe_name(raw.decode("utf-8"))


def test_examples():
    assert safe_text("ok \x1b[31mred\x1b[0m") == "ok \\x1b[31mred\\x1b[0m"
    assert safe_text("\x9b2J") == "\\x9b2J"
    assert safe_text(123) == "123"
    assert safe_name(b"bad\xffname") == "bad\\xffname"
    assert safe_name(os.fsdecode(b"bad\xffname")) == "bad\\xffname"
    assert safe_name("two\nlines\t") == "two\\x0alines\\x09"
    assert safe_name("caf\u00e9.txt") == "caf\u00e9.txt"


def test_bidi_controls_and_separators_are_escaped():
    assert safe_text("abc\u202edef\u2066x\u2028") == "abc\\u202edef\\u2066x\\u2028"
    assert safe_name("a\u200bb\ufeff") == "a\\u200bb\\ufeff"  # an invisible difference between two names
    assert safe_text("a\u200db") == "a\u200db"  # a zero-width joiner in prose (emoji) stays
    assert safe_cell("a|b\nc\td\x1b") == "a|b c d\\x1b"
    assert inert({"k\x07": [float("nan"), float("inf"), 1.5, "\x9b", None, True]}) == \
        {"k\\x07": [None, None, 1.5, "\\x9b", None, True]}


# ----------------------------------------------------------------------------- every report's escaper

def _html(s: str) -> str:
    from gripprobe_core.reports.html import _env

    page = "<p title='{{ s }}'>{{ s }}{{ s|num }}</p><script type='application/json'>{{ d|tojson }}</script>"
    return _env().from_string(page).render(s=s, d={"k": s, s: [s]})


def _otlp(s: str) -> str:
    from gripprobe_core.export.otlp import _attrs, _content

    attrs = _attrs([("a", s), ("b", [s, s])])
    return "".join([attrs.get("a", ""), *attrs.get("b", []), _content(s), _content({"t": s, "l": [s]})])


def _escapers() -> dict:
    from gripprobe_core.export.junit import xml_text
    from gripprobe_core.jsonl import dumps
    from gripprobe_core.reports import aggregate, compare, summary_md

    return {
        "safe_text": safe_text, "safe_name": safe_name, "safe_cell": safe_cell,
        "inert": lambda s: "".join(str(x) for x in inert({s: [s]}).items()),
        "html (finalize, tojson)": _html, "summary.md": summary_md._cell, "aggregate.md": aggregate._md,
        "compare.md": compare._md, "junit": xml_text, "otlp": _otlp,
        "json files (jsonl.dumps)": lambda s: dumps({s: s}, ensure_ascii=False),
    }


ESCAPERS = _escapers()


@given(name=st.sampled_from(sorted(ESCAPERS)), s=TEXTS)
def test_text_through_each_report_escaper_never_yields_a_control_character(name, s):
    out = ESCAPERS[name](s)
    bad = [c for c in out if _control(c) and not (name.startswith("json") and 0xD800 <= ord(c) <= 0xDFFF)]
    assert not bad, (name, repr(out))
