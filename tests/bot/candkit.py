"""A candidate PR made the way the bot makes one (bot/campaign/attempts.py): a ``kbot/<definition>/<node>``
branch with one bot commit under ``kernels/<definition>/<name>/`` and a signed meta block naming the
solution, its hash, ``solution_path`` and the head the bot pushed. Promotion refuses anything less
(bot/promotion/candidate_gate.py)."""

from __future__ import annotations

from reportkit import CAND_HASH, stand_in

from bot.forge.trusted_meta import write_meta

__all__ = ["CAND_HASH", "bot_candidate", "candidate_meta"]


def candidate_meta(definition: str, node: str, *, solution: str = "cand_v2", solution_hash: str = CAND_HASH,
                   **extra) -> dict:
    return {"definition": definition, "node": node, "solution": solution, "solution_hash": solution_hash,
            "solution_path": f"kernels/{definition}/{solution}-{node}/solution.json", **extra}


def bot_candidate(forge, definition: str, node: str = "n1", *, solution: str = "cand_v2",
                  solution_hash: str = CAND_HASH, labels=(), **extra):
    """Branch + bot commit + PR (MemForge or GitHubForge); returns the PR. The committed file is the
    stand-in solution of that hash when there is one (reportkit.stand_in), else a placeholder."""
    meta = candidate_meta(definition, node, solution=solution, solution_hash=solution_hash, **extra)
    branch = f"kbot/{definition}/{node}"
    _, main = forge.default_head()
    sol = stand_in(solution, definition)
    content = sol.to_json(indent=2) if sol.content_hash() == solution_hash else '{"name": "%s"}' % solution
    head = forge.commit_files(branch, main, {meta["solution_path"]: content}, f"kbot: {solution}")
    return forge.open_pr(branch, f"kbot: {solution}", write_meta("Candidate.", meta, branch, head_sha=head, forge=forge),
                         labels=list(labels))
