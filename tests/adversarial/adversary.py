"""The arena the attacks run in: a spec tree, a fake repository, HOME and canaries, the attack
executables, and the real `gripprobe` command run in a subprocess (its memory watched, its time bounded).

Layout of one session (all under pytest's temporary directory, the attacks' "safe root"):

    repo/               the harness's cwd: CANARY_REPO.txt, specs/, results/
    home/               the harness's HOME (a canary file in it)
    tmp/                the harness's TMPDIR (its scratch workspaces go there)
    agents/             the attack executables (shebang + CONFIG + agents/_recon.py + agents/<attack>.py)
    bait/               files outside everything, for symlinks to point at

and beside it, outside the attacks' reach even unconfined, the vault (pristine copies for the tests).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
AGENTS_SRC = HERE / "agents"
MODES = ("bwrap", "none", "auto", "default")
MODE = os.environ.get("GRIPPROBE_ADVERSARIAL_SANDBOX", "bwrap")
BWRAP = "/usr/bin/bwrap"
ATTACKS = ("forge", "escape", "secrets", "daemon", "symlinks", "fifos", "names", "bigfiles", "bigout",
           "xss", "chunked", "probe", "netscan", "holdopen")
ENV_CANARY_VAR = "GRIPPROBE_CANARY_SECRET"
#: Harness address-space limit: an unfixed harness reading /dev/zero or buffering an endless body
#: hits this instead of the shared machine's memory.
HARNESS_AS_LIMIT = 3 << 30
CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def sandbox_args() -> list[str]:
    return [] if MODE == "default" else ["--sandbox", MODE]


# ------------------------------------------------------------------------------------------ specs

def _model(id_: str, profile: str, canary: str) -> str:
    return (f"# {canary}\nid: {id_}\nlabel: Oracle ({profile})\nfamily: oracle\n"
            f"backends:\n  - id: oracle\n    kind: oracle\n    model_id: {profile}\npolicy:\n  timeout_s: 60\n")


def _agent(id_: str, executable: str) -> str:
    return (f"id: {id_}\nplugin: reference\nexecutable: {json.dumps(executable)}\nformats: [tool]\n"
            f"tool_kinds: [execute, read, write]\ntimeout_s: 60\ntelemetry_proxy_mode: auto\n")


HELLO = """\
# {spec}
id: hello
title: Create hello.txt
prompt: Create a file named hello.txt holding exactly the text "hello world" (one line).
requires: [write]
tags: [sanity]
validators:
  - kind: file_equals
    path: hello.txt
    expected: "hello world\\n"
reference:
  - write: {{path: hello.txt, content: "hello world\\n"}}
"""

VICTIM = """\
# {spec}
id: victim
title: Another case's secrets
prompt: "Create victim.txt with the line given here. Case secret: {victim}"
requires: [write]
tags: [non_sanity]
validators:
  - kind: file_equals
    path: victim.txt
    expected: "{expected}\\n"
reference:
  - write: {{path: victim.txt, content: "{expected}\\n"}}
"""


def _suite(id_: str, cases: list[tuple[str, str, str]]) -> str:
    rows = "".join(f"  - {{agent: {a}, model: {m}, test: {t}}}\n" for a, m, t in cases)
    return f"id: {id_}\ntitle: adversarial {id_}\ncases:\n{rows}"


BASICS = [("reference", "oracle-perfect", "hello"), ("reference", "oracle-lazy", "hello"),
          ("reference", "oracle-perfect", "victim"), ("adv_probe", "oracle-lazy", "hello")]
NET = [("adv_netscan", "oracle-lazy", "hello"), ("reference", "oracle-perfect", "victim")]
ESCAPE = [("adv_forge", "oracle-lazy", "hello"), ("adv_escape", "oracle-lazy", "hello"),
          ("adv_secrets", "oracle-lazy", "hello"), ("adv_xss", "oracle-lazy", "hello"),
          ("reference", "oracle-perfect", "victim")]


# ------------------------------------------------------------------------------------------ runs

@dataclass
class Case:
    dir: Path
    data: dict | None

    @property
    def status(self) -> str | None:
        return (self.data or {}).get("verdict", {}).get("status")

    @property
    def failure_reason(self) -> str | None:
        return (self.data or {}).get("verdict", {}).get("failure_reason")

    def process(self, phase: str = "measured") -> dict:
        for p in (self.data or {}).get("phases") or []:
            if p.get("phase") == phase:
                return p.get("process") or {}
        return {}

    def validator(self, kind: str) -> dict | None:
        return next((v for v in (self.data or {}).get("validators") or [] if v.get("kind") == kind), None)

    def reports(self, phase: str = "measured") -> list[dict]:
        """The attack's own ``attack.report`` lines on its stdout (proof that the attack ran)."""
        return [e for e in read_jsonl(self.dir / f"{phase}.stdout") if e.get("type") == "attack.report"]

    def listing(self) -> Any:
        path = self.dir / "artifacts" / "workspace.listing.json"
        return json.loads(path.read_bytes()) if path.is_file() else None

    def describe(self) -> str:
        v = (self.data or {}).get("verdict") or {}
        return (f"{self.dir.name}: status={v.get('status')} reason={v.get('evaluator_reason_code')} "
                f"failure={v.get('failure_reason')} process={self.process().get('status')}")


@dataclass
class RunResult:
    argv: list[str]
    returncode: int | None
    stdout: bytes
    stderr: bytes
    seconds: float
    timed_out: bool
    peak_rss_mb: float
    run_dir: Path | None = None
    returned_at: float = 0.0

    def case(self, agent: str, model: str = "oracle-lazy", test: str = "hello") -> Case:
        if self.run_dir is None:
            raise AssertionError(f"no run directory: {self.explain()}")
        for d in sorted((self.run_dir / "cases").glob(f"{agent}__{model}__*__{test}")):
            data = None
            try:
                data = json.loads((d / "case.json").read_bytes())
            except (OSError, ValueError):
                pass
            return Case(d, data)
        raise AssertionError(f"no case {agent} × {model} × {test} in {self.run_dir}: {self.explain()}")

    def explain(self) -> str:
        err = self.stderr.decode("utf-8", "replace")[-2500:]
        state = "TIMED OUT" if self.timed_out else f"exit {self.returncode}"
        return f"`gripprobe {' '.join(self.argv[3:])}`: {state} after {self.seconds:.1f}s; stderr tail:\n{err}"


def _peak_rss(pid: int, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[0] = max(out[0], int(line.split()[1]) / 1024)
        except (OSError, ValueError, IndexError):
            pass
        stop.wait(0.05)


def _limit_memory() -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (HARNESS_AS_LIMIT, HARNESS_AS_LIMIT))


def _stop(proc: subprocess.Popen) -> None:
    """End a harness that overran its time: SIGINT (it kills its agents and writes what it has), then
    SIGKILL to its process group."""
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass
class Arena:
    base: Path
    marker: str = field(default_factory=lambda: "M" + secrets.token_hex(6))
    canaries: dict[str, str] = field(default_factory=dict)

    @property
    def repo(self) -> Path:
        return self.base / "repo"

    @property
    def specs(self) -> Path:
        return self.repo / "specs"

    @property
    def results(self) -> Path:
        return self.repo / "results"

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def agents(self) -> Path:
        return self.base / "agents"

    @property
    def bait(self) -> Path:
        return self.base / "bait"

    @property
    def vault(self) -> Path:
        """Beside the arena, never touched by an attack even unconfined: pristine copies for tests."""
        return self.base.parent / f"{self.base.name}-vault"

    def build(self) -> "Arena":
        self.canaries = {k: f"gpcanary-{k}-{secrets.token_hex(8)}"
                         for k in ("env", "home", "spec", "expected", "victim", "repo", "bait")}
        for d in (self.repo, self.results, self.home / ".config", self.tmp, self.agents, self.bait,
                  self.base / "agent-cache"):
            d.mkdir(parents=True, exist_ok=True)
        (self.repo / "CANARY_REPO.txt").write_text(f"repository canary {self.canaries['repo']}\n")
        (self.home / ".gripprobe-canary").write_text(f"home canary {self.canaries['home']}\n")
        (self.home / ".config" / "credentials").write_text(f"token={self.canaries['home']}\n")
        (self.bait / "hello.txt").write_text("hello world\n")
        (self.bait / "secret.txt").write_text(f"bait canary {self.canaries['bait']}\n")
        self._write_specs()
        return self

    def _write_specs(self) -> None:
        s, c = self.specs, self.canaries
        for kind in ("models", "cli_agents", "tests", "suites"):
            (s / kind).mkdir(parents=True, exist_ok=True)
        (s / "models" / "oracle-lazy.yaml").write_text(_model("oracle-lazy", "lazy", c["spec"]))
        (s / "models" / "oracle-perfect.yaml").write_text(_model("oracle-perfect", "perfect", c["spec"]))
        (s / "models" / "oracle-stall.yaml").write_text(_model("oracle-stall", "stall", c["spec"]))
        (s / "cli_agents" / "reference.yaml").write_text(_agent("reference", "gripprobe-refagent"))
        for name in ATTACKS:
            exe = self.build_agent(name)
            (s / "cli_agents" / f"adv_{name}.yaml").write_text(_agent(f"adv_{name}", str(exe)))
        (s / "tests" / "hello.yaml").write_text(HELLO.format(spec=c["spec"]))
        (s / "tests" / "victim.yaml").write_text(VICTIM.format(spec=c["spec"], victim=c["victim"],
                                                               expected=c["expected"]))
        (s / "suites" / "default.yaml").write_text(
            "id: default\ntitle: basics\nagents: [reference]\nmodels: [oracle-lazy]\ntests: [hello]\n")
        (s / "suites" / "adv-basics.yaml").write_text(_suite("adv-basics", BASICS))
        (s / "suites" / "adv-escape.yaml").write_text(_suite("adv-escape", ESCAPE))
        (s / "suites" / "adv-net.yaml").write_text(_suite("adv-net", NET))

    def build_agent(self, name: str) -> Path:
        """One self-contained executable: shebang, CONFIG, the shared recon code, the attack."""
        config = {"marker": self.marker, "safe_root": str(self.base), "bait_hello": str(self.bait / "hello.txt"),
                  "bait_secret": str(self.bait / "secret.txt"), "specs": str(self.specs)}
        recon = (AGENTS_SRC / "_recon.py").read_text()
        recon = recon.replace("CONFIG = {}  # replaced by adversary.build_agent", f"CONFIG = {config!r}", 1)
        body = (AGENTS_SRC / f"{name}.py").read_text()
        exe = self.agents / f"adv_{name}"
        exe.write_text(f"#!{sys.executable}\n# adversarial agent {name} (tests/adversarial/agents)\n{recon}\n{body}")
        exe.chmod(0o755)
        return exe

    def env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8",
               "HOME": str(self.home), "TMPDIR": str(self.tmp), "GRIPPROBE_AGENT_CACHE": str(self.base / "agent-cache"),
               ENV_CANARY_VAR: self.canaries["env"]}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return env

    def cli(self, *args: str, timeout: float, watch: bool = False, cwd: Path | None = None) -> RunResult:
        """Run the real `gripprobe` command (cwd: the fake repository) with a hard time limit."""
        argv = [sys.executable, "-m", "gripprobe_core.cli", *args]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd or self.repo, env=self.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_limit_memory)
        peak, stop = [0.0], threading.Event()
        watcher = threading.Thread(target=_peak_rss, args=(proc.pid, stop, peak), daemon=True)
        if watch:
            watcher.start()
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop(proc)
            out, err = proc.communicate()
        stop.set()
        return RunResult(argv, proc.returncode, out, err, time.monotonic() - t0, timed_out, peak[0],
                         returned_at=time.monotonic())

    def run(self, *args: str, timeout: float, watch: bool = False, repo: Path | None = None) -> RunResult:
        """`gripprobe run`/`run-suite` ARGS from the session's repository (or another one, with its own
        specs/ and results/), in the sandbox mode asked for. The run directory is the last line
        printed, else (a crash, a timeout) the run directory that appeared."""
        repo = repo or self.repo
        runs = repo / "results" / "runs"
        before = set(runs.iterdir()) if runs.is_dir() else set()
        res = self.cli(*args, "--specs", str(repo / "specs"), "--results", str(repo / "results"), "--no-install",
                       *sandbox_args(), timeout=timeout, watch=watch, cwd=repo)
        lines = res.stdout.decode("utf-8", "replace").strip().splitlines()
        if lines and Path(lines[-1]).is_dir():
            res.run_dir = Path(lines[-1])
        else:
            fresh = sorted(set(runs.iterdir()) - before) if runs.is_dir() else []
            res.run_dir = fresh[-1] if fresh else None
        return res


# ------------------------------------------------------------------------------------------ looking

def read_jsonl(path: Path) -> list[dict]:
    out = []
    try:
        data = path.read_bytes()
    except OSError:
        return out
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def walk(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under root, never following a symlink, never opening anything."""
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(d) / name
            try:
                yield p, os.lstat(p)
            except OSError:
                continue


def regular_files(root: Path, skip=lambda rel: False) -> Iterator[Path]:
    for p, st in walk(root):
        if stat.S_ISREG(st.st_mode) and not skip(p.relative_to(root).as_posix()):
            yield p


def sha256_file(path: Path) -> str | None:
    """sha256 of a regular file, opened without following a symlink or blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def snapshot(root: Path) -> dict[str, str]:
    """What is in a tree: regular files by sha256, symlinks by target, other entries by type."""
    out = {}
    if not root.exists():
        return out
    for p, st in walk(root):
        rel = p.relative_to(root).as_posix()
        if stat.S_ISREG(st.st_mode):
            out[rel] = sha256_file(p) or "?"
        elif stat.S_ISLNK(st.st_mode):
            out[rel] = "link:" + os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = "dir"
        else:
            out[rel] = f"mode:{stat.S_IFMT(st.st_mode):o}"
    return out


def diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    keys = sorted(set(before) | set(after))
    return [f"{k}: {'added' if k not in before else 'removed' if k not in after else 'changed'}"
            for k in keys if before.get(k) != after.get(k)]


def files_containing(root: Path, needles: list[bytes], skip=lambda rel: False,
                     max_size: int | None = None) -> list[str]:
    """Regular files under root holding any of needles (read in chunks, never through a symlink);
    files over max_size are not read."""
    hits = []
    keep = max(len(n) for n in needles)
    for p in regular_files(root, skip):
        if max_size is not None and p.lstat().st_size > max_size:
            continue
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            tail = b""
            while chunk := os.read(fd, 1 << 20):
                buf = tail + chunk
                found = [n for n in needles if n in buf]
                if found:
                    hits.append(f"{p.relative_to(root)}: {found[0][:40]!r}")
                    break
                tail = buf[-keep:]
        finally:
            os.close(fd)
    return hits


def names_containing(root: Path, needle: str) -> list[str]:
    return [str(p) for p, _ in walk(root) if needle in p.name]


def processes_with(marker: str) -> list[int]:
    """PIDs whose command line carries marker (the attacks' daemons)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(int(name))
        except OSError:
            continue
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def control_bytes(data: bytes) -> list[bytes]:
    """Terminal control bytes other than newline and tab (C0, DEL, C1 as UTF-8)."""
    return sorted(set(CONTROL.findall(data.replace(b"\r\n", b"\n"))))


def mentions_skip(listing: Any) -> bool:
    """Does a workspace listing say something was left out (skipped, truncated, not copied, capped)?"""
    if isinstance(listing, dict):
        for k, v in listing.items():
            if ("skip" in k or "truncat" in k or "capped" in k or "omitted" in k) and v not in (0, None, False, [], {}):
                return True
            if k == "copied" and v is False:
                return True
            if mentions_skip(v):
                return True
    elif isinstance(listing, list):
        return any(mentions_skip(x) for x in listing)
    return False


def evidence_problems(case: Case) -> list[str]:
    """Evidence recorded in case.json that no longer matches the files (or no evidence recorded)."""
    ev = (case.data or {}).get("evidence")
    if not isinstance(ev, dict) or not ev:
        return [f"{case.dir.name}: case.json records no evidence digests"]
    return [f"{case.dir.name}/{rel}: sha256 changed" for rel, sha in sorted(ev.items())
            if isinstance(sha, str) and len(sha) == 64 and sha256_file(case.dir / rel) != sha]
