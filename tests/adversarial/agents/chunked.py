# Attack 11, an endless chunked request body to the proxy (the base URL it is given): 1 MiB chunks
# until the proxy stops reading or answers, 1.5 GiB or 20 s at most (bounded so that an unfixed
# harness does not take the machine down). Reports the status it got back. Measured phase only.
import os
import socket
import time
from urllib.parse import urlsplit

LIMIT = 3 << 29
DEADLINE_S = 20.0


def attack(base_url):
    u = urlsplit(base_url)
    path = (u.path.rstrip("/") or "") + "/chat/completions"
    s = socket.create_connection((u.hostname, u.port or 80), timeout=10)
    s.sendall((f"POST {path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
               f"Transfer-Encoding: chunked\r\n\r\n").encode())
    chunk = b"a" * (1 << 20)
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    head = b'{"model": "lazy", "messages": [{"role": "user", "content": "'
    s.sendall(f"{len(head):x}\r\n".encode() + head + b"\r\n")
    sent, t0, why = 0, time.monotonic(), "limit"
    s.settimeout(5)
    try:
        while sent < LIMIT:
            if time.monotonic() - t0 > DEADLINE_S:
                why = "deadline"
                break
            s.sendall(frame)
            sent += len(chunk)
    except OSError as exc:
        why = f"send failed: {type(exc).__name__}"
    status = None
    try:
        head = s.recv(4096)
        if head.startswith(b"HTTP/"):
            status = int(head.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    s.close()
    return sent, status, why, round(time.monotonic() - t0, 2)


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    result = {"sent": 0, "status": None, "why": "warmup"}
    if phase == "measured":
        sent, status, why, secs = attack(args["base_url"])
        result = {"sent": sent, "status": status, "why": why, "seconds": secs}
    emit("final", text="done")
    emit("attack.report", attack="chunked", phase=phase, **result)
    return 0


sys.exit(main())
