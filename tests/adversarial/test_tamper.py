"""Attack 12: evidence changed after the run (here by the test itself, as a daemon or anyone with
write access to the results could): `rebuild-reports --recompute` must mark exactly the changed case
HARNESS_ERROR with failure_reason `artifact_tampered`, and leave an untouched run as it was. Attacks 25-28:
the same against the run's signatures (`gripprobe verify` must name the case; digests redone or the run
re-signed with another key must not pass; a run stripped of every signature reads as not signed).

Each test works on its own copy of the session's basics run (reference × oracle-perfect/-lazy ×
hello, × victim, and the probe script agent)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .adversary import Arena

pytestmark = pytest.mark.e2e

LAZY = "reference__oracle-lazy__oracle__tool__hello"
PERFECT = "reference__oracle-perfect__oracle__tool__hello"


def _copy(arena: Arena, dest: Path) -> Path:
    """A copy of the pristine basics run (the vault's: an unconfined attack may have hit the original)."""
    run = dest / arena.basics.run_dir.name
    shutil.copytree(arena.vault / "basics" / arena.basics.run_dir.name, run, symlinks=True)
    return run


def _verdicts(run: Path) -> dict[str, tuple[str, str | None]]:
    out = {}
    for p in sorted(run.glob("cases/*/case.json")):
        v = json.loads(p.read_bytes())["verdict"]
        out[p.parent.name] = (v["status"], v.get("failure_reason"))
    return out


def _recompute(arena: Arena, run: Path) -> dict[str, tuple[str, str | None]]:
    out = arena.cli("rebuild-reports", str(run), "--recompute", timeout=120)
    assert not out.timed_out and out.returncode == 0, out.explain()
    return _verdicts(run)


def _only(changed_case: str, before: dict, after: dict) -> None:
    assert after[changed_case] == ("HARNESS_ERROR", "artifact_tampered"), \
        f"{changed_case} after tampering: {after[changed_case]} (was {before[changed_case]})"
    others = {k: (before[k], after[k]) for k in before if k != changed_case and before[k] != after[k]}
    assert not others, f"untouched cases changed: {others}"


def _case_dir(run: Path, name: str) -> Path:
    d = run / "cases" / name
    assert d.is_dir(), f"no case {name} in {run}"
    return d


def test_untouched_run_recomputes_unchanged(arena, tmp_path):
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    assert before[PERFECT][0] == "PASS" and before[LAZY][0] == "NO_TOOL_CALL"
    assert _recompute(arena, run) == before


def test_forged_records_after_the_run_are_flagged(arena, tmp_path):
    """The lazy case gets the perfect case's proxy and oracle records and a hello.txt: what a daemon
    would plant to turn NO_TOOL_CALL into PASS."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    lazy, perfect = _case_dir(run, LAZY), _case_dir(run, PERFECT)
    for name in ("proxy.measured.http.jsonl", "oracle.measured.jsonl"):
        genuine = (perfect / "artifacts" / name).read_bytes()
        with open(lazy / "artifacts" / name, "ab") as fh:
            fh.write(genuine)
    (lazy / "workspace").mkdir(exist_ok=True)
    (lazy / "workspace" / "hello.txt").write_text("hello world\n")
    _only(LAZY, before, _recompute(arena, run))


def test_edited_capture_after_the_run_is_flagged(arena, tmp_path):
    """One byte of the perfect case's captured stdout changed, same length."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    stdout = _case_dir(run, PERFECT) / "measured.stdout"
    data = stdout.read_bytes()
    assert b"hello world" in data
    stdout.write_bytes(data.replace(b"hello world", b"hello w0rld", 1))
    _only(PERFECT, before, _recompute(arena, run))


# ----------------------------------------------------------------------------- signed runs (attacks 25-28)
# The basics run is signed by the arena's harness key (the arena HOME's ~/.config/gripprobe/signing-key):
# whoever edits the results has the files, not that key.

def _verify(arena: Arena, run: Path, *extra: str):
    out = arena.cli("verify", str(run), *extra, timeout=120)
    assert not out.timed_out and "Traceback" not in out.stderr.decode(errors="replace"), out.explain()
    return out


def _named(out) -> set[str]:
    text = out.stdout.decode(errors="replace")
    return {line.split(":")[0].removeprefix("  case ") for line in text.splitlines() if line.startswith("  case ")}


def _issue_17_forgery(run: Path) -> tuple[Path, Path]:
    """The attack of issue 17: drop `evidence` from the lazy case's case.json and copy the perfect case's
    records, stdout, workspace and listing in (NO_TOOL_CALL became PASS with no warning)."""
    lazy, perfect = _case_dir(run, LAZY), _case_dir(run, PERFECT)
    data = json.loads((lazy / "case.json").read_bytes())
    del data["evidence"]
    (lazy / "case.json").write_text(json.dumps(data, indent=2))
    for name in ("proxy.measured.http.jsonl", "oracle.measured.jsonl", "workspace.listing.json"):
        shutil.copyfile(perfect / "artifacts" / name, lazy / "artifacts" / name)
    shutil.copyfile(perfect / "measured.stdout", lazy / "measured.stdout")
    shutil.rmtree(lazy / "workspace", ignore_errors=True)
    shutil.copytree(perfect / "workspace", lazy / "workspace")
    return lazy, perfect


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_dropped_digest_and_copied_records_are_named_by_verify_and_tampered(arena, tmp_path):
    """Attack 25 (issue 17)."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    assert _verify(arena, run).returncode == 0
    _issue_17_forgery(run)
    out = _verify(arena, run)
    assert out.returncode == 1 and _named(out) == {LAZY}, out.stdout.decode()
    assert b"case.json: digest dropped" in out.stdout
    _only(LAZY, before, _recompute(arena, run))
    assert _verify(arena, run).returncode == 1  # and it stays so: the tampered case is never re-signed


def test_digests_redone_after_the_forgery_are_named_by_verify_and_tampered(arena, tmp_path):
    """Attack 26: the forgery, then every sha256 the run records recomputed (case.json `evidence`, the
    evidence statement, the case statement, the seal), the signatures left as they were."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    lazy, _ = _issue_17_forgery(run)
    evidence = {rel: _sha(lazy / rel) for rel in json.loads((_case_dir(run, PERFECT) / "case.json").read_bytes())
                ["evidence"]}
    data = json.loads((lazy / "case.json").read_bytes())
    data["evidence"] = evidence
    (lazy / "case.json").write_text(json.dumps(data, indent=2))
    for name, update in (("evidence.sig.json", lambda st: st.update(evidence=evidence)),
                         ("case.sig.json", lambda st: st.update(
                             evidence_statement=_sha(lazy / "evidence.sig.json"),
                             files={rel: _sha(lazy / rel) for rel in st["files"] if (lazy / rel).is_file()}))):
        signed = json.loads((lazy / name).read_bytes())
        update(signed["statement"])
        (lazy / name).write_text(json.dumps(signed, indent=1, sort_keys=True) + "\n")
    seal = json.loads((run / "run.sig.json").read_bytes())
    seal["statement"]["cases"][LAZY] = {"evidence": _sha(lazy / "evidence.sig.json"),
                                        "case": _sha(lazy / "case.sig.json")}
    (run / "run.sig.json").write_text(json.dumps(seal, indent=1, sort_keys=True) + "\n")
    out = _verify(arena, run)
    assert out.returncode == 1 and LAZY in _named(out) and b"signature invalid" in out.stdout, out.stdout.decode()
    _only(LAZY, before, _recompute(arena, run))


def test_a_run_re_signed_with_the_forgers_key_is_not_the_harness_run(arena, tmp_path):
    """Attack 27: the forgery, then every statement re-signed with a key of the forger's own, named
    everywhere (manifest, seal): consistent, but not this harness's key."""
    from gripprobe_core.integrity.keys import load_signer
    from gripprobe_core.integrity.signed import signed_file

    run = _copy(arena, tmp_path)
    lazy, _ = _issue_17_forgery(run)
    forger = load_signer(create=True, env={"GRIPPROBE_SIGNING_KEY": str(tmp_path / "forger" / "key")})
    assert forger is not None
    fp = forger.public.fingerprint
    data = json.loads((lazy / "case.json").read_bytes())
    data["evidence"] = {rel: _sha(lazy / rel) for rel in json.loads(
        (_case_dir(run, PERFECT) / "case.json").read_bytes())["evidence"]}
    (lazy / "case.json").write_text(json.dumps(data, indent=2))
    seal = json.loads((run / "run.sig.json").read_bytes())["statement"]
    for case in sorted((run / "cases").iterdir()):
        ev = json.loads((case / "evidence.sig.json").read_bytes())["statement"]
        ev.update(key=fp, **({"evidence": data["evidence"]} if case == lazy else {}))
        (case / "evidence.sig.json").write_bytes(signed_file(forger, ev))
        cs = json.loads((case / "case.sig.json").read_bytes())["statement"]
        cs.update(key=fp, evidence_statement=_sha(case / "evidence.sig.json"),
                  files={rel: _sha(case / rel) for rel in cs["files"] if (case / rel).is_file()})
        (case / "case.sig.json").write_bytes(signed_file(forger, cs))
        seal["cases"][case.name] = {"evidence": _sha(case / "evidence.sig.json"), "case": _sha(case / "case.sig.json")}
    manifest = json.loads((run / "manifest.json").read_bytes())
    manifest["signing"].update(key=fp, public_key=forger.public.b64)
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    seal.update(key=fp, public_key=forger.public.b64, files={**seal["files"], "manifest.json": _sha(run / "manifest.json")})
    (run / "run.sig.json").write_bytes(signed_file(forger, seal))
    assert _verify(arena, run, "--key", fp).returncode == 0  # the forgery holds together under its own key
    out = _verify(arena, run)
    assert out.returncode == 1 and b"SIGNED BY ANOTHER KEY" in out.stdout, out.stdout.decode()
    rec = arena.cli("rebuild-reports", str(run), "--recompute", timeout=120)
    assert rec.returncode == 2 and f"signed by {fp}".encode() in rec.stderr, rec.explain()
    assert json.loads((lazy / "case.json").read_bytes())["verdict"]["status"] == "NO_TOOL_CALL"  # not re-judged


def test_a_run_stripped_of_every_signature_and_digest_is_shown_unsigned(arena, tmp_path):
    """Attack 28: the forgery, then every mark of signing and every digest removed, so that the run reads as
    one from before digests. Nothing can be proven about such a run: verify says NOT SIGNED (exit 1), a
    recompute warns, and the aggregate marks it `unsigned` (and leaves it out with --verified-only)."""
    run = _copy(arena, tmp_path)
    _issue_17_forgery(run)
    (run / "run.sig.json").unlink()
    manifest = json.loads((run / "manifest.json").read_bytes())
    del manifest["signing"]
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    for case in (run / "cases").iterdir():
        (case / "evidence.sig.json").unlink()
        (case / "case.sig.json").unlink()
        data = json.loads((case / "case.json").read_bytes())
        data.pop("evidence", None)
        (case / "case.json").write_text(json.dumps(data, indent=2))
    out = _verify(arena, run)
    assert out.returncode == 1 and b"NOT SIGNED" in out.stdout, out.stdout.decode()
    rec = arena.cli("rebuild-reports", str(run), "--recompute", timeout=120)
    assert rec.returncode == 0 and b"is not signed" in rec.stderr, rec.explain()
    agg = arena.cli("aggregate-reports", "--runs-root", str(run), "--output", str(tmp_path / "agg"), timeout=120)
    assert agg.returncode == 0, agg.explain()
    data = json.loads((tmp_path / "agg" / "aggregate.json").read_bytes())
    assert data["runs"][0]["integrity"]["status"] == "unsigned" and "not signed" in \
        (tmp_path / "agg" / "aggregate.md").read_text()
    strict = arena.cli("aggregate-reports", "--runs-root", str(run), "--output", str(tmp_path / "strict"),
                       "--verified-only", timeout=120)
    assert strict.returncode == 0 and json.loads((tmp_path / "strict" / "aggregate.json").read_bytes())["rows"] == []


def test_a_forged_seen_at_in_a_stored_context_is_refused(arena, tmp_path):
    """A stored phase context naming another place the sandbox showed the workspace at (where the validators'
    sandbox would then bind the stored workspace) is not believed: the case is marked, nothing else changes."""
    run = _copy(arena, tmp_path)
    before = _verdicts(run)
    ctx_file = _case_dir(run, PERFECT) / "artifacts" / "measured.context.json"
    ctx = json.loads(ctx_file.read_bytes())
    assert ctx.get("seen_at") in ("/tmp/gripprobe-case", None), ctx.get("seen_at")  # None: run unsandboxed
    ctx["seen_at"] = "/usr"
    ctx_file.write_text(json.dumps(ctx))
    after = _recompute(arena, run)
    assert after[PERFECT][0] == "HARNESS_ERROR", after[PERFECT]
    assert {k: v for k, v in after.items() if k != PERFECT} == {k: v for k, v in before.items() if k != PERFECT}
