# Attack 13, the network beside the proxy: the ports listening in /proc/net/tcp and tcp6, then a scan of
# every port on 127.0.0.1 and ::1. Every port it reaches other than its own base URL's is asked
# `GET /v1/models`; those that answer like a model server (an oracle, another case's or run's proxy, the
# test's decoy) get a model call naming the `perfect` profile (the oracle answers it with a tool call)
# with the marker in the prompt, then a flood of 20 more (another case's budget, its records). Only ports
# listening on a loopback address are asked anything (every server the test starts is one); a port bound
# to every interface (a service of the machine) is at most connected to. Reports what it found.
import errno
import select
import socket
from urllib.parse import urlsplit

FLOOD = 20


LOOPBACK = ("0100007F", "00000000000000000000000001000000")  # 127.0.0.1, ::1 as /proc/net/tcp(6) writes them


def listening_ports(loopback_only=False):
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[3] == "0A":  # LISTEN
                addr, port = parts[1].rsplit(":", 1)
                if not loopback_only or addr in LOOPBACK:
                    ports.add(int(port, 16))
    return sorted(ports)


def _connected(s):
    try:  # a connect to a free port in the ephemeral range can meet itself (TCP simultaneous open)
        return s.getsockname()[:2] != s.getpeername()[:2]
    except OSError:
        return False


def scan(family, host):
    found = []
    for start in range(1, 65536, 512):
        socks = []
        for port in range(start, min(start + 512, 65536)):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setblocking(False)
            socks.append((port, s, s.connect_ex((host, port))))
        for port, s, rc in socks:
            if rc == 0 and _connected(s):
                found.append(port)
            elif rc == errno.EINPROGRESS:
                _, w, _ = select.select([], [s], [], 0.3)
                if w and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 and _connected(s):
                    found.append(port)
            s.close()
    return found


def http(port, method, path, body=b"", timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        s.sendall(head + body)
        data = b""
        while len(data) < 1 << 20:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None
    return status, data.split(b"\r\n\r\n", 1)[-1]


def looks_like_a_model_server(body):
    return any(w in body for w in (b"perfect", b"lazy", b"stall", MARKER.encode()))


def model_call(port, n):
    body = json.dumps({"model": "perfect", "stream": False, "messages": [
        {"role": "user", "content": f"{MARKER} call {n}: create hello.txt holding hello world"}],
        "tools": [{"type": "function", "function": {"name": "write_file", "parameters": {
            "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}]}).encode()
    try:
        return http(port, "POST", "/v1/chat/completions", body)[0]
    except OSError as exc:
        return type(exc).__name__


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    own = urlsplit(args["base_url"]).port
    report = {"phase": phase, "own_port": own}
    if phase == "measured":
        report["listening"] = listening_ports()
        report["open4"] = scan(socket.AF_INET, "127.0.0.1")
        try:
            report["open6"] = scan(socket.AF_INET6, "::1")
        except OSError as exc:
            report["open6"] = type(exc).__name__
        reached = {}
        askable = set(listening_ports(loopback_only=True))
        for port in sorted((set(report["open4"]) | set(report["listening"])) & askable):
            if port == own:
                continue
            try:
                status, body = http(port, "GET", "/v1/models", timeout=2.0)
            except OSError as exc:
                reached[port] = type(exc).__name__
                continue
            reached[port] = status
            if status == 200 and looks_like_a_model_server(body):
                reached[port] = [model_call(port, n) for n in range(1 + FLOOD)]
        report["reached"] = {str(k): v for k, v in reached.items()}
    emit("final", text="done")
    emit("attack.report", attack="netscan", **report)
    return 0


sys.exit(main())
