# Attack 8, a workspace too big to keep: a 1 GiB file (sparse: cheap to make, 1 GiB to read) and
# 100,000 small files in 100 folders (hard links, 1,000 to a file: as many directory entries for the
# harness to walk, a fraction of the time to make). Measured phase only (the warmup is not copied anyway).
import os

N_FILES = 100_000
BIG = 1 << 30


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    made = 0
    if phase == "measured":
        with open(os.path.join(ws, "big.bin"), "wb") as fh:
            fh.truncate(BIG)
            fh.seek(BIG - 5)
            fh.write(b"tail\n")
        for d in range(100):
            sub = os.path.join(ws, "many", f"d{d:03d}")
            os.makedirs(sub, exist_ok=True)
            first = os.path.join(sub, "f0000")
            with open(first, "w") as fh:
                fh.write("x\n")
            made += 1
            for i in range(1, N_FILES // 100):
                os.link(first, os.path.join(sub, f"f{i:04d}"))  # a directory entry each, cheap to make
                made += 1
    with open(os.path.join(ws, "hello.txt"), "w") as fh:
        fh.write("hello world\n")
    emit("final", text="done")
    emit("attack.report", attack="bigfiles", phase=phase, files=made, big=BIG if phase == "measured" else 0)
    return 0


sys.exit(main())
