"""``kbot submit``: a person's kernel through the local forge: the person's branch, commit and PR, the
submission record, the same evaluation, review and promotion rules as an agent's attempt, and the
maintainer's approval that a person's code needs before it is merged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.agents.providers.offline import DEFAULT_SEEDS_DIR, load_seeds
from bot.campaign.local_loop import LoopError, Workspace
from bot.campaign.local_submit import Person, SubmitOptions, approve, parse_author, submit
from bot.campaign.submission import read_record
from bot.forge.base import ForgeError
from bot.promotion.champion import read_champion
from bot.review.evidence import find_bot_review
from bot.review.markdown import escape_inline
from tests.local.test_local_loop_synthetic import WORKLOADS, SyntheticHarness

REPO = Path(__file__).resolve().parents[2]
ADA = Person("Ada Lovelace", "ada@example.org")


def person_kernel(tmp_path: Path, name: str = "ada_rmsnorm_single_pass") -> Path:
    """A hand-written kernel: the single-pass seed under the person's own name (2 ms in the synthetic
    harness, against the weak start's 17 ms)."""
    seed = next(s for s in load_seeds("rmsnorm_h4096", DEFAULT_SEEDS_DIR) if "single" in s.name)
    sol = seed.model_copy(update={"name": name, "author": "Ada Lovelace", "description": "written by hand"})
    path = tmp_path / f"{name}.json"
    path.write_text(sol.to_json(indent=2))
    return path


def opts(tmp_path, **kw):
    return SubmitOptions(solution=person_kernel(tmp_path), author=ADA, workspace=tmp_path / "ws", device="cpu",
                         workloads=WORKLOADS, **kw)


def test_a_person_s_kernel_is_reviewed_and_waits_for_a_maintainer_s_approval(tmp_path):
    out = submit(opts(tmp_path), harness=SyntheticHarness({}))
    ws = Workspace(tmp_path / "ws")
    f = ws.forge
    pr = f.get_pr(out["pr"])
    # Provenance: the person opened the PR, authored and committed its one commit, and the body names them.
    assert pr.author == "ada" and pr.head_branch.startswith("submit/ada/rmsnorm_h4096/") and pr.is_open
    (commit,) = f.branch_commits(pr.head_branch)
    assert (commit.author_name, commit.author_email, commit.committer_email) == ("Ada Lovelace", "ada@example.org", "ada@example.org")
    assert "Ada Lovelace" in pr.body and escape_inline("ada@example.org") in pr.body  # escaped: no mention
    assert f.changed_files(pr.head_sha) == [p for p in f.changed_files(pr.head_sha) if p.startswith("kernels/rmsnorm_h4096/")]
    # The bot's record of what was authorized, for this head.
    sub = read_record(f, pr)
    assert sub is not None and sub.head_sha == pr.head_sha and sub.author == "ada" and sub.authorized_by == f.owner
    # The same review and status as an agent's attempt; the rules hold, the approval is missing.
    review = find_bot_review(f, pr.number).body
    assert "kbot evaluation: ada\\_rmsnorm\\_single\\_pass" in review and "waiting for an approving review" in review
    # waiting for a maintainer, not rejected on its figures: pending (neither a green check nor a red cross)
    assert f.combined_status(pr.head_sha).get("kbot/harness").state == "pending"
    assert out["decision"] == "reject" and read_champion(f, "rmsnorm_h4096")["origin"] == "start"
    # The owner approves: the same rules again, now merged (sha-guarded), the champion pointer names the PR.
    message = approve(ws, pr.number)
    assert "Decision: **promote**" in message
    champ = read_champion(f, "rmsnorm_h4096")
    assert champ["pr"] == pr.number and champ["solution"] == "ada_rmsnorm_single_pass"
    assert f.get_pr(pr.number).merged and f.read_file(champ["solution_path"]) is not None
    assert "ada\\_rmsnorm\\_single\\_pass" in f.read_file("kernels/rmsnorm_h4096/LEADERBOARD.md").decode()


def test_submit_with_approve_is_promoted_like_an_agent_s_winner(tmp_path):
    out = submit(opts(tmp_path, approve=True), harness=SyntheticHarness({}))
    f = Workspace(tmp_path / "ws").forge
    assert out["decision"] == "promote" and out["merged_sha"]
    assert read_champion(f, "rmsnorm_h4096")["pr"] == out["pr"]
    approvals = [r for r in f.list_reviews(out["pr"]) if r.state == "APPROVED"]
    assert [(r.author, r.commit_sha) for r in approvals] == [(f.owner, f.get_pr(out["pr"]).head_sha)]


def test_a_slower_person_s_kernel_is_not_merged_even_when_approved(tmp_path):
    harness = SyntheticHarness({})
    submit(opts(tmp_path, approve=True), harness=harness)  # the single-pass kernel is the champion now
    slow = next(s for s in load_seeds("rmsnorm_h4096", DEFAULT_SEEDS_DIR) if "chunked" in s.name)
    path = tmp_path / "slow.json"
    path.write_text(slow.model_copy(update={"name": "ada_slow"}).to_json())
    out = submit(SubmitOptions(solution=path, author=ADA, workspace=tmp_path / "ws", device="cpu", workloads=WORKLOADS, approve=True),
                 harness=harness)
    assert out["decision"] == "reject" and "waiting for an approving review" not in out["headline"]
    assert read_champion(Workspace(tmp_path / "ws").forge, "rmsnorm_h4096")["solution"] == "ada_rmsnorm_single_pass"


def test_the_author_cannot_approve_their_own_pr_and_bad_authors_are_refused(tmp_path):
    out = submit(opts(tmp_path), harness=SyntheticHarness({}))
    f = Workspace(tmp_path / "ws").forge
    with pytest.raises(ForgeError, match="own pull request"):
        f.approve(out["pr"], f.get_pr(out["pr"]).head_sha, by="ada")
    with pytest.raises(LoopError, match="'Name <email>'"):
        parse_author("just a name")
    assert parse_author("Ada Lovelace <ada@example.org>") == ADA


def test_kbot_submit_on_the_command_line_with_the_real_harness(tmp_path):
    """The whole path with the real harness on the CPU: a plain-torch kernel by a person, one small
    workload, approved: measured paired with the champion, reviewed and merged."""
    good = {"name": "ada_torch_rmsnorm", "definition": "rmsnorm_h4096", "author": "Ada Lovelace",
            "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
            "sources": [{"path": "main.py", "content": "import torch\n\n\ndef run(hidden_states, weight):\n    x = hidden_states.float()\n"
                         "    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)\n"
                         "    return (x * inv * weight.float()).to(hidden_states.dtype)\n"}]}
    sol = tmp_path / "ada.json"
    sol.write_text(json.dumps(good))
    one = tmp_path / "one.jsonl"
    one.write_text(WORKLOADS.read_text().splitlines()[0] + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "submit", str(sol), "--author", "Ada Lovelace <ada@example.org>",
                        "--workspace", str(tmp_path / "ws"), "--device", "cpu", "--workloads", str(one), "--budget", "0.05",
                        "--approve", "--json"], cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["author"] == "Ada Lovelace <ada@example.org>" and out["summary"]["all_passed"]
    assert out["decision"] in ("promote", "reject"), out
    if out["decision"] == "promote":  # a torch kernel against the interpreted weak Triton start: normally faster
        assert read_champion(Workspace(tmp_path / "ws").forge, "rmsnorm_h4096")["pr"] == out["pr"]
    shown = subprocess.run([sys.executable, "-m", "harness.cli", "pr", "show", str(out["pr"]), "--workspace", str(tmp_path / "ws")],
                           cwd=REPO, capture_output=True, text=True, env=env)
    # rendered for the terminal: the Markdown escapes are gone, the evidence blob is not shown
    assert shown.returncode == 0 and "kbot evaluation: ada_torch_rmsnorm" in shown.stdout
    assert "kbot:evidence" not in shown.stdout


@pytest.mark.parametrize("flag,want", [([], None), (["--no-baselines"], False), (["--baselines"], True)])
def test_submit_and_optimize_take_the_baselines_switch_to_the_evaluator(tmp_path, monkeypatch, flag, want):
    """--no-baselines reaches the HarnessEvaluator of `kbot submit` and of `kbot optimize` (declared
    baselines are measured beside every candidate on the GPU by default; a torch.compile one compiles for
    every workload)."""
    import click
    from click.testing import CliRunner

    import bot.campaign.harness_evaluator as he
    from bot.cli.workspace import register

    seen = []

    class Stop(Exception):
        pass

    def capture(self, *a, **kw):
        seen.append(self.with_baselines)
        raise Stop()

    monkeypatch.setattr(he.HarnessEvaluator, "evaluate", capture)
    monkeypatch.setattr(he.HarnessEvaluator, "declared_baselines", lambda self: [])
    g = click.Group()
    register(g)
    sol = person_kernel(tmp_path)
    r = CliRunner().invoke(g, ["submit", str(sol), "--author", "Ada Lovelace <ada@example.org>", "--workspace", str(tmp_path / "ws"),
                               "--device", "cpu", "--workloads", str(WORKLOADS), *flag])
    assert isinstance(r.exception, Stop), r.output
    r = CliRunner().invoke(g, ["optimize", "rmsnorm_h4096", "--agent", "offline", "--workspace", str(tmp_path / "ws2"),
                               "--device", "cpu", "--workloads", str(WORKLOADS), "--rounds", "1", "--candidates", "1", *flag])
    assert seen == [want, want], (seen, r.output)
