"""safe_text / safe_name: nothing they return can steer a terminal or fail an encoder."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from gripprobe_core.textsafe import safe_name, safe_text

# every code point, lone surrogates included (st.text() alone leaves them out)
ANY_CHAR = st.characters(codec=None, categories=None)
HOSTILE = st.sampled_from(["\x1b[31m", "\x1b]0;pwned\x07", "\x1b]8;;http://x\x1b\\", "\x9b2J", "\x7f", "\x00",
                           "\r", "\x08", "\udcff", "\ud800", "\u0085", "\n", "\t"])
TEXTS = st.lists(st.one_of(st.text(alphabet=ANY_CHAR, max_size=20), HOSTILE), max_size=8).map("".join)


def _control(c: str) -> bool:
    o = ord(c)
    return (o < 0x20 and c not in "\n\t") or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xDFFF


@given(TEXTS)
def test_safe_text_never_returns_a_control_character(s):
    out = safe_text(s)
    assert not any(_control(c) for c in out), repr(out)
    out.encode("utf-8")  # never raises: no lone surrogate left
    assert "\x1b" not in out and "\x9b" not in out


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cc"]), max_size=50))
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
