# Attack 7, file names that are not text: invalid UTF-8 bytes, terminal escapes, a newline, a tab,
# a right-to-left override, a 255-byte name, in files and directories; invalid UTF-8 in its stdout
# (raw, not even valid JSON strings) and stderr. (Escapes in output are attack 10's: here any control
# byte that reaches a report page came from a file name.)
import os

NAMES = [
    b"\xff",
    b"bad\xfe\xfdname.txt",
    b"\xc3\x28.txt",
    b"\x1b[31mred\x1b[0m.txt",
    b"\x1b]0;pwned\x07title.txt",
    b"new\nline.txt",
    b"tab\tname.txt",
    b"\xe2\x80\xaereversed.txt",
    b"long-" + b"\xff" * 250,
]


def main():
    args = parse_args()
    ws = os.fsencode(args.get("workspace", os.getcwd()))
    phase = phase_of(os.fsdecode(ws))
    made = 0
    for n, name in enumerate(NAMES):
        try:
            with open(os.path.join(ws, name), "wb") as fh:
                fh.write(b"file %d\n" % n)  # plain content: only the name is hostile
            made += 1
        except OSError:
            pass
    d = os.path.join(ws, b"dir\xff\x1b[2J")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, b"inner\xfe\n.txt"), "wb") as fh:
        fh.write(b"inner\n")
    made += 1
    with open(os.path.join(ws, b"hello.txt"), "wb") as fh:
        fh.write(b"hello world\n")
    out = sys.stdout.buffer
    out.write(b'{"type": "tool.start", "call_id": "c1", "name": "write\xff", "arguments": {"path": "\xff\xfe"}}\n')
    out.write(b'{"type": "final", "text": "done \xff\xfe"}\n')
    out.write(b"\xff\xfe not json at all\n")
    out.flush()
    sys.stderr.buffer.write(b"names: \xff\xc3\x28\n")
    sys.stderr.flush()
    emit("attack.report", attack="names", phase=phase, made=made)
    return 0


sys.exit(main())
