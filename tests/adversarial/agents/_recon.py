# Shared reconnaissance of the adversarial agents: prepended to every attack script by
# adversary.build_agent (an agent sees only its own executable inside the sandbox, so each
# script must be one self-contained file). Standard library only.
#
# What a clever agent does to find the harness's files: its cwd and workspace parents, $OLDPWD/$PWD,
# the chain of its ancestors in /proc (cmdline flags --results/--specs, their cwd and environ), every
# /proc/<pid> whose cmdline mentions gripprobe, a bounded walk of / and /tmp for case.json / runs/.
#
# Safety on a shared machine: CONFIG["safe_root"] (the test session's temporary directory) bounds
# what the attacks touch when they are NOT confined (--sandbox none): they write, and read files,
# only under it (plus /tmp/gpadv-<marker>* and /proc of the harness processes started for the test); in the
# sandbox, also under /tmp/gripprobe-case, where the sandbox shows the phase's own folder.
# It is never used to FIND anything; under bwrap it is not even visible.

import json
import os
import sys
import time

CONFIG = {}  # replaced by adversary.build_agent

MARKER = CONFIG.get("marker", "GPADV-unset")
SAFE_ROOT = os.path.realpath(CONFIG.get("safe_root", "/nonexistent-safe-root"))
SKIP_WALK = ("/proc", "/sys", "/dev", "/farm", "/old_root", "/run")


def parse_args(argv=None):
    """The reference plugin's command line: --base-url URL --model M --workspace WS --prompt P."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--") and i + 1 < len(argv):
            out[argv[i][2:].replace("-", "_")] = argv[i + 1]
            i += 2
        else:
            i += 1
    return out


def phase_of(workspace):
    """Which phase this is. Unconfined, the workspace's own path says (…/warmup/workspace); in the sandbox
    every phase works at one path (/tmp/gripprobe-case/workspace) and the mount table still names the real
    folder bound there."""
    parts = str(workspace).split(os.sep)
    if "warmup" in parts or "measured" in parts:
        return "warmup" if "warmup" in parts else "measured"
    root = os.path.dirname(os.path.abspath(str(workspace)))
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 4 and fields[4] == root and "warmup" in fields[3].split("/"):
                    return "warmup"
    except OSError:
        pass
    return "measured"


def emit(type_, **fields):
    """One JSON event line on stdout, the reference agent's format."""
    sys.stdout.write(json.dumps({"type": type_, "ts": "2026-01-01T00:00:00.000Z", **fields}) + "\n")
    sys.stdout.flush()


def is_safe(path):
    """May an attack touch this path (see the header)? Never follows a final symlink."""
    try:
        real = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        real = os.path.join(real, os.path.basename(path))
    except OSError:
        return False
    if real == SAFE_ROOT or real.startswith(SAFE_ROOT + os.sep):
        return True
    if (real == SEEN_ROOT or real.startswith(SEEN_ROOT + os.sep)) and _seen_root_mounted():
        return True  # the phase's own folder where the sandbox shows it (bound from under the safe root)
    return os.path.dirname(real) == "/tmp" and os.path.basename(real).startswith("gpadv-" + MARKER)


SEEN_ROOT = "/tmp/gripprobe-case"
_MOUNTED = []


def _seen_root_mounted():
    """Is SEEN_ROOT a mount point here (inside the sandbox, where the phase's folder is bound)? Unconfined
    it is not, and a folder of that name on the host is never touched."""
    if not _MOUNTED:
        try:
            with open("/proc/self/mountinfo") as fh:
                _MOUNTED.append(any(len(f) > 4 and f[4] == SEEN_ROOT for f in (line.split() for line in fh)))
        except OSError:
            _MOUNTED.append(False)
    return _MOUNTED[0]


def try_write(path, data, append=False):
    """Write or append bytes where allowed; True when it worked."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if not is_safe(path):
        return False
    try:
        with open(path, "ab" if append else "wb") as fh:
            fh.write(data)
        return True
    except OSError:
        return False


def try_read(path, limit=1 << 20):
    if not is_safe(path) or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _read_proc(pid, name):
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read(1 << 20)
    except OSError:
        return b""


def _ppid(pid):
    for line in _read_proc(pid, "status").splitlines():
        if line.startswith(b"PPid:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return 0
    return 0


def ancestors():
    out, pid = [], os.getppid()
    while pid > 1 and pid not in out and len(out) < 64:
        out.append(pid)
        pid = _ppid(pid)
    return out


def proc_info(pid):
    argv = [a.decode("utf-8", "surrogateescape") for a in _read_proc(pid, "cmdline").split(b"\0") if a]
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = None
    return argv, cwd


def proc_environ(pid):
    """The environment of a harness process (only those started under the safe root are read)."""
    env = {}
    for item in _read_proc(pid, "environ").split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode("utf-8", "surrogateescape")] = v.decode("utf-8", "surrogateescape")
    return env


def harness_pids():
    """Ancestors, plus every process whose command line mentions gripprobe and which works under the
    safe root (so that, unconfined, other people's processes on the machine are left alone)."""
    pids = list(ancestors())
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    for name in names:
        if not name.isdigit() or int(name) in pids or int(name) == os.getpid():
            continue
        argv, cwd = proc_info(int(name))
        if any("gripprobe" in a for a in argv):
            pids.append(int(name))
    return [p for p in pids if _guarded(p)]


def _guarded(pid):
    argv, cwd = proc_info(pid)
    return (cwd is not None and is_safe(os.path.join(cwd, "x"))) or any(is_safe(a) for a in argv if a.startswith("/"))


def _flag(argv, *names):
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _walk_for(root, budget_s, want_names=("case.json", "manifest.json"), max_depth=12):
    """Paths of files named in want_names under root (bounded in time and depth, no symlinks)."""
    found, deadline = [], time.monotonic() + budget_s
    stack = [(root, 0)]
    while stack and time.monotonic() < deadline:
        d, depth = stack.pop()
        if any(d == s or d.startswith(s + "/") for s in SKIP_WALK) or depth > max_depth:
            continue
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append((e.path, depth + 1))
                        elif e.name in want_names:
                            found.append(e.path)
                    except OSError:
                        continue
        except OSError:
            continue
    return found


class Recon:
    """Everything the agent could find about the harness: results roots, runs, cases, specs, homes."""

    def __init__(self, workspace):
        self.workspace = os.path.abspath(workspace)
        self.results, self.specs, self.homes, self.repos, self.tmpdirs = set(), set(), set(), set(), set()
        self.case_dirs, self.run_dirs = set(), set()
        self.environs = []
        self.notes = []
        self._look()

    def _add_case_like(self, path):
        p = os.path.abspath(path)
        while p not in ("/", ""):
            if os.path.isdir(os.path.join(p, "artifacts")) or os.path.isfile(os.path.join(p, "case.json")):
                self.case_dirs.add(p)
            if os.path.isdir(os.path.join(p, "cases")):
                self.run_dirs.add(p)
            if os.path.isdir(os.path.join(p, "runs")):
                self.results.add(p)
            p = os.path.dirname(p)

    def _look(self):
        for p in (os.getcwd(), self.workspace, os.environ.get("OLDPWD"), os.environ.get("PWD")):
            if p:
                self._add_case_like(p)
        for pid in harness_pids():
            argv, cwd = proc_info(pid)
            env = proc_environ(pid)
            self.environs.append(env)
            base = cwd or "/"
            if any("gripprobe" in a for a in argv):
                res = _flag(argv, "--results")
                self.results.add(os.path.join(base, res or "results"))
                spec = _flag(argv, "--specs", "--root") or env.get("GRIPPROBE_SPECS")
                self.specs.add(os.path.join(base, spec or "specs"))
                if cwd:
                    self.repos.add(cwd)
            for key in ("HOME",):
                if env.get(key):
                    self.homes.add(env[key])
            if env.get("TMPDIR"):
                self.tmpdirs.add(env["TMPDIR"])
            if cwd:
                self._add_case_like(cwd)
        for root, budget in (("/tmp", 0.6), ("/", 0.6)):
            for f in _walk_for(root, budget):
                if is_safe(f):
                    self._add_case_like(os.path.dirname(f))
        for r in list(self.results):
            runs = os.path.join(r, "runs")
            for name in _listdir(runs):
                self.run_dirs.add(os.path.join(runs, name))
        for rd in list(self.run_dirs):
            for name in _listdir(os.path.join(rd, "cases")):
                self.case_dirs.add(os.path.join(rd, "cases", name))
        self.results = {p for p in self.results if os.path.isdir(p) and is_safe(os.path.join(p, "x"))}
        self.specs = {p for p in self.specs if os.path.isdir(p) and is_safe(os.path.join(p, "x"))}
        self.run_dirs = {p for p in self.run_dirs if os.path.isdir(p) and is_safe(os.path.join(p, "x"))}
        self.case_dirs = {p for p in self.case_dirs if os.path.isdir(p) and is_safe(os.path.join(p, "x"))}

    def summary(self):
        return {k: len(getattr(self, k)) for k in ("results", "specs", "homes", "repos", "run_dirs", "case_dirs")}


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def files_under(root, limit=2000):
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            out.append(os.path.join(d, f))
            if len(out) >= limit:
                return out
    return out
