"""Attacks on the harness by untrusted agents (README.md)."""
