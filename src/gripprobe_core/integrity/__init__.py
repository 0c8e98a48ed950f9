"""Signed runs (SPEC §9): the harness's key (:mod:`.keys`), what it signs when it writes a run
(:mod:`.seal`), and how a stored run is checked against it (:mod:`.check`, ``gripprobe verify``).
See docs/sandbox.md ("Signed runs") for the design."""
