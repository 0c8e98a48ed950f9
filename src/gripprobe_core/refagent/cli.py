"""``gripprobe-refagent``: command-line entry of the reference agent (docs/reference-agent.md).

Usage errors print one line to stderr, emit an ``error`` event with kind ``usage`` and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from .loop import EXIT_USAGE, AgentConfig, EventWriter, run_agent


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gripprobe-refagent",
                description="GripProbe's reference coding agent: an OpenAI Chat Completions tool loop "
                            "(shell, read, write, edit) printing JSON-lines events on stdout.")
    p.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="model name sent to the backend")
    p.add_argument("--workspace", default=None, help="directory the tools work in (default: current directory)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="the task")
    src.add_argument("--prompt-file", help="file holding the task")
    p.add_argument("--max-turns", type=int, default=12, help="model requests before giving up (default 12)")
    p.add_argument("--tool-timeout", type=float, default=60.0, help="seconds per shell command (default 60)")
    p.add_argument("--request-timeout", type=float, default=300.0,
                   help="seconds to wait for the backend per read (default 300)")
    p.add_argument("--no-stream", action="store_true", help="ask for JSON replies instead of SSE streams")
    p.add_argument("--ask", action="store_true",
                   help="ask before every tool call: a permission.request event on stdout, answered by one JSON "
                        "line on stdin {\"request_id\": ..., \"outcome\": \"allow\"|\"deny\"}")
    return p


def config_from_args(argv: Sequence[str] | None) -> AgentConfig:
    """Parse and check arguments; raise :class:`UsageError` with a one-line message."""
    args = build_parser().parse_args(argv)
    if not args.base_url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url must start with http:// or https://, got {args.base_url!r}")
    if args.max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if args.tool_timeout <= 0 or args.request_timeout <= 0:
        raise UsageError("--tool-timeout and --request-timeout must be positive")
    workspace = Path(args.workspace) if args.workspace else Path.cwd()
    if not workspace.is_dir():
        raise UsageError(f"--workspace {str(workspace)!r} is not a directory")
    if args.prompt_file is not None:
        try:
            prompt = Path(args.prompt_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --prompt-file {args.prompt_file!r}: {exc}") from None
    else:
        prompt = args.prompt
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return AgentConfig(base_url=args.base_url, model=args.model, workspace=workspace.resolve(), prompt=prompt,
                       max_turns=args.max_turns, tool_timeout_s=args.tool_timeout, stream=not args.no_stream,
                       api_key=os.environ.get("OPENAI_API_KEY") or None, request_timeout_s=args.request_timeout,
                       ask=args.ask)


def main(argv: Sequence[str] | None = None) -> int:
    events = EventWriter()
    try:
        cfg = config_from_args(argv)
    except UsageError as exc:
        events.emit("error", kind="usage", message=str(exc))
        sys.stderr.write(f"gripprobe-refagent: error: {exc} (see --help)\n")
        return EXIT_USAGE
    return run_agent(cfg, events)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
