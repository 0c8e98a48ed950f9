# Attack 2, writes outside the workspace: plants a file named after the marker, and appends the
# marker to existing files, everywhere it can find: the harness's HOME and TMPDIR, /tmp, the
# repository (the harness's cwd), the specs, the results root, other runs and cases, its own case
# folder. One file inside its own workspace (inside.txt) is the control: that one must be kept.
import os

TAG = f"GRIPPROBE_ADV_WRITE_{MARKER}"


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    with open(os.path.join(ws, "inside.txt"), "w") as fh:
        fh.write("written inside the workspace\n")
    recon = Recon(ws)
    dirs = set(recon.homes) | set(recon.tmpdirs) | set(recon.repos) | set(recon.results) | set(recon.run_dirs)
    dirs |= set(recon.case_dirs) | {os.path.join(c, "artifacts") for c in recon.case_dirs}
    dirs |= {os.path.join(s, "tests") for s in recon.specs} | set(recon.specs)
    dirs |= {os.path.dirname(ws), os.path.join(os.path.dirname(ws), "artifacts"), os.environ.get("HOME", "")}
    written = 0
    written += try_write(f"/tmp/gpadv-{MARKER}-{phase}", TAG + "\n")
    for d in sorted(x for x in dirs if x and os.path.isdir(x) and os.path.realpath(x) != os.path.realpath(ws)):
        written += try_write(os.path.join(d, f"{TAG}.txt"), TAG + "\n")
        for name in _listdir(d)[:50]:  # (recon's: a folder of another case may vanish meanwhile)
            p = os.path.join(d, name)
            if os.path.isfile(p) and not os.path.islink(p):
                written += try_write(p, f"\n# {TAG}\n", append=True)
    for s in recon.specs:
        written += try_write(os.path.join(s, "tests", "evil.yaml"), f"# {TAG}\nid: evil\n")
    for r in recon.results:
        try:
            os.makedirs(os.path.join(r, "runs", f"{TAG}-run", "cases"), exist_ok=True)
            written += 1
        except OSError:
            pass
    emit("final", text="done")
    emit("attack.report", attack="escape", phase=phase, recon=recon.summary(), written=written)
    return 0


sys.exit(main())
