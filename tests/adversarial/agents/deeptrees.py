# Attack 17, scratch that resists removal: in its HOME, its TMPDIR and its workspace the agent leaves a
# 3,000-deep folder chain (a path far past PATH_MAX: built by descriptor, as a recursive remover would
# need 3,000 frames and 3,000 descriptors to walk it), chmod-000 folders holding files, names that are
# not text (0xff, a newline, an escape, 255 bytes), FIFOs and a socket; a fake API key in HOME. It
# writes hello.txt (so the validators run) and check.py, which the test's command_output validator runs
# on its scratch copy: it leaves the same kind of tree in the validator's scratch and HOME.
import os
import socket

DEPTH = 3000
ODD = [b"\xff\xfe", b"new\nline", b"\x1b[31mred", b"x" * 255, b"-rf", b".gripprobe-rm-0"]
CHECK = r'''
import os
def chain(root, depth):
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    os.chmod(os.path.join(root, "d"), 0)
for where in (".", os.environ.get("HOME", ".")):
    os.makedirs(os.path.join(where, "deep2"), exist_ok=True)
    chain(os.path.join(where, "deep2"), %d)
print("ok")
''' % DEPTH


def chain(root, depth):
    """root/d/d/... depth folders, by descriptor; a file and a FIFO every 500 levels; 000 on the top."""
    os.makedirs(root, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        if i % 500 == 0:
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=nfd))
            os.mkfifo("pipe", dir_fd=nfd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    os.chmod(os.path.join(root, "d"), 0)
    return depth


def litter(base, depth):
    """Everything a remover can trip on, under base; what was made, as a count."""
    made = 0
    if not is_safe(os.path.join(base, "deep")):
        return made
    made += chain(os.path.join(base, "deep"), depth)
    locked = os.path.join(base, "locked")
    os.makedirs(os.path.join(locked, "inner"), exist_ok=True)
    for d in (locked, os.path.join(locked, "inner")):
        with open(os.path.join(d, "key.txt"), "w") as fh:
            fh.write("sk-gpadv-fake-key\n")
    os.chmod(os.path.join(locked, "inner", "key.txt"), 0)
    os.chmod(os.path.join(locked, "inner"), 0)
    os.chmod(locked, 0)
    made += 3
    for name in ODD:
        p = os.fsencode(base) + b"/" + name
        try:
            os.mkdir(p)
            with open(p + b"/" + name[:200], "wb") as fh:
                fh.write(name)
            made += 1
        except OSError:
            pass
    try:
        os.mkfifo(os.path.join(base, "pipe"))
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(os.path.join(base, "sock"))
        made += 2
    except OSError:
        pass
    return made


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    home, tmp = os.environ.get("HOME", ws), os.environ.get("TMPDIR", ws)
    with open(os.path.join(ws, "hello.txt"), "w") as fh:
        fh.write("hello world\n")
    with open(os.path.join(ws, "check.py"), "w") as fh:
        fh.write(CHECK)
    with open(os.path.join(home, ".api-key"), "w") as fh:
        fh.write("OPENAI_API_KEY=sk-gpadv-fake-key\n")
    made = {}
    places = {"HOME": home, "TMPDIR": tmp, "workspace": ws} if phase == "measured" else {"HOME": home}
    for label, base in places.items():
        try:
            made[label] = litter(base, DEPTH if phase == "measured" else 300)
        except OSError as exc:
            made[label] = f"failed: {exc.strerror}"
    emit("final", text="done")
    emit("attack.report", attack="deeptrees", phase=phase, made=made)
    return 0


sys.exit(main())
