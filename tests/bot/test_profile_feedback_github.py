"""On GitHub (the fake REST server), profiler feedback travels from a `/profile` bench to the next prompt.

`/optimize rmsnorm_h4096 --agent anthropic` opens a candidate PR with the kernel the model (the local
Anthropic-speaking server) wrote; `/profile` on it labels the PR; the bench runs `kbot eval --profile`
on the CPU as bench.yml does on its runner (the real harness, the real profile fold: roofline rules and
the kernel's ahead-of-time sm_90 compile statistics); the sticky review and its evidence block carry
the feedback items; `/optimize` on the PR then asks the model with a prompt that lists them, instead of
"No profiler feedback for this kernel".
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from e2ekit import Env
from fakes.llm_servers import FakeAnthropic
from test_github_campaign import DEF, seed_files

from bot.campaign.github_campaign import bind, read_snapshot
from bot.forge.markers import REVIEW_MARKER, decode_meta
from bot.promotion.champion import read_champion
from bot.review.evidence import Evidence, read_evidence
from bot.review.markdown import escape_inline
from bot.review.results import write_bench_results
from harness.schema import parse_solution

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def reply_with(source: str, why: str) -> str:
    return f'Here is the kernel.\n<file path="main.py">\n{source}</file>\n<rationale>{why}</rationale>\n'


def profiled_bench(repo, scratch, calls):
    """bench.yml's evaluate step with `--profile` (a /profile label), through the real `kbot eval` CLI
    on this CPU, then the artifact as bench.yml uploads it."""
    from harness.cli import cli

    wl = scratch / "workloads.jsonl"
    wl.write_text("\n".join((repo / "definitions" / DEF / "workloads.small.jsonl").read_text().splitlines()[:2]) + "\n")

    def fetch(forge, run, dest):
        pr = forge.find_open_pr(run["head_branch"])
        path = decode_meta(pr.body)["solution_path"]
        sol_file = scratch / f"sol-{run['head_sha'][:12]}.json"
        sol_file.write_bytes(forge.read_file(path, ref=run["head_sha"]))
        champ = read_champion(forge, DEF)
        base_file = scratch / "champion.json"
        base_file.write_bytes(forge.read_file(champ["solution_path"]))
        out = scratch / f"run-{run['head_sha'][:12]}"
        r = CliRunner().invoke(cli, ["eval", str(sol_file), "--definition", DEF, "--workloads", str(wl), "--baseline", str(base_file),
                                     "--profile", "--device", "cpu", "--trials", "1", "--budget", "0.05",
                                     "--timing", "warmup=1", "--timing", "min_iters=5", "--out", str(out), "--json"])
        assert r.exit_code in (0, 1), r.output[-3000:]
        calls.append(out)
        write_bench_results(dest, out, path, parse_solution(json.loads(sol_file.read_text())).name, artifact="kbot-results-0")
        return True

    return fetch


def test_profile_then_optimize_puts_the_feedback_in_the_prompt(github_server, shared, tmp_path, repo, monkeypatch):
    files, start = seed_files(repo)
    # The model's kernel: the starting kernel with two warps (no faster in the interpreter: not promoted).
    start_src = start.sources[0].content
    assert "NUM_WARPS = 1 " in start_src
    kernel = start_src.replace("NUM_WARPS = 1 ", "NUM_WARPS = 2 ", 1)
    benches: list = []
    with FakeAnthropic() as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-0003")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        env = Env(github_server, shared, tmp_path, repo, files=files, fetch=profiled_bench(repo, tmp_path, benches), generator=bind)
        issue = env.server.create_issue("make rmsnorm faster", author="alice")
        srv.push(reply_with(kernel, "two warps per row"))
        _, p = env.comment(issue, f"/optimize {DEF} --candidates 1 --agent anthropic")
        env.deliver("issue_comment", p)
        (pr1,) = env.pulls()
        assert len(srv.requests) == 1

        c, p = env.comment(pr1, "/profile")
        env.deliver("issue_comment", p)
        assert env.reactions(c) == ["eyes", "rocket"] and "kbot:profile" in env.forge.labels(pr1)
        env.bench_done(pr1, None)  # the bench the label started
        assert len(benches) == 1
        report = json.loads((benches[0] / "report.json").read_text())
        assert report["profiling"]["static"] == "ok"  # the kernel compiled for sm_90 on this CPU
        items = [f for w in report["workloads"] for f in w["feedback"]]
        assert items and all(w["feedback"] for w in report["workloads"] if w["status"] == "PASSED")

        (review,) = [r for r in env.server.reviews_on(pr1) if REVIEW_MARKER in r["body"]]
        ev = Evidence.from_block(read_evidence(review["body"]))
        assert ev.feedback and {f.rule for f in ev.feedback} <= {f["rule"] for f in items}
        assert escape_inline(ev.feedback[0].title, 160) in review["body"]  # the review shows what the block carries
        node = decode_meta(env.forge.get_pr(pr1).body)["node"]
        rec = next(r for r in read_snapshot(env.forge, DEF).records if r["node_id"] == node)
        assert [f["rule"] for f in rec["summary"]["feedback"]] == [f.rule for f in ev.feedback]

        srv.push(reply_with(kernel.replace("BLOCK = 256 ", "BLOCK = 512 ", 1), "bigger blocks"))
        c, p = env.comment(pr1, "/optimize --candidates 1 --agent anthropic")
        env.deliver("issue_comment", p)
        assert env.reactions(c) == ["eyes", "rocket"]
        assert len(srv.requests) == 2
    prompt = json.dumps(srv.requests[1].body["messages"])
    assert "Profiler feedback (most severe first)" in prompt
    assert "No profiler feedback for this kernel" not in prompt
    for f in ev.feedback:
        assert json.dumps(f.title)[1:-1] in prompt
    # The first prompt (the starting kernel, never profiled) had none: the difference is the /profile.
    assert "No profiler feedback for this kernel" in json.dumps(srv.requests[0].body["messages"])
