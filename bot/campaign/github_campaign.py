"""``/optimize`` on GitHub: propose candidates and open one PR each; the GPU runners evaluate later.

    kbot bot command --campaign bot.campaign.github_campaign:campaign   (the default; bot/cli/github_bot.py)

GitHub is the database. Every call rebuilds the search tree from the repository:

* nodes = the bot's PRs on ``kbot/<definition>/<node>`` branches (any state), read through their
  ``kbot:meta`` block (``read_meta``: only PRs the bot opened are trusted, signed when a key is set),
  plus the champions of ``kernels/<definition>/champion.json`` that have no PR (the shipped or
  starting kernel);
* a PR is *evaluated* when our sticky review carries an evidence block for its solution
  (``bot.review.evidence.find_evidence``), *pending* otherwise;
* rewards: each review measured the candidate paired against the champion of that day, and the
  record keeps that pairing as it was (``baseline_hash``: that champion; ``speedup_vs_baseline``: the
  paired ratio). The tree chains it (``bot.controller.tree``): the champion's own record, or for a
  champion without a PR its seed record, whose ratio over the oldest champion is the champion
  lineage's product of each promotion's paired ``speedup_vs_previous``
  (``bot.promotion.champion.champion_lineage``). The oldest champion is the tree's start, so every
  node's speedup is a chain of paired ratios in one frame, rebuilt from GitHub alone;
* the kernels of evaluated nodes are read back from the PRs (``solution_path`` in the meta block).

Then the controller does what it does everywhere: ``Campaign.from_records`` builds the campaign from
those node records (the path a local resume takes, here in memory: nothing is written or cached) and
``propose_next`` selects (UCT with widening, search memory, the agent's proposals, duplicate kernels
dropped); each new proposal becomes a PR through ``bot.campaign.attempts.ensure_attempt``
(deterministic branch, one commit, meta block with definition, parent node, agent, model, prompt
hash, campaign id, round, solution hash and path). The bench workflow starts on the PR's ``opened``
event.

Idempotence: one request is identified by its campaign id (definition, thread and the comment that
asked) and round. A repeated call finds the PRs its earlier calls opened (meta ``campaign`` and
``round``) and opens only the missing ones; proposals are deterministic for a given repository state
(the agent's seed is derived from the campaign id), and a kernel already proposed maps to the same
branch, so a crash between commit and PR resumes on the same branch. A branch a person pushed to is
never written to.

Rounds: on GitHub a round is one batch of PRs. ``/optimize --rounds N`` opens round 1; when the last
PR of a round has its results, ``continue_after_results`` (called by the report step) opens the next
round from the updated tree, until N rounds or a ``kbot:stopped`` label on the thread.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from bot.agents.base import AgentError
from bot.agents.catalog import create_agent
from bot.agents.tunables import config_key_or_none
from bot.campaign.attempts import AttemptError, ensure_attempt, read_solution
from bot.campaign.request import CampaignRefused, OptimizeRequest
from bot.commands.bot_policy import CHOICES, kill_switch, load_policy
from bot.controller.campaign import Campaign
from bot.controller.tree import PENDING, ROOT
from bot.forge.base import BranchTouchedByHumansError, PullRequest
from bot.forge.trusted_meta import read_meta
from bot.names import CALLS_ARTIFACT_PREFIX, STOPPED_LABEL, attempt_branch, definition_branch_prefix
from bot.policy_file import PolicyError
from bot.promotion.champion import champion_lineage, read_champion
from bot.promotion.execute import load_promotion_policy
from bot.review.evidence import Evidence, find_evidence
from bot.review.markdown import escape_inline
from harness.geomean import geomean
from harness.schema import Definition, SchemaError, Solution, Workload, parse_definition, parse_workloads

log = logging.getLogger(__name__)

_NODE = re.compile(r"^[0-9a-f]{12}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_SOLUTION_PATH = re.compile(r"^kernels/[A-Za-z0-9_.-]+/(?:[A-Za-z0-9_.-]+/)*solution\.json$")
MAX_RATIONALE = 400
CALLS_DIR_ENV = "KBOT_CALLS_DIR"  # where the bot keeps every model call (see ``campaign``)


# ------------------------------------------------------------------------------------ evidence


def summary_from_evidence(ev: Evidence) -> dict[str, Any]:
    """The tree's compact node summary (``bot.controller.summary.summarize`` shape) from the evidence
    block of our review: statuses, paired ratios vs the champion it was measured against, speedup vs
    the reference, roofline fractions and energy where the block has them, and the review's top feedback
    items (what the next prompt shows)."""
    ws = ev.workloads
    statuses: dict[str, int] = {}
    for w in ws:
        statuses[w.status] = statuses.get(w.status, 0) + 1
    bad = [w for w in ws if w.status != "PASSED" or w.failed_trials]
    passed = bool(ws) and not bad and ev.findings == 0
    if passed:
        status = "PASSED"
    elif not ws:
        status = "RUNTIME_ERROR"
    elif ev.findings and not bad:
        status = "REJECTED"
    else:
        status = bad[0].status if bad[0].status != "PASSED" else "INCORRECT_NUMERICAL"
    ratios = [w.ratio for w in ws if w.ratio and w.ratio[0] > 0]
    refs = [w.vs_reference for w in ws if w.vs_reference]
    noise = [(hi - lo) / (2 * m) for m, lo, hi in ratios if m > 0 and math.isfinite(hi - lo)]
    error = None
    if not passed:
        if bad:
            w = bad[0]
            msg = f"workload {w.uuid}: {w.status}" + (f", {w.failed_trials} failed correctness trial(s)" if w.failed_trials else "")
        else:
            msg = f"{ev.findings} guard finding(s)" if ev.findings else "no workloads were evaluated"
        error = {"status": status, "file": None, "line": None, "message": msg}
    roofs = [w.roofline for w in ws if w.roofline is not None and w.roofline[0] > 0]
    largest = max(roofs, key=lambda r: r[1]) if roofs and len(roofs) == len(ws) else None
    return {
        "passed": passed,
        "status": status,
        "statuses": statuses,
        "workloads": len(ws),
        "speedup_vs_reference": geomean(refs) if passed and len(refs) == len(ws) else None,
        "speedup_vs_baseline": geomean([r[0] for r in ratios]) if passed and ratios and len(ratios) == len(ws) else None,
        "baseline_hash": ev.baseline_hash,  # the champion it was paired against: the tree chains from it
        "solution_hash": ev.solution_hash,
        "noise": max(noise) if noise else None,
        # From the review's evidence block (absent in blocks written before it carried them): the
        # speed-of-light stop rule judges the PRs by these.
        "roofline_fraction_min": min(r[0] for r in roofs) if largest else None,
        "roofline_fraction_largest": largest[0] if largest else None,
        "roofline_bound_largest": largest[2] if largest else None,
        "roofline_fraction_geomean": geomean([r[0] for r in roofs]) if largest else None,
        "energy_j_per_call": geomean([w.energy[0] for w in ws]) if ws and all(w.energy for w in ws) else None,  # type: ignore[index]
        "eval_seconds": 0.0,
        "error": error,
        "feedback": [f.model_dump(mode="json") for f in ev.feedback],
        "head_sha": ev.head_sha,
    }


# ------------------------------------------------------------------------------------ snapshot


@dataclass
class Snapshot:
    """The search tree of one definition as the repository holds it now."""

    definition: str
    records: list[dict[str, Any]] = field(default_factory=list)
    pr_of: dict[str, PullRequest] = field(default_factory=dict)     # node id -> its PR
    meta_of: dict[int, dict[str, Any]] = field(default_factory=dict)  # PR number -> trusted meta
    prs: list[PullRequest] = field(default_factory=list)             # every PR on kbot/<definition>/
    baseline: str | None = None

    def round_prs(self, campaign_id: str, round_no: int) -> list[PullRequest]:
        return [p for p in self.prs if (m := self.meta_of.get(p.number))
                and m.get("campaign") == campaign_id and m.get("round", 1) == round_no]

    def status(self, node: str) -> str | None:
        return next((r["status"] for r in self.records if r["node_id"] == node), None)


def _read_solution(forge: Any, path: Any, refs: list[str | None], want_hash: str) -> Solution | None:
    if not isinstance(path, str) or not _SOLUTION_PATH.match(path) or ".." in path.split("/"):
        return None
    return read_solution(forge, [(path, ref) for ref in refs if ref is not None], want_hash)


def _trusted_meta(pr: PullRequest, definition: str, forge: Any) -> dict[str, Any] | None:
    meta = read_meta(pr, forge)
    if not meta or pr.from_fork or meta.get("definition") != definition:
        return None
    node, h = meta.get("node"), meta.get("solution_hash")
    if not (isinstance(node, str) and _NODE.match(node) and isinstance(h, str) and _HASH.match(h) and h.startswith(node)):
        return None
    if pr.head_branch != attempt_branch(definition, node):
        return None
    return meta


def read_snapshot(forge: Any, definition: str, *, load_solutions: bool = True) -> Snapshot:
    """Node records (``Tree.from_records`` input) from the PRs, their reviews and the champion pointer."""
    snap = Snapshot(definition)
    snap.prs = sorted((p for p in forge.list_prs(state="all", head_prefix=definition_branch_prefix(definition)) if not p.from_fork),
                      key=lambda p: p.number)
    lineage = champion_lineage(read_champion(forge, definition))
    base = lineage[0] if lineage else None
    snap.baseline = base["solution_hash"][:12] if base else None
    _, main_sha = forge.default_head()

    pr_records: list[dict[str, Any]] = []
    for pr in snap.prs:
        meta = _trusted_meta(pr, definition, forge)
        if meta is None:
            continue
        snap.meta_of[pr.number] = meta
        node = meta["node"]
        if node in snap.pr_of:
            continue  # one node, one PR: the first one counts
        snap.pr_of[node] = pr
        summary, status = None, PENDING
        data = find_evidence(forge, pr.number)
        if data is not None:
            try:
                ev = Evidence.from_block(data)
            except ValueError:
                ev = None
            if ev is not None and ev.solution_hash == meta["solution_hash"]:
                summary, status = summary_from_evidence(ev), "evaluated"
                # The error text the report step kept in the signed meta block (the evidence holds
                # statuses only): the search memory's facts and error -> fix pairs come from it.
                said = meta.get("outcome") if isinstance(meta.get("outcome"), Mapping) else {}
                if summary["error"] is not None and isinstance(said.get("error"), str) and said["error"]:
                    summary["error"]["message"] = said["error"][:500]
        solution = None
        if load_solutions and status != PENDING:
            solution = _read_solution(forge, meta.get("solution_path"), [pr.head_sha, pr.merge_commit_sha, main_sha],
                                      meta["solution_hash"])
        pr_records.append({
            "node_id": node, "parent_id": meta.get("parent"),
            "solution": solution.model_dump(mode="json", exclude_unset=True) if solution else None,
            "status": status, "summary": summary,
            "agent": str(meta.get("agent") or ""), "model": meta.get("model"), "prompt_hash": meta.get("prompt_hash"),
            "rationale": str(meta.get("rationale") or ""), "config_key": meta.get("config_key"),
            "mode": meta.get("mode"), "failure": None, "is_baseline": False,
        })

    # Champions without a PR (the shipped or starting kernel) are seeds under the root.
    seeds: list[dict[str, Any]] = []
    for e in lineage:
        node = e["solution_hash"][:12]
        s = e.get("summary") if isinstance(e.get("summary"), Mapping) else {}
        champion_summary = {
            "passed": True, "status": "PASSED", "statuses": {}, "workloads": s.get("workloads") or 0,
            "speedup_vs_reference": s.get("geomean_speedup_vs_reference"),
            "speedup_vs_baseline": e["factor"], "baseline_hash": base["solution_hash"] if base else None,
            "solution_hash": e["solution_hash"], "noise": None, "roofline_fraction_min": None,
            "energy_j_per_call": None, "eval_seconds": 0.0, "error": None, "feedback": [], "champion": True}
        if node in snap.pr_of:
            # A promoted PR whose review can no longer be read is still a measured champion.
            rec = next(r for r in pr_records if r["node_id"] == node)
            if rec["status"] == PENDING:
                rec["status"], rec["summary"] = "evaluated", champion_summary
                if load_solutions:
                    pr = snap.pr_of[node]
                    sol = _read_solution(forge, snap.meta_of[pr.number].get("solution_path"),
                                         [pr.head_sha, pr.merge_commit_sha, main_sha], e["solution_hash"])
                    rec["solution"] = sol.model_dump(mode="json", exclude_unset=True) if sol else None
            continue
        if any(x["node_id"] == node for x in seeds):
            continue
        sol = _read_solution(forge, e.get("solution_path"), [main_sha, e.get("sha")], e["solution_hash"]) if load_solutions else None
        seeds.append({
            "node_id": node, "parent_id": None,
            "solution": sol.model_dump(mode="json", exclude_unset=True) if sol else None,
            "status": "evaluated",
            "summary": champion_summary,
            "agent": "champion", "model": None, "prompt_hash": None,
            "rationale": f"champion {e.get('solution')}" + (f" (PR #{e['pr']})" if isinstance(e.get("pr"), int) else " (no PR)"),
            "config_key": None, "mode": "seed", "failure": None, "is_baseline": False,
        })

    # Configuration keys of the kernels read back (the search memory's "tried" set).
    for r in seeds + pr_records:
        if r["solution"] and not r["config_key"]:
            r["config_key"] = config_key_or_none(Solution.model_validate(r["solution"]))

    # Sequence: seeds first, then PRs in the order they were opened; a parent must come earlier
    # (no cycles from hand-edited metadata), else the node hangs from the root.
    records = seeds + pr_records
    seen: set[str] = set()
    for i, r in enumerate(records, start=1):
        r["seq"] = i
        if r["parent_id"] not in seen:
            r["parent_id"] = None
        r["is_baseline"] = r["node_id"] == snap.baseline
        seen.add(r["node_id"])
    snap.records = records
    return snap


# ------------------------------------------------------------------------------------ campaign


def campaign_id(request: OptimizeRequest, main_sha: str) -> str:
    """Same request (a redelivered or retried comment) → same id. Without a comment id (a caller other
    than the command handler) the default branch's head stands in: same state, same round."""
    who = f"c{request.comment_id}" if request.comment_id is not None else f"m{main_sha[:12]}"
    return f"{request.definition}#{request.thread}-{who}"


def _definition(forge: Any, name: str) -> Definition:
    raw = forge.read_file(f"definitions/{name}/definition.json")
    if raw is None:
        raise CampaignRefused(f"no definition `{escape_inline(name, 128)}` on the default branch (definitions/<name>/definition.json)")
    try:
        return parse_definition(json.loads(raw), f"definitions/{name}/definition.json")
    except (ValueError, SchemaError) as e:
        raise CampaignRefused(f"definitions/{escape_inline(name, 128)}/definition.json is invalid: {escape_inline(e, 300)}") from None


def _workloads(forge: Any, definition: Definition) -> list[Workload]:
    """The definition's workloads from the default branch (prompts show their regimes); [] if unreadable."""
    raw = forge.read_file(f"definitions/{definition.name}/workloads.jsonl")
    if raw is None:
        return []
    try:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return parse_workloads(text, definition, f"definitions/{definition.name}/workloads.jsonl")
    except (ValueError, SchemaError) as e:
        log.warning("workloads of %s unreadable, prompts go without regimes: %s", definition.name, e)
        return []


def _make_agent(name: str, config: Mapping[str, Any] | None = None) -> Any:
    try:
        return create_agent(name, dict(config or {}))
    except AgentError as e:
        raise CampaignRefused(f"agent `{escape_inline(name, 40)}` is unavailable: {escape_inline(e, 300)}") from None


def _body(sol: Solution, node: Any, request: OptimizeRequest, parent_pr: PullRequest | None, round_no: int) -> str:
    lines = [f"Candidate `{escape_inline(sol.name, 100)}` for `{escape_inline(request.definition, 128)}`, "
             f"proposed by the `{escape_inline(node.agent, 40)}` agent"
             + (f" (model `{escape_inline(node.model, 80)}`)" if node.model else "")
             + f" for #{request.thread}, round {round_no} of {request.rounds}."]
    if parent_pr is not None:
        lines.append(f"Parent: #{parent_pr.number} (node `{node.parent}`).")
    elif node.parent and node.parent != ROOT:
        lines.append(f"Parent: node `{node.parent}` (a champion without a PR).")
    if node.rationale:
        lines.append(f"Rationale: {escape_inline(node.rationale, 1000)}")
    lines.append("The bench workflow measures it against the current champion; the kbot review reports the result.")
    return "\n\n".join(lines)


def calls_file(calls_dir: str | os.PathLike[str], cid: str, round_no: int) -> Path:
    """Where the model calls of round ``round_no`` of campaign ``cid`` are kept."""
    return Path(calls_dir) / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', cid)}-r{round_no}.jsonl"


def calls_place() -> str | None:
    """Where this process's calls can be found later: the Actions run (its ``kbot-calls-<run id>``
    artifact) when running in a workflow, else None (App mode: the state directory's ``calls/``)."""
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run and run.isdigit():
        return f"{server}/{repo}/actions/runs/{run} (artifact {CALLS_ARTIFACT_PREFIX}{run})"
    return None


def campaign(request: OptimizeRequest, *, forge: Any, agent: Any = None, round_no: int = 1,
             cid: str | None = None, calls_dir: str | os.PathLike[str] | None = None) -> list[PullRequest]:
    """Open round ``round_no`` of ``request``: ``request.candidates`` PRs in all (those a previous call
    for the same campaign and round opened count). Returns the round's PRs, oldest first.

    ``agent``: an Agent instance (tests, replays); default ``request.agent`` from the registry, keys
    from the environment. ``cid``: the campaign id (later rounds reuse the first round's).
    ``calls_dir``: where every model call is kept (default ``$KBOT_CALLS_DIR``; command.yml and
    report.yml upload it as an artifact, ``kbot serve`` keeps it in its state directory); each PR's
    meta block names its file and the run. Without one the calls live only in this process.
    """
    definition = _definition(forge, request.definition)
    _, main_sha = forge.default_head()
    cid = cid or campaign_id(request, main_sha)
    snap = read_snapshot(forge, definition.name)
    mine = snap.round_prs(cid, round_no)
    need = request.candidates - len(mine)
    if need <= 0:
        return mine

    parent_node = None
    if request.parent_pr is not None:
        meta = snap.meta_of.get(request.parent_pr)
        if meta is None:
            raise CampaignRefused(f"#{request.parent_pr} is not a kbot candidate of `{escape_inline(definition.name, 128)}`")
        parent_node = meta["node"]
        if snap.status(parent_node) == PENDING:
            raise CampaignRefused(f"#{request.parent_pr} has no evaluation yet: wait for its review or run `/evaluate`")

    seed = int(hashlib.sha256(f"{cid}:{round_no}".encode()).hexdigest()[:8], 16)
    # The stop rules (speed of light, plateau) from the promotion policy on the default branch; the
    # plateau is judged over the tree's nodes, so the PRs alone say whether it was reached.
    try:
        stop = load_promotion_policy(forge).budget()
    except PolicyError as e:
        raise CampaignRefused(f"the promotion policy is invalid: {escape_inline(e, 300)}") from None
    config = {"proposals_per_step": need, "seed": seed, "fsync": False,
              "budget": {"max_candidates": None, **stop}}
    agent = agent or _make_agent(request.agent, request.agent_config)
    opened: list[PullRequest] = []
    # The same record path as a local resume, in memory: GitHub is the database, nothing is cached.
    # No evaluator: the bench workflow measures each PR on a GPU runner.
    calls_dir = calls_dir if calls_dir is not None else os.environ.get(CALLS_DIR_ENV) or None
    calls = calls_file(calls_dir, cid, round_no) if calls_dir else None
    camp = Campaign.from_records(snap.records, definition, agent, None, config, workloads=_workloads(forge, definition),
                                 calls_path=calls)
    # /optimize on a candidate PR: that node is expanded, whatever UCT would pick.
    forced = camp.tree.nodes[parent_node] if parent_node is not None else None
    for _ in range(need + 3):  # a step may yield fewer than asked (widening, duplicates)
        camp.config.proposals_per_step = need - len(opened)
        step = camp.propose_next(at=forced)
        if step.stopped:
            log.info("campaign %s: %s", cid, step.reason)
            if round_no == 1 and not opened and not mine:
                # Said in the reply to /optimize; a later round just ends (continue_after_results).
                raise CampaignRefused(f"no candidate opened: {escape_inline(step.reason, 300)} "
                                      "(the stop rules are `stop:` in skills/promotion.yaml)")
            break
        for nid in step.new_nodes:
            node = camp.tree.nodes[nid]
            if node.solution is None:
                log.info("campaign %s: agent produced no kernel: %s", cid, node.failure)
                continue
            parent = None if node.parent in (None, ROOT) else node.parent
            ppr = snap.pr_of.get(parent) if parent else None
            meta = {
                "definition": definition.name, "node": nid, "parent": parent, "parent_pr": ppr.number if ppr else None,
                "agent": node.agent, "model": node.model, "prompt_hash": node.prompt_hash,
                "campaign": cid, "round": round_no, "rounds": request.rounds, "candidates": request.candidates,
                "requested_agent": request.agent, "thread": request.thread, "requested_by": request.requested_by,
                "requested_settings": dict(request.agent_choice or {}),
                "solution": node.solution.name, "solution_hash": node.solution.content_hash(),
                "config_key": node.config_key, "mode": node.mode, "rationale": node.rationale[:MAX_RATIONALE],
            }
            if node.prompt_hash and calls is not None:
                meta["calls"] = {"file": calls.name, "where": calls_place()}
            try:
                att = ensure_attempt(forge, node.solution, node=nid, meta=meta,
                                     body=_body(node.solution, node, request, ppr, round_no),
                                     known_prs=snap.prs)
            except (BranchTouchedByHumansError, AttemptError) as e:
                log.warning("campaign %s: node %s skipped: %s", cid, nid, e)
                continue
            if att.opened:
                opened.append(att.pr)
        if len(opened) >= need or parent_node is not None and not step.new_nodes:
            break
    return sorted(mine + opened, key=lambda p: p.number)


def bind(forge: Any, fn: Callable[..., Any] = campaign, **options: Any) -> Callable[[OptimizeRequest], Any]:
    """``fn`` with the forge (and options) bound when it takes a ``forge`` keyword: the one-argument
    callable ``ForgeServices`` expects. Functions without one are returned as they are."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    if "forge" not in params:
        return fn
    return functools.partial(fn, forge=forge, **options)


def _whole(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def clamp_to_policy(meta: Mapping[str, Any], policy: Any, fallback_candidates: int) -> tuple[int, int, str] | None:
    """(candidates, rounds, agent) of a later round, from the PR's meta block bounded by TODAY's policy.

    The meta block is signed only when a key is configured, and the policy may have changed since, so
    its numbers are only a request: clamped to ``optimize.max_candidates`` / ``max_rounds``, and an
    agent the policy does not enable falls back to its default agent. None when the block has no
    usable round count.
    """
    bounds = policy.optimize
    rounds = _whole(meta.get("rounds"))
    if rounds is None:
        return None
    rounds = max(1, min(rounds, bounds.max_rounds))
    candidates = _whole(meta.get("candidates")) or fallback_candidates or bounds.default_candidates
    candidates = max(1, min(candidates, bounds.max_candidates))
    agent = meta.get("requested_agent") or meta.get("agent")
    if agent not in bounds.agents:
        agent = bounds.default_agent
    return candidates, rounds, str(agent)


def settings_for_round(meta: Mapping[str, Any], policy: Any, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(choice, agent config) for a later round: the settings the first comment asked for (meta
    ``requested_settings``) resolved against TODAY's policy; the policy's own settings when they are
    no longer allowed (or the agent changed)."""
    asked = meta.get("requested_settings")
    choice = {k: v for k, v in asked.items() if k in CHOICES} if isinstance(asked, Mapping) else {}
    if agent != (meta.get("requested_agent") or meta.get("agent")):
        choice = {}
    try:
        return choice, policy.optimize.resolve_agent(agent, choice)
    except ValueError as e:
        log.info("later round: the first request's agent settings no longer hold (%s); the policy's own", e)
        return {}, policy.optimize.resolve_agent(agent, {})


def continue_after_results(forge: Any, pr_number: int, *, agent: Any = None) -> list[PullRequest]:
    """The next round of ``pr_number``'s campaign, when that PR's round is complete (every PR of it
    evaluated or closed) and the request asked for more rounds; [] otherwise. Idempotent.

    Checked at every round, against the default branch as it is now: the kill switch (and an invalid
    policy), ``kbot:stopped`` on the thread or the candidate PR, and the policy's bounds.
    """
    pr = forge.get_pr(pr_number)
    meta = read_meta(pr, forge)
    if not meta or not isinstance(meta.get("definition"), str):
        return []
    round_no = _whole(meta.get("round"))
    cid, thread = meta.get("campaign"), _whole(meta.get("thread"))
    if round_no is None or round_no < 1 or not isinstance(cid, str) or thread is None:
        return []
    # Stopped on the thread or on this candidate PR (``/stop`` there), or the kill switch is on.
    labels = set(forge.labels(thread)) | set(forge.labels(pr_number))
    if STOPPED_LABEL in labels:
        return []
    try:
        policy = load_policy(forge)
    except PolicyError:
        return []  # an invalid policy stops everything
    if kill_switch(forge, policy, sorted(labels)):
        return []
    bounded = clamp_to_policy(meta, policy, 0)
    if bounded is None or round_no >= bounded[1]:
        return []
    snap = read_snapshot(forge, meta["definition"], load_solutions=False)
    this = snap.round_prs(cid, round_no)
    candidates, rounds, requested_agent = clamp_to_policy(meta, policy, len(this))  # type: ignore[misc]
    if any(p.is_open and snap.status(snap.meta_of[p.number]["node"]) == PENDING for p in this):
        return []  # results still to come in this round
    choice, config = settings_for_round(meta, policy, requested_agent)
    request = OptimizeRequest(definition=meta["definition"], candidates=candidates, agent=requested_agent,
                              rounds=rounds, requested_by=str(meta.get("requested_by") or ""), thread=thread,
                              agent_config=config, agent_choice=choice)
    return campaign(request, forge=forge, agent=agent, round_no=round_no + 1, cid=cid)
