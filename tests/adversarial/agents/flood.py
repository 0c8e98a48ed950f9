# Attack 24, a record flood: 1,500 model calls of 250 KB each to its own base URL (the proxy), from 8
# connections at once, within ~15 s. Unfixed: a 377 MB proxy.measured.http.jsonl in the results and 1.34 GB
# harness RSS. Each names the case's model. Reports how many were answered. Measured phase only.
import http.client
import json
import os
import threading
import time
from urllib.parse import urlsplit

CALLS = 1500
SIZE = 250 * 1000
WORKERS = 8
DEADLINE_S = 60.0


def worker(u, path, body, todo, out, lock, t0):
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
    while True:
        with lock:
            if not todo or time.monotonic() - t0 > DEADLINE_S:
                return
            todo.pop()
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException) as exc:
            status = type(exc).__name__
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
        with lock:
            out[status] = out.get(status, 0) + 1


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    out, seconds = {}, 0.0
    if phase == "measured":
        u = urlsplit(args["base_url"])
        path = u.path.rstrip("/") + "/chat/completions"
        filler = "hello world " * (SIZE // 12)
        body = json.dumps({"model": args.get("model"), "stream": False,
                           "messages": [{"role": "user", "content": filler}]}).encode()
        todo, lock, t0 = list(range(CALLS)), threading.Lock(), time.monotonic()
        threads = [threading.Thread(target=worker, args=(u, path, body, todo, out, lock, t0)) for _ in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = round(time.monotonic() - t0, 2)
    emit("final", text="done")
    emit("attack.report", attack="flood", phase=phase, statuses={str(k): v for k, v in out.items()},
         calls=sum(out.values()), seconds=seconds)
    return 0


sys.exit(main())
