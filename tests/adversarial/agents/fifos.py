# Attack 6, FIFOs and device files: hello.txt (the file the validator reads) is a FIFO nobody writes,
# more FIFOs, a listening UNIX socket's file, and device nodes (/dev/null, /dev/zero, /dev/urandom
# alikes) where mknod is permitted (never inside bwrap; as root unconfined it is).
import os
import socket
import stat


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    made = []
    for name in ("hello.txt", "pipe", "zz-pipe"):
        try:
            os.mkfifo(os.path.join(ws, name))
            made.append(name)
        except OSError:
            pass
    for name, (major, minor) in (("devnull", (1, 3)), ("devzero", (1, 5)), ("devurandom", (1, 9))):
        try:
            os.mknod(os.path.join(ws, name), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            made.append(name)
        except OSError as exc:
            sys.stderr.write(f"mknod {name}: {exc.strerror}\n")
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(ws, "sock"))
        made.append("sock")
    except OSError:
        pass
    with open(os.path.join(ws, "regular.txt"), "w") as fh:
        fh.write("a regular file\n")
    emit("final", text="done")
    emit("attack.report", attack="fifos", phase=phase, made=made)
    return 0


sys.exit(main())
