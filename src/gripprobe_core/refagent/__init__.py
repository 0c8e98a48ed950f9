"""The reference agent (SPEC §8): a small real CLI agent, ``gripprobe-refagent``.

An OpenAI Chat Completions tool loop (shell, read, write, edit) that prints one JSON event per line.
Standard library only, so it starts fast in its own process. See docs/reference-agent.md.
"""
