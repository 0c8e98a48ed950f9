# Attack 9, 1 GiB on stdout and 1 GiB on stderr at once (stdout as JSON lines the parser must read
# and drop; a flood of real tool events is a different attack, see README). Measured phase only.
import os
import threading

TOTAL = 1 << 30
LINE = b'{"type": "noise"}' + b" " * 1006 + b"\n"


def pump(fd, block):
    sent = 0
    try:
        while sent < TOTAL:
            sent += os.write(fd, block)
    except OSError:
        pass


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    emit("attack.report", attack="bigout", phase=phase, total=TOTAL if phase == "measured" else 0)
    if phase == "measured":
        out_block = LINE * ((1 << 20) // len(LINE))
        err_block = b"E" * (1 << 20)
        threads = [threading.Thread(target=pump, args=(1, out_block)),
                   threading.Thread(target=pump, args=(2, err_block))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    sys.stdout.write('{"type": "final", "text": "done"}\n')
    return 0


sys.exit(main())
