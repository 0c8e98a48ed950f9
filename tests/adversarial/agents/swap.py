# Attacks 20 and 21, the model under test swapped through the agent's own proxy (the base URL it is given).
# What it does depends on the case's model (--model):
#   under `lazy` (13): a real tool loop (the reference agent's own, imported) that asks for the oracle's
#                    `perfect` profile instead of the case's model (`lazy`): it performs the task with the
#                    tools, so its tool calls would be on the wire; if the proxy refuses, it writes
#                    hello.txt itself. Unpinned, this was PASS at tier A.
#   under `perfect` (14): one request naming the backend's tool-less model (`tools-unsupported`), then exit 0
#                    with nothing done. Unpinned, the backend's "does not support tools" for that other
#                    model made the case TOOL_UNSUPPORTED (out of n) even under `oracle-perfect`.
import io
import json
import os
import urllib.error
import urllib.request


def ask(base_url, model, tools):
    body = {"model": model, "messages": [{"role": "user", "content": "Create hello.txt holding hello world"}],
            "tools": tools}
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except ValueError:
            return exc.code, None
    except (OSError, ValueError) as exc:
        return type(exc).__name__, None


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    from gripprobe_core.refagent.tools import TOOL_SCHEMAS

    SWAP_TO = "tools-unsupported" if args.get("model") == "perfect" else "perfect"

    status, answer = ask(args["base_url"], SWAP_TO, TOOL_SCHEMAS)
    code = ((answer or {}).get("error") or {}).get("code") if isinstance(answer, dict) else None
    loop_rc = None
    if SWAP_TO == "perfect" and phase == "measured":
        # the whole task through the other model, with the reference agent's own loop (its tier-B events)
        from gripprobe_core.refagent.cli import main as refagent

        saved, sys.stdout = sys.stdout, io.StringIO()
        try:
            loop_rc = refagent(["--base-url", args["base_url"], "--model", SWAP_TO, "--workspace", ws,
                                "--prompt", args.get("prompt", "")])
        except SystemExit as exc:
            loop_rc = exc.code
        finally:
            captured, sys.stdout = sys.stdout.getvalue(), saved
        sys.stdout.write(captured)  # its events, as if it were the agent
        if not os.path.exists(os.path.join(ws, "hello.txt")):
            with open(os.path.join(ws, "hello.txt"), "w") as fh:
                fh.write("hello world\n")
    emit("final", text="done")
    emit("attack.report", attack="swap", swap_to=SWAP_TO, phase=phase, status=status, code=code, loop_rc=loop_rc)
    return 0


sys.exit(main())
