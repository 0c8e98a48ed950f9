"""Signed runs (SPEC §9, issue 17): the harness's key, what it signs, and `gripprobe verify`.

One real run (reference agent × oracle perfect/lazy × two tests, through the real `gripprobe` command) with a
key of its own; each test works on a copy. Tampering is done the way anyone with write access to the results
could: editing files, re-hashing digests, re-signing with a key of their own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SPECS, gripprobe, read_json
from gripprobe_core.integrity.check import verify_run

LAZY = "reference__oracle-lazy__oracle__tool__save_file"
PERFECT = "reference__oracle-perfect__oracle__tool__save_file"


def key_env(folder: Path) -> dict[str, str]:
    """A config folder of its own: the harness key lives in <folder>/gripprobe/signing-key."""
    return {"XDG_CONFIG_HOME": str(folder)}


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("signed")
    env = key_env(base / "config")
    res = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-m", "oracle-lazy", "-t", "save_file",
                    "-t", "shell_pwd", "--jobs", "2", "--results", str(base / "results"), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return {"run": Path(res.stdout.strip().splitlines()[-1]), "env": env, "config": base / "config"}


def copy_run(signed: dict, tmp_path: Path) -> Path:
    dst = tmp_path / "runs" / signed["run"].name
    shutil.copytree(signed["run"], dst, symlinks=True)
    return dst


def verify(run: Path, env: dict, *extra: str):
    return gripprobe("verify", str(run), *extra, env=env)


def statuses(run: Path) -> dict[str, tuple[str, str | None]]:
    out = {}
    for p in sorted(run.glob("cases/*/case.json")):
        v = read_json(p)["verdict"]
        out[p.parent.name] = (v["status"], v.get("failure_reason"))
    return out


def changed_cases(stdout: str) -> set[str]:
    return {line.split(":")[0].removeprefix("  case ") for line in stdout.splitlines() if line.startswith("  case ")}


# ----------------------------------------------------------------------------------------- the key


def test_a_run_from_a_fresh_results_folder_verifies_and_records_its_key(signed, tmp_path):
    key = signed["config"] / "gripprobe" / "signing-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert b"BEGIN PRIVATE KEY" in key.read_bytes()
    run = signed["run"]
    assert not any("PRIVATE KEY" in p.read_text(errors="replace") for p in run.rglob("*") if p.is_file())
    signing = read_json(run / "manifest.json")["signing"]
    raw = base64.b64decode(signing["public_key"])
    assert signing["format"] == 1 and signing["key"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    res = verify(run, signed["env"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"verified: signed by {signing['key']}" in res.stdout and "4 case(s) hold" in res.stdout
    out = json.loads(verify(run, signed["env"], "--json").stdout)
    assert out["verified"] is True and out["runs"][0]["public_key"] == signing["public_key"]
    # the same key signs the next run: made once, never replaced
    again = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "shell_pwd", "--results",
                      str(tmp_path / "r"), env=signed["env"])
    assert again.returncode == 0, again.stderr[-2000:]
    assert read_json(Path(again.stdout.strip().splitlines()[-1]) / "manifest.json")["signing"] == signing


def test_where_the_key_lives_and_that_it_never_travels(tmp_path):
    import pickle

    from gripprobe_core.integrity.keys import default_key_path, load_signer

    assert default_key_path({"HOME": "/h"}) == Path("/h/.config/gripprobe/signing-key")
    assert default_key_path({"HOME": "/h", "XDG_CONFIG_HOME": "/x"}) == Path("/x/gripprobe/signing-key")
    assert default_key_path({"HOME": "/h", "XDG_CONFIG_HOME": "rel"}) == Path("/h/.config/gripprobe/signing-key")
    assert default_key_path({"HOME": "/h", "GRIPPROBE_SIGNING_KEY": "/k/key"}) == Path("/k/key")
    env = {"GRIPPROBE_SIGNING_KEY": str(tmp_path / "k" / "key")}
    assert load_signer(create=False, env=env) is None  # only a run creates it
    signer = load_signer(create=True, env=env)
    assert signer is not None and load_signer(create=True, env=env).public == signer.public  # never replaced
    with pytest.raises(TypeError):  # not to a Ray worker, not anywhere
        pickle.dumps(signer)


def test_the_key_the_harness_writes_is_read_without_the_serialization_module_and_others_by_the_library(tmp_path):
    """A run reads its key (the PKCS#8 form ``_create`` writes) without importing cryptography's serialization
    module; it is the key the library reads from the same file. Any other PEM goes to the library: an Ed25519
    key with its public key inside, or a PEM whose body is broken, reads as the library reads it."""
    import base64

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption, PrivateFormat,
                                                              load_pem_private_key)

    from gripprobe_core.integrity.keys import _bare_ed25519, load_signer

    env = {"GRIPPROBE_SIGNING_KEY": str(tmp_path / "k" / "key")}
    made = load_signer(create=True, env=env)
    pem = (tmp_path / "k" / "key").read_bytes()
    fast = _bare_ed25519(pem)
    assert isinstance(fast, Ed25519PrivateKey)
    assert fast.public_key().public_bytes_raw() == load_pem_private_key(pem, None).public_key().public_bytes_raw() \
        == made.public.raw
    out = subprocess.run([sys.executable, "-c", (
        "import sys\nfrom gripprobe_core.integrity.keys import load_signer\n"
        f"s = load_signer(create=False, env={env!r})\n"
        "print(s.public.fingerprint, 'cryptography.hazmat.primitives.serialization' in sys.modules)")],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [made.public.fingerprint, "False"]

    key = Ed25519PrivateKey.generate()
    body = base64.b64decode(b"".join(pem.strip().splitlines()[1:-1]))
    for other in (key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()),  # another form
                  pem.replace(b"PRIVATE KEY-----", b"EC PRIVATE KEY-----"),                 # another label
                  b"-----BEGIN PRIVATE KEY-----\n" + base64.b64encode(body + b"\0") + b"\n-----END PRIVATE KEY-----\n",
                  b"-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
                  b"-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n", b""):
        assert _bare_ed25519(other) is None, other[:40]


def test_a_key_where_others_can_read_it_is_refused_with_one_line(tmp_path):
    results = tmp_path / "results"
    cases = {"inside results": results / "key",
             "group-readable": tmp_path / "loose" / "key",
             "not a key": tmp_path / "junk" / "key"}
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "key").write_bytes(b"x")
    os.chmod(tmp_path / "loose" / "key", 0o644)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "key").write_bytes(b"-----BEGIN PRIVATE KEY-----\nnope\n")
    os.chmod(tmp_path / "junk" / "key", 0o600)
    for why, path in cases.items():
        res = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "shell_pwd", "--results", str(results),
                        env={"GRIPPROBE_SIGNING_KEY": str(path)})
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, (why, res.stderr)
        assert lines[0].startswith(f"error: signing key {path}"), (why, lines)
    assert not list(results.glob("runs/*/cases/*")), "nothing runs without a usable key"


def test_verify_bad_input_is_one_line_and_exit_2(signed, tmp_path):
    for args in ([str(tmp_path)], [str(signed["run"]), "--key", "not-a-key"], [str(tmp_path / "nope")]):
        res = gripprobe("verify", *args, env=signed["env"])
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (args, res.stderr)
        assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------------------- any change


def _stored_files(run: Path) -> list[str]:
    return sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def pristine(signed, tmp_path_factory) -> Path:
    return copy_run(signed, tmp_path_factory.mktemp("pristine"))


def _case_of(rel: str) -> str | None:
    parts = rel.split("/")
    return parts[1] if parts[0] == "cases" else None


def _fails_naming(run: Path, rel: str) -> None:
    rc = verify_run(run)
    assert rc.status == "changed", (rel, rc.as_json())
    case = _case_of(rel)
    if case is None:
        assert rc.problems and not rc.changed_cases, (rel, rc.as_json())
    else:
        assert rc.changed_cases == [case], (rel, rc.as_json())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_one_byte_change_of_any_stored_file_is_found(pristine, data):
    files = _stored_files(pristine)
    rel = data.draw(st.sampled_from(files), label="file")
    path = pristine / rel
    original = path.read_bytes()
    if original:
        at = data.draw(st.integers(0, len(original) - 1), label="offset")
        byte = data.draw(st.integers(0, 255).filter(lambda b: b != original[at]), label="byte")
        changed = original[:at] + bytes([byte]) + original[at + 1:]
    else:
        changed = bytes([data.draw(st.integers(0, 255), label="byte")])
    try:
        path.write_bytes(changed)
        _fails_naming(pristine, rel)
    finally:
        path.write_bytes(original)
    assert verify_run(pristine).status == "verified"


def test_a_signed_file_said_again_in_other_whitespace_is_found(pristine):
    """Same statement, same signature, other bytes (what a one-byte change rarely hits: a space for a tab)."""
    for path in sorted(pristine.rglob("*.sig.json")):
        rel = path.relative_to(pristine).as_posix()
        original = path.read_bytes()
        try:
            path.write_bytes(original.replace(b'\n "', b'\n\t"', 1))
            _fails_naming(pristine, rel)
        finally:
            path.write_bytes(original)
    assert verify_run(pristine).status == "verified"


def _evidence_cases(run: Path) -> list[str]:
    return sorted(p.parent.name for p in run.glob("cases/*/case.json") if read_json(p).get("evidence"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_dropped_digest_is_found(pristine, data):
    case = data.draw(st.sampled_from(_evidence_cases(pristine)), label="case")
    where = data.draw(st.sampled_from(["case.json", "evidence.sig.json"]), label="dropped from")
    path = pristine / "cases" / case / where
    original = path.read_bytes()
    obj = json.loads(original)
    digests = obj["evidence"] if where == "case.json" else obj["statement"]["evidence"]
    rel = data.draw(st.sampled_from(sorted(digests)), label="digest")
    del digests[rel]
    try:
        path.write_text(json.dumps(obj, indent=2) if where == "case.json" else json.dumps(obj, indent=1, sort_keys=True))
        rc = verify_run(pristine)
        assert rc.changed_cases == [case], rc.as_json()
        hows = {p.how for p in rc.cases[case].problems}
        assert ("digest_dropped" in hows) if where == "case.json" else ("signature_invalid" in hows), hows
    finally:
        path.write_bytes(original)


def _rehash(run: Path) -> None:
    """What someone without the key can do after a forgery: recompute every sha256 the run records (case.json
    `evidence`, every statement's digests, the seal's), keeping the old signatures."""
    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    for case in sorted((run / "cases").iterdir()):
        data = read_json(case / "case.json")
        ev = read_json(case / "evidence.sig.json")
        if data.get("evidence"):
            data["evidence"] = {rel: sha(case / rel) for rel in data["evidence"]}
            ev["statement"]["evidence"] = dict(data["evidence"])
        (case / "case.json").write_text(json.dumps(data, indent=2))
        (case / "evidence.sig.json").write_text(json.dumps(ev, indent=1, sort_keys=True) + "\n")
        cs = read_json(case / "case.sig.json")
        cs["statement"]["evidence_statement"] = sha(case / "evidence.sig.json")
        cs["statement"]["files"] = {rel: sha(case / rel) for rel in cs["statement"]["files"]}
        (case / "case.sig.json").write_text(json.dumps(cs, indent=1, sort_keys=True) + "\n")
    seal = read_json(run / "run.sig.json")
    seal["statement"]["files"] = {rel: sha(run / rel) for rel in seal["statement"]["files"]}
    seal["statement"]["cases"] = {c: {"evidence": sha(run / "cases" / c / "evidence.sig.json"),
                                      "case": sha(run / "cases" / c / "case.sig.json")}
                                  for c in seal["statement"]["cases"]}
    (run / "run.sig.json").write_text(json.dumps(seal, indent=1, sort_keys=True) + "\n")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_re_hashing_after_a_change_is_found(signed, tmp_path_factory, data):
    run = copy_run(signed, tmp_path_factory.mktemp("rehash"))
    case = data.draw(st.sampled_from(_evidence_cases(run)), label="case")
    rel = data.draw(st.sampled_from(sorted(read_json(run / "cases" / case / "case.json")["evidence"])), label="file")
    path = run / "cases" / case / rel
    path.write_bytes(path.read_bytes() + b"\n")
    _rehash(run)
    rc = verify_run(run)
    assert rc.status == "changed" and case in rc.changed_cases, rc.as_json()
    assert any(p.how == "signature_invalid" for p in rc.cases[case].problems), rc.as_json()


# ----------------------------------------------------------------------------------------- keys


def _resign(run: Path, private: Path) -> str:
    """Re-sign every statement of the run with another key (and name that key everywhere): a forger's own run."""
    from gripprobe_core.integrity.keys import load_signer
    from gripprobe_core.integrity.signed import signed_file

    signer = load_signer(create=True, env={"GRIPPROBE_SIGNING_KEY": str(private)})
    assert signer is not None
    fp = signer.public.fingerprint

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    for case in sorted((run / "cases").iterdir()):
        ev = read_json(case / "evidence.sig.json")["statement"]
        (case / "evidence.sig.json").write_bytes(signed_file(signer, {**ev, "key": fp}))
        cs = read_json(case / "case.sig.json")["statement"]
        cs.update(key=fp, evidence_statement=sha(case / "evidence.sig.json"))
        (case / "case.sig.json").write_bytes(signed_file(signer, cs))
    manifest = read_json(run / "manifest.json")
    manifest["signing"].update(key=fp, public_key=signer.public.b64)
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    seal = read_json(run / "run.sig.json")["statement"]
    seal.update(key=fp, public_key=signer.public.b64, files={"manifest.json": sha(run / "manifest.json"),
                                                             **{k: v for k, v in seal["files"].items()
                                                                if k != "manifest.json"}},
                cases={c: {"evidence": sha(run / "cases" / c / "evidence.sig.json"),
                           "case": sha(run / "cases" / c / "case.sig.json")} for c in seal["cases"]})
    (run / "run.sig.json").write_bytes(signed_file(signer, seal))
    return fp


def test_a_run_re_signed_with_another_key_is_not_this_machines(signed, tmp_path):
    run = copy_run(signed, tmp_path)
    theirs = _resign(run, tmp_path / "forger" / "key")
    res = verify(run, signed["env"])
    assert res.returncode == 1 and "SIGNED BY ANOTHER KEY" in res.stdout and theirs in res.stdout, res.stdout
    # consistent under its own key: checked against it when asked, and not when another is required
    assert verify(run, signed["env"], "--key", theirs).returncode == 0
    mine = read_json(signed["run"] / "manifest.json")["signing"]["public_key"]
    assert verify(run, {}, "--key", mine).returncode == 1
    # nothing rewrites it here: recompute and resume refuse (exit 2, one line)
    for args in (["rebuild-reports", str(run), "--recompute"], ["run-suite", "--resume", str(run)]):
        res = gripprobe(*args, env=signed["env"])
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (args, res.stderr)
        assert f"signed by {theirs}" in res.stderr and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------------------- what rewrites a run


def test_rewrites_by_the_harness_stay_verified_and_never_bless_a_change(signed, tmp_path):
    run = copy_run(signed, tmp_path)
    env = signed["env"]
    before = statuses(run)
    for args in (["rebuild-reports", str(run)], ["rebuild-reports", str(run), "--recompute"],
                 ["backfill-model-hashes", str(run)], ["export", str(run), "--format", "junit"]):
        res = gripprobe(*args, env=env)
        assert res.returncode == 0, (args, res.stderr[-2000:])
        assert verify(run, env).returncode == 0, (args, verify(run, env).stdout)
    assert statuses(run) == before
    # a report file planted beside the harness's is named, and re-rendering the reports does not bless it
    (run / "reports" / "cases" / "extra.html").write_text("<p>PASS</p>")
    for _ in range(2):
        res = verify(run, env)
        assert res.returncode == 1 and "run: reports/cases/extra.html appeared after the run" in res.stdout, res.stdout
        assert gripprobe("rebuild-reports", str(run), env=env).returncode == 0


def test_a_forged_verdict_is_tampered_on_every_recompute_and_never_re_signed(signed, tmp_path):
    run = copy_run(signed, tmp_path)
    env = signed["env"]
    case = run / "cases" / LAZY
    data = read_json(case / "case.json")
    assert data["verdict"]["status"] == "NO_TOOL_CALL"
    data["verdict"].update(status="PASS", strict_pass_score=1.0, overall_score=1.0)
    data["phases"][-1]["process"]["exit_code"] = 0
    (case / "case.json").write_text(json.dumps(data, indent=2))
    res = verify(run, env)
    assert res.returncode == 1 and changed_cases(res.stdout) == {LAZY}, res.stdout
    for _ in range(2):
        rec = gripprobe("rebuild-reports", str(run), "--recompute", env=env)
        assert rec.returncode == 0, rec.stderr
        assert statuses(run)[LAZY] == ("HARNESS_ERROR", "artifact_tampered")
        assert statuses(run)[PERFECT] == ("PASS", None)
        assert changed_cases(verify(run, env).stdout) == {LAZY}


def test_an_earlier_signed_state_put_back_is_found(signed, tmp_path):
    """Every state the harness signed is genuine; the run's seal says which one is the latest."""
    env = signed["env"]
    specs = tmp_path / "specs"  # a spec whose model_hash the oracle's digest replaces (backfill --force)
    shutil.copytree(SPECS, specs)
    model = specs / "models" / "oracle-perfect.yaml"
    model.write_text(model.read_text().replace("model_id: perfect",
                                               "model_id: perfect\n    model_hash: sha256:recorded-by-an-older-oracle"))
    res = gripprobe("run", "--specs", str(specs), "-a", "reference", "-m", "oracle-perfect", "-t", "save_file",
                    "--results", str(tmp_path / "results"), env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    run = Path(res.stdout.strip().splitlines()[-1])
    case = run / "cases" / PERFECT
    old = {n: (case / n).read_bytes() for n in ("case.json", "case.sig.json")}
    res = gripprobe("backfill-model-hashes", "--force", str(run), env=env)
    assert res.returncode == 0 and "overwritten 1" in res.stdout, res.stdout  # case.json rewritten, re-signed
    assert verify(run, env).returncode == 0
    for name, content in old.items():
        (case / name).write_bytes(content)
    res = verify(run, env)
    assert res.returncode == 1 and changed_cases(res.stdout) == {PERFECT} and "signatures replaced" in res.stdout


# ----------------------------------------------------------------------------------------- older runs


def _unsign(run: Path, *, keep_digests: bool) -> None:
    (run / "run.sig.json").unlink()
    manifest = read_json(run / "manifest.json")
    del manifest["signing"]
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    for case in (run / "cases").iterdir():
        for name in ("evidence.sig.json", "case.sig.json"):
            (case / name).unlink()
        if not keep_digests:
            data = read_json(case / "case.json")
            data.pop("evidence", None)
            (case / "case.json").write_text(json.dumps(data, indent=2))


def test_runs_from_before_digests_keep_working_and_verify_says_unsigned(signed, tmp_path):
    run = copy_run(signed, tmp_path)
    before = statuses(run)
    _unsign(run, keep_digests=False)
    res = verify(run, signed["env"])
    assert res.returncode == 1 and "NOT SIGNED" in res.stdout
    rec = gripprobe("rebuild-reports", str(run), "--recompute", env=signed["env"])
    assert rec.returncode == 0 and "0 changed" in rec.stdout, rec.stdout + rec.stderr
    assert statuses(run) == before


def test_an_unsigned_run_with_digests_does_not_let_one_case_drop_them(signed, tmp_path):
    """Written after digests but before signatures: a case that ran without digests there is tampered."""
    run = copy_run(signed, tmp_path)
    _unsign(run, keep_digests=True)
    data = read_json(run / "cases" / LAZY / "case.json")
    del data["evidence"]
    (run / "cases" / LAZY / "case.json").write_text(json.dumps(data, indent=2))
    rec = gripprobe("rebuild-reports", str(run), "--recompute", env=signed["env"])
    assert rec.returncode == 0, rec.stderr
    got = statuses(run)
    assert got[LAZY] == ("HARNESS_ERROR", "artifact_tampered") and got[PERFECT] == ("PASS", None)
    assert "digest dropped" in read_json(run / "cases" / LAZY / "case.json")["harness_error"]
