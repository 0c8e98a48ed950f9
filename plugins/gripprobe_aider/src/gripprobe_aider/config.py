"""aider's isolated configuration for one phase: its files under HOME, its environment, its argv.

Measured on aider-chat 0.86.2. Everything aider would fetch, ask or write elsewhere is pinned here:

- the model catalog (litellm downloads ``model_prices_and_context_window.json`` from GitHub) →
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` plus a ``--model-metadata-file`` naming the model, so aider
  knows its context size without the catalog and prints no "unknown model" warning;
- update checks, release notes, analytics → ``--no-check-update --no-show-release-notes
  --analytics-disable``; URL detection and shell suggestions → ``--no-detect-urls
  --no-suggest-shell-commands``; git → ``--no-git --no-auto-commits``;
- questions ("Create new file?", "Allow edits to file that has not been added to the chat?") →
  ``--yes-always``; terminal UI → ``--no-pretty --no-fancy-input`` (plain text on stdout);
- retries: the OpenAI SDK's own retries inside each aider attempt are turned off
  (``extra_params.max_retries: 0`` in a ``--model-settings-file``). aider's *own* back-off loop
  (0.25 s doubling up to 32 s, about 64 s in all, ``aider.models.RETRY_TIMEOUT = 60``) has no switch
  in this version;
- history files → ``--chat-history-file``, ``--input-history-file``, ``--llm-history-file`` and the
  ``--env-file`` all under ``<HOME>/.gripprobe-aider/`` (the workspace gets no ``.aider*`` files).

aider still reads ``.aider.conf.yml``, ``.env`` and ``.aider.model.*`` files from its working directory
(the workspace) and from HOME, whatever the flags say (``--config`` adds a file, it does not replace the
search). HOME is fresh per phase; a workspace only holds what the test seeds, so such a file is part
of the test.

The base URL is passed three ways because ``OPENAI_BASE_URL`` in the environment OVERRIDES
``--openai-api-base`` (litellm reads it first): the flag, ``OPENAI_BASE_URL`` and ``OPENAI_API_BASE``
all carry the phase's URL. The API key travels only in the environment (``OPENAI_API_KEY``), never
on the command line (aider copies its command line into the chat history file) and never in a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

#: litellm provider prefix: aider talks Chat Completions (SSE) to any OpenAI-compatible base URL.
PROVIDER = "openai"
#: Key handed to key-less backends (the oracle, a local Ollama): litellm's OpenAI client insists on one.
DUMMY_API_KEY = "gripprobe-no-key"
#: Folder under the phase's HOME that holds every file written for aider (and every file it writes).
STATE_DIR = ".gripprobe-aider"
#: The edit formats this plugin drives (the spec's ``formats`` axis), and aider's flag value for each.
EDIT_FORMATS: tuple[str, ...] = ("whole", "diff", "udiff")
DEFAULT_EDIT_FORMAT = "whole"

#: Context and output limits declared for the model (aider budgets the chat with them).
CONTEXT_LIMIT = 131072
OUTPUT_LIMIT = 8192

#: ``COLUMNS`` for aider's console: wide enough that no message of its own is wrapped.
TERMINAL_COLUMNS = 1000

#: Seeded workspace files added to the chat (``--file``): at most this many, each at most this big.
MAX_CHAT_FILES = 50
MAX_CHAT_FILE_BYTES = 256 * 1024

#: Flags that keep aider quiet, local and non-interactive (see the module docstring).
QUIET_FLAGS: tuple[str, ...] = (
    "--no-git", "--no-auto-commits", "--yes-always", "--no-show-model-warnings", "--analytics-disable",
    "--no-check-update", "--no-show-release-notes", "--no-pretty", "--no-fancy-input", "--no-detect-urls",
    "--no-suggest-shell-commands", "--encoding", "utf-8",
)

#: Environment variables that would re-route or re-configure aider behind its flags' back. The runner
#: passes none of them on (allowlist), but a backend spec's ``env`` could: they are overridden here.
URL_ENV: tuple[str, ...] = ("OPENAI_BASE_URL", "OPENAI_API_BASE")


@dataclass(frozen=True)
class AiderFiles:
    """Where one phase's aider files live (all under ``<HOME>/.gripprobe-aider/``)."""

    root: Path

    @property
    def env_file(self) -> Path:
        return self.root / "aider.env"

    @property
    def model_metadata(self) -> Path:
        return self.root / "model_metadata.json"

    @property
    def model_settings(self) -> Path:
        return self.root / "model_settings.yml"

    @property
    def chat_history(self) -> Path:
        return self.root / "aider.chat.history.md"

    @property
    def input_history(self) -> Path:
        return self.root / "aider.input.history"

    @property
    def llm_history(self) -> Path:
        return self.root / "aider.llm.history.txt"


def files_for(home: Path) -> AiderFiles:
    """The file layout for a phase whose HOME is ``home`` (nothing is written)."""
    return AiderFiles(home / STATE_DIR)


def model_ref(model_name: str) -> str:
    """The ``provider/model`` name aider and litellm expect (``openai/<model>``)."""
    return f"{PROVIDER}/{model_name}"


def edit_format_for(case_format: str) -> str:
    """aider's ``--edit-format`` for a case format; an unknown format (``tool``) gets the default."""
    return case_format if case_format in EDIT_FORMATS else DEFAULT_EDIT_FORMAT


def model_metadata(model_name: str) -> dict[str, dict[str, object]]:
    """litellm model metadata for ``openai/<model>``: limits and zero cost (no catalog needed)."""
    return {model_ref(model_name): {
        "max_tokens": OUTPUT_LIMIT, "max_input_tokens": CONTEXT_LIMIT, "max_output_tokens": OUTPUT_LIMIT,
        "input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": PROVIDER, "mode": "chat",
    }}


def model_settings_yaml(model_name: str, edit_format: str) -> str:
    """aider model settings: the edit format, no repo map, streaming, no SDK-level retries."""
    return (
        f"- name: {json.dumps(model_ref(model_name))}\n"
        f"  edit_format: {edit_format}\n"
        "  use_repo_map: false\n"
        "  streaming: true\n"
        "  extra_params:\n"
        "    max_retries: 0\n"
    )


def write_files(home: Path, model_name: str, edit_format: str) -> AiderFiles:
    """Write the phase's env, model metadata and model settings files; return the layout.

    History files are aider's to write; stale ones (none in a fresh HOME) are removed so a phase's
    artifacts are its own."""
    files = files_for(home)
    files.root.mkdir(parents=True, exist_ok=True)
    files.env_file.write_text("", encoding="utf-8")
    files.model_metadata.write_text(json.dumps(model_metadata(model_name), indent=2) + "\n", encoding="utf-8")
    files.model_settings.write_text(model_settings_yaml(model_name, edit_format), encoding="utf-8")
    for stale in (files.chat_history, files.input_history, files.llm_history):
        stale.unlink(missing_ok=True)
    return files


def agent_env(base_url: str, api_key: str | None) -> dict[str, str]:
    """Environment additions: the URL in both variables litellm reads, the key, local-only litellm,
    UTC (the timestamps aider writes into its LLM history are naive local time) and a wide terminal
    (aider's console wraps its messages at ``COLUMNS``, 80 by default, splitting file names)."""
    env = {name: base_url for name in URL_ENV}
    env["OPENAI_API_KEY"] = api_key or DUMMY_API_KEY
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["TZ"] = "UTC"
    env["COLUMNS"] = str(TERMINAL_COLUMNS)
    return env


def chat_files(workspace: Path) -> list[str]:
    """Workspace files to add to aider's chat, as workspace-relative POSIX paths, sorted.

    aider has no read tool: it sees a file's content only when the file is in the chat. The runner
    seeds the workspace with the test's fixtures before the agent starts, so these are exactly those
    fixtures (regular, non-hidden, UTF-8 text, at most :data:`MAX_CHAT_FILE_BYTES`, at most
    :data:`MAX_CHAT_FILES`). Never raises."""
    out: list[str] = []
    try:
        walk = sorted(os.walk(workspace))
    except OSError:
        return out
    for dirpath, dirnames, filenames in walk:
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel_dir = Path(dirpath).relative_to(workspace)
        if any(part.startswith(".") for part in rel_dir.parts):
            continue
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            try:
                if path.stat().st_size > MAX_CHAT_FILE_BYTES:
                    continue
                path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out.append((rel_dir / name).as_posix())
            if len(out) >= MAX_CHAT_FILES:
                return out
    return out


def build_argv(executable: str, files: AiderFiles, *, base_url: str, model_name: str, edit_format: str,
               prompt: str, chat_paths: list[str], extra_args: list[str] | None = None) -> list[str]:
    """aider's command line for one phase (cwd = the workspace, stdin = /dev/null).

    The prompt goes as ``--message=<prompt>`` (one argument, so a prompt starting with ``-`` is never
    read as a flag); each chat file as ``--file=<path>``."""
    return [
        executable,
        f"--model={model_ref(model_name)}",
        f"--openai-api-base={base_url}",
        f"--edit-format={edit_format}",
        *QUIET_FLAGS,
        f"--model-metadata-file={files.model_metadata}",
        f"--model-settings-file={files.model_settings}",
        f"--env-file={files.env_file}",
        f"--chat-history-file={files.chat_history}",
        f"--input-history-file={files.input_history}",
        f"--llm-history-file={files.llm_history}",
        *(extra_args or []),
        *(f"--file={p}" for p in chat_paths),
        f"--message={prompt}",
    ]
