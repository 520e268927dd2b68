"""The real loop on this CPU: ``kbot optimize`` as a subprocess with the offline agent and the real
harness (Triton through its interpreter), killed after its first candidate evaluation finished, run
again to completion; then the static report opened in a real headless browser.

One campaign serves every test here (module fixture) to keep the CPU time to about a minute."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bot.forge.local import LocalForge
from bot.promotion.champion import read_champion
from tests.local.test_site_report import assert_rendered

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # one CPU campaign: ~1-3 min

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")


def _cmd(ws: Path, wl: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "optimize", "rmsnorm_h4096", "--agent", "offline", "--device", "cpu",
            "--rounds", "1", "--candidates", "2", "--workspace", str(ws), "--workloads", str(wl), *extra]


def _done(ws: Path) -> set[str]:
    return {str(p.parent) for p in (ws / "runs").rglob("kbot-done.json")}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cpu_loop")
    ws = tmp / "ws"
    wl = tmp / "workloads.jsonl"
    # two of the three small workloads (batch 1 and 3): the loop is the same, the run is shorter
    lines = (REPO / "definitions/rmsnorm_h4096/workloads.small.jsonl").read_text().splitlines()[:2]
    wl.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    first = subprocess.Popen(_cmd(ws, wl, "--json"), cwd=REPO, env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    killed = False
    try:
        # the starting champion, then one candidate: kill during whatever comes next
        while time.monotonic() < deadline and first.poll() is None:
            if len(_done(ws)) >= 2:
                os.killpg(first.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.1)
    finally:
        if first.poll() is None and not killed:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert killed, f"first run ended before it could be interrupted: {first.stderr.read().decode()[-3000:]}"
    done_at_kill = _done(ws)
    prs_at_kill = [(p.number, p.head_branch) for p in LocalForge(ws / "forge").list_prs(state="all")]
    second = subprocess.run(_cmd(ws, wl, "--json"), cwd=REPO, env=env, capture_output=True, timeout=400)
    assert second.returncode == 0, second.stderr.decode()[-4000:]
    summary = json.loads(second.stdout)
    evals = [json.loads(x) for x in (ws / "runs" / "evaluations.jsonl").read_text().splitlines()]
    return {"ws": ws, "summary": summary, "done_at_kill": done_at_kill, "prs_at_kill": prs_at_kill,
            "evals": evals, "first_pid": first.pid, "stderr": second.stderr.decode()}


def test_loop_proposes_evaluates_explains_and_merges(campaign):
    s = campaign["summary"]
    assert s["device"] == "cpu" and "CPU timing" in s["timing"]
    rows = s["candidates"]
    assert rows[0]["decision"] == "champion" and rows[0]["pr"] is None  # the starting point, measured alone
    cands = [r for r in rows if r["pr"] is not None]
    assert len(cands) == 2
    assert all(r["status"] == "PASSED" for r in cands)
    assert all(r["decision"] in ("promote", "reject") for r in cands)
    # BLOCK 256 -> 512 halves the interpreted loop trips: a real, large CPU speedup that is promoted
    promoted = [r for r in cands if r["decision"] == "promote"]
    assert promoted and all(r["speedup_vs_champion"] > 1.03 for r in promoted)
    forge = LocalForge(campaign["ws"] / "forge")
    champ = read_champion(forge, "rmsnorm_h4096")
    assert champ["pr"] == promoted[-1]["pr"] == s["champion"]["pr"]
    assert forge.get_pr(champ["pr"]).merged
    assert "campaign rmsnorm_h4096/001 (resumed)" in campaign["stderr"]  # progress on stderr, JSON on stdout


def test_resume_repeated_no_finished_evaluation_and_opened_no_duplicate_pr(campaign):
    forge = LocalForge(campaign["ws"] / "forge")
    prs = list(forge.list_prs(state="all"))
    assert len(prs) == len({p.head_branch for p in prs}) == 2
    assert set(campaign["prs_at_kill"]) <= {(p.number, p.head_branch) for p in prs}
    assert campaign["prs_at_kill"], "the first run was killed before any PR: the test proves nothing"
    starts: dict[str, int] = {}
    for e in campaign["evals"]:
        starts[e["run_dir"]] = starts.get(e["run_dir"], 0) + 1
    for d in campaign["done_at_kill"]:
        assert starts.get(d) == 1, f"{d} was evaluated again after the restart"
    resumed = [e for e in campaign["evals"] if e["pid"] != campaign["first_pid"]]
    assert resumed, "the second run evaluated nothing (the kill came too late)"
    assert not {e["run_dir"] for e in resumed} & campaign["done_at_kill"]


def test_cli_views_read_the_records(campaign):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ws = str(campaign["ws"])
    out = subprocess.run([sys.executable, "-m", "harness.cli", "pr", "list", "--workspace", ws, "--json"],
                         cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)
    champ_pr = campaign["summary"]["champion"]["pr"]
    assert {r["number"]: r["state"] for r in rows}[champ_pr] == "merged"
    show = subprocess.run([sys.executable, "-m", "harness.cli", "pr", "show", str(champ_pr), "--workspace", ws],
                          cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
    assert "Decision: PROMOTE" in show and "merged as" in show
    assert "kbot:evidence" not in show and "```mermaid" not in show and "**Decision" not in show  # rendered, no blob
    board = subprocess.run([sys.executable, "-m", "harness.cli", "leaderboard", "rmsnorm_h4096", "--workspace", ws],
                           cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
    assert f"#{champ_pr}" in board and "(champion)" in board


def _chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="kbot-chromium-")
    return subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                           *args], capture_output=True, text=True, timeout=120)


def test_html_report_in_a_headless_browser(campaign, tmp_path):
    from bot.site.build import _x

    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is missing (apt-get install -y chromium); the HTML report is not checked in a browser")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "harness.cli", "report", "--html", str(site), "--workspace", str(campaign["ws"])],
                   cwd=REPO, env=env, check=True, capture_output=True)
    index = site / "index.html"
    s = campaign["summary"]
    promoted = next(r["pr"] for r in s["candidates"] if r["decision"] == "promote")
    rejected = next((r["pr"] for r in s["candidates"] if r["decision"] == "reject"), None)
    # screenshots of the index, a promoted and (when the campaign has one) a rejected PR page
    for page in [index, site / f"pr-{promoted}.html"] + ([site / f"pr-{rejected}.html"] if rejected else []):
        png = tmp_path / f"{page.stem}.png"
        shot = _chromium(f"--screenshot={png}", "--window-size=1200,2400", page.as_uri())
        assert png.exists(), shot.stderr[-2000:]
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert int.from_bytes(data[16:20], "big") == 1200 and len(data) > 20_000  # a rendered page, not a blank one
    dom = _chromium("--dump-dom", index.as_uri()).stdout
    assert_rendered(dom, timing="CPU")
    assert "<svg" in dom and "rmsnorm_h4096" in dom
    for r in s["candidates"]:
        assert r["node"] in dom
        assert _x(r["speedup_vs_start"]) in dom
        if r["pr"] is not None:
            assert f'href="pr-{r["pr"]}.html"' in dom
            page = _chromium("--dump-dom", (site / f"pr-{r['pr']}.html").as_uri()).stdout
            assert r["decision"] in page and _x(r["speedup_vs_champion"]) in page
            assert_rendered(page, timing="CPU")
            assert '<figure class="chart"><svg' in page  # the review's chart, drawn
            assert ("merged" if r["decision"] == "promote" else "closed") in page


def test_recorded_rewards_are_the_chained_paired_ratios_of_the_reports(campaign):
    """The real campaign's rewards against its own reports: each node's speedup over the start, as the
    node records give it back (and as the summary shows it), is its report's paired geomean against the
    champion it was measured with, times that champion's own chained speedup; the start is 1."""
    import math

    from bot.controller.tree import Tree
    from harness.geomean import geomean
    from harness.report import load_report

    store = campaign["ws"] / "campaigns" / "rmsnorm_h4096" / "001"
    reports = {p.stem: load_report(p) for p in (store / "reports").glob("*.json")}
    tree = Tree.from_records(json.loads(p.read_text()) for p in (store / "nodes").glob("*.json"))
    start = tree.baseline
    by_hash = {r.solution_hash: nid for nid, r in reports.items()}

    def chained(nid: str) -> float:
        rep = reports[nid]
        if nid == start.id:
            return 1.0
        paired = geomean([w.speedup_vs_baseline.median for w in rep.workloads])
        return paired * chained(by_hash[rep.baseline_hash])

    rows = {r["node"]: r for r in campaign["summary"]["candidates"]}
    paired_later = 0
    for nid, rep in reports.items():
        node = tree.nodes[nid]
        if not node.passed:
            continue
        want = chained(nid)
        assert math.isclose(tree.speedup(node), want, rel_tol=1e-9), (nid, tree.speedup(node), want)
        assert math.isclose(tree.reward(node), math.log(want), rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(rows[nid]["speedup_vs_start"], want, rel_tol=1e-9)
        paired_later += rep.baseline_hash not in (None, start.solution.content_hash())
    promoted = [r for r in rows.values() if r["decision"] == "promote"]
    # With a promotion before the second candidate, that candidate was paired with the new champion:
    # its reward is a two-link chain (the case the old code got wrong).
    if len(promoted) >= 1 and promoted[0]["node"] != list(rows)[-1]:
        assert paired_later >= 1
