"""A third-party agent plugin for the adversarial suite (installed by test_kept_files_links.py into the
arena with a hand-written dist-info, so the harness discovers it as it would any plugin): driver
``adv-keeper`` starts an attack script exactly as the reference driver does, and keeps files from every
folder of the phase the way real drivers do — found by pattern, named by fixed path, in HOME, in an XDG
folder, in TMPDIR, in the workspace, and one read by the driver itself and kept as redacted bytes (as
continue's log). Written only against ``gripprobe_core.plugin``."""

from __future__ import annotations

from pathlib import Path

from gripprobe_core.plugin import (
    AgentCommand, BaseAgentDriver, Transcript, find_agent_files, hookimpl, json_lines, read_agent_file, text,
)


def kept_places(ctx) -> dict[str, Path]:
    """Where the agent's files are, by the name they are kept under."""
    logs = ctx.home / ".adv-agent" / "logs"
    return {"fixed.jsonl": logs / "session-0.jsonl",
            "state.json": Path(ctx.xdg["XDG_STATE_HOME"]) / "adv" / "state.json",
            "run.log": ctx.tmpdir / "adv" / "run.log",
            "notes.txt": ctx.workspace / ".adv" / "notes.txt"}


class KeeperDriver(BaseAgentDriver):
    name = "adv-keeper"
    description = "adversarial suite: an attack script, with files kept from HOME, XDG, TMPDIR and the workspace"

    def environment(self, ctx):
        (ctx.home / ".adv-agent" / "logs").mkdir(parents=True, exist_ok=True)  # before the run, as drivers do
        (ctx.home / ".adv-agent" / "config.json").write_text('{"model": "%s"}\n' % ctx.model_name)
        return {"OPENAI_API_KEY": ctx.api_key or "oracle"}

    def command(self, ctx):
        return AgentCommand([ctx.agent.executable, "--base-url", ctx.openai_base_url, "--model", ctx.model_name,
                             "--workspace", str(ctx.workspace), "--prompt", ctx.prompt])

    def artifacts(self, ctx):
        out: dict[str, Path | bytes] = dict(kept_places(ctx))
        found = find_agent_files(ctx, ctx.home / ".adv-agent" / "logs", "session-*.jsonl")
        if found:
            out["session.jsonl"] = found[-1]
        secret = read_agent_file(ctx, ctx.home / ".adv-agent" / "logs" / "secret.log")
        if secret is not None:
            out["secret.log"] = secret.replace(b"sk-", b"[REDACTED]-")
        return out

    def parse(self, ctx, capture):
        final = None
        try:
            data = capture.stdout_path.read_bytes()
        except OSError:
            data = b""
        for _line, obj in json_lines(data):
            if obj.get("type") == "final":
                final = text(obj.get("text"))
        kept = b"".join(p.read_bytes() for p in capture.files.values())  # what was kept reaches the report
        return Transcript([], (final or "") + kept.decode("utf-8", "replace"))


@hookimpl
def register_agents(register):
    register(KeeperDriver())
