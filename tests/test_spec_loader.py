"""The spec loader: valid trees load; every kind of broken spec is reported as file:line: key: message."""

from __future__ import annotations

import json
import os
import re
import textwrap

from pathlib import Path

import pytest

from pydantic import BaseModel, ConfigDict, model_validator

from ruamel.yaml import YAML

from gripprobe_core.errors import SpecError, UserError
from gripprobe_core.models.specs import CliAgentSpec, HardwareProfiles, ModelSpec, SuiteSpec, TestSpec
from gripprobe_core.pluginmanager import Registry
from gripprobe_core.specs import load_specs, load_yaml_file, shipped_specs_dir, spec_layers, write_schemas

ROOT = Path(__file__).resolve().parents[1]

VALID = {
    "models/oracle-perfect.yaml": """\
        id: oracle-perfect
        label: Oracle (perfect)
        backends:
          - id: oracle
            kind: oracle
            model_id: perfect
        policy:
          timeout_s: 60
          agents:
            reference: {timeout_s: 30}
        """,
    "models/qwen.yaml": """\
        id: qwen
        backends:
          - id: ollama
            kind: ollama
            model_id: qwen3:8b
            base_url: http://127.0.0.1:11434
        """,
    "cli_agents/reference.yaml": """\
        id: reference
        plugin: reference
        executable: gripprobe-refagent
        formats: [tool, markdown]
        tool_kinds: [read, write, execute]
        timeout_s: 60
        """,
    "tests/save_file.yaml": """\
        id: save_file
        title: Save a file
        prompt: |
          Write greeting.txt.
        requires: [write]
        tags: [sanity]
        validators:
          - kind: file_equals
            path: greeting.txt
            expected: hello
        reference:
          - write: {path: greeting.txt, content: hello}
        """,
    "tests/save_file_de.yml": """\
        id: save_file_de
        title: Datei speichern
        prompt: Schreibe greeting.txt.
        language: de
        variant_of: save_file
        requires: [[write, execute]]
        tags: [multilingual]
        challenge: {kind: nonce}
        validators:
          - kind: file_equals
            path: greeting.txt
            expected: hello
        reference:
          - shell: echo hello > greeting.txt
        """,
    "suites/default.yaml": """\
        id: default
        agents: [reference]
        models: [oracle-perfect, qwen]
        tests: ["tag:sanity", save_file_de]
        formats: [tool]
        cases:
          - {agent: reference, model: qwen, test: save_file, format: markdown, backend: ollama}
        """,
    "hardware_profiles.yaml": """\
        profiles:
          - id: ci
            cpu: 2 cores
            memory_gb: 24
        """,
}

VALID = {rel: textwrap.dedent(text) for rel, text in VALID.items()}



class FileEqualsOptions(BaseModel):
    """Options of the small validator below (a plugin attaches its options model as ``options_model``)."""

    model_config = ConfigDict(extra="forbid")
    path: str
    expected: str
    strip: bool = True


def file_equals(ctx, options):
    return None


file_equals.options_model = FileEqualsOptions


class Exploding(BaseModel):
    @model_validator(mode="after")
    def _boom(self):
        raise RuntimeError("plugin bug")


def exploding(ctx, options):
    return None


exploding.options_model = Exploding

REGISTRY = Registry(agents={"reference": object()},
                    validators={"file_equals": file_equals, "file_exists": object(), "exploding": exploding},
                    challenges={"nonce": object()})


def write_tree(base: Path, files: dict[str, str | None]) -> Path:
    """Write ``files`` (relative path → dedented text; None deletes) under ``base/specs``."""
    root = base / "specs"
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def errors_of(root: Path, registry=None) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_specs(root, registry=registry)
    return info.value.errors


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A valid tree under tmp_path/specs, with cwd at tmp_path so paths print as specs/..."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRIPPROBE_SPECS", raising=False)

    def make(changes: dict[str, str | None] | None = None) -> Path:
        return write_tree(tmp_path, {**VALID, **(changes or {})})
    return make


# --------------------------------------------------------------------------- valid trees

def test_valid_tree_loads_every_kind(tree):
    specs = load_specs(tree(), registry=REGISTRY)
    assert sorted(specs.models) == ["oracle-perfect", "qwen"]
    assert isinstance(specs.models["qwen"], ModelSpec)
    assert isinstance(specs.agents["reference"], CliAgentSpec)
    assert sorted(specs.tests) == ["save_file", "save_file_de"]
    assert isinstance(specs.suites["default"], SuiteSpec)
    assert [p.id for p in specs.hardware.profiles] == ["ci"]
    assert specs.files[("test", "save_file_de")].name == "save_file_de.yml"
    assert specs.files[("hardware_profiles", "ci")].name == "hardware_profiles.yaml"
    assert specs.summary() == "2 models, 1 cli_agents, 2 tests, 1 suites, 1 hardware profiles"
    assert specs.where("model", "oracle-perfect", "policy", "agents", "reference") == \
        "specs/models/oracle-perfect.yaml:10"
    assert [t.id for t in specs.tests_tagged("sanity")] == ["save_file"]


def test_missing_optional_parts_are_fine(tree):
    root = tree({"hardware_profiles.yaml": None, "suites/default.yaml": None})
    assert not (root / "suites").exists()
    (root / "notes.txt").write_text("not a spec")
    (root / "tests" / "README.md").write_text("ignored")
    specs = load_specs(root)
    assert specs.hardware == HardwareProfiles()
    assert specs.suites == {}


def test_missing_root_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist; pass --specs/--root DIR"):
        load_specs(tmp_path / "nope")


# --------------------------------------------------------------------------- keys and types

def test_misspelt_key_names_file_line_and_suggestion(tree):
    root = tree({"cli_agents/reference.yaml": """\
        id: reference
        plugin: reference
        executable: gripprobe-refagent
        tool_kinds: [read]
        timout_s: 60
        """})
    # The misspelt key does not hide what the rest of the file says: this agent lost the markdown
    # format a suite case asks of it.
    assert errors_of(root) == [
        "specs/cli_agents/reference.yaml:5: timout_s: unknown key; did you mean 'timeout_s'?",
        "specs/suites/default.yaml:7: cases[0].format: agent 'reference' does not support format 'markdown' "
        "(it supports: tool)",
    ]


def test_unknown_top_level_keys_do_not_hide_the_references_of_the_file(tree):
    root = tree({"suites/default.yaml": """\
        id: default
        agent: [reference]
        models: [oracle-perfect, qwne]
        tests: [save_file]
        colour: blue
        """})
    assert errors_of(root) == [
        "specs/suites/default.yaml:2: agent: unknown key; did you mean 'agents'?",
        "specs/suites/default.yaml:3: models[1]: unknown model 'qwne'; did you mean 'qwen'? known: oracle-perfect, qwen",
        "specs/suites/default.yaml:5: colour: unknown key; valid keys: agents, cases, formats, id, jobs, judge, "
        "max_tokens_per_phase, models, observe, sandbox, telemetry_proxy_mode, tests, … (3 more)",
    ]


def test_other_errors_keep_the_spec_out_of_the_reference_checks(tree):
    # A wrong value is not replaced by a default to check references with: that could invent errors.
    root = tree({"suites/default.yaml": """\
        id: default
        jobs: many
        models: [qwne]
        """})
    assert errors_of(root) == [
        "specs/suites/default.yaml:2: jobs: Input should be a valid integer, unable to parse string as an integer; "
        "got a string"]


def test_misspelt_nested_key_in_list_item(tree):
    root = tree({"models/qwen.yaml": """\
        id: qwen
        backends:
          - id: ollama
            kind: ollama
            modle_id: qwen3:8b
            base_url: http://127.0.0.1:11434
        """})
    assert errors_of(root) == [
        "specs/models/qwen.yaml:3: backends[0].model_id: missing required key",
        "specs/models/qwen.yaml:5: backends[0].modle_id: unknown key; did you mean 'model_id'?",
    ]


def test_unknown_key_far_from_any_lists_valid_keys(tree):
    root = tree({"hardware_profiles.yaml": "profiles: []\nzzz: 1\n"})
    assert errors_of(root) == ["specs/hardware_profiles.yaml:2: zzz: unknown key; valid keys: profiles"]


def test_wrong_types(tree):
    root = tree({"cli_agents/reference.yaml": """\
        id: reference
        plugin: 7
        executable: gripprobe-refagent
        tool_kinds: read
        timeout_s: fast
        telemetry_proxy_mode: sometimes
        formats: []
        """})
    assert errors_of(root) == [
        "specs/cli_agents/reference.yaml:2: plugin: expected a string, got an integer (put the value in quotes)",
        "specs/cli_agents/reference.yaml:4: tool_kinds: expected a list, got a string",
        "specs/cli_agents/reference.yaml:5: timeout_s: Input should be a valid number, unable to parse string "
        "as a number; got a string",
        "specs/cli_agents/reference.yaml:6: telemetry_proxy_mode: Input should be 'off', 'auto' or 'force'; "
        "got 'sometimes'",
        "specs/cli_agents/reference.yaml:7: formats: List should have at least 1 item after validation, not 0",
    ]


def test_missing_key_uses_line_of_enclosing_mapping(tree):
    root = tree({"tests/save_file.yaml": """\
        # a comment first
        id: save_file
        prompt: hi
        validators:
          - path: x
        reference:
          - read: {path: x}
        """})
    assert errors_of(root) == [
        "specs/tests/save_file.yaml:2: title: missing required key",
        "specs/tests/save_file.yaml:5: validators[0].kind: missing required key",
    ]


def test_model_validator_message_and_empty_value(tree):
    root = tree({"models/qwen.yaml": """\
        id: qwen
        label:
        backends:
          - id: ollama
            kind: ollama
            model_id: qwen3:8b
          - id: other
            kind: oracle
            model_id:
        """})
    assert errors_of(root) == [
        "specs/models/qwen.yaml:4: backends[0]: backend kind 'ollama' needs base_url",
        "specs/models/qwen.yaml:9: backends[1].model_id: expected a string, got null (the value is empty)",
    ]


def test_union_members_are_collapsed_to_the_intended_one(tree):
    root = tree({"tests/save_file.yaml": """\
        id: save_file
        title: t
        prompt: p
        requires: [reed, [read, x], 3]
        validators: [{kind: file_equals}]
        reference:
          - write: {path: a.txt}
          - shel: ls
          - {}
          - ls
          - shell: 1
          - edit: {path: a, old: b, new: c}
        """})
    assert errors_of(root) == [
        "specs/tests/save_file.yaml:4: requires[0]: Input should be 'read', 'write', 'execute', 'search', 'fetch' "
        "or 'other'; got 'reed'; did you mean 'read'?",
        "specs/tests/save_file.yaml:4: requires[1][1]: Input should be 'read', 'write', 'execute', 'search', "
        "'fetch' or 'other'; got 'x'",
        "specs/tests/save_file.yaml:4: requires[2]: Input should be 'read', 'write', 'execute', 'search', 'fetch' "
        "or 'other'; got an integer",
        "specs/tests/save_file.yaml:7: reference[0].write.content: missing required key",
        "specs/tests/save_file.yaml:8: reference[1].shel: unknown key; did you mean 'shell'?",
        "specs/tests/save_file.yaml:9: reference[2]: missing key; expected one of 'edit', 'read', 'shell', 'write'",
        "specs/tests/save_file.yaml:10: reference[3]: expected a mapping, got a string",
        "specs/tests/save_file.yaml:11: reference[4].shell: expected a string, got an integer (put the value in quotes)",
    ]


def test_dict_of_models_locations(tree):
    root = tree({"models/oracle-perfect.yaml": """\
        id: oracle-perfect
        backends: [{id: o, kind: oracle, model_id: perfect}]
        policy:
          agents:
            reference:
              timeout_s: -1
        """})
    assert errors_of(root) == [
        "specs/models/oracle-perfect.yaml:6: policy.agents.reference.timeout_s: -1 is out of range; give a number "
        "greater than 0 and at most 86,400"]


def test_fixture_path_validator(tree):
    root = tree({"tests/save_file.yaml": VALID["tests/save_file.yaml"] + "fixtures:\n  - path: ../x\n"})
    assert errors_of(root) == ["specs/tests/save_file.yaml:14: fixtures[0].path: fixture path must be relative "
                               "and stay inside the workspace"]


# --------------------------------------------------------------------------- YAML level

def test_yaml_syntax_error(tree):
    root = tree({"suites/default.yaml": "id: default\nagents: [reference\n"})
    (error,) = errors_of(root)
    assert error.startswith("specs/suites/default.yaml:2: YAML syntax error: ")
    assert "flow sequence" in error


def test_yaml_duplicate_key_is_reported_at_second_key(tree):
    root = tree({"suites/default.yaml": "id: default\nagents: [reference]\nagents: [reference]\n"})
    (error,) = errors_of(root)
    assert error.startswith("specs/suites/default.yaml:3: YAML syntax error: found duplicate key \"agents\"")


@pytest.mark.parametrize("text, expected", [
    ("", "specs/suites/default.yaml:1: file is empty; expected a mapping of keys"),
    ("# only a comment\n", "specs/suites/default.yaml:1: file is empty; expected a mapping of keys"),
    ("\n- a\n- b\n", "specs/suites/default.yaml:2: expected a mapping of keys at the top level, got a list"),
    ("just words", "specs/suites/default.yaml:1: expected a mapping of keys at the top level, got a string"),
    ("id: default\n---\nid: other\n", "specs/suites/default.yaml:3: more than one YAML document; put one spec per file"),
    ("id: default\ntitle: !shout hi\n", "specs/suites/default.yaml:2: title: unsupported YAML tag !shout; remove it"),
    ("id: default\n? [a, b]\n: c\n", "specs/suites/default.yaml:2: mapping keys must be plain words, not lists or mappings"),
    ("id: default\ntitle: !!python/name:os.system ''\n",
     "specs/suites/default.yaml:2: title: unsupported YAML tag !!python/name:os.system; remove it"),
    ("id: default\n1: x\n", "specs/suites/default.yaml:2: 1: keys must be strings; quote the key"),
    ("id: default\ntrue: x\n", "specs/suites/default.yaml:2: true: keys must be strings; quote the key"),
    ("id: default\n: x\n", "specs/suites/default.yaml:2: empty key; write a name before the colon"),
])
def test_document_shape_errors(tree, text, expected):
    root = tree({"suites/default.yaml": text})
    assert errors_of(root) == [expected]


def test_not_utf8(tree):
    root = tree()
    (root / "suites" / "default.yaml").write_bytes(b"id: default\ntitle: \xff\xfe\n")
    assert errors_of(root) == [
        "specs/suites/default.yaml:2: not valid UTF-8 text (byte 0xff); save the file as UTF-8"]


def test_alias_bomb_is_refused(tree):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    root = tree({"suites/default.yaml": "\n".join(lines) + "\n"})
    (error,) = errors_of(root)
    assert re.match(r"specs/suites/default\.yaml:\d+: document too large", error)


def test_merge_keys_and_anchors_work(tree):
    root = tree({"models/qwen.yaml": """\
        id: qwen
        backends:
          - &base {id: ollama, kind: ollama, model_id: qwen3:8b, base_url: http://127.0.0.1:11434}
          - <<: *base
            id: ollama2
        """})
    specs = load_specs(root)
    assert [b.id for b in specs.models["qwen"].backends] == ["ollama", "ollama2"]


def test_load_yaml_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\nb:\n  - c: 2\n")
    data, source = load_yaml_file(path)
    assert data == {"a": 1, "b": [{"c": 2}]}
    assert source.line(("b", 0, "c")) == 3
    assert source.line(("b", 0, "missing")) == 3
    path.write_text("a: [\n")
    with pytest.raises(SpecError):
        load_yaml_file(path)


# --------------------------------------------------------------------------- ids and references

def test_file_name_must_match_id(tree):
    root = tree({"tests/save_file.yaml": VALID["tests/save_file.yaml"].replace("id: save_file", "id: save_files")})
    errors = errors_of(root)
    assert "specs/tests/save_file.yaml:1: id: id 'save_files' does not match the file name 'save_file.yaml'; " \
           "rename the file to save_files.yaml or set id: save_file" in errors


def test_duplicate_ids_across_files(tree):
    root = tree({"models/qwen.yml": VALID["models/qwen.yaml"]})
    assert errors_of(root) == [
        "specs/models/qwen.yml:1: id: duplicate model id 'qwen'; also defined at specs/models/qwen.yaml:1"]


def test_duplicate_backend_and_profile_ids(tree):
    root = tree({
        "models/oracle-perfect.yaml": """\
            id: oracle-perfect
            backends:
              - {id: o, kind: oracle, model_id: perfect}
              - {id: o, kind: oracle, model_id: lazy}
            """,
        "hardware_profiles.yaml": "profiles:\n  - id: a\n  - id: a\n",
    })
    assert errors_of(root) == [
        "specs/hardware_profiles.yaml:3: profiles[1].id: duplicate hardware profile id 'a'; first defined on line 2",
        "specs/models/oracle-perfect.yaml:4: backends[1].id: duplicate backend id 'o'",
    ]


def test_unknown_suite_references(tree):
    root = tree({"suites/default.yaml": """\
        id: default
        agents: [reference, codex]
        models: [oracle-perfectt]
        tests: ["tag:sanitty", save_file, nope]
        formats: [tool, xml]
        cases:
          - {agent: refrence, model: qwen, test: save_file}
          - {agent: reference, model: qwen, test: save_file, format: xml, backend: olama}
        """})
    assert errors_of(root) == [
        "specs/suites/default.yaml:2: agents[1]: unknown agent 'codex'; known: reference",
        "specs/suites/default.yaml:3: models[0]: unknown model 'oracle-perfectt'; did you mean 'oracle-perfect'? "
        "known: oracle-perfect, qwen",
        "specs/suites/default.yaml:4: tests[0]: no test has tag 'sanitty'; did you mean 'tag:sanity'? "
        "tags in use: multilingual, sanity",
        "specs/suites/default.yaml:4: tests[2]: unknown test 'nope'; known: save_file, save_file_de",
        "specs/suites/default.yaml:7: cases[0].agent: unknown agent 'refrence'; did you mean 'reference'? "
        "known: reference",
        "specs/suites/default.yaml:8: cases[1].backend: unknown backend of model 'qwen' 'olama'; "
        "did you mean 'ollama'? known: ollama",
        "specs/suites/default.yaml:8: cases[1].format: agent 'reference' does not support format 'xml' "
        "(it supports: markdown, tool)",
    ]


def test_suite_tag_that_selects_nothing(tree):
    root = tree({"suites/default.yaml": "id: default\ntests: ['tag:web']\n"})
    assert errors_of(root) == ["specs/suites/default.yaml:2: tests[0]: no test has tag 'web'; "
                               "tags in use: multilingual, sanity"]
    # ... unless a broken test file might be the one carrying it.
    root = tree({"suites/default.yaml": "id: default\ntests: ['tag:web']\n", "tests/broken.yaml": "id: [\n"})
    assert len(errors_of(root)) == 1


def test_tags_are_free_in_a_sane_shape(tree):
    """A tag of your own (`demo`, `my-team`, `long_context2`) loads and selects; the known tags are only
    documented, not a closed list; a tag that is not lowercase words is refused with the rule."""
    demo = VALID["tests/save_file.yaml"].replace("tags: [sanity]", "tags: [sanity, demo, my-team, long_context2]")
    suite = "id: default\nagents: [reference]\nmodels: [qwen]\ntests: ['tag:demo', 'tag:my-team']\n"
    specs = load_specs(tree({"tests/save_file.yaml": demo, "suites/default.yaml": suite}), registry=REGISTRY)
    assert specs.tests["save_file"].tags == ["sanity", "demo", "my-team", "long_context2"]
    assert [t.id for t in specs.tests_tagged("demo")] == ["save_file"]
    from gripprobe_core.runner.matrix import select_tests
    assert [t.id for t in select_tests(specs.tests, ["tag:long_context2"])] == ["save_file"]
    for bad in ("Demo", "my tag", "-x", "x-", "a--b", "2fast", "x" * 65, "tag:x", "ünï"):
        broken = VALID["tests/save_file.yaml"].replace("tags: [sanity]", f"tags: [sanity, {json.dumps(bad)}]")
        errors = errors_of(tree({"tests/save_file.yaml": broken}))
        assert len(errors) == 1 and errors[0].startswith("specs/tests/save_file.yaml:6: tags[1]: "), errors
        assert "is not a tag: use lowercase letters and digits, words joined by '-' or '_'" in errors[0], errors


def test_the_schema_describes_tags_and_names_the_known_ones(tmp_path):
    from gripprobe_core.models.specs import KNOWN_TAGS, TAG_PATTERN
    schema = json.loads(write_schemas(tmp_path / "schemas")[2].read_text())
    items = schema["properties"]["tags"]["items"]
    assert items["type"] == "string" and items["pattern"] == TAG_PATTERN and "enum" not in items
    assert items["examples"] == list(KNOWN_TAGS) == ["sanity", "non_sanity", "multilingual", "web", "scenario",
                                                        "interaction"]
    assert all(tag in items["description"] for tag in KNOWN_TAGS)
    assert all(re.match(TAG_PATTERN, t) for t in ("demo", "my-team", "long_context2"))
    text = (ROOT / "docs" / "specs.md").read_text(encoding="utf-8")  # each known tag and its meaning
    for tag in KNOWN_TAGS:
        assert f"| `{tag}` |" in text, tag


def test_suite_format_nobody_supports(tree):
    root = tree({"suites/default.yaml": "id: default\nagents: [reference]\nformats: [tool, xml]\n"})
    assert errors_of(root) == ["specs/suites/default.yaml:3: formats[1]: format 'xml' is not supported by any agent "
                               "of this suite (they support: markdown, tool)"]


def test_variant_of_and_policy_agents(tree):
    root = tree({
        "tests/save_file_de.yml": VALID["tests/save_file_de.yml"].replace("variant_of: save_file",
                                                                          "variant_of: save_fil"),
        "models/oracle-perfect.yaml": VALID["models/oracle-perfect.yaml"].replace("reference: {", "codex: {"),
    })
    assert errors_of(root) == [
        "specs/tests/save_file_de.yml:5: variant_of: unknown test 'save_fil'; did you mean 'save_file'? "
        "known: save_file, save_file_de",
    ]
    # a policy for an agent the tree does not define is a note, not an error (trees are often subsets)
    root = tree({"models/oracle-perfect.yaml": VALID["models/oracle-perfect.yaml"].replace("reference: {", "codex: {")})
    assert [n.format() for n in load_specs(root).notes] == [
        "specs/models/oracle-perfect.yaml:10: policy.agents.codex: unknown agent 'codex'; known: reference"]


def test_a_broken_file_does_not_cascade_into_unknown_references(tree):
    root = tree({"tests/save_file.yaml": "id: save_file\ntitle: [\n"})
    errors = errors_of(root)
    assert len(errors) == 1 and "YAML syntax error" in errors[0]


def test_errors_from_every_file_are_collected_and_sorted(tree):
    root = tree({
        "models/qwen.yaml": VALID["models/qwen.yaml"] + "labl: x\n",
        "cli_agents/reference.yaml": VALID["cli_agents/reference.yaml"] + "formts: [tool]\n",
        "tests/save_file.yaml": "id: save_file\ntitle: [unclosed\n",
    })
    errors = errors_of(root)
    assert [e.split(":")[0] for e in errors] == [
        "specs/cli_agents/reference.yaml", "specs/models/qwen.yaml", "specs/tests/save_file.yaml"]
    assert all(re.match(r"^specs/\S+\.yaml:\d+: ", e) for e in errors)


def test_registry_checks_name_installed_choices(tree):
    root = tree({
        "cli_agents/reference.yaml": VALID["cli_agents/reference.yaml"].replace("plugin: reference",
                                                                                "plugin: refagent"),
        "tests/save_file.yaml": VALID["tests/save_file.yaml"].replace("kind: file_equals", "kind: file_equal"),
        "tests/save_file_de.yml": VALID["tests/save_file_de.yml"].replace("kind: nonce", "kind: dns"),
    })
    assert errors_of(root, REGISTRY) == [
        "specs/tests/save_file.yaml:8: validators[0].kind: unknown validator kind 'file_equal'; did you mean "
        "'file_equals'? installed: exploding, file_equals, file_exists; install the plugin that provides it",
        "specs/tests/save_file_de.yml:8: challenge.kind: unknown challenge kind 'dns'; installed: nonce; "
        "install the plugin that provides it",
    ]
    # Without a registry those names are not checked.
    assert load_specs(root).agents["reference"].plugin == "refagent"


def test_uninstalled_agent_plugin_is_a_note_not_an_error(tree):
    """Core alone runs with the shipped specs: agents of absent plugins are skipped, not fatal."""
    root = tree({"cli_agents/reference.yaml": VALID["cli_agents/reference.yaml"].replace(
        "plugin: reference", "plugin: refagent")})
    specs = load_specs(root, registry=REGISTRY)
    assert [n.format() for n in specs.notes] == [
        "specs/cli_agents/reference.yaml:2: plugin: agent plugin 'refagent' is not installed; "
        "its cases will be SKIPPED (install it: pip install gripprobe-refagent, or ./dev setup "
        "installs every in-repo plugin)"]


def test_validator_options_are_checked_with_the_plugin_options_model(tree):
    root = tree({"tests/save_file.yaml": """\
        id: save_file
        title: t
        prompt: p
        validators:
          - kind: file_equals
            path: 3
            expcted: x
          - kind: exploding
          - kind: file_exists
            anything: goes
        reference: [{shell: ls}]
        tags: [sanity]
        """})
    assert errors_of(root, REGISTRY) == [
        "specs/tests/save_file.yaml:5: validators[0].expected: missing required key",
        "specs/tests/save_file.yaml:6: validators[0].path: expected a string, got an integer (put the value in quotes)",
        "specs/tests/save_file.yaml:7: validators[0].expcted: unknown key; did you mean 'expected'?",
        "specs/tests/save_file.yaml:8: validators[1]: could not check the options of 'exploding' "
        "(RuntimeError: plugin bug)",
    ]
    assert load_specs(root).tests["save_file"].validators[0].model_extra == {"path": 3, "expcted": "x"}


# --------------------------------------------------------------------------- finding the root

yaml = YAML(typ="safe")


def test_spec_layers_put_the_shipped_specs_under_the_nearest_specs_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("GRIPPROBE_SPECS", raising=False)
    shipped = shipped_specs_dir()
    assert shipped is not None and (shipped / "suites" / "default.yaml").is_file()
    (tmp_path / "specs" / "tests").mkdir(parents=True)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert spec_layers(start=deep) == [shipped, (tmp_path / "specs").resolve()]
    assert spec_layers(start=tmp_path / "specs") == [shipped, (tmp_path / "specs").resolve()]
    monkeypatch.chdir(deep)
    assert spec_layers() == [shipped, (tmp_path / "specs").resolve()]


def test_spec_layers_from_env_and_flags(tmp_path, monkeypatch):
    shipped = shipped_specs_dir()
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    monkeypatch.delenv("GRIPPROBE_SPECS", raising=False)
    # nothing nearby: the shipped specs alone (a newcomer outside any checkout still has agents and models)
    assert spec_layers(start=tmp_path) == [shipped]
    monkeypatch.setenv("GRIPPROBE_SPECS", f"{one}{os.pathsep}{two}")
    assert spec_layers() == [shipped, one, two]
    # --specs wins over the environment; a folder given twice (or the shipped one again) is loaded once, highest
    assert spec_layers([two, one, two]) == [shipped, one, two]
    assert spec_layers([shipped, one]) == [shipped, one]
    assert spec_layers([one], shipped=False) == [one]
    monkeypatch.setenv("GRIPPROBE_SPECS", str(tmp_path / "missing"))
    with pytest.raises(UserError, match="GRIPPROBE_SPECS"):
        spec_layers()
    with pytest.raises(UserError, match="does not exist; pass --specs DIR"):
        spec_layers([tmp_path / "missing"])


def test_a_higher_layer_wins_by_id_and_says_what_it_replaced(tmp_path):
    shipped = shipped_specs_dir()
    mine = tmp_path / "mine"
    (mine / "tests").mkdir(parents=True)
    (mine / "models").mkdir()
    test = yaml.load((shipped / "tests" / "save_file.yaml").read_text())
    test["tags"] = [*test.get("tags", []), "mine"]
    with open(mine / "tests" / "save_file.yaml", "w") as f:
        yaml.dump(test, f)
    model = yaml.load((shipped / "models" / "oracle-perfect.yaml").read_text())
    model["id"] = "my-oracle"
    with open(mine / "models" / "my-oracle.yaml", "w") as f:
        yaml.dump(model, f)
    specs = load_specs([shipped, mine])
    assert "mine" in specs.tests["save_file"].tags
    assert specs.origin("test", "save_file") == mine and specs.replaced[("test", "save_file")] == shipped / "tests" / "save_file.yaml"
    assert specs.origin("model", "my-oracle") == mine and ("model", "my-oracle") not in specs.replaced
    assert specs.origin("model", "oracle-perfect") == shipped
    # the shipped suites still see every shipped test; the layer on top adds a model they can be run with
    assert "my-oracle" in specs.models and len(specs.models) == len(load_specs(shipped).models) + 1
    # an id twice within one layer is still an error
    (mine / "tests" / "save_file2.yaml").write_text((mine / "tests" / "save_file.yaml").read_text())
    with pytest.raises(SpecError, match="duplicate test id 'save_file'"):
        load_specs([shipped, mine])


# --------------------------------------------------------------------------- schemas and docs

def test_schemas_describe_every_kind(tmp_path):
    paths = write_schemas(tmp_path / "schemas")
    assert [p.name for p in paths] == ["model.schema.json", "cli_agent.schema.json", "test.schema.json",
                                       "suite.schema.json", "hardware_profiles.schema.json"]
    models = [ModelSpec, CliAgentSpec, TestSpec, SuiteSpec, HardwareProfiles]
    for path, model in zip(paths, models):
        schema = json.loads(path.read_text())
        assert schema["$schema"].endswith("2020-12/schema")
        assert schema["additionalProperties"] is False
        assert list(schema["properties"]) == list(model.model_fields)
    first = [p.read_bytes() for p in paths]
    assert [p.read_bytes() for p in write_schemas(tmp_path / "schemas")] == first


def _doc_sections() -> dict[str, str]:
    text = (ROOT / "docs" / "specs.md").read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]}


@pytest.mark.parametrize("model", [ModelSpec, CliAgentSpec, TestSpec, SuiteSpec, HardwareProfiles])
def test_docs_name_every_key(model):
    """docs/specs.md documents every key of every spec model (and nested model) as `key`."""
    text = (ROOT / "docs" / "specs.md").read_text(encoding="utf-8")
    pending = [model]
    seen = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for name, field in cls.model_fields.items():
            assert f"`{name}`" in text, f"{cls.__name__}.{name} is not documented in docs/specs.md"
            for sub in _nested_models(field.annotation):
                pending.append(sub)


def _nested_models(annotation) -> list[type]:
    import typing

    from pydantic import BaseModel
    out = []
    stack = [annotation]
    while stack:
        tp = stack.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            out.append(tp)
        stack.extend(typing.get_args(tp))
    return out


def test_docs_examples_are_valid_specs(tmp_path, monkeypatch):
    """Every ```yaml block starting with `# specs/<path>` in docs/specs.md is written out and loaded."""
    text = (ROOT / "docs" / "specs.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n# (specs/\S+)\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    for rel, body in blocks:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    try:
        from gripprobe_core.pluginmanager import make_plugin_manager
        registry = make_plugin_manager(load_entry_points=False).registry  # the built-in kinds the docs use
    except ImportError:
        registry = None
    specs = load_specs(tmp_path / "specs", registry=registry)
    assert specs.models and specs.agents and specs.tests and specs.suites and specs.hardware.profiles
    assert specs.where("test", "save_file", "validators", 0) == "specs/tests/save_file.yaml:9"


# --------------------------------------------------------------------------- numbers

def test_numbers_that_are_not_finite_or_out_of_range_are_one_line_each(tree):
    """``.nan``, ``.inf``, ``1e400`` (read as infinity) and values past a key's range, in every kind of spec:
    each is one line naming the file, line and key, and what to write instead."""
    huge = "1" + "0" * 400
    root = tree({
        "models/oracle-perfect.yaml": """\
            id: oracle-perfect
            backends:
              - id: oracle
                kind: oracle
                model_id: perfect
                resources: {gpu-box: .inf}
            policy:
              timeout_s: .nan
              max_tokens_per_phase: 0
              agents:
                reference: {timeout_s: -1}
            pricing:
              input_per_million: .inf
              output_per_million: 1e400
              cached_input_per_million: -0.5
            """,
        "cli_agents/reference.yaml": f"""\
            id: reference
            plugin: reference
            executable: gripprobe-refagent
            tool_kinds: [read, write, execute]
            timeout_s: {huge}
            """,
        "tests/save_file.yaml": """\
            id: save_file
            title: Save a file
            prompt: Write greeting.txt.
            timeout_s: 1e308
            fixtures:
              - {path: run.sh, mode: 99999999999999999999}
            challenge: {kind: nonce, options: {delay_s: .nan}}
            validators:
              - {kind: file_equals, path: greeting.txt, expected: hello, tolerance: [1, .inf]}
            reference:
              - write: {path: greeting.txt, content: hello}
            """,
        "suites/default.yaml": """\
            id: default
            agents: [reference]
            models: [oracle-perfect]
            tests: [save_file]
            jobs: 1000
            trials: 101
            max_tokens_per_phase: -3
            """,
        "hardware_profiles.yaml": "profiles:\n  - {id: ci, memory_gb: .nan}\n",
    })
    errors = errors_of(root)
    expected = [
        "specs/cli_agents/reference.yaml:5: timeout_s: 100000000000000000000000000... is out of range; give a "
        "number greater than 0 and at most 86,400",
        "specs/hardware_profiles.yaml:2: profiles[0].memory_gb: .nan is not a number GripProbe can use; write a "
        "finite number (not .nan or .inf)",
        "specs/models/oracle-perfect.yaml:6: backends[0].resources.gpu-box: .inf is not a number GripProbe can use; "
        "write a finite number (not .nan or .inf)",
        "specs/models/oracle-perfect.yaml:8: policy.timeout_s: .nan is not a number GripProbe can use; write a "
        "finite number (not .nan or .inf)",
        "specs/models/oracle-perfect.yaml:9: policy.max_tokens_per_phase: 0 is out of range; give a whole number "
        "at least 1 and at most 1,000,000,000,000,000",
        "specs/models/oracle-perfect.yaml:11: policy.agents.reference.timeout_s: -1 is out of range; give a number "
        "greater than 0 and at most 86,400",
        "specs/models/oracle-perfect.yaml:13: pricing.input_per_million: .inf is not a number GripProbe can use; "
        "write a finite number (not .nan or .inf)",
        "specs/models/oracle-perfect.yaml:14: pricing.output_per_million: .inf is not a number GripProbe can use; "
        "write a finite number (not .nan or .inf)",
        "specs/models/oracle-perfect.yaml:15: pricing.cached_input_per_million: -0.5 is out of range; give a number "
        "at least 0 and at most 1,000,000",
        "specs/suites/default.yaml:5: jobs: 1000 is out of range; give a whole number at least 1 and at most 64",
        "specs/suites/default.yaml:6: trials: 101 is out of range; give a whole number at least 1 and at most 100",
        "specs/suites/default.yaml:7: max_tokens_per_phase: -3 is out of range; give a whole number at least 1 "
        "and at most 1,000,000,000,000,000",
        "specs/tests/save_file.yaml:4: timeout_s: 1e+308 is out of range; give a number greater than 0 and at "
        "most 86,400",
        "specs/tests/save_file.yaml:6: fixtures[0].mode: 99999999999999999999 is out of range; give a whole "
        "number at least 0 and at most 4095",
        "specs/tests/save_file.yaml:7: challenge.options: delay_s is .nan, not a finite number; write a finite number",
        "specs/tests/save_file.yaml:9: validators[0]: tolerance[1] is .inf, not a finite number; write a finite "
        "number",
    ]
    assert errors == expected


def test_a_model_with_pricing_of_inf_never_reaches_a_cost():
    """The pricing a model spec can hold gives a finite cost for any believable token count."""
    from gripprobe_core.models.bounds import CALL_TOKENS_MAX, COST_MAX
    from gripprobe_core.models.specs import Pricing
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Pricing(input_per_million=float("inf"), output_per_million=1.0)
    top = Pricing(input_per_million=1e6, output_per_million=1e6)
    assert top.cost(CALL_TOKENS_MAX * 10**6, CALL_TOKENS_MAX * 10**6) <= COST_MAX


# --------------------------------------------------------------------------- ids

@pytest.mark.parametrize("bad, what", [
    ("refer\u202eence", "U+202E RIGHT-TO-LEFT OVERRIDE (a bidi control, which reorders what is shown) "
                        "(did you mean 'reference'?)"),
    ("ref\u200berence", "U+200B ZERO WIDTH SPACE (an invisible zero-width character) (did you mean 'reference'?)"),
    ("r\u0435ference", "U+0435 CYRILLIC SMALL LETTER IE (which looks like the ASCII 'e') (did you mean 'reference'?)"),
])
def test_ids_that_read_like_another_are_refused_with_one_line(tree, bad, what):
    """Three agents whose ids all read "reference" once made three rows reading "reference"."""
    root = tree({f"cli_agents/{bad}.yaml": VALID["cli_agents/reference.yaml"].replace("id: reference", f"id: {bad}")})
    (line,) = errors_of(root)
    assert line.startswith(f"specs/cli_agents/{bad}.yaml:1: id: {ascii(bad)} holds {what}; agent ids are lowercase "
                           f"ASCII letters and digits, words joined by one '-', '_' or '.', at most 32 characters")


def test_ids_of_every_kind_follow_the_rule(tree):
    root = tree({
        "models/oracle-perfect.yaml": VALID["models/oracle-perfect.yaml"].replace("- id: oracle", "- id: Oracle"),
        "cli_agents/reference.yaml": VALID["cli_agents/reference.yaml"].replace("[tool, markdown]", "[tool, mark down]"),
        "tests/save_file__t2.yaml": VALID["tests/save_file.yaml"].replace("id: save_file", "id: save_file__t2"),
        "suites/default.yaml": VALID["suites/default.yaml"].replace("format: markdown", "format: x__y"),
        "hardware_profiles.yaml": "profiles:\n  - id: ci box\n",
        "models/" + "m" * 70 + ".yaml": "id: " + "m" * 70 + "\nbackends: [{id: o, kind: oracle, model_id: perfect}]\n",
    })
    errors = errors_of(root)
    assert [e.split(": ", 2)[:2] for e in errors] == [
        ["specs/cli_agents/reference.yaml:4", "formats[1]"],
        ["specs/hardware_profiles.yaml:2", "profiles[0].id"],
        [f"specs/models/{'m' * 70}.yaml:1", "id"],
        ["specs/models/oracle-perfect.yaml:4", "backends[0].id"],
        ["specs/suites/default.yaml:7", "cases[0].format"],
        ["specs/tests/save_file__t2.yaml:1", "id"],
    ], errors
    assert "'save_file__t2' is not a plain id (did you mean 'save_file_t2'?)" in errors[5]
    assert "is 70 characters, over the 64 an id may have here" in errors[2]
