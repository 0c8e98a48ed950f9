"""Telemetry proxy modes through the real runner (SPEC §5): off | auto | force, and proxy failures as evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SPECS, run_reference
from gripprobe_core import RouteDecision, hookimpl
from gripprobe_core.errors import PluginError
from gripprobe_core.pluginmanager import make_plugin_manager


class Unroutable:
    """An agent plugin saying its agent cannot be pointed at another base URL."""

    @hookimpl(tryfirst=True)
    def route_base_url(self, agent, backend):
        return RouteDecision(False, "unsupported_shell")


class BindFails:
    """A proxy plugin whose port cannot be bound."""

    @hookimpl
    def start_proxy(self, ctx, upstream_url, record_path):
        raise OSError(98, "Address already in use")


def _run(tmp_path: Path, mode: str, *extra, test: str = "shell_pwd", without: tuple[str, ...] = ()):
    out = run_reference(tmp_path, *extra, tests=(test,), without=without, proxy_mode=mode)
    assert len(out.results) == 1
    return out.results[0]


def test_auto_with_the_builtin_proxy_collects_tier_a(tmp_path):
    r = _run(tmp_path, "auto")
    assert r.verdict.status == "PASS"
    assert r.telemetry.telemetry_proxy_status == "collected" and r.telemetry.telemetry_source_tier == "A"
    assert r.verdict.protocol_match == 1.0


def test_off_records_skipped_disabled(tmp_path):
    r = _run(tmp_path, "off")
    assert r.verdict.status == "PASS"
    assert r.telemetry.telemetry_proxy_status == "skipped" and r.telemetry.telemetry_proxy_skip_reason == "disabled"
    assert r.telemetry.telemetry_source_tier == "B"  # the reference agent's own JSON events


def test_auto_without_a_proxy_plugin_is_skipped_not_failed(tmp_path):
    r = _run(tmp_path, "auto", without=("recording_proxy",))
    assert r.verdict.status == "PASS"
    assert r.telemetry.telemetry_proxy_status == "skipped"
    assert r.telemetry.telemetry_proxy_skip_reason == "unsupported_backend"


def test_force_with_unroutable_agent_is_harness_error(tmp_path):
    r = _run(tmp_path, "force", Unroutable())
    assert r.verdict.status == "HARNESS_ERROR"
    assert r.verdict.failure_reason == "proxy_required_but_not_available"
    assert r.telemetry.telemetry_proxy_status == "error"
    assert [p.phase for p in r.phases] == ["warmup"]  # the agent never ran


def test_auto_with_unroutable_agent_skips_with_reason(tmp_path):
    r = _run(tmp_path, "auto", Unroutable())
    assert r.verdict.status == "PASS"
    assert r.telemetry.telemetry_proxy_skip_reason == "unsupported_shell"


def test_bind_error_in_auto_is_evidence_and_lower_tier_still_confirms(tmp_path):
    r = _run(tmp_path, "auto", BindFails())
    assert r.telemetry.telemetry_proxy_status == "error"
    assert r.telemetry.telemetry_proxy_skip_reason == "proxy_bind_error"
    assert r.verdict.status == "PASS" and r.telemetry.telemetry_source_tier == "B"


def test_bind_error_in_force_is_harness_error(tmp_path):
    r = _run(tmp_path, "force", BindFails())
    assert r.verdict.status == "HARNESS_ERROR" and r.verdict.failure_reason == "proxy_required_but_not_available"


def test_register_challenge_servers_rejects_a_second_owner_of_a_kind():
    class MyChallenge:
        @hookimpl
        def register_challenge_servers(self, register):
            register("nonce", lambda options, phase: None)

    gpm = make_plugin_manager(load_entry_points=False, extra=[MyChallenge()])
    with pytest.raises(PluginError, match="challenge server 'nonce' is registered twice"):
        _ = gpm.registry


def test_register_validators_adds_a_kind_the_runner_uses(tmp_path):
    """A plugin's validator (register_validators) judges a case like a built-in one."""
    from gripprobe_core import ValidatorResult

    seen = []

    class WordCount:
        @hookimpl
        def register_validators(self, register):
            def word_count(ctx, options):
                text = (ctx.workspace / options["path"]).read_text()
                seen.append(text)
                n = len(text.split())
                return ValidatorResult(kind="word_count", passed=n == options["words"], expected=str(options["words"]),
                                       observed=str(n))
            register("word_count", word_count)

    import shutil
    root = tmp_path / "specs"
    shutil.copytree(SPECS, root)
    (root / "tests" / "two_words.yaml").write_text(
        "id: two_words\ntitle: Two words\nprompt: Write two words to w.txt\nrequires: [write]\n"
        "validators:\n  - {kind: word_count, path: w.txt, words: 2}\n"
        "reference:\n  - write: {path: w.txt, content: hello world}\n")
    r = run_reference(tmp_path / "r", WordCount(), tests=("two_words",), specs=root).results[0]
    assert r.verdict.status == "PASS" and r.validators[0].kind == "word_count" and seen == ["hello world"]


class AsyncNotMine:
    """A plugin whose ``start_proxy`` is a coroutine function answering "not mine" (None).

    A coroutine object is never None, so under ``firstresult`` it used to stop the hook before the built-in
    proxy answered, and the case lost its tier-A telemetry (``unsupported_backend``). Hooks are synchronous:
    such a plugin is refused when it loads, and the built-in proxy serves the case."""

    @hookimpl(tryfirst=True)
    async def start_proxy(self, ctx, upstream_url, record_path):
        return None


def test_an_async_start_proxy_that_declines_does_not_take_the_proxy_away(tmp_path):
    r = _run(tmp_path, "auto", AsyncNotMine())
    assert r.verdict.status == "PASS"
    assert r.telemetry.telemetry_proxy_status == "collected", r.telemetry.telemetry_proxy_skip_reason
    assert r.telemetry.telemetry_source_tier == "A"


def test_a_coroutine_hook_implementation_is_refused_at_load_naming_plugin_and_hook():
    gpm = make_plugin_manager(load_entry_points=False, extra=[AsyncNotMine()])
    assert [f.name for f in gpm.failures] == ["AsyncNotMine"]
    assert "start_proxy" in gpm.failures[0].error and "async" in gpm.failures[0].error
    assert not gpm.pm.has_plugin("AsyncNotMine")
    with pytest.raises(PluginError, match="start_proxy"):
        make_plugin_manager(load_entry_points=False, extra=[AsyncNotMine()], strict=True)
