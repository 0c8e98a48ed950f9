# Attack 22, streamed calls that do not ask for usage (the OpenAI SDK's default: no
# stream_options.include_usage), so the backend reports none, under a token budget: 20 of them to its own
# base URL (the proxy), each asking for the task. Unfixed, each counted 0 tokens: 20 of 20 answered under
# a budget of 200. Reports the statuses it got. Measured phase only.
import json
import os
import urllib.error
import urllib.request

CALLS = 20


def call(base_url, model):
    body = {"model": model, "stream": True,
            "messages": [{"role": "user", "content": "Create hello.txt holding hello world. " + "x" * 400}]}
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            data = resp.read()
            return resp.status, b'"usage"' in data
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code, False
    except OSError as exc:
        return type(exc).__name__, False


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    statuses, usage_seen = [], 0
    if phase == "measured":
        for _ in range(CALLS):
            status, usage = call(args["base_url"], args.get("model"))
            statuses.append(status)
            usage_seen += usage
    emit("final", text="done")
    emit("attack.report", attack="unbudgeted", phase=phase, statuses=statuses, usage_seen=usage_seen)
    return 0


sys.exit(main())
