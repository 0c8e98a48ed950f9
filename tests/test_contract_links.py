"""The driver contract's link check (DriverContract.test_kept_files_never_follow_a_link) catches the ways
a third-party driver can keep or write through a link the agent planted, and passes a driver that uses
the core's helpers. The drivers here are real drivers written the way plugin authors write them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gripprobe_core.models.specs import TOOL_KINDS, CliAgentSpec
from gripprobe_core.plugin import AgentCommand, BaseAgentDriver, find_agent_files, read_agent_file
from gripprobe_core.testing import DriverContract

AGENT = CliAgentSpec.model_validate({"id": "x", "plugin": "x", "executable": "x", "tool_kinds": list(TOOL_KINDS)})
LOG = "home/.x/logs/x.log"
SESSION = "home/.x/sessions/2026/s-1.jsonl"


class _Base(BaseAgentDriver):
    name = "x"

    def command(self, ctx):
        return AgentCommand(["x"])

    def environment(self, ctx):
        (ctx.home / ".x" / "logs").mkdir(parents=True, exist_ok=True)
        return {}


class Careful(_Base):
    """Finds and reads with the core's helpers; hands the redacted log over as bytes."""

    def artifacts(self, ctx):
        out: dict[str, Path | bytes] = {}
        found = find_agent_files(ctx, ctx.home / ".x" / "sessions", "*/s-*.jsonl")
        if found:
            out["session.jsonl"] = found[-1]
        log = read_agent_file(ctx, ctx.home / ".x" / "logs" / "x.log")
        if log is not None:
            out["x.log"] = log.replace(b"sk-", b"[REDACTED]")
        return out


class WritesBeside(Careful):
    """What continue did: reads the log (O_NOFOLLOW on its last component only), writes the redacted copy
    beside it and keeps that."""

    def artifacts(self, ctx):
        out = {k: v for k, v in super().artifacts(ctx).items() if k != "x.log"}
        log = ctx.home / ".x" / "logs" / "x.log"
        try:
            fd = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return out
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
        copy = log.with_name("x.redacted.log")
        copy.write_bytes(data.replace(b"sk-", b"[REDACTED]"))
        out["x.log"] = copy
        return out


class ReadsThrough(Careful):
    """Reads the log with Path.read_bytes (follows every link) and keeps the bytes."""

    def artifacts(self, ctx):
        out = {k: v for k, v in super().artifacts(ctx).items() if k != "x.log"}
        log = ctx.home / ".x" / "logs" / "x.log"
        if log.is_file():
            out["x.log"] = log.read_bytes()
        return out


class Contract(DriverContract):
    kept_files = ("session.jsonl", "x.log")
    kept_paths = (SESSION, LOG)


def test_a_careful_driver_passes(tmp_path):
    Contract().test_kept_files_never_follow_a_link(Careful(), AGENT, tmp_path)


@pytest.mark.parametrize("driver, says", [(WritesBeside(), "something was written into it"),
                                          (ReadsThrough(), "the driver kept its canary")])
def test_a_driver_reading_or_writing_through_a_link_fails(tmp_path, driver, says):
    with pytest.raises(AssertionError, match=says):
        Contract().test_kept_files_never_follow_a_link(driver, AGENT, tmp_path)


def test_a_driver_with_kept_files_must_say_where_they_are(tmp_path):
    class Silent(DriverContract):
        kept_files = ("x.log",)

    with pytest.raises(pytest.fail.Exception, match="set kept_paths"):
        Silent().test_kept_files_never_follow_a_link(Careful(), AGENT, tmp_path)


def test_kept_paths_the_driver_does_not_keep_fail_the_control(tmp_path):
    class Wrong(DriverContract):
        kept_files = ("x.log",)
        kept_paths = ("home/.x/elsewhere/x.log",)

    with pytest.raises(AssertionError, match="without any link the driver did not keep"):
        Wrong().test_kept_files_never_follow_a_link(Careful(), AGENT, tmp_path)


def test_fixed_paths_named_in_a_fresh_phase_are_checked_without_kept_paths(tmp_path):
    """A driver naming fixed paths (as aider does) is checked at those paths with nothing declared."""

    class Fixed(_Base):
        def artifacts(self, ctx):
            return {"x.log": ctx.home / ".x" / "logs" / "x.log"}

    class Undeclared(DriverContract):
        kept_files = ("x.log",)

    Undeclared().test_kept_files_never_follow_a_link(Fixed(), AGENT, tmp_path)


def test_model_aliases_the_contract_accepts_and_refuses(tmp_path):
    """``model_aliases`` (optional) must be plain model names: the proxy serves only those besides the case's."""
    from gripprobe_core.phase import PhaseContext

    def make_phase_ctx(**kw):
        return PhaseContext.__new__(PhaseContext)  # model_aliases here never reads the context

    class Titled(Careful):
        def model_aliases(self, ctx):
            return ["title-model"]

    class Junk(Careful):
        def model_aliases(self, ctx):
            return ["", " padded "]

    DriverContract().test_model_aliases_are_plain_model_names(Titled(), make_phase_ctx)
    DriverContract().test_model_aliases_are_plain_model_names(Careful(), make_phase_ctx)  # the default: none
    with pytest.raises(AssertionError):
        DriverContract().test_model_aliases_are_plain_model_names(Junk(), make_phase_ctx)
