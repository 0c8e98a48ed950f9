"""How a case run on another node reaches the run directory (store/archive.py), the resources a spec may
ask of a Ray cluster, and what a task asks of the scheduler (runner/rayexec.py) — none of it needs Ray."""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT, gripprobe
from gripprobe_core.store.archive import ArchiveError, pack_case, unpack_case


def _case_dir(tmp: Path) -> Path:
    d = tmp / "case"
    (d / "artifacts").mkdir(parents=True)
    (d / "workspace" / "sub").mkdir(parents=True)
    (d / "case.json").write_text('{"case_id": "x"}')
    (d / "artifacts" / "events.measured.jsonl").write_text('{"kind": "tool_call"}\n')
    (d / "workspace" / "sub" / "hello.txt").write_bytes(b"hi\x00there")
    (d / "workspace" / "empty").mkdir()
    return d


def _tree(d: Path) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for root, dirs, files in os.walk(os.fsencode(d)):
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), os.fsencode(d))] = None
        for name in files:
            p = os.path.join(root, name)
            out[os.path.relpath(p, os.fsencode(d))] = Path(os.fsdecode(p)).read_bytes()
    return out


def test_a_case_directory_arrives_byte_for_byte_with_case_json_handed_back(tmp_path):
    src = _case_dir(tmp_path)
    odd = os.fsencode(src / "workspace") + b"/na\xffme \x1b[31m.txt"
    with open(odd, "wb") as f:
        f.write(b"odd")
    dest = tmp_path / "run" / "cases" / "case"
    raw = unpack_case(pack_case(src), dest)
    assert raw == b'{"case_id": "x"}'
    assert not (dest / "case.json").exists()  # written last, by the driver
    expected = {k: v for k, v in _tree(src).items() if k != b"case.json"}
    assert _tree(dest) == expected


def test_what_is_not_a_file_or_folder_does_not_travel(tmp_path):
    src = _case_dir(tmp_path)
    os.symlink("/etc/passwd", src / "workspace" / "link")
    os.mkfifo(src / "workspace" / "fifo")
    dest = tmp_path / "dest"
    unpack_case(pack_case(src), dest)
    assert not (dest / "workspace" / "link").exists() and not (dest / "workspace" / "fifo").exists()
    assert (dest / "workspace" / "sub" / "hello.txt").read_bytes() == b"hi\x00there"


def _tar(members: list[tarfile.TarInfo], data: bytes = b"x") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(data) if m.isfile() else None)
    return buf.getvalue()


def _file(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info


@pytest.mark.parametrize("member", [
    _file("../../escape"), _file("/etc/evil"), _file("workspace/../../up"),
    tarfile.TarInfo("link"), tarfile.TarInfo("fifo"),
])
def test_an_archive_that_is_not_a_case_directory_is_refused(tmp_path, member):
    if member.name == "link":
        member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
    if member.name == "fifo":
        member.type = tarfile.FIFOTYPE
    with pytest.raises(ArchiveError):
        unpack_case(_tar([_file("case.json"), member]), tmp_path / "dest")
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape").exists()


def test_garbage_and_an_archive_without_case_json_are_refused(tmp_path):
    with pytest.raises(ArchiveError, match="no case.json"):
        unpack_case(_tar([_file("a.txt")]), tmp_path / "d1")
    with pytest.raises(ArchiveError):
        unpack_case(b"\x00not a tar" * 100, tmp_path / "d2")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000))
def test_unpacking_arbitrary_bytes_never_raises_anything_but_archive_error(tmp_path_factory, data):
    dest = tmp_path_factory.mktemp("fuzz") / "case"
    try:
        unpack_case(data, dest)
    except ArchiveError:
        pass


# --------------------------------------------------------------------------- resources

def _model(tmp: Path, resources: str) -> Path:
    import shutil
    root = tmp / "specs"
    shutil.copytree(ROOT / "specs", root)
    (root / "models" / "oracle-res.yaml").write_text(
        "id: oracle-res\nlabel: r\nfamily: oracle\nbackends:\n  - id: oracle\n    kind: oracle\n"
        f"    model_id: perfect\n    resources: {resources}\n")
    return root


@pytest.mark.parametrize("resources, ok", [
    ("{ollama-qwen3-8b: 1}", True), ("{GPU: 0.5, box/7: 2}", True), ("{CPU: 0.25}", True),
    ("{gpu: 1.5}", False), ("{gpu: 0}", False), ("{gpu: -1}", False), ('{"bad name!": 1}', False),
])
def test_a_backend_asks_for_resources_ray_can_schedule(tmp_path, resources, ok):
    out = gripprobe("validate", "--specs", str(_model(tmp_path, resources)))
    if ok:
        assert out.returncode == 0, out.stdout + out.stderr
        return
    assert out.returncode == 2, out.stdout + out.stderr
    assert re.search(r"oracle-res\.yaml:\d+", out.stderr) and "resource" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_task_asks_for_the_agent_and_backend_resources():
    from gripprobe_core.models.specs import BackendSpec, CliAgentSpec
    from gripprobe_core.runner.rayexec import fits, needed, requirement
    from gripprobe_core.runner.matrix import PlannedCase
    from gripprobe_core.models.results import CaseKey
    from gripprobe_core.specs import load_specs

    specs = load_specs(ROOT / "specs")
    base = PlannedCase(CaseKey(agent="reference", model="oracle-perfect", backend="oracle", format="tool",
                               test="shell_pwd"), specs.agents["reference"], specs.models["oracle-perfect"],
                       specs.models["oracle-perfect"].backends[0], specs.tests["shell_pwd"], "tool")
    assert requirement(base) == {"num_cpus": 1.0}
    agent = CliAgentSpec.model_validate({**base.agent.model_dump(), "resources": {"GPU": 1, "CPU": 0.5, "fast": 1}})
    backend = BackendSpec.model_validate({**base.backend.model_dump(), "resources": {"ollama-a": 1, "fast": 2}})
    case = PlannedCase(base.key, agent, base.model, backend, base.test, "tool")
    opts = requirement(case)
    assert opts == {"num_cpus": 0.5, "num_gpus": 1.0, "resources": {"fast": 2.0, "ollama-a": 1.0}}
    need = needed(opts)
    assert need == {"CPU": 0.5, "GPU": 1.0, "fast": 2.0, "ollama-a": 1.0}
    assert fits(need, [{"CPU": 8}, {"CPU": 2, "GPU": 1, "fast": 2, "ollama-a": 1}])
    assert not fits(need, [{"CPU": 8, "GPU": 4, "fast": 1, "ollama-a": 1}, {"CPU": 2, "fast": 2, "ollama-a": 1}])


def test_a_local_run_never_imports_ray(tmp_path):
    out = gripprobe("run", "-a", "reference", "-m", "oracle-perfect", "-t", "shell_pwd", "--results",
                    str(tmp_path), env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "gripprobe_core.runner.executors" in imported
    # the Ray executor's module itself is imported only with --executor ray (start-up), and Ray never
    assert not {m for m in imported if m == "ray" or m.startswith("ray.") or m.startswith("gripprobe_core.runner.ray")}


# --------------------------------------------------------------------------- caps

def _checksum(header: bytearray) -> bytes:
    header[148:156] = b" " * 8
    return b"%06o\0 " % sum(header)


def _sparse_archive(real_size: int = 256 << 20) -> bytes:
    """A GNU sparse member (type 'S'): one stored block of data whose sparse map puts it at the end of a
    ``real_size`` file; everything before it is a hole, i.e. zeros written on extraction."""
    info = tarfile.TarInfo("workspace/holes.bin")
    info.size = 512
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
    header[156:157] = tarfile.GNUTYPE_SPARSE
    header[386:398] = tarfile.itn(real_size - 512, 12, tarfile.GNU_FORMAT)
    header[398:410] = tarfile.itn(512, 12, tarfile.GNU_FORMAT)
    header[483:495] = tarfile.itn(real_size, 12, tarfile.GNU_FORMAT)
    header[148:156] = _checksum(header)
    case = tarfile.TarInfo("case.json")
    case.size = 2
    body = bytes(header) + b"x" * 512 + case.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + b"{}".ljust(512, b"\0")
    return body + b"\0" * 1024


def test_a_sparse_member_is_refused_before_a_byte_of_it_is_written(tmp_path):
    """A 3-KiB archive whose sparse member once unpacked into 256 MiB of zeros."""
    data = _sparse_archive()
    assert len(data) <= 3072
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:  # it is what it claims: tarfile reads it as sparse
        (member,) = [m for m in tar if m.name == "workspace/holes.bin"]
        assert member.issparse() and member.size == 256 << 20
    with pytest.raises(ArchiveError, match="is a sparse file"):
        unpack_case(data, tmp_path / "dest")
    assert sum(p.stat().st_size for p in (tmp_path / "dest").rglob("*") if p.is_file()) == 0


def _big_member_archive(size: int) -> bytes:
    """A header claiming ``size`` bytes followed by far fewer: the cap is checked before any byte is read."""
    info = tarfile.TarInfo("workspace/big.bin")
    info.size = size
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + b"y" * 4096


def test_members_and_archives_past_their_caps_are_refused(tmp_path):
    from gripprobe_core.store.archive import MEMBER_MAX

    with pytest.raises(ArchiveError, match="over the 134,217,728 a file of a case may have"):
        unpack_case(_big_member_archive(MEMBER_MAX + 1), tmp_path / "d1")  # refused from its header alone
    with pytest.raises(ArchiveError):  # a header claiming more than its data
        unpack_case(_big_member_archive(8192) + b"\0" * 1024, tmp_path / "d2")
    many = _tar([_file("case.json")] + [_file(f"workspace/f{i}") for i in range(30)])
    unpack_case(many, tmp_path / "d3")  # within the default caps
    with pytest.raises(ArchiveError, match="more than 20 files and folders"):
        unpack_case(many, tmp_path / "d4", members_max=20)
    with pytest.raises(ArchiveError, match="unpacks to more than 10 bytes"):
        unpack_case(many, tmp_path / "d5", total_max=10)
    with pytest.raises(ArchiveError, match="bytes, over the 10 a case may have"):
        unpack_case(b"\0" * (11 + (1 << 20)), tmp_path / "d6", total_max=10)
    with pytest.raises(ArchiveError, match="over the 0 a file"):
        unpack_case(many, tmp_path / "d7", member_max=0)


def test_a_member_name_the_file_system_cannot_hold_is_refused(tmp_path):
    with pytest.raises(ArchiveError, match="a name the file system cannot hold"):
        unpack_case(_tar([_file("case.json"), _file("workspace/" + "n" * 300)]), tmp_path / "dest")
