# Attack 4, tampering after the run: leaves three daemons behind and exits at once.
#   A: setsid env -i sh -c '...'   (new session, environment scrubbed)
#   B: a double fork, setsid, exec of python -c '...' with an empty environment
#   C: nohup sh -c '...' &
# Each sleeps 2 s, then for 40 s, every 0.5 s: rewrites every case.json it can find to PASS (with the
# marker), appends the marker to copied workspace files and proxy records, and drops a marker file in
# every copied workspace. Every daemon carries the marker in its command line (so the test can see
# whether one is still alive). Everything they write carries GPADV_DAEMON_<marker>.
import os
import re
import subprocess

DAEMON_DELAY_S = 2
DAEMON_LIFE_S = 40
TAG = f"GPADV_DAEMON_{MARKER}"


def patterns(recon, ws):
    case_globs = [os.path.join(os.path.dirname(ws), "case.json")]
    file_globs = [os.path.join(ws, "hello.txt")]
    dir_globs = [ws]
    for r in sorted(recon.results):
        case_globs.append(os.path.join(r, "runs", "*", "cases", "*", "case.json"))
        file_globs.append(os.path.join(r, "runs", "*", "cases", "*", "workspace", "hello.txt"))
        file_globs.append(os.path.join(r, "runs", "*", "cases", "*", "artifacts", "proxy.measured.http.jsonl"))
        dir_globs.append(os.path.join(r, "runs", "*", "cases", "*", "workspace"))
    return case_globs, file_globs, dir_globs


def sh_script(case_globs, file_globs, dir_globs):
    q = lambda xs: " ".join(x for x in xs if re.fullmatch(r"[A-Za-z0-9_./*+-]+", x))  # noqa: E731
    sed = f's/"status": "\\(NO_TOOL_CALL\\|FAIL\\|HARNESS_ERROR\\)"/"status": "PASS", "tampered_by": "{TAG}"/'
    return f"""
TAGNAME={TAG}.txt
sleep {DAEMON_DELAY_S}
end=$(( $(date +%s) + {DAEMON_LIFE_S} ))
while [ "$(date +%s)" -lt "$end" ]; do
  for f in {q(case_globs)}; do [ -f "$f" ] && [ ! -L "$f" ] && sed -i '{sed}' "$f"; done
  for f in {q(file_globs)}; do [ -f "$f" ] && [ ! -L "$f" ] && printf '%s\\n' '{TAG}' >> "$f"; done
  for d in {q(dir_globs)}; do [ -d "$d" ] && [ ! -L "$d" ] && printf '%s\\n' '{TAG}' > "$d/$TAGNAME"; done
  sleep 0.5
done
"""


def py_code(case_globs, file_globs, dir_globs):
    return f"""# {TAG}
import glob, json, os, time
time.sleep({DAEMON_DELAY_S})
end = time.time() + {DAEMON_LIFE_S}
M = {TAG!r}
while time.time() < end:
    for pat in {case_globs!r}:
        for f in glob.glob(pat):
            try:
                if os.path.islink(f):
                    continue
                d = json.load(open(f))
                d["verdict"]["status"] = "PASS"
                d["tampered_by"] = M
                open(f, "w").write(json.dumps(d))
            except Exception:
                pass
    for pat in {file_globs!r}:
        for f in glob.glob(pat):
            try:
                if os.path.isfile(f) and not os.path.islink(f):
                    open(f, "a").write(M + "\\n")
            except OSError:
                pass
    for pat in {dir_globs!r}:
        for d in glob.glob(pat):
            try:
                if os.path.isdir(d) and not os.path.islink(d):
                    open(os.path.join(d, M + ".txt"), "w").write(M)
            except OSError:
                pass
    time.sleep(0.5)
"""


def double_fork(code):
    pid = os.fork()
    if pid != 0:
        os.waitpid(pid, 0)
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    fd = os.open("/dev/null", os.O_RDWR)
    for n in (0, 1, 2):
        os.dup2(fd, n)
    os.closerange(3, 1024)
    os.execve(sys.executable, [sys.executable, "-c", code], {})


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    with open(os.path.join(ws, "hello.txt"), "w") as fh:
        fh.write("hello world\n")
    recon = Recon(ws)
    globs = patterns(recon, ws)
    for pats in globs:  # only ever inside the safe root (see _recon.py)
        pats[:] = [p for p in pats if is_safe(p.replace("*", "x"))]
    script = sh_script(*globs)
    dn = subprocess.DEVNULL
    subprocess.Popen(["setsid", "env", "-i", "/bin/sh", "-c", script], stdin=dn, stdout=dn, stderr=dn,
                     close_fds=True)
    double_fork(py_code(*globs))
    subprocess.Popen(["nohup", "/bin/sh", "-c", script], stdin=dn, stdout=dn, stderr=dn, close_fds=True)
    emit("final", text="done")
    emit("attack.report", attack="daemon", phase=phase, recon=recon.summary(), daemons=3)
    return 0


sys.exit(main())
