"""The compiled init's build and cache (runner/sandbox_build.py) with the system's real C compiler: built once
per source and compiler, a changed source is a new binary, a corrupt or altered binary is rebuilt and never
run, two builds at once compile once; where no compiler works a real run falls back to the Python init and
says so. Under CI=true a missing compiler (or bwrap, for the sandbox checks) fails these tests."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gripprobe_core.runner import sandbox_build
from gripprobe_core.runner.sandbox import INIT_INSIDE, Sandbox, resolve_sandbox

CI = os.environ.get("CI") == "true"


@pytest.fixture(scope="module", autouse=True)
def compiler() -> list[str]:
    cc = sandbox_build.find_compiler()
    if cc is None:
        if CI:
            pytest.fail("a C compiler (cc) is required under CI=true: ./dev installs gcc and libc6-dev")
        pytest.skip("no C compiler (cc) here")
    return cc


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _counting_cc(tmp_path: Path) -> tuple[str, Path]:
    """$CC for a real compiler that logs each compile (not its --version) before running it."""
    log = tmp_path / "compiles.log"
    real = shutil.which("cc")
    assert real
    wrapper = tmp_path / "counting-cc"
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -o "*) echo compile >> {log};; esac\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log


def _compiles(log: Path) -> int:
    return log.read_text().count("compile") if log.exists() else 0


def test_built_once_then_taken_from_the_cache(tmp_path, monkeypatch):
    cc, log = _counting_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    root = tmp_path / "cache"
    first, why = sandbox_build.compiled_init(root=root)
    assert first is not None, why
    assert first.path.name == "sandbox_init" and first.path.parent.parent == root
    assert first.sha256 == _sha(first.path) == (first.path.parent / "sandbox_init.sha256").read_text().strip()
    assert (root.stat().st_mode & 0o777) == 0o700 and (first.path.parent.stat().st_mode & 0o777) == 0o700
    inode = first.path.stat().st_ino
    again, why = sandbox_build.compiled_init(root=root)
    assert again == first and first.path.stat().st_ino == inode, why
    assert _compiles(log) == 1
    # the binary is the init: a command's status comes back through it
    proc = subprocess.run([str(first.path), "--", "/bin/sh", "-c", "exit 9"], capture_output=True, timeout=30)
    assert proc.returncode == 9, proc.stderr
    # nothing half-written is left beside it
    assert sorted(p.name for p in first.path.parent.iterdir()) == ["sandbox_init", "sandbox_init.c",
                                                                   "sandbox_init.sha256"]


def test_a_changed_source_is_a_new_binary(tmp_path):
    root = tmp_path / "cache"
    original, why = sandbox_build.compiled_init(root=root)
    assert original is not None, why
    changed = tmp_path / "sandbox_init.c"
    changed.write_bytes(sandbox_build.SOURCE.read_bytes() + b"\nint gripprobe_test_changed_source = 1;\n")
    other, why = sandbox_build.compiled_init(source=changed, root=root)
    assert other is not None, why
    assert other.path != original.path and other.path.parent.parent == root
    assert other.sha256 != original.sha256
    assert original.path.is_file() and sandbox_build.verified(original)  # the other key's binary is untouched


def test_a_different_compiler_is_a_new_key():
    source = sandbox_build.SOURCE.read_bytes()
    cc = ["/usr/bin/cc"]
    assert sandbox_build.build_key(source, cc, "gcc 12.2.0") != sandbox_build.build_key(source, cc, "gcc 12.3.0")
    assert sandbox_build.build_key(source, cc, "v") != sandbox_build.build_key(source, ["/usr/bin/clang"], "v")
    assert sandbox_build.build_key(source, cc, "v") != sandbox_build.build_key(source + b" ", cc, "v")


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "replaced by a script", "digest edited",
                                    "digest gone"])
def test_a_corrupt_cached_binary_is_rebuilt_never_run(tmp_path, monkeypatch, damage):
    cc, log = _counting_cc(tmp_path)
    monkeypatch.setenv("CC", cc)
    root = tmp_path / "cache"
    built, why = sandbox_build.compiled_init(root=root)
    assert built is not None, why
    ran = tmp_path / "the-corrupt-binary-ran"
    binary, digest = built.path, built.path.parent / "sandbox_init.sha256"
    if damage == "flipped byte":
        data = bytearray(binary.read_bytes())
        data[len(data) // 2] ^= 0xFF
        binary.write_bytes(bytes(data))
    elif damage == "truncated":
        binary.write_bytes(binary.read_bytes()[:1000])
    elif damage == "replaced by a script":
        binary.write_text(f"#!/bin/sh\ntouch {ran}\n")
    elif damage == "digest edited":
        digest.write_text("0" * 64 + "\n")
    else:
        digest.unlink()
    assert _compiles(log) == 1
    rebuilt, why = sandbox_build.compiled_init(root=root)
    assert rebuilt is not None, why
    assert _compiles(log) == 2
    assert rebuilt.path == binary and rebuilt.sha256 == _sha(binary) == digest.read_text().strip()
    assert not ran.exists()


def test_the_sandbox_never_binds_a_binary_that_changed(tmp_path):
    """A binary replaced after the run resolved its sandbox: wrap() rebuilds it before binding it in, and the
    sandboxed command runs under the rebuilt init."""
    box = _harness_box()
    root = tmp_path / "cache"
    built, why = sandbox_build.compiled_init(root=root)
    assert built is not None, why
    mine = replace(box, init=built)
    ran = tmp_path / "the-replaced-binary-ran"
    built.path.write_text(f"#!/bin/sh\ntouch {ran}\nexec \"$@\"\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = mine.wrap(["/bin/sh", "-c", "echo inside"], cwd=ws, rw=[ws])
    bound = argv[argv.index(INIT_INSIDE) - 1]
    assert bound == str(built.path)
    assert _sha(Path(bound)) == (built.path.parent / "sandbox_init.sha256").read_text().strip()
    proc = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and proc.stdout == b"inside\n", proc.stderr
    assert not ran.exists()


def test_two_builds_at_once_compile_once(tmp_path):
    cc, log = _counting_cc(tmp_path)
    root = tmp_path / "cache"
    code = ("import sys; from pathlib import Path; from gripprobe_core.runner import sandbox_build as b; "
            "got, why = b.compiled_init(root=Path(sys.argv[1])); print(got.sha256 if got else why)")
    env = {**os.environ, "CC": cc}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, env=env)
             for _ in range(3)]
    outs = [p.communicate(timeout=120)[0].decode().strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and len(outs[0]) == 64, outs
    assert _compiles(log) == 1


def test_a_source_that_does_not_compile_says_why(tmp_path):
    broken = tmp_path / "sandbox_init.c"
    broken.write_text("int main(void) { return this is not C; }\n")
    got, why = sandbox_build.compiled_init(source=broken, root=tmp_path / "cache")
    assert got is None and why is not None and "failed to compile" in why and "error" in why, why


def test_no_compiler_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    got, why = sandbox_build.compiled_init(root=tmp_path / "cache")
    assert got is None and why == f"no C compiler ({tmp_path / 'no-such-cc'} is not on PATH)"
    assert not (tmp_path / "cache").exists()


def test_the_source_compiles_without_a_warning(tmp_path, compiler):
    """Stricter than what the harness asks for: any warning is an error."""
    proc = subprocess.run([*compiler, *sandbox_build.CFLAGS, "-Werror", "-Wshadow", "-Wconversion", "-Wpedantic",
                           "-Wformat=2", "-o", str(tmp_path / "init"), str(sandbox_build.SOURCE)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _harness_box() -> Sandbox:
    try:
        box = resolve_sandbox("auto")
    except Exception as exc:
        box, why = None, str(exc)
    else:
        why = box.warning
    if box is None or not box.confined:
        if CI:
            pytest.fail(f"bubblewrap is required under CI=true: {why}")
        pytest.skip(f"bubblewrap does not work here: {why}")
    return box


def test_without_a_compiler_a_real_run_uses_the_python_init_and_says_so(tmp_path):
    """PATH holds bwrap but no cc: the run warns once, every phase's stored command starts the Python init, the
    case passes; with cc back (same cache) the compiled init runs and nothing is said."""
    from conftest import gripprobe, read_json

    _harness_box()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bwrap", "sh"):
        found = shutil.which(tool)
        assert found, tool
        os.symlink(found, bindir / tool)
    env = {"PATH": str(bindir), "CC": "", "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def run(name: str, env: dict) -> tuple[dict, str]:
        proc = gripprobe("run", "--results", str(tmp_path / name), "-t", "save_file", "-m", "oracle-perfect",
                         "--sandbox", "bwrap", env=env)
        assert proc.returncode == 0, proc.stderr
        run_dir = Path(proc.stdout.strip().splitlines()[-1])
        (case,) = [read_json(p) for p in run_dir.glob("cases/*/case.json")]
        assert case["verdict"]["status"] == "PASS" and case["sandbox"] == "bwrap", case["verdict"]
        return case, proc.stderr

    case, err = run("without", env)
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning: sandbox:")]
    assert len(warnings) == 1 and "no C compiler (cc is not on PATH)" in warnings[0] and "Python init" in warnings[0] \
        and "apt-get install gcc libc6-dev" in warnings[0], err
    for phase in case["phases"]:
        command = phase["process"]["command"]
        init = command[command.index("--as-pid-1") + 4:]
        assert init[1:4] == ["-I", "-S", str(Path(sandbox_build.__file__).with_name("sandbox_init.py"))], init
        assert INIT_INSIDE not in command
    assert not (tmp_path / "cache" / "gripprobe" / "sandbox-init").exists()

    case, err = run("with", {**env, "PATH": f"{bindir}:{os.path.dirname(shutil.which('cc') or '/usr/bin/cc')}"})
    assert "warning: sandbox:" not in err, err
    for phase in case["phases"]:
        command = phase["process"]["command"]
        assert command[command.index("--as-pid-1") + 4] == INIT_INSIDE, command
        bound = Path(command[command.index(INIT_INSIDE) - 1])
        assert bound.parent.parent == tmp_path / "cache" / "gripprobe" / "sandbox-init", bound


def test_doctor_says_which_init_runs(tmp_path):
    from conftest import gripprobe

    _harness_box()
    proc = gripprobe("doctor", "--no-check", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    first = proc.stdout.splitlines()[0]
    assert first.startswith("sandbox") and "init: compiled (" in first and str(tmp_path / "cache") in first, proc.stdout


def test_dev_setup_names_the_compiler_fix_when_there_is_none(tmp_path):
    """`./dev setup` on a machine with neither cc nor apt-get: it goes on, and says what is missing and the fix."""
    root = Path(__file__).resolve().parents[1]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for folder in ("/usr/bin", "/bin"):
        for entry in os.scandir(folder):
            if entry.name not in ("cc", "apt-get") and not (bindir / entry.name).exists():
                os.symlink(entry.path, bindir / entry.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    env.update(HOME=str(tmp_path), PATH=str(bindir), GRIPPROBE_VENV=str(Path(sys.executable).parent.parent))
    proc = subprocess.run(["bash", str(root / "dev"), "setup"], capture_output=True, text=True, env=env, timeout=300,
                          stdin=subprocess.DEVNULL, cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "cc is not installed: each sandboxed phase starts the Python init instead" in proc.stderr, proc.stderr
    assert "fix: sudo apt-get install -y gcc libc6-dev" in proc.stderr, proc.stderr


def test_the_wheel_ships_the_inits_source(tmp_path):
    """An installed gripprobe-core compiles its init from the .c file beside sandbox_build.py: the wheel holds it
    (built from a copy of the tree, so no other build shares its build/ folder)."""
    import zipfile

    root = Path(__file__).resolve().parents[1]
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in os.listdir(root):
        if name in ("pyproject.toml", "README.md", "LICENSE", "setup.cfg", "setup.py", "MANIFEST.in"):
            shutil.copy2(root / name, tree / name)
    shutil.copytree(root / "src", tree / "src", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    shutil.copytree(root / "specs", tree / "specs")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(tree)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "wheel").glob("gripprobe_core-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = z.read("gripprobe_core/runner/sandbox_init.c")
        assert "gripprobe_core/runner/sandbox_build.py" in z.namelist()
    assert shipped == sandbox_build.SOURCE.read_bytes()


def test_a_compiled_init_that_fails_the_probe_leaves_the_python_init_running(tmp_path):
    """A compiled init that builds and passes its self-test but fails as PID 1 in the sandbox (here: the real
    source with one line added that refuses PID 1, put in the cache under the real source's key): the
    start-of-run probe then runs the Python init, the run goes on with it and says why; bwrap is not called
    broken."""
    from conftest import gripprobe, read_json

    _harness_box()
    source = sandbox_build.SOURCE.read_text()
    anchor = "    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)\n"
    assert anchor in source
    broken = tmp_path / "broken.c"
    broken.write_text(source.replace(anchor, '    if (getpid() == 1) fail("refusing to be PID 1");\n' + anchor))
    built, why = sandbox_build.compiled_init(source=broken, root=tmp_path / "build")
    assert built is not None, why
    cc = sandbox_build.find_compiler()
    assert cc is not None
    ident = sandbox_build._identity(cc)
    assert ident is not None
    key = sandbox_build.build_key(sandbox_build.SOURCE.read_bytes(), cc, ident[0])
    folder = tmp_path / "cache" / "gripprobe" / "sandbox-init" / key
    folder.mkdir(parents=True)
    shutil.copy2(built.path, folder / "sandbox_init")
    (folder / "sandbox_init.sha256").write_text(built.sha256 + "\n")

    proc = gripprobe("run", "--results", str(tmp_path / "r"), "-t", "save_file", "-m", "oracle-perfect",
                     "--sandbox", "bwrap", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning: sandbox:")]
    assert len(warnings) == 1 and "the compiled init failed the sandbox's probe" in warnings[0] \
        and "refusing to be PID 1" in warnings[0] and "Python init" in warnings[0], proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    (case,) = [read_json(p) for p in run_dir.glob("cases/*/case.json")]
    assert case["verdict"]["status"] == "PASS" and case["sandbox"] == "bwrap"
    for phase in case["phases"]:
        assert INIT_INSIDE not in phase["process"]["command"]
