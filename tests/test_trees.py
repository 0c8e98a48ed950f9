"""Trees an agent wrote (gripprobe_core.store.trees): opening a path in them without following a link,
and removing them whole — 3,000 folders deep and deeper, chmod 000, names that are not text, FIFOs,
sockets, links to host folders — without recursion, without following a link, without raising."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gripprobe_core.store.trees import Refused, open_beneath, open_dir, remove_tree, scratch_folder

NOBODY = 65534
SRC = Path(__file__).resolve().parents[1] / "src"


def deep_tree(root: Path, depth: int, *, every: int = 0, name: bytes = b"d") -> None:
    """``root/d/d/…`` ``depth`` folders deep (a path far past PATH_MAX), built by descriptor; every
    ``every`` levels a file, a FIFO and a chmod-000 folder holding a file."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(depth):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        if every and level % every == 0:
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=child))
            os.mkfifo("pipe", dir_fd=child)
            os.mkdir("locked", dir_fd=child)
            os.close(os.open("locked/secret", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=child))
            os.chmod("locked", 0, dir_fd=child)
        os.close(fd)
        fd = child
    os.close(fd)


def host_folder(base: Path) -> Path:
    """A folder outside every tree, holding a canary: what a link planted in a tree points at."""
    host = base / "host"
    host.mkdir()
    (host / "canary.txt").write_text("host canary\n")
    (host / "sub").mkdir()
    (host / "sub" / "keep.txt").write_text("keep\n")
    return host


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(d) / n
            st_ = os.lstat(p)
            out[str(p.relative_to(root))] = (st_.st_mode, p.read_bytes() if stat.S_ISREG(st_.st_mode) else b"")
    return out


# ------------------------------------------------------------------------------------------- removal


def test_a_3000_deep_tree_with_fifos_and_locked_folders_goes(tmp_path):
    tree = tmp_path / "home"
    deep_tree(tree, 3000, every=500)
    assert remove_tree(tree) == []
    assert not tree.exists() and os.listdir(tmp_path) == []


def test_removal_neither_recurses_nor_holds_a_descriptor_per_level(tmp_path):
    """In a process allowed 100 frames of recursion and 16 open files: a 4,500-deep tree still goes."""
    tree = tmp_path / "tree"
    deep_tree(tree, 4500, every=1500)
    script = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {str(SRC)!r})
        from gripprobe_core.store.trees import remove_tree
        resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
        sys.setrecursionlimit(100)
        problems = remove_tree({str(tree)!r})
        print(repr(problems))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]" and not tree.exists()


def test_links_are_removed_never_followed(tmp_path):
    host = host_folder(tmp_path)
    before = snapshot(host)
    tree = tmp_path / "ws"
    (tree / "a").mkdir(parents=True)
    os.symlink(host, tree / "hostdir")
    os.symlink(host / "canary.txt", tree / "a" / "canary")
    os.symlink(host, tree / "a" / "up")
    os.symlink("../../..", tree / "a" / "rel")
    assert remove_tree(tree) == []
    assert not tree.exists() and snapshot(host) == before


def test_a_root_that_is_a_link_loses_only_the_link(tmp_path):
    host = host_folder(tmp_path)
    before = snapshot(host)
    os.symlink(host, tmp_path / "home")
    assert remove_tree(tmp_path / "home") == []
    assert not os.path.lexists(tmp_path / "home") and snapshot(host) == before


def test_missing_file_fifo_and_socket_roots(tmp_path):
    assert remove_tree(tmp_path / "nothing") == []
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "file").write_text("x")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "sock"))
    for name in ("pipe", "file", "sock"):
        assert remove_tree(tmp_path / name) == []
    assert os.listdir(tmp_path) == []


def test_names_that_are_not_text_and_255_bytes(tmp_path):
    tree = os.fsencode(tmp_path / "t")
    os.mkdir(tree)
    names = [b"\xff\xfe", b"new\nline", b"\x1b[31mred", b"x" * 255, b".gripprobe-rm-0", b"-rf", b" "]
    for n in names:
        os.mkdir(tree + b"/" + n)
        with open(tree + b"/" + n + b"/" + n, "wb") as fh:
            fh.write(n)
    assert remove_tree(tmp_path / "t") == []
    assert not os.path.exists(tree)


def test_a_folder_already_named_like_the_spare_names_does_not_collide(tmp_path):
    tree = tmp_path / "t"
    for i in range(3):
        (tree / f".gripprobe-rm-{i}" / "x").mkdir(parents=True)
        (tree / f".gripprobe-rm-{i}" / "x" / "f").write_text("f")
    (tree / "a" / ".gripprobe-rm-0").mkdir(parents=True)
    assert remove_tree(tree) == [] and not tree.exists()


def _unprivileged(tree: Path) -> subprocess.CompletedProcess:
    """remove_tree(tree) run by a process without privileges (chmod 000 means something only to one): as
    root, the same user with every capability dropped (setpriv); else this user as it is."""
    script = f"import sys; sys.path.insert(0, {str(SRC)!r}); from gripprobe_core.store.trees import remove_tree; " \
             f"print(repr(remove_tree({str(tree)!r})))"
    prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def _lock(tree: Path) -> None:
    """chmod 000 every folder and file, innermost first (as an agent does before it exits)."""
    for d, dirs, files in os.walk(tree, topdown=False):
        for n in files:
            os.chmod(Path(d) / n, 0)
        for n in dirs:
            os.chmod(Path(d) / n, 0)
    os.chmod(tree, 0)


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"), reason="needs setpriv to drop root's privileges")
def test_chmod_000_everywhere_is_undone_by_its_owner(tmp_path):
    tree = tmp_path / "home"
    deep_tree(tree, 300, every=50)
    (tree / "a" / "b" / "c").mkdir(parents=True)
    (tree / "a" / "b" / "c" / "key").write_text("sk-secret")
    (tree / "d" / "x" / "e" / "f").mkdir(parents=True)
    _lock(tree)
    locked = subprocess.run([*(["setpriv", "--inh-caps=-all", "--bounding-set=-all"] if os.geteuid() == 0 else []),
                             sys.executable, "-c", f"import os; os.listdir({str(tree)!r})"], capture_output=True)
    assert locked.returncode != 0, "the check cannot fail: chmod 000 does not bite this process"
    done = _unprivileged(tree)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]" and not tree.exists(), done.stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs a folder another user owns")
def test_what_cannot_be_removed_is_said_not_raised(tmp_path):
    """A folder another user owns (0755, a file in it): one problem line naming the file, everything
    else removed, no exception."""
    tree = tmp_path / "home"
    (tree / "mine" / "deep").mkdir(parents=True)
    (tree / "mine" / "deep" / "f").write_text("x")
    (tree / "theirs").mkdir()
    (tree / "theirs" / "stuck.txt").write_text("x")
    os.chown(tree / "theirs", NOBODY, NOBODY)
    done = _unprivileged(tree)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    problems = eval(done.stdout)  # the repr of a list of str
    assert len(problems) == 1 and problems[0].startswith(f"{tree}/theirs/stuck.txt: "), problems
    left = [str(Path(d, n).relative_to(tree)) for d, dirs, files in os.walk(tree) for n in dirs + files]
    assert len(left) == 2 and left[1].endswith("/stuck.txt"), f"only what could not go is left: {left}"


def test_scratch_folder_is_resolved_and_always_removed(tmp_path):
    with scratch_folder("gripprobe-test-") as scratch:
        assert scratch == scratch.resolve() and scratch.is_dir()
        deep_tree(scratch / "home", 200, every=40)
        os.symlink(tmp_path, scratch / "link")
    assert not scratch.exists() and tmp_path.is_dir()


# ---------------------------------------------------------------------------- random trees (property)

NAMES = st.one_of(st.sampled_from([b"a", b"\xff", b"n\nl", b"\x1b[0m", b"x" * 255, b" ", b"-", b".hidden",
                                   b".gripprobe-rm-1"]),
                  st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\x00" not in b
                                                            and b not in (b".", b"..")))
KINDS = st.sampled_from(["file", "dir", "fifo", "link_host", "link_file", "locked_dir", "locked_file", "socket"])


@st.composite
def trees(draw, depth=0):
    entries = draw(st.dictionaries(NAMES, KINDS, max_size=5 if depth < 3 else 0))
    return {name: (kind, draw(trees(depth + 1)) if kind in ("dir", "locked_dir") else None)
            for name, kind in entries.items()}


def build(at: bytes, tree: dict, host: Path) -> None:
    for name, (kind, sub) in tree.items():
        p = at + b"/" + name
        if kind in ("dir", "locked_dir"):
            os.mkdir(p)
            build(p, sub, host)
            if kind == "locked_dir":
                os.chmod(p, 0)
        elif kind in ("file", "locked_file"):
            with open(p, "wb") as fh:
                fh.write(name)
            if kind == "locked_file":
                os.chmod(p, 0)
        elif kind == "fifo":
            os.mkfifo(p)
        elif kind == "socket":
            if len(p) < 100:
                with socket.socket(socket.AF_UNIX) as s:
                    s.bind(p)
        else:
            os.symlink(os.fsencode(host if kind == "link_host" else host / "canary.txt"), p)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees())
def test_any_tree_goes_and_nothing_outside_changes(tmp_path_factory, tree):
    base = tmp_path_factory.mktemp("prop")
    host = host_folder(base)
    before = snapshot(host)
    root = os.fsencode(base / "scratch")
    os.mkdir(root)
    build(root, tree, host)
    assert remove_tree(base / "scratch") == []
    assert not os.path.lexists(root)
    assert snapshot(host) == before


# --------------------------------------------------------------------------------------- open_beneath


def test_open_beneath_refuses_a_link_in_any_component(tmp_path):
    host = host_folder(tmp_path)
    home = tmp_path / "home"
    (home / ".config" / "agent").mkdir(parents=True)
    (home / ".config" / "agent" / "log.txt").write_text("mine")
    fd = open_dir(home)
    try:
        got = open_beneath(fd, [".config", "agent", "log.txt"])
        assert os.read(got, 100) == b"mine"
        os.close(got)
        for planted in (home / ".config", home / ".config" / "agent"):
            real = planted.with_name(planted.name + ".real")
            planted.rename(real)
            os.symlink(host, planted)
            (host / "agent").mkdir(exist_ok=True)
            (host / "agent" / "log.txt").write_text("host canary")
            (host / "log.txt").write_text("host canary")
            with pytest.raises(Refused) as exc:
                open_beneath(fd, [".config", "agent", "log.txt"], prefix="home")
            assert exc.value.reason == "symlink_in_path"
            assert exc.value.where == "home/" + str(planted.relative_to(home))
            os.unlink(planted)
            real.rename(planted)
    finally:
        os.close(fd)


def test_open_beneath_never_opens_a_fifo_or_device_and_names_the_reason(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    os.mkfifo(d / "pipe")
    (d / "dir").mkdir()
    os.symlink("/etc/hostname", d / "link")
    fd = open_dir(d)
    try:
        reasons = {}
        for name in ("pipe", "dir", "link", "missing"):
            with pytest.raises(Refused) as exc:
                open_beneath(fd, [name])
            reasons[name] = exc.value.reason
        with pytest.raises(Refused):
            open_beneath(fd, [".."])
    finally:
        os.close(fd)
    assert reasons == {"pipe": "not_a_regular_file", "dir": "not_a_regular_file", "link": "symlink_in_path",
                       "missing": "missing"}


def test_open_dir_walks_from_the_root_with_no_link(tmp_path):
    (tmp_path / "real" / "x").mkdir(parents=True)
    os.symlink(tmp_path / "real", tmp_path / "alias")
    os.close(open_dir(tmp_path / "real" / "x"))
    with pytest.raises(Refused) as exc:
        open_dir(tmp_path / "alias" / "x")
    assert exc.value.reason == "symlink_in_path" and exc.value.where.endswith("alias")
    with pytest.raises(Refused):
        open_dir("relative/path")


def test_read_stored_follows_no_link_below_its_root(tmp_path):
    """A stored run is read without following a link in any component below the run folder: a case folder or
    its workspace swapped for a link to / is refused, as is a final link, a FIFO or a path leading out."""
    from gripprobe_core.store import NotRegularFile, read_stored

    run = tmp_path / "run"
    (run / "cases" / "a" / "workspace").mkdir(parents=True)
    (run / "cases" / "a" / "workspace" / "hello.txt").write_text("hello world\n")
    assert read_stored(run, "cases/a/workspace/hello.txt") == b"hello world\n"
    assert read_stored(run, Path("cases") / "a" / "workspace" / "hello.txt", limit=5) == b"hello"
    (run / "cases" / "b").mkdir()
    os.symlink("/", run / "cases" / "b" / "workspace")
    os.symlink("/etc", run / "cases" / "c")
    os.symlink("/etc/hostname", run / "cases" / "a" / "workspace" / "host.txt")
    os.mkfifo(run / "cases" / "a" / "fifo")
    for rel in ("cases/b/workspace/etc/hostname", "cases/c/hostname", "cases/a/workspace/host.txt", "cases/a/fifo",
                "../run/cases/a/workspace/hello.txt", "/etc/hostname", "cases/a/workspace"):
        with pytest.raises(NotRegularFile):
            read_stored(run, rel)
    with pytest.raises(FileNotFoundError):
        read_stored(run, "cases/a/missing.txt")
    linked_root = tmp_path / "linked-run"
    os.symlink(run, linked_root)  # the folder the user names may itself be a link
    assert read_stored(linked_root, "cases/a/workspace/hello.txt") == b"hello world\n"
