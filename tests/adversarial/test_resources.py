"""Attacks 8, 9 and 11: an agent trying to exhaust the harness — a 1 GiB file and 100,000 files in
its workspace, 1 GiB on stdout and on stderr, an endless chunked request body to the proxy. Each case
must be classified within its timeout, with what is kept capped and the runner's memory bounded
(its resident size is sampled every 50 ms while it runs)."""

from __future__ import annotations

import shutil

import pytest

from .adversary import MODE, Case, RunResult, mentions_skip, read_jsonl, walk
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e

#: Peak resident memory of the `gripprobe run` process. It idles around 70 MB; streaming anything
#: of these sizes through memory would go far past this.
RSS_LIMIT_MB = 400
CAPTURE_LIMIT = 64 << 20
GIB = 1 << 30


@pytest.fixture(scope="module")
def heavy_run(arena):
    if arena.broken:
        yield None
        return
    res = arena.run("run", "-a", "adv_bigfiles", "-a", "adv_bigout", "-m", "oracle-lazy", "-t", "hello",
                    "-j", "2", "--timeout", "90", timeout=300, watch=True)
    yield res
    if res.run_dir is not None:  # 100,000 files when uncapped: not kept for the rest of the session
        shutil.rmtree(res.run_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def chunked_run(arena):
    if arena.broken:
        return None
    return arena.run("run", "-a", "adv_chunked", "-m", "oracle-lazy", "-t", "hello", "--timeout", "45",
                     timeout=180, watch=True)


def _case(res: RunResult, attack: str) -> Case:
    assert not res.timed_out, f"`gripprobe run` did not finish: {res.explain()}"
    assert res.returncode == 0, res.explain()
    case = res.case(f"adv_{attack}")
    assert case.data is not None, f"{case.dir}: no case.json"
    assert case.status in STATUSES and case.status != "HARNESS_ERROR", case.describe()
    assert case.reports(), f"the {attack} attack did not run: {case.describe()}"
    if MODE in ("bwrap", "none"):
        assert case.data.get("sandbox") == MODE
    return case


def test_huge_workspace_is_capped(heavy_run):
    """Attack 8: a 1 GiB (sparse) file and 100,000 files: the copy is capped and the listing says so."""
    case = _case(heavy_run, "bigfiles")
    assert case.reports()[-1]["files"] == 100_000
    assert case.process().get("status") == "ok", case.describe()
    files, size, biggest = 0, 0, 0
    for _, st in walk(case.dir / "workspace"):
        if st.st_mode & 0o170000 == 0o100000:
            files += 1
            size += st.st_size
            biggest = max(biggest, st.st_size)
    assert files < 100_000, f"the workspace copy holds {files} files: not capped"
    assert biggest < GIB and size < GIB, f"the copy holds {size} bytes (largest file {biggest}): not capped"
    assert mentions_skip(case.listing()), "the workspace listing does not say what was left out"
    assert heavy_run.peak_rss_mb < RSS_LIMIT_MB, f"runner peak RSS {heavy_run.peak_rss_mb:.0f} MB"


def test_huge_output_is_capped(heavy_run):
    """Attack 9: 1 GiB on stdout (tier-B event lines) and 1 GiB on stderr, at once."""
    case = _case(heavy_run, "bigout")
    proc = case.process()
    assert proc.get("status") == "ok", case.describe()
    for stream in ("stdout", "stderr"):
        kept = (case.dir / f"measured.{stream}").stat().st_size
        assert kept <= CAPTURE_LIMIT, f"measured.{stream}: {kept} bytes kept"
        assert proc.get(f"{stream}_truncated") is True, f"{stream} capture not marked truncated: {proc}"
    assert heavy_run.peak_rss_mb < RSS_LIMIT_MB, f"runner peak RSS {heavy_run.peak_rss_mb:.0f} MB"


def test_endless_request_body_is_refused(chunked_run):
    """Attack 11: an endless chunked request body to the proxy → 413, a proxy_error record, flat memory."""
    case = _case(chunked_run, "chunked")
    report = case.reports()[-1]
    assert report.get("status") == 413, f"the proxy answered {report}"
    records = read_jsonl(case.dir / "artifacts" / "proxy.measured.http.jsonl")
    refused = [r for r in records if r.get("x_gripprobe_status") == 413 and r.get("x_gripprobe_proxy_error")]
    seen = [(r.get("x_gripprobe_status"), r.get("x_gripprobe_proxy_error")) for r in records]
    assert refused, f"no 413 proxy_error record; records (status, proxy_error): {seen}"
    assert chunked_run.peak_rss_mb < RSS_LIMIT_MB, f"runner peak RSS {chunked_run.peak_rss_mb:.0f} MB"
