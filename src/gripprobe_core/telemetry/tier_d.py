"""Tier D: what the agent *says* it did, from its final answer text (self-report, fallback only).

:func:`parse_claims` finds first-person past-tense claims of tool use and turns each into a
``tool_call_start`` event with ``source_tier: "D"``, ``source: "wrapper"`` and ``status: "unknown"``.
A claim can explain a verdict; it never confirms tool use (the summary ignores tier D for
"executed", see ``docs/evaluator.md``).

Claims recognized (English, German, Russian; the subject is "I"/"Ich habe"/"Я", or "and"/"und"/"и"
continuing a sentence; negated sentences such as "I could not create" or "hello.txt was not
created" do not match):

=============== ================================================================ ==================
claim           examples                                                         event name / kind
=============== ================================================================ ==================
file written    "I created hello.txt", "I've written `a/b.py`", "I saved the      write / write
                file notes.md", "hello.txt has been created", "Created `x.txt`",
                "Ich habe die Datei a.txt erstellt", "Я создал файл a.txt"
file edited     "I updated config.yaml", "I modified `src/x.py`",                 edit / write
                "Ich habe a.txt geändert", "Я изменил файл a.txt"
command run     "I ran `ls -la`", "I executed the command `make`",                shell / execute
                "Ich habe `ls` ausgeführt", "Я выполнил команду `ls`"
URL fetched     "I fetched https://…", "I downloaded … from https://…",           fetch / fetch
                "Ich habe https://… abgerufen", "Я загрузил https://…"
file read       "I read `notes.md`", "I looked at config.yaml"                    read / read
=============== ================================================================ ==================

A path must look like one (an extension or a slash, no spaces, not a URL); a command must be in
backticks. Each (name, arguments) claim is reported once, at most :data:`MAX_CLAIMS` per text. Never
raises.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from pydantic import ValidationError

from ..models.events import Event

__all__ = ["MAX_CLAIMS", "TEXT_LIMIT", "Claim", "find_claims", "parse_claims"]

TEXT_LIMIT = 256 * 1024
MAX_CLAIMS = 100
"""At most this many claims are reported per text."""

# Bounded repetitions and a start that cannot be inside another path keep every match attempt short
# (no quadratic backtracking on a long run of path characters).
_PATH = (r"(?:`(?P<{g}q1>[^`\n]{{1,200}})`|\"(?P<{g}q2>[^\"\n]{{1,200}})\"|'(?P<{g}q3>[^'\n]{{1,200}})'"
         r"|(?<![\w~.\-/])(?P<{g}bare>(?:[\w~.\-]{{1,80}}/){{0,10}}[\w~\-]{{1,80}}\.[A-Za-z0-9]{{1,8}}\b"
         r"|(?:[\w~.\-]{{1,80}}/){{1,10}}[\w~.\-]{{1,80}}(?![\w~.\-/])))")
_URL = r"<?(?P<url>https?://[^\s<>`'\"()\[\]]+)"
_CMD = r"`(?P<cmd>[^`\n]{1,500})`"
_I_EN = (r"(?:\bI(?:\s+have|'ve|\s+also|\s+just|\s+then|\s+successfully|\s+first)*"
         r"|\b(?:and|then)(?:\s+(?:also|then|finally))?)\s+")
_I_DE = r"(?:\b[Ii]ch\s+habe|\bund)\s+(?:(?:auch|erfolgreich|zuerst|dann|nun|jetzt)\s+)*"
_I_RU = r"(?<![\w])(?:[Яя]|и)\s+(?:(?:успешно|также|сначала|затем|уже)\s+)*"
_ART_EN = (r"(?:(?:a|an|the|new|your|this)\s+)*(?:(?:file|script|document|page|config(?:uration)?)\s+)?"
           r"(?:(?:called|named)\s+)?")
_ART_DE = r"(?:(?:die|eine|den|das|der|neue|neuen)\s+)*(?:(?:Datei|Skript)\s+)?"
_NEAR = r"(?:[^\n.]{0,60}?\s)?"
_BULLET = r"(?m)^[ \t]*(?:[-*•]\s+|\d+\.\s+)?"


def _path(g: str) -> str:
    return _PATH.format(g=g)


def _verbs(*words: str) -> str:
    return r"(?P<verb>" + "|".join(words) + ")"


_EN_FETCH = _verbs("fetched", "downloaded", "retrieved", "visited", "accessed", "requested", "opened", "loaded",
                   "queried", "called")
_RU_FETCH = _verbs("загрузил", "загрузила", "скачал", "скачала", "получил", "получила", "открыл", "открыла",
                   "запросил", "запросила")
_EN_EDIT = _verbs("edited", "updated", "modified", "changed", "patched", "fixed", "rewrote", "rewritten", "overwrote")
_DE_WRITE = _verbs("erstellt", "angelegt", "geschrieben", "gespeichert", "erzeugt")
_DE_EDIT = _verbs("bearbeitet", "geändert", "aktualisiert", "angepasst")
_RU_WRITE = _verbs("создал", "создала", "записал", "записала", "сохранил", "сохранила")
_RU_EDIT = _verbs("изменил", "изменила", "отредактировал", "отредактировала", "обновил", "обновила")
_DONE_EN = r"\s+(?:has\s+been|have\s+been|was|were|is\s+now)\s+(?:successfully\s+)?"
_FEW_DE = r"\s+(?:\w+\s+){0,4}?"

#: (claim kind, language, pattern). Order matters: a more specific claim is tried first. Compiled on first use
#: (:func:`_rules`): compiling these twenty takes ~15 ms, which a command that judges no case (validate) never pays.
_RULE_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("fetch", "en", _I_EN + _EN_FETCH + r"\s+" + _NEAR + r"(?:from\s+|at\s+)?" + _URL),
    ("fetch", "de", _I_DE + _NEAR + _URL + r"\s+(?:\w+\s+){0,3}?"
     + _verbs("abgerufen", "heruntergeladen", "geladen", "aufgerufen", "besucht") + r"\b"),
    ("fetch", "ru", _I_RU + _RU_FETCH + r"\s+" + _NEAR + _URL),
    ("shell", "en", _I_EN + _verbs("ran", "executed", "run", "invoked", "launched")
     + r"\s+(?:the\s+)?(?:(?:shell\s+)?(?:command|script)\s+)?" + _CMD),
    ("shell", "de", _I_DE + r"(?:den\s+Befehl\s+)?" + _CMD + r"\s+(?:\w+\s+){0,3}?"
     + _verbs("ausgeführt", "gestartet") + r"\b"),
    ("shell", "ru", _I_RU + _verbs("выполнил", "выполнила", "запустил", "запустила") + r"\s+(?:команду\s+)?" + _CMD),
    ("write", "en", _I_EN + _verbs("wrote", "written", "saved", "added", "appended")
     + r"\s+[^\n]{0,80}?\s(?:to|into|in)\s+" + _ART_EN + _path("t")),
    ("write", "en", _I_EN + _verbs("created", "wrote", "written", "saved", "generated", "made") + r"\s+" + _ART_EN
     + _path("w")),
    ("edit", "en", _I_EN + _EN_EDIT + r"\s+" + _ART_EN + _path("e")),
    ("read", "en", _I_EN + _verbs("read", "viewed", "inspected", "examined", "looked at", "checked")
     + r"\s+(?:the\s+)?(?:contents\s+of\s+)?" + _ART_EN + _path("r")),
    ("write", "en", _path("p") + _DONE_EN + _verbs("created", "written", "saved", "generated") + r"\b"),
    ("edit", "en", _path("q") + _DONE_EN + _verbs("updated", "modified", "edited", "changed", "patched") + r"\b"),
    ("write", "en", _BULLET + _verbs("Created", "Wrote", "Saved") + r"\s+(?:(?:the\s+)?file\s+)?" + _path("s")),
    ("edit", "en", _BULLET + _verbs("Updated", "Edited", "Modified", "Patched") + r"\s+(?:(?:the\s+)?file\s+)?"
     + _path("u")),
    ("write", "de", _I_DE + _ART_DE + _path("dw") + _FEW_DE + _DE_WRITE + r"\b"),
    ("edit", "de", _I_DE + _ART_DE + _path("de") + _FEW_DE + _DE_EDIT + r"\b"),
    ("write", "de", r"\b[Dd]ie\s+Datei\s+" + _path("dp") + r"\s+wurde\s+(?:erfolgreich\s+)?" + _DE_WRITE + r"\b"),
    ("write", "ru", _I_RU + _RU_WRITE + r"\s+(?:новый\s+)?(?:файл\s+)?" + _path("rw")),
    ("edit", "ru", _I_RU + _RU_EDIT + r"\s+(?:файл\s+)?" + _path("re")),
    ("write", "ru", r"(?<![\w])[Фф]айл\s+" + _path("rp") + r"\s+(?:успешно\s+)?"
     + _verbs("создан", "записан", "сохранён", "сохранен")),
)


@lru_cache(maxsize=1)
def _rules() -> list[tuple[str, str, re.Pattern[str]]]:
    return [(kind, lang, re.compile(rx)) for kind, lang, rx in _RULE_SOURCES]


def compile_rules() -> None:
    """Compile the claim patterns now (~10 ms; otherwise on the first final answer read): a run does it on its
    loading thread while its first agent runs (runner/run.py), so judging its first case does not."""
    _rules()


_KINDS: dict[str, tuple[str, str, str]] = {
    # claim → (event name, kind, argument key)
    "write": ("write", "write", "path"), "edit": ("edit", "write", "path"), "read": ("read", "read", "path"),
    "shell": ("shell", "execute", "command"), "fetch": ("fetch", "fetch", "url"),
}


class Claim:
    """One claim: what (``name``/``kind``), on what (``arguments``), where (``start``, ``line``)."""

    __slots__ = ("arguments", "kind", "language", "line", "name", "start", "text", "verb")

    def __init__(self, name: str, kind: str, arguments: dict[str, str], verb: str, language: str,
                 start: int, line: int, text: str) -> None:
        self.name, self.kind, self.arguments, self.verb = name, kind, arguments, verb
        self.language, self.start, self.line, self.text = language, start, line, text


def _valid_path(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip().rstrip(".,;:!?)")
    if not value or len(value) > 200 or any(c.isspace() for c in value):
        return None
    if "://" in value or value.startswith(("http:", "https:", "www.")):
        return None
    if "." not in value and "/" not in value:
        return None
    if value.strip("./~-") == "":
        return None
    return value


def _value(match: re.Match[str], claim: str) -> str | None:
    if claim == "fetch":
        url = match.group("url")
        return url.rstrip(".,;:!?>") if url else None
    if claim == "shell":
        cmd = match.group("cmd").strip()
        return cmd or None
    for name, value in match.groupdict().items():
        if value is not None and name.endswith(("q1", "q2", "q3", "bare")):
            return _valid_path(value)
    return None


def find_claims(text: str) -> list[Claim]:
    """Every distinct claim in ``text`` (its first :data:`TEXT_LIMIT` characters), in text order."""
    if not isinstance(text, str) or not text.strip():
        return []
    text = text[:TEXT_LIMIT]
    found: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    taken: list[tuple[int, int]] = []
    for claim, language, rx in _rules():
        for match in rx.finditer(text):
            if len(found) >= MAX_CLAIMS:
                break
            if any(s < match.end() and match.start() < e for s, e in taken):
                continue
            value = _value(match, claim)
            if value is None:
                continue
            name, kind, key = _KINDS[claim]
            signature = (name, value)
            if signature in seen:
                continue
            seen.add(signature)
            taken.append((match.start(), match.end()))
            verb = match.group("verb") if "verb" in match.groupdict() else ""
            found.append(Claim(name, kind, {key: value}, verb or "", language, match.start(),
                               text.count("\n", 0, match.start()) + 1, match.group(0)[:300]))
    found.sort(key=lambda c: c.start)
    return found


def parse_claims(text: str | None, phase: str, ref: str) -> list[Event]:
    """Tier D ``tool_call_start`` events for the claims in ``text``; ``ref`` names the text's artifact
    (``raw_artifact_ref`` is ``<ref>:<line>``). Never raises."""
    try:
        claims = find_claims(text or "")
    except (RecursionError, re.error):
        return []
    events: list[Event] = []
    for claim in claims:
        n = len(events) + 1
        try:
            events.append(Event(
                event_type="tool_call_start", event_id=f"{phase}-D-{n}", sequence=n,
                phase=phase,  # type: ignore[arg-type]
                source_tier="D", source="wrapper", status="unknown", raw_artifact_ref=f"{ref}:{claim.line}",
                payload={"raw_name": None, "name": claim.name, "kind": claim.kind,
                         "arguments": json.loads(json.dumps(claim.arguments)), "claim": claim.text,
                         "claim_verb": claim.verb, "language": claim.language}))
        except (ValidationError, ValueError, TypeError):
            continue
    return events
