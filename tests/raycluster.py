"""A real multi-node Ray cluster on this machine, for the Ray executor's tests and benchmark.

Every node is a ``ray start ... --block`` process in its own session (so it and everything it started
can be killed as one, the way a machine dies), on 127.0.0.1, with its own TMPDIR (nothing shared between
nodes but what Ray sends) and its own custom resources. The cluster uses token authentication with a
token of its own (``RAY_AUTH_TOKEN``), never ~/.ray, and fast node-death detection (GCS health checks
every 0.5 s) so a killed node is noticed within seconds.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

RAY_BIN = Path(sys.executable).parent / "ray"


def require_ray() -> None:
    """Ray (the ``ray`` extra) or a skip; with CI=true a missing Ray is a failure."""
    try:
        import ray  # noqa: F401
    except ImportError:
        msg = "Ray is not installed (pip install 'gripprobe-core[ray]'; ./dev setup installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Ray executor tests cannot run in CI: {msg}", pytrace=False)
        pytest.skip(msg)
    if not RAY_BIN.exists():
        pytest.fail(f"{RAY_BIN} is missing although ray imports", pytrace=False)


MARKER = "gp-node-"


def marker(name: str) -> str:
    return MARKER + name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    tmpdir: Path
    resources: dict[str, float]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """The node dies as a machine would: every process it started, at once."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


@dataclass
class RayCluster:
    base: Path
    port: int = field(default_factory=_free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(32))
    nodes: list[Node] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """What a driver (``gripprobe run --executor ray``) needs to join this cluster."""
        return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token,
                "RAY_USAGE_STATS_ENABLED": "0"}

    def _start(self, name: str, args: list[str], resources: dict[str, float], cpus: int,
               extra_env: dict[str, str] | None = None) -> Node:
        tmp = self.base / name / "tmp"
        tmp.mkdir(parents=True)
        env = {**self.env, **(extra_env or {}), "TMPDIR": str(tmp),
               "GRIPPROBE_AGENT_CACHE": os.environ.get("GRIPPROBE_AGENT_CACHE", ""),
               "RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
               "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "0"}
        if not env["GRIPPROBE_AGENT_CACHE"]:
            del env["GRIPPROBE_AGENT_CACHE"]
        resources = {**resources, marker(name): 1}  # tells this node apart in ray.nodes()
        log = open(self.base / f"{name}.log", "wb")
        proc = subprocess.Popen(
            [str(RAY_BIN), "start", *args, "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus),
             "--resources", json.dumps(resources), "--object-store-memory", str(100 * 1024 * 1024),
             "--disable-usage-stats", "--block"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        node = Node(name, proc, tmp, resources)
        self.nodes.append(node)
        return node

    def start(self, resources: dict[str, float], cpus: int = 2) -> Node:
        """The head node (GCS on ``self.port``; temp dir short enough for Ray's socket paths)."""
        return self._start("head", ["--head", "--port", str(self.port), "--include-dashboard=false",
                                    "--temp-dir", str(self.base / "ray")], resources, cpus)

    def add_node(self, name: str, resources: dict[str, float], cpus: int = 2,
                 env: dict[str, str] | None = None) -> Node:
        """Another node; ``env`` reaches its workers (a PYTHONPATH makes a node with other plugins)."""
        return self._start(name, ["--address", self.address], resources, cpus, env)

    def live_nodes(self) -> list[dict]:
        """``ray.nodes()`` of the live nodes, read by a separate driver process: id and resources."""
        code = ("import json, logging, ray\n"
                f"ray.init(address={self.address!r}, _node_ip_address='127.0.0.1', logging_level=logging.ERROR,"
                " log_to_driver=False)\n"
                "print(json.dumps([{'node_id': n['NodeID'], 'resources': n['Resources']} for n in ray.nodes()"
                " if n['Alive']]))\n")
        out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"cannot list the cluster's nodes: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def wait_for(self, timeout_s: float = 90) -> list[dict]:
        """Until the cluster's live nodes are exactly the nodes started here and still running (a node
        killed a moment ago must be noticed dead, one just started must have joined); their ``ray.nodes()``."""
        deadline = time.monotonic() + timeout_s
        have: set[str] = set()
        while time.monotonic() < deadline:
            for n in self.nodes:
                if not n.alive and n.name == "head":
                    raise RuntimeError(f"the head died: {(self.base / 'head.log').read_text()[-3000:]}")
            want = {marker(n.name) for n in self.nodes if n.alive}
            try:
                live = self.live_nodes()
            except (RuntimeError, subprocess.TimeoutExpired, ValueError):
                live = []
            have = {k for n in live for k in n["resources"] if k.startswith(MARKER)}
            if have == want:
                return live
            time.sleep(0.5)
        raise RuntimeError(f"live Ray nodes {sorted(have)}, expected {sorted(want)} after {timeout_s}s; "
                           f"logs in {self.base}")

    def node_with(self, resource: str, nodes: list[dict]) -> str:
        hits = [n["node_id"] for n in nodes if resource in n["resources"]]
        assert len(hits) == 1, (resource, nodes)
        return hits[0]

    def stop(self) -> None:
        """Every node killed at once (a throwaway cluster: no 30 s drain), its folder removed."""
        for node in self.nodes:
            node.kill()
        shutil.rmtree(self.base, ignore_errors=True)


def new_cluster() -> RayCluster:
    # Ray's unix socket paths live under the temp dir: keep it short (/tmp/gpray-XXXX)
    return RayCluster(Path(tempfile.mkdtemp(prefix="gpray-", dir="/tmp")))
