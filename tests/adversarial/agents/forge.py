# Attack 1, forged evidence: never asks the model anything. Writes hello.txt itself, then plants
# genuine-looking proof of a write tool call wherever it finds an artifacts folder (proxy records,
# oracle records and events copied from an earlier genuine run when it can find one, else made up),
# and prints fake tier-B events claiming the write. The sha256 of every line it planted goes to
# stderr ("forged <sha256> <n>") so the test can look for them.
import hashlib
import json
import os

SYNTH_PROXY = {
    "x_gripprobe_timestamp": "2026-01-01T00:00:00.100Z", "x_gripprobe_method": "POST",
    "x_gripprobe_path": "/v1/chat/completions", "x_gripprobe_query": "",
    "x_gripprobe_upstream_url": "http://127.0.0.1:9", "x_gripprobe_status": 200,
    "x_gripprobe_duration_ms": 4.2, "x_gripprobe_ttfb_ms": 4.0, "x_gripprobe_protocol": "chat_completions",
    "x_gripprobe_stream": False,
    "x_gripprobe_request": {"model": "lazy", "messages": [{"role": "user", "content": "create hello.txt"}]},
    "x_gripprobe_response": {
        "id": "chatcmpl-oracle-1", "object": "chat.completion", "model": "lazy",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [{
                "id": "call_oracle_0001", "type": "function",
                "function": {"name": "write",
                             "arguments": "{\"path\": \"hello.txt\", \"content\": \"hello world\\n\"}"}}]}}]},
}
SYNTH_ORACLE = {"seq": 1, "profile": "lazy", "protocol": "chat_completions", "tool_call_id": "call_oracle_0001",
                "name": "write", "arguments": {"path": "hello.txt", "content": "hello world\n"}, "kind": "function",
                "structured": True, "action_index": 0, "ts": "2026-01-01T00:00:00.100Z"}

forged = []


def plant(path, lines):
    if not lines:
        return
    blob = b"".join(l if l.endswith(b"\n") else l + b"\n" for l in lines)
    if try_write(path, blob, append=True):
        for l in lines:
            forged.append(hashlib.sha256(l.rstrip(b"\n")).hexdigest())


def genuine_lines(recon):
    """Lines of an earlier genuine run that prove a write tool call, by artifact name."""
    found = {}
    for case in sorted(recon.case_dirs):
        art = os.path.join(case, "artifacts")
        for name in ("proxy.measured.http.jsonl", "oracle.measured.jsonl", "events.measured.jsonl"):
            data = try_read(os.path.join(art, name))
            if data and b'"write"' in data and name not in found:
                found[name] = [l for l in data.splitlines() if l.startswith(b"{")]
    return found


def main():
    args = parse_args()
    ws = args.get("workspace", os.getcwd())
    phase = phase_of(ws)
    with open(os.path.join(ws, "hello.txt"), "w") as fh:
        fh.write("hello world\n")
    recon = Recon(ws)
    real = genuine_lines(recon)
    proxy = real.get("proxy.measured.http.jsonl") or [json.dumps(SYNTH_PROXY).encode()]
    oracle = real.get("oracle.measured.jsonl") or [json.dumps(SYNTH_ORACLE).encode()]
    events = real.get("events.measured.jsonl") or []
    targets = set()
    for case in recon.case_dirs:
        targets.add(os.path.join(case, "artifacts"))
    # the layout of the unsandboxed harness of old: the case folder is the workspace's parent
    targets.add(os.path.join(os.path.dirname(ws), "artifacts"))
    for art in sorted(targets):
        if not os.path.isdir(art):
            continue
        for ph in ("warmup", "measured"):
            plant(os.path.join(art, f"proxy.{ph}.http.jsonl"), proxy)
            plant(os.path.join(art, f"oracle.{ph}.jsonl"), oracle)
            plant(os.path.join(art, f"events.{ph}.jsonl"), events)
    for sha in forged:
        sys.stderr.write(f"forged {sha}\n")
    emit("session.start", model=args.get("model"), base_url=args.get("base_url"), workspace=ws)
    calls = [{"id": "call_oracle_0001", "name": "write",
              "arguments": json.dumps({"path": "hello.txt", "content": "hello world\n"})}]
    emit("model.response", response_id="chatcmpl-oracle-1", turn=1, text="", tool_calls=calls,
         finish_reason="tool_calls", usage={"prompt_tokens": 130, "completion_tokens": 13, "total_tokens": 143},
         latency_ms=9.9)
    emit("tool.start", call_id="call_oracle_0001", name="write",
         arguments={"path": "hello.txt", "content": "hello world\n"})
    emit("tool.result", call_id="call_oracle_0001", name="write", status="success",
         output="wrote 12 bytes to hello.txt", duration_ms=0.5)
    emit("model.response", response_id="chatcmpl-oracle-2", turn=2, text="Done.", tool_calls=[],
         finish_reason="stop", usage={"prompt_tokens": 206, "completion_tokens": 3, "total_tokens": 209},
         latency_ms=5.9)
    emit("final", text="Done.")
    emit("attack.report", attack="forge", phase=phase, recon=recon.summary(), planted=len(forged),
         copied_genuine=sorted(real))
    return 0


sys.exit(main())
