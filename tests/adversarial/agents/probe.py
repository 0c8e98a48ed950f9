# Not an attack: the basics check that a script declared as an agent runs at all where the attacks
# run (inside the sandbox when there is one): it asks the model once through the proxy, writes
# hello.txt in its workspace and a file in its HOME and TMPDIR, and reports what worked.
import json
import os
import urllib.request


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    status = None
    try:
        body = json.dumps({"model": args.get("model"), "messages": [{"role": "user", "content": "say hi"}]})
        req = urllib.request.Request(args["base_url"].rstrip("/") + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
            status = resp.status
    except Exception as exc:
        status = type(exc).__name__
    with open(os.path.join(ws, "hello.txt"), "w") as fh:
        fh.write("hello world\n")
    wrote = {}
    for var in ("HOME", "TMPDIR"):
        try:
            with open(os.path.join(os.environ[var], "probe.txt"), "w") as fh:
                fh.write("ok\n")
            wrote[var] = True
        except (KeyError, OSError):
            wrote[var] = False
    emit("final", text="done")
    emit("attack.report", attack="probe", phase=phase_of(ws), model_status=status, wrote=wrote)
    return 0


sys.exit(main())
