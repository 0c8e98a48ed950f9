"""Property tests: no file content makes the loader raise anything but SpecError, and every error it
reports is a ``file:line: ...`` line pointing inside the file."""

from __future__ import annotations

import io
import re
import tempfile

from pathlib import Path

import pytest

from hypothesis import HealthCheck, given, settings, strategies as st
from ruamel.yaml import YAML

from gripprobe_core.defaults.validators import BUILTIN_VALIDATORS
from gripprobe_core.errors import SpecError
from gripprobe_core.models.specs import CliAgentSpec, HardwareProfiles, ModelSpec, SuiteSpec, TestSpec
from gripprobe_core.pluginmanager import Registry
from gripprobe_core.specs import load_specs
from gripprobe_core.specs.yaml_source import MAX_DEPTH, MAX_NODES, read_yaml

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
#: Nested documents are slower to generate and load; fewer examples per kind keep the file quick.
NESTED = settings(SETTINGS, max_examples=50)

#: kind → (file under the specs root, model). The file name matches the id the generators favour.
TARGETS = {
    "model": ("models/m.yaml", ModelSpec),
    "cli_agent": ("cli_agents/m.yaml", CliAgentSpec),
    "test": ("tests/m.yaml", TestSpec),
    "suite": ("suites/m.yaml", SuiteSpec),
    "hardware": ("hardware_profiles.yaml", HardwareProfiles),
}
REGISTRY = Registry(agents={"reference": 1}, validators={"file_exists": 1}, challenges={"nonce": 1})
LINE = re.compile(r"^(?P<file>[^\n]+?\.ya?ml):(?P<line>\d+): [^\n]+$")

_KEYS = sorted({name for _, model in TARGETS.values() for name in model.model_fields}
               | {"kind", "model_id", "base_url", "path", "content", "shell", "write", "read", "edit", "old", "new",
                  "agents", "timeout_s", "agent", "model", "test", "format", "backend", "profiles", "expected"})
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True), st.text(max_size=20),
    st.sampled_from(["m", "read", "oracle", "ollama", "tag:sanity", "sanity", "tool", "x.txt", "../x", "/abs"]),
    st.dates(),
)
_keys = st.one_of(st.sampled_from(_KEYS), st.text(min_size=1, max_size=12))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=5)),
    max_leaves=25,
)
_documents = st.dictionaries(_keys, _values, max_size=8).map(lambda d: {"id": "m", **d} if "id" not in d else d)


def _load(files: dict[str, bytes], registry: Registry = REGISTRY) -> list[str]:
    """Write ``files`` into a fresh spec tree and load it; the error lines, or [] on success."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "specs"
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        try:
            load_specs(root, registry=registry)
        except SpecError as exc:
            assert exc.errors, "a SpecError must carry at least one line"
            return exc.errors
        return []


def _check_lines(errors: list[str], content: bytes) -> None:
    n_lines = content.count(b"\n") + 1
    for error in errors:
        m = LINE.match(error)
        assert m, f"not a file:line: message line: {error!r}"
        assert 1 <= int(m["line"]) <= n_lines + 1, error


def _dump(doc: object) -> bytes:
    yaml = YAML(typ="safe", pure=True)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue().encode("utf-8")


@pytest.mark.parametrize("kind", sorted(TARGETS))
@SETTINGS
@given(text=st.text(max_size=300))
def test_arbitrary_text_is_a_spec_error_or_loads(kind, text):
    rel, _ = TARGETS[kind]
    content = text.encode("utf-8")
    _check_lines(_load({rel: content}), content)


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_are_a_spec_error_or_load(raw):
    _check_lines(_load({"tests/m.yaml": raw}), raw)


@st.composite
def _yamlish(draw) -> str:
    """Text built from YAML punctuation, so the parser sees many near-valid documents."""
    pieces = st.sampled_from(["id: m\n", "- ", "  ", "{", "}", "[", "]", ": ", ",", "&a ", "*a", "<<: ", "!t ",
                              "!!str ", "? ", "|\n  ", ">\n  ", "---\n", "...\n", "#c\n", "\n", "'", '"', "\t",
                              "backends:\n", "kind: oracle\n", "reference:\n", "x", "1", "null", "%YAML 1.2\n"])
    return "".join(draw(st.lists(pieces, max_size=40)))


@pytest.mark.parametrize("kind", sorted(TARGETS))
@SETTINGS
@given(text=_yamlish())
def test_yaml_punctuation_soup_is_a_spec_error_or_loads(kind, text):
    rel, _ = TARGETS[kind]
    content = text.encode("utf-8")
    _check_lines(_load({rel: content}), content)


@pytest.mark.parametrize("kind", sorted(TARGETS))
@NESTED
@given(doc=_documents)
def test_nested_values_of_wrong_types_are_spec_errors(kind, doc):
    rel, model = TARGETS[kind]
    content = _dump(doc)
    errors = _load({rel: content})
    _check_lines(errors, content)
    if not errors:
        # Success is only possible when the document really is a valid spec.
        model.model_validate(doc)


_VALID_TEST = {
    "id": "m", "title": "T", "prompt": "p", "language": "en", "requires": ["write"], "tags": ["sanity"],
    "fixtures": [{"path": "a.txt", "content": "x"}], "challenge": {"kind": "nonce"},
    "validators": [{"kind": "file_exists", "path": "a.txt"}], "reference": [{"write": {"path": "a", "content": "b"}}],
    "rules": {"no_retry_on_error": True}, "timeout_s": 10,
}


@SETTINGS
@given(key=st.sampled_from(sorted(_VALID_TEST)), suffix=st.sampled_from(["x", "s", "_"]))
def test_a_misspelt_key_is_reported_on_its_own_line(key, suffix):
    if key == "id":
        return  # misspelling the id makes the file nameless: covered by the example tests
    doc = {(k + suffix if k == key else k): v for k, v in _VALID_TEST.items()}
    content = _dump(doc)
    line = next(i for i, text in enumerate(content.decode().splitlines(), 1) if text.startswith(key + suffix + ":"))
    errors = _load({"tests/m.yaml": content})
    expected_unknown = f":{line}: {key}{suffix}: unknown key; did you mean {key!r}?"
    assert any(e.endswith(expected_unknown) for e in errors), errors


# --------------------------------------------------------------------------- read_yaml on its own

_PIECES = ["id: m\n", "- ", "  ", "{", "}", "[", "]", ": ", ",", "&a ", "*a", "&b ", "*b", "<<: ", "!t ", "!!str ",
           "!!binary ", "!!python/object:os.system ", "? ", "|\n  ", ">-\n  ", "---\n", "...\n", "#c\n", "\n",
           "'", '"', "\t", "\ufeff", "\x00", "\x85", "\u2028", "%TAG ! tag:x,2000:\n", "x", "1", "~", "2025-01-01",
           "[[[[[[[[", "]]]]]]]]", "{a: {a: {a: ", "- - - - - - ", "*a, *a, *a, *a, *a, "]


@st.composite
def _hostile(draw) -> bytes:
    """YAML punctuation plus what hostile files are made of: anchors and aliases, tags, nesting, control
    characters, byte-order marks; some pieces repeated many times."""
    parts = draw(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from([1, 1, 1, 2, 50, 400])), max_size=30))
    text = "".join(piece * times for piece, times in parts)
    return text.encode("utf-8", errors="surrogatepass") + draw(st.binary(max_size=8))


@SETTINGS
@given(content=_hostile())
def test_read_yaml_never_raises_and_always_answers(content):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.yaml"
        path.write_bytes(content)
        parsed = read_yaml(path)
    assert parsed.data is not None or parsed.issues, "no data and no reason"
    assert parsed.data is None or isinstance(parsed.data, dict)
    n_lines = content.count(b"\n") + 1
    for issue in parsed.issues:
        assert 1 <= issue.line <= n_lines + 1, issue
        assert "\n" not in issue.format()


@NESTED
@given(levels=st.integers(1, 12), width=st.integers(1, 12), nest=st.integers(0, MAX_DEPTH + 5))
def test_aliases_and_nesting_load_or_are_refused_by_a_limit(levels, width, nest):
    lines = [f"a0: &a0 {'[' * nest}x{']' * nest}"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.yaml"
        path.write_text("\n".join(lines) + "\n")
        parsed = read_yaml(path)
    values = [nest + 1]  # a0, then each level: its list plus ``width`` copies of the level below
    for _ in range(levels):
        values.append(1 + width * values[-1])
    expanded = 1 + sum(values)  # every value once aliases are expanded, the root included
    parsed_nodes = 1 + (levels + 1) + (nest + 1) + levels * (1 + width)  # keys and values as written
    too_many = max(expanded, parsed_nodes) > MAX_NODES
    too_deep = levels + nest + 1 >= MAX_DEPTH  # the innermost x under every level of aliases
    assert (parsed.data is None) == (too_many or too_deep), (expanded, parsed.issues)
    if parsed.data is None:
        (issue,) = parsed.issues
        allowed = (("document too large",) if too_many else ()) + (("nested more than",) if too_deep else ())
        assert issue.message.startswith(allowed), issue


# --------------------------------------------------------------------------- nothing hides an error

BUILTIN = Registry(agents={"reference": 1}, validators=dict(BUILTIN_VALIDATORS), challenges={"nonce": 1})
_OPTION_VALUES = {
    "path": st.sampled_from(["a.txt", "sub/a.txt", "a/../b", "../x", "/etc/hostname", "", "${workspace}/a",
                             "${today}.txt", "../${today}"]),
    "cwd": st.sampled_from([".", "sub", "..", "/tmp"]),
    "expected": st.one_of(st.text(max_size=4), st.just({"today": True}), st.just({}), st.integers()),
    "command": st.lists(st.sampled_from(["echo", "x"]), max_size=2),
    "contains": st.lists(st.text(max_size=3), max_size=2),
    "task": st.text(max_size=4),
    "bogus": st.integers(),
}
_validator_entry = st.fixed_dictionaries(
    {"kind": st.sampled_from(sorted(BUILTIN_VALIDATORS) + ["file_equalz"])},
    optional={k: v for k, v in _OPTION_VALUES.items()})


def _entry_is_valid(entry: dict) -> bool:
    fn = BUILTIN_VALIDATORS.get(entry["kind"])
    if fn is None:
        return False
    try:
        fn.options_model.model_validate({k: v for k, v in entry.items() if k != "kind"})
    except ValueError:
        return False
    return True


@NESTED
@given(validators=st.lists(_validator_entry, min_size=1, max_size=5), drop_title=st.booleans())
def test_every_bad_validator_is_reported_at_its_own_lines_whatever_else_is_wrong(validators, drop_title):
    doc = {**_VALID_TEST, "validators": validators}
    if drop_title:
        doc.pop("title")
    content = _dump(doc)
    errors = _load({"tests/m.yaml": content}, BUILTIN)
    _check_lines(errors, content)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "m.yaml").write_bytes(content)
        lines = read_yaml(Path(tmp) / "m.yaml").source.lines
    starts = [lines[("validators", i)] for i in range(len(validators))] + [10**9]
    for i, entry in enumerate(validators):
        mine = [e for e in errors if f": validators[{i}]" in e]
        assert bool(mine) != _entry_is_valid(entry), (entry, mine)
        for e in mine:
            assert starts[i] <= int(LINE.match(e)["line"]) < max(starts[i + 1], starts[i] + 1), (e, starts)


@NESTED
@given(validators=st.lists(_validator_entry, min_size=1, max_size=4), drop_title=st.booleans())
def test_an_unknown_top_level_key_adds_its_error_and_hides_none(validators, drop_title):
    doc = {**_VALID_TEST, "validators": validators}
    if drop_title:
        doc.pop("title")
    content = _dump(doc)
    before = [e[e.index("m.yaml:"):] for e in _load({"tests/m.yaml": content}, BUILTIN)]  # each in its own tmp dir
    after = [e[e.index("m.yaml:"):] for e in _load({"tests/m.yaml": content + b"zzz_unknown: 1\n"}, BUILTIN)]
    added = [e for e in after if e not in before]
    assert all(e in after for e in before), (before, after)
    assert len(added) == 1 and added[0].split(": ", 1)[1].startswith("zzz_unknown: unknown key"), added


# --------------------------------------------------------------------------- ids and case folders

from gripprobe_core.models.bounds import TRIALS_MAX  # noqa: E402
from gripprobe_core.models.ids import ID_MAX, id_problem  # noqa: E402
from gripprobe_core.models.results import CaseKey  # noqa: E402
from gripprobe_core.store.names import CASE_ID_MAX  # noqa: E402

#: Separators, the trial suffix's letter and digits, capitals, lookalikes and invisibles: the characters
#: that could make two ids, or an id and a trial suffix, collide in a case folder's name.
_ID_CHARS = "ab_t-.12_A\u0435\u200b/ "
_KINDS = ("agent", "model", "backend", "format", "test")


def _ids(kind: str):
    plain = st.from_regex(r"\A[at12]{1,3}([._-][at12]{1,3}){0,3}\Z")  # mostly valid, short: collisions likely
    return st.one_of(plain, plain, plain, st.text(_ID_CHARS, min_size=1, max_size=ID_MAX[kind] + 2))


_KEY = st.fixed_dictionaries({k: _ids(k) for k in _KINDS} | {"trial": st.integers(1, TRIALS_MAX)})


@SETTINGS
@given(a=_KEY, b=_KEY)
def test_ids_that_pass_give_unique_case_folders_for_any_trials(a, b):
    """Any two keys made of ids that pass validation, with any trials, have different case folder names
    unless they are the same key; the name splits back into its parts; it fits the file system."""
    if any(id_problem(a[k], k) or id_problem(b[k], k) for k in _KINDS):
        for key in (a, b):
            if any(id_problem(key[k], k) for k in _KINDS):
                with pytest.raises(ValueError):
                    CaseKey(**key)
        return
    ka, kb = CaseKey(**a), CaseKey(**b)
    assert (ka.slug() == kb.slug()) == (ka == kb)
    parts = ka.slug().split("__")
    assert parts[:5] == [a[k] for k in _KINDS]
    assert parts[5:] == ([] if a["trial"] == 1 else [f"t{a['trial']}"])
    assert len(ka.slug().encode()) <= CASE_ID_MAX


@SETTINGS
@given(kind=st.sampled_from(_KINDS), value=st.text(max_size=80))
def test_an_id_that_passes_is_plain_lowercase_ascii(kind, value):
    if id_problem(value, kind) is None:
        assert re.fullmatch(r"[a-z0-9]+([._-][a-z0-9]+)*", value) and len(value) <= ID_MAX[kind]
    else:
        with pytest.raises(ValueError):
            CaseKey(**{k: value if k == kind else "x" for k in _KINDS})


def test_the_longest_ids_still_fit_a_case_folder():
    key = CaseKey(**{k: "x" * ID_MAX[k] for k in _KINDS}, trial=TRIALS_MAX)
    assert len(key.slug()) == 222 <= CASE_ID_MAX
    assert len(f".{key.slug()}.html.0123456789ab.tmp") <= 255
