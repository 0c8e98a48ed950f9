# Attack 23, 30 model calls at once to its own base URL (the proxy) under a small token budget: unfixed,
# every one was admitted before any had been counted (2,550 tokens spent against a budget of 100, and
# `token_budget_exceeded: false`). Each names the case's model and streams without asking for usage.
# Reports the statuses. Measured phase only.
import json
import os
import threading
import urllib.error
import urllib.request

CALLS = 30


def call(base_url, model, out, i):
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": f"call {i}: create hello.txt holding hello world"}]}
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
            out[i] = resp.status
    except urllib.error.HTTPError as exc:
        exc.read()
        out[i] = exc.code
    except OSError as exc:
        out[i] = type(exc).__name__


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    out = [None] * CALLS
    if phase == "measured":
        start = threading.Barrier(CALLS)

        def go(i):
            start.wait()
            call(args["base_url"], args.get("model"), out, i)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(CALLS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    emit("final", text="done")
    emit("attack.report", attack="parallel", phase=phase, statuses=out)
    return 0


sys.exit(main())
