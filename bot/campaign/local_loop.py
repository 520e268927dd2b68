"""The embedded default: the whole kbot loop on this machine, no GitHub, no API key.

    kbot optimize rmsnorm_h4096 --rounds 2 --candidates 2

runs a campaign (``bot.controller.campaign``) whose evaluator opens one branch + one pull request per
candidate on a ``LocalForge``, evaluates it with the real harness against the current champion
(paired ratio), publishes the sticky review + status with ``bot.review.publish.publish_results``, and lets
``bot.promotion`` decide and carry out the decision (sha-guarded squash merge of the winner, champion
pointer + LEADERBOARD.md commit, losers closed with a summary). The same code paths as on GitHub.

Workspace layout (``--workspace``, default ``.kbot/workspace``)::

    forge/repo.git       bare git repository: main + kbot/<definition>/<node> branches
    forge/forge.json     pull requests, reviews, comments, labels, statuses
    runs/                harness run folders, cached by (solution, baseline, workloads, settings)
    campaigns/<definition>/<nnn>/   campaign stores (tree, reports, calls.jsonl, outcomes.json)
    memory/<definition>.json        the search memory all campaigns of a definition share

Starting point: a definition with no champion on the workspace's main gets one before the first
round: the first seed of ``skills/seeds/<definition>/`` with every tunable at its FIRST listed value
(a deliberately weak configuration, so the demo has room to improve). It is recorded as the starting
champion (``origin: "start"``, no PR) in ``champion.json``; it is not a promotion, and the leaderboard
says so. Every candidate must then beat it by the promotion policy to be merged.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from bot.campaign.attempts import AttemptError, ensure_attempt, folder_for, read_solution, solution_files, update_attempt
from bot.campaign.gpu_rounds import gpus_summary, harness_for_gpus, measure_round
from bot.campaign.harness_evaluator import HarnessEvaluator
from bot.controller.campaign import Campaign, CampaignConfig, StepResult, own_fingerprint
from bot.controller.tree import ROOT, solution_node_id
from bot.forge.local import LocalForge
from bot.names import STATUS_CONTEXT, attempt_branch
from bot.promotion.champion import (
    chain_factors,
    champion_lineage,
    champion_path,
    leaderboard_path,
    read_champion,
    render_leaderboard,
    updated_champion,
)
from bot.review.markdown import escape_inline
from bot.review.publish import publish_results
from harness.paths import definition_dir, roots, skill
from harness.report import Report
from harness.schema import Definition, SchemaError, Solution, load_solution, load_workloads

DEFAULT_WORKSPACE = Path(".kbot") / "workspace"
Event = Callable[[str, dict[str, Any]], None]


class LoopError(RuntimeError):
    """Bad input for the local loop (unknown definition, no seeds, bad workloads file)."""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------ workspace


class Workspace:
    """Paths and the forge of one local workspace (see the module docstring)."""

    # What the workspace's main starts with: the definitions, the shipped kernels, the policy.
    SEED_PATHS = ("definitions", "kernels", "skills/promotion.yaml")

    def __init__(self, root: str | Path = DEFAULT_WORKSPACE, source: Path | None = None):
        self.root = Path(root).resolve()
        self.source = source  # None: kbot's own files with the repository's over them (harness/paths.py)
        self.forge = LocalForge(self.root / "forge")
        self.runs = self.root / "runs"
        self.campaigns = self.root / "campaigns"
        if self.forge.branch_head("main") is None:
            self._init_main()

    def _init_main(self) -> None:
        files: dict[str, bytes] = {}
        bases = [self.source] if self.source is not None else list(reversed(roots()))  # later ones win
        for base in bases:
            for rel in self.SEED_PATHS:
                p = base / rel
                paths = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else []
                for f in paths:
                    if "__pycache__" in f.parts or f.suffix == ".pyc":
                        continue
                    files[str(f.relative_to(base))] = f.read_bytes()
        where = " and ".join(str(b) for b in bases)
        if not files:
            raise LoopError(f"{where}: none of {self.SEED_PATHS} found to start the workspace from")
        try:
            self.forge.commit_files("main", None, files, f"kbot workspace: definitions, kernels and policy from {where}")
        except Exception:
            if self.forge.branch_head("main") is None:  # not a lost race with another process
                raise

    def definition(self, name: str, dataset: Path | None = None, workloads: Path | None = None, *, require_workloads: bool = True):
        """The definition a campaign is for, and its workloads (``harness.dataset.resolve``): one of ours
        by name, an official one by name with a dataset, or a definition file (an official path too)."""
        from harness.dataset import resolve

        try:
            return resolve(name, dataset=dataset, workloads=workloads, kbot_root=self.source / "definitions" if self.source else None,
                           require_workloads=require_workloads)
        except SchemaError as e:
            raise LoopError(str(e)) from None

    def inputs(self, name: str, device: str, dataset: Path | None = None, workloads: Path | None = None):
        """A local evaluation's definition and workloads: ``definition``'s, except that on the CPU one of
        kbot's own definitions with its own workloads uses its ``workloads.small.jsonl`` when present."""
        if workloads is None and device == "cpu":
            ours = self.definition(name, dataset, require_workloads=False)
            small = ours.path.parent / "workloads.small.jsonl"
            if ours.origin == "kbot" and ours.workloads_origin.startswith("kbot") and small.exists():
                workloads = small
        return self.definition(name, dataset, workloads)

    def champion_solution(self, definition: str) -> tuple[dict[str, Any] | None, Solution | None]:
        doc = read_champion(self.forge, definition)
        if not doc:
            return None, None
        want = doc.get("solution_hash")
        path = doc.get("solution_path")
        candidates = [path] if isinstance(path, str) else []
        candidates += [p for p in self.forge.list_files(under=f"kernels/{definition}") if p.endswith("/solution.json")]
        sol = read_solution(self.forge, [(p, None) for p in candidates], want) if isinstance(want, str) else None
        if sol is not None:
            return doc, sol
        raise LoopError(f"champion {doc.get('solution')} of {definition} is not on the workspace's main")

    def folder_for(self, solution: Solution, ref: str = "main") -> str:
        """A kernels/ folder for ``solution`` that holds nothing else on ``ref``."""
        return folder_for(self.forge, solution, ref)

    def install_start(self, solution: Solution) -> dict[str, Any]:
        """Record ``solution`` as the starting champion of its definition (see the module docstring)."""
        folder = self.folder_for(solution)
        entry = {"solution": solution.name, "solution_hash": solution.content_hash(),
                 "solution_path": f"{folder}/solution.json", "pr": None, "sha": None, "merge_sha": None,
                 "promoted_at": _now(), "summary": {"origin": "start", "workloads": None}}
        doc = updated_champion(None, solution.definition, entry)
        doc["origin"] = "start"
        files = {**solution_files(solution, folder),
                 champion_path(solution.definition): json.dumps(doc, indent=2, sort_keys=True) + "\n",
                 leaderboard_path(solution.definition): render_leaderboard(doc)}
        _, head = self.forge.default_head()
        self.forge.commit_files("main", head, files,
                                f"kbot: starting point for {solution.definition} is {solution.name} (not a promotion)")
        return doc


def starting_point(definition: Definition, def_path: Path, seeds_dir: Path | None = None) -> Solution:
    """The champion a definition's first campaign starts from. A definition that ships its reference as
    a solution (``reference_solution.json``, beside it or beside kbot's definition of that name: the
    contest operators) starts from it, so every kernel of the seeds enters as a pull request and reaches
    main only by a paired promotion; a definition with seeds starts from the weak start below (the demo
    definitions); any other (an official definition kbot has no seeds for) from its own reference code
    as a plain-torch solution."""
    ref = def_path.parent / "reference_solution.json"
    if not ref.is_file():
        ours = definition_dir(definition.name)  # the repository's definition of that name, else ours
        ref = (ours or def_path.parent) / "reference_solution.json"
    if ref.is_file():
        try:
            sol = load_solution(ref)
        except SchemaError as e:
            raise LoopError(f"{ref}: {e}") from None
        if sol.definition != definition.name:
            raise LoopError(f"{ref} is a solution of {sol.definition}, not of {definition.name}")
        return sol.model_copy(update={"description": f"starting point: the definition's reference ({sol.name})"})
    from bot.agents.providers.offline import load_seeds

    if load_seeds(definition.name, seeds_dir):
        return weak_start(definition.name, seeds_dir)
    return reference_start(definition)


def reference_start(definition: Definition) -> Solution:
    """The definition's reference code as a plain-torch solution (value-returning, entry ``run``)."""
    from harness.schema import parse_solution

    return parse_solution({
        "name": f"{definition.name}_reference", "definition": definition.name, "author": "the definition's reference",
        "description": "starting point: the definition's own reference code, as a solution",
        "spec": {"language": "python", "target_hardware": ["cuda", "cpu"], "entry_point": "reference.py::run",
                 "dependencies": ["torch"], "destination_passing_style": False},
        "sources": [{"path": "reference.py", "content": definition.reference}]}, where=f"the reference of {definition.name}")


def weak_start(definition: str, seeds_dir: Path | None = None) -> Solution:
    """The first seed with every tunable at its first listed value (see the module docstring)."""
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import apply, solution_tunables

    seeds = load_seeds(definition, seeds_dir)
    if not seeds:
        raise LoopError(f"no seed kernels in skills/seeds/{definition}/ to start from")
    seed = seeds[0]
    changes = {t.key: t.options[0] for t in solution_tunables(seed) if t.options and t.value != t.options[0]}
    desc = ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))
    sol = apply(seed, changes, name=f"{definition}_start") if changes else seed.model_copy(update={"name": f"{definition}_start"})
    return sol.model_copy(update={"description": f"starting point: {seed.name}" + (f" with {desc}" if desc else "")})


# ---------------------------------------------------------------------------------- PR-per-candidate


@dataclass
class Outcome:
    node: str
    pr: int | None
    decision: str  # champion | promote | reject | rebenchmark | error
    headline: str = ""
    merged_sha: str | None = None
    closed: list[int] = field(default_factory=list)


class PullRequestEvaluator:
    """The Evaluator the campaign calls: branch + commit + PR, harness evaluation against the current
    champion, review/status/promotion through the forge. The campaign's own ``baseline`` argument (its
    first seed) is ignored: promotion needs a measurement paired with TODAY's champion."""

    def __init__(self, ws: Workspace, harness: HarnessEvaluator, definition: Definition, campaign_id: str,
                 store: Path, event: Event | None = None):
        self.ws, self.harness, self.definition = ws, harness, definition
        self.campaign_id = campaign_id
        self.store = store
        self.outcomes_path = store / "outcomes.json"
        self.event = event or (lambda kind, data: None)
        self.campaign: Campaign | None = None

    # -- records -----------------------------------------------------------------------------------
    def outcomes(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.outcomes_path.read_text()) if self.outcomes_path.exists() else {}

    def _record(self, o: Outcome) -> None:
        data = self.outcomes()
        data[o.node] = o.__dict__
        _write_json(self.outcomes_path, data)

    # -- the Evaluator protocol --------------------------------------------------------------------
    def evaluate(self, solution: Solution, baseline: Solution | None) -> Report:
        forge = self.ws.forge
        nid = solution_node_id(solution)
        _, champ = self.ws.champion_solution(self.definition.name)
        if champ is not None and champ.content_hash() == solution.content_hash():
            report = self.harness.evaluate(solution, None)  # the champion itself: no PR, no pairing
            self._record(Outcome(nid, None, "champion", "the current champion (measured alone)"))
            return report
        branch = attempt_branch(self.definition.name, nid)
        pr = self._ensure_pr(solution, nid, branch)
        if not pr.is_open:
            # Published before an interruption; the evaluation is cached, its decision is on the PR.
            # A PR is never reopened (the forge contract has no reopen), so a candidate decided on other
            # inputs (a definition's generators or workloads changed since) keeps that decision, and says so.
            same = self.harness.latest_report(solution.content_hash(), same_inputs=True)
            done = same or self.harness.latest_report(solution.content_hash())
            if done is not None:
                if nid not in self.outcomes():  # e.g. proposed again by a later campaign
                    how = "merged" if pr.merged else "closed"
                    self._record(Outcome(nid, pr.number, "promote" if pr.merged else "reject",
                                         f"decided earlier in #{pr.number} ({how})" if same is not None else
                                         f"decided earlier in #{pr.number} ({how}) on other inputs; not measured again"))
                return done
        report: Report | None = None
        for _ in range(3):  # a re-benchmark is asked for when the champion or main moved meanwhile
            _, champ = self.ws.champion_solution(self.definition.name)
            head = update_attempt(forge, pr.number)  # main merged in, the new head recorded
            forge.set_status(head, "pending", context=STATUS_CONTEXT,
                             description=f"evaluating on {self.harness.device}" + (" (CPU timing)" if self.harness.device == "cpu" else ""))
            self.event("evaluate", {"node": nid, "pr": pr.number, "solution": solution.name,
                                    "champion": champ.name if champ else None})
            measure_round(self, champ)  # under --gpus: the round's candidates at once, one per GPU
            report = self.harness.evaluate(solution, champ)
            # Measured by this process (no artifact in between): published as it is, with the
            # champion's latest report beside it.
            shown = self._champion_report(champ)
            pub = publish_results(forge, pr.number, head, report=report, champion=shown)
            action = pub.decision.action if pub.decision is not None else "error"
            if action != "rebenchmark":
                break
        headline = pub.decision.headline if pub.decision is not None else "no usable report"
        current = forge.get_pr(pr.number)
        if current.is_open and action != "promote":
            forge.close_pr(pr.number, comment=(
                f"Closed by kbot: not promoted ({escape_inline(headline, 400)}). "
                "The branch and this review stay; the candidate remains in the search tree."))
        out = Outcome(nid, pr.number, "promote" if pub.merged_sha else action, headline, pub.merged_sha, pub.closed or [])
        self._record(out)
        self.event("decision", out.__dict__)
        assert report is not None
        return report

    def inputs_fingerprint(self) -> str | None:
        """What this evaluator's measurements depend on besides the solutions: the harness's (the search
        memory's "tried" is per this value: bot.controller.memory); None for a harness without one."""
        return own_fingerprint(self.harness)

    def _champion_report(self, champ: Solution | None) -> Report | None:
        """The champion's latest report on these inputs, shown beside the candidate's (None when it was
        only measured on other inputs: an old figure is not shown as today's)."""
        return self.harness.latest_report(champ.content_hash(), same_inputs=True) if champ is not None else None

    def _ensure_pr(self, solution: Solution, nid: str, branch: str):
        node = self._node(nid)
        parent = node.get("parent") if node.get("parent") not in (None, ROOT) else None
        meta = {"definition": self.definition.name, "node": nid, "parent": parent,
                "agent": node.get("agent"), "model": node.get("model"), "prompt_hash": node.get("prompt_hash"),
                "campaign": self.campaign_id, "solution": solution.name, "solution_hash": solution.content_hash()}
        body = (f"Candidate `{escape_inline(solution.name, 100)}` for `{self.definition.name}`"
                + (f", child of node `{parent}`" if parent else "") + ".\n\n"
                + (f"Rationale: {escape_inline(node['rationale'], 1000)}\n" if node.get("rationale") else ""))
        try:
            attempt = ensure_attempt(self.ws.forge, solution, node=nid, meta=meta, body=body)
        except AttemptError as e:
            raise LoopError(str(e)) from None
        assert attempt.branch == branch
        if attempt.opened:
            self.event("pr", {"node": nid, "pr": attempt.pr.number, "branch": branch, "solution": solution.name})
        return attempt.pr

    def _node(self, nid: str) -> dict[str, Any]:
        """The node's record: from the live tree, or from the store while ``Campaign.resume`` is still
        evaluating the nodes an interruption left pending (before the campaign object exists)."""
        if self.campaign is not None and nid in self.campaign.tree:
            n = self.campaign.tree.nodes[nid]
            return {"parent": n.parent, "agent": n.agent, "model": n.model, "prompt_hash": n.prompt_hash,
                    "rationale": n.rationale}
        path = self.store / "nodes" / f"{nid}.json"
        rec = json.loads(path.read_text()) if path.exists() else {}
        return {"parent": rec.get("parent_id"), "agent": rec.get("agent"), "model": rec.get("model"),
                "prompt_hash": rec.get("prompt_hash"), "rationale": rec.get("rationale") or ""}

# ------------------------------------------------------------------------------------------ the loop


@dataclass
class OptimizeOptions:
    definition: str
    agent: str | None = None  # None: anthropic/openai when their key is set, else offline
    rounds: int = 2
    candidates: int = 2
    device: str = "auto"
    workspace: Path = DEFAULT_WORKSPACE
    workloads: Path | None = None
    dataset: Path | None = None  # an official FlashInfer-Trace dataset (harness.dataset)
    budget_s: float | None = None  # timing budget per workload (default: 0.3 s on CPU, 1.0 s on GPU)
    baselines: bool | None = None  # declared baselines beside each candidate (None: on the GPU only)
    trials: int | None = None
    new: bool = False  # start a new campaign even if an unfinished one exists
    profile: bool = True  # feedback items on every evaluation (static evidence; ncu too on the GPU)
    profile_budget_s: float | None = 120.0  # per candidate, for the GPU's profiling runs
    # The agent's settings (model, base_url, temperature, max_tokens, top_p; None: not given), over an
    # agent config file (a campaign config with an ``agent:`` section, or just that section), over the
    # policy's ``optimize.agent_settings`` for the agent (skills/bot-policy.yaml of the source tree).
    agent_settings: dict[str, Any] = field(default_factory=dict)
    agent_config: Path | None = None
    gpus: str | None = None  # --gpus: N, all or a list such as 0,2 (bot/campaign/gpu_rounds.py); None: one device


def default_agent(env: dict[str, str] | None = None) -> str:
    env = dict(os.environ if env is None else env)
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY"):
        return "openai"
    return "offline"


def agent_setup(opts: OptimizeOptions, source: Path | None = None) -> tuple[str, dict[str, Any]]:
    """(agent name, its config section) for a local campaign: see ``OptimizeOptions.agent_settings``.
    The command line is the owner's: any URL it gives is used, the policy's limits are for comments."""
    from bot.agents.base import AgentError
    from bot.agents.config import agent_config, load_config_file
    from bot.commands.bot_policy import POLICY_PATH, load_policy_text
    from bot.policy_file import PolicyError

    section: dict[str, Any] = {}
    try:
        if opts.agent_config is not None:
            data = load_config_file(opts.agent_config)
            section = dict(data["agent"]) if isinstance(data.get("agent"), dict) else dict(data)
        file_agent = section.pop("name", None)
        name = opts.agent or (str(file_agent) if file_agent else None) or default_agent()
        # skills/bot-policy.yaml of ``source``, else the repository's, else kbot's (harness/paths.py)
        policy_file = source / POLICY_PATH if source is not None else skill(POLICY_PATH.removeprefix("skills/"))
        try:
            policy = load_policy_text(policy_file.read_text() if policy_file.is_file() else None, str(policy_file))
        except PolicyError as e:
            raise LoopError(str(e)) from None
        defaults = policy.optimize.settings_for(name).defaults() if name in policy.optimize.agent_settings else {}
        return name, agent_config(name, defaults, section, opts.agent_settings)
    except AgentError as e:
        raise LoopError(str(e)) from None


def timing_for(device: str, budget_s: float | None) -> dict[str, Any]:
    """Timing settings: the harness defaults on a GPU; on a CPU (Triton interpreted, ~0.1-0.5 s a call)
    fewer iterations, or one evaluation would take minutes. Paired and interleaved either way."""
    if device == "cpu":
        return {"budget_s": 0.3 if budget_s is None else budget_s, "min_iters": 10, "warmup": 2, "recheck": 2}
    return {"budget_s": 1.0 if budget_s is None else budget_s}


def _campaign_dir(ws: Workspace, definition: str, new: bool) -> tuple[Path, bool]:
    """(store, resume?): the latest unfinished campaign of the definition, else a new numbered one."""
    root = ws.campaigns / definition
    existing = sorted(p for p in root.glob("[0-9][0-9][0-9]") if (p / "campaign.json").exists()) if root.is_dir() else []
    if existing and not new and not (existing[-1] / "finished.json").exists():
        return existing[-1], True
    n = int(existing[-1].name) + 1 if existing else 1
    return root / f"{n:03d}", False


def workspace_memory(ws: Workspace, definition: str) -> Path:
    """The search memory every campaign of ``definition`` in this workspace shares:
    ``memory/<definition>.json``. Made on first use from the memories of the campaigns that kept their
    own (workspaces from before it was shared), so nothing they learned is lost."""
    from bot.controller.memory import SearchMemory

    path = ws.root / "memory" / f"{definition}.json"
    if path.exists():
        return path
    mem = SearchMemory(definition, path)
    for old in sorted((ws.campaigns / definition).glob("[0-9][0-9][0-9]/memory.json")):
        earlier = SearchMemory.load(definition, old)
        for a in earlier.attempts:
            a.setdefault("session", old.parent.name)
        mem.merge(earlier)
    mem.save()
    return path


def optimize(opts: OptimizeOptions, event: Event | None = None, harness: Any = None, gpu_provider: Any = None) -> dict[str, Any]:
    """Run (or resume) a campaign; returns the summary. ``harness``: a stand-in for the
    ``HarnessEvaluator`` (same ``evaluate``/``latest_report``/``device``/``runs``/``cache_hits``), for tests.
    ``gpu_provider``: where ``opts.gpus`` finds its GPUs (``harness.gpu_pool.DeviceProvider``; default
    nvidia-smi; tests give fake GPUs)."""
    from bot.agents.base import AgentError
    from bot.agents.catalog import create_agent
    from harness.env import resolve_device

    event = event or (lambda kind, data: None)
    if opts.rounds < 1 or opts.candidates < 1:
        raise LoopError("--rounds and --candidates must be at least 1")
    agent_name, agent_cfg = agent_setup(opts)  # bad settings are refused before anything is written
    ws = Workspace(opts.workspace)
    device = resolve_device(opts.device)
    resolved = ws.inputs(opts.definition, device, opts.dataset, opts.workloads)
    definition, def_path, wl_path = resolved.definition, resolved.path, resolved.workloads_path
    if wl_path is None or not Path(wl_path).exists():
        raise LoopError(f"workloads file {wl_path} does not exist")
    try:
        workloads = load_workloads(wl_path, definition)
    except SchemaError as e:
        raise LoopError(str(e)) from None
    if not workloads:
        raise LoopError(f"{wl_path} holds no workloads")
    try:
        agent = create_agent(agent_name, agent_cfg)
    except AgentError as e:
        raise LoopError(str(e)) from None
    if harness is None:
        def lane(gpu: Any = None) -> HarnessEvaluator:
            return HarnessEvaluator(definition, workloads, ws.runs, device=device, trials=opts.trials,
                                    timing=timing_for(device, opts.budget_s), definition_path=def_path,
                                    provenance=resolved.provenance(len(workloads)), gpu=gpu,
                                    profile=opts.profile, profile_budget_s=opts.profile_budget_s, with_baselines=opts.baselines,
                                    progress=lambda k, d: event(f"harness.{k}", d if isinstance(d, dict) else {"obj": d}))
        harness = harness_for_gpus(opts.gpus, device, lane, gpu_provider, event) if opts.gpus is not None else lane()

    if read_champion(ws.forge, definition.name) is None:
        start = starting_point(definition, def_path)
        ws.install_start(start)
        event("start", {"solution": start.name, "description": start.description})
    _, champion = ws.champion_solution(definition.name)
    assert champion is not None

    store, resume = _campaign_dir(ws, definition.name, opts.new)
    cid = f"{definition.name}/{store.name}"
    evaluator = PullRequestEvaluator(ws, harness, definition, cid, store, event)
    event("campaign", {"id": cid, "resume": resume, "device": device, "agent": agent_name,
                       "workloads": str(wl_path), "n_workloads": len(workloads), "inputs": resolved.describe(len(workloads))})
    # Champions promoted outside this campaign (a `kbot submit` while it was stopped) are in the
    # pointer's lineage: the tree chains a pairing against one of them through it.
    lineage = chain_factors(read_champion(ws.forge, definition.name))
    if resume:
        # Pending nodes (proposed, not finished when the last run stopped) are evaluated first, even
        # when the budget is used up: their PRs may already be open.
        campaign = Campaign.resume(store, agent, evaluator, evaluate_pending=True, lineage=lineage)
    else:
        from bot.policy_file import PolicyError
        from bot.promotion.execute import load_promotion_policy

        try:
            policy = load_promotion_policy(ws.forge)  # the workspace's main, as promotion reads it
        except PolicyError as e:
            raise LoopError(str(e)) from None
        config = CampaignConfig.from_dict({
            "proposals_per_step": opts.candidates,
            # relative to the store: the workspace can be moved (carried to another machine) and resumed
            "memory_path": os.path.relpath(workspace_memory(ws, definition.name), store),
            # one step evaluates the starting champion, then one step per round; the stop rules
            # (speed of light, plateau) from the promotion policy's `stop:`
            "budget": {"max_steps": opts.rounds + 1, "max_candidates": 1 + opts.rounds * opts.candidates,
                       **policy.budget()},
        })
        campaign = Campaign.start(definition, [champion], agent, evaluator, config, store, workloads=workloads,
                                  lineage=lineage)
    evaluator.campaign = campaign
    steps: list[StepResult] = []
    try:
        while True:
            r = campaign.step()
            steps.append(r)
            event("step", r.__dict__)
            if r.stopped:
                break
    finally:
        if hasattr(harness, "close"):
            harness.close()  # the spare workers started for an evaluation that will not come
    _write_json(store / "finished.json", {"finished": _now(), "reason": r.reason})
    return summarize_campaign(ws, campaign, evaluator, harness, device, wl_path)


def summarize_campaign(ws: Workspace, campaign: Campaign, evaluator: PullRequestEvaluator,
                       harness: Any, device: str, wl_path: Path) -> dict[str, Any]:
    rep = campaign.report()
    outcomes = evaluator.outcomes()
    rows = []
    for h in rep["history"]:
        node = campaign.tree.nodes[h["node"]]
        s = node.summary or {}
        rpath = campaign.store / "reports" / f"{h['node']}.json"
        lat = vs_best = None
        if rpath.exists():
            from harness.report import load_report

            r = load_report(rpath)
            meds = [w.latency_ms.median for w in r.workloads if w.latency_ms]
            lat = sum(meds) / len(meds) if meds and len(meds) == len(r.workloads) else None
            vs_best = r.summary().get("geomean_speedup_vs_best_baseline")
        o = outcomes.get(h["node"], {})
        gpu = (r.config.get("gpu") or {}).get("index") if rpath.exists() else None
        rows.append({
            "node": h["node"], "parent": h["parent"], "solution": node.solution.name if node.solution else None,
            "pr": o.get("pr"), "status": h["status"], "mean_latency_ms": lat,
            "speedup_vs_champion": s.get("speedup_vs_baseline"), "speedup_vs_start": h["speedup"],
            "speedup_vs_reference": s.get("speedup_vs_reference"), "speedup_vs_best_baseline": vs_best,
            "roofline_fraction": s.get("roofline_fraction_min"),
            "roofline_fraction_largest": s.get("roofline_fraction_largest"),
            "roofline_bound_largest": s.get("roofline_bound_largest"),
            "roofline_fraction_geomean": s.get("roofline_fraction_geomean"),
            "decision": o.get("decision"), "headline": o.get("headline"), "rationale": h["rationale"],
            **({"gpu": gpu} if gpu is not None else {}),
        })
    doc, champ = ws.champion_solution(campaign.definition.name)
    return {
        "headline": headline(campaign, doc),
        "definition": campaign.definition.name,
        "campaign": f"{campaign.definition.name}/{campaign.store.name}",
        "workspace": str(ws.root),
        "device": device,
        "timing": "CPU timing (Triton interpreter; not a GPU measurement)" if device == "cpu" else "GPU timing (CUDA events)",
        "workloads": str(wl_path),
        "agent": rep["agent"],
        "candidates": rows,
        "champion": {"solution": doc.get("solution") if doc else None, "pr": doc.get("pr") if doc else None,
                     "solution_hash": doc.get("solution_hash") if doc else None},
        "evaluations_run": harness.runs, "evaluations_cached": harness.cache_hits,
        "stop_reason": rep["stop_reason"],
        "baselines": baselines_summary(campaign.store),
        **({"gpus": gpus_summary(_reports(campaign.store), harness.pool), "gpu_placements": harness.placements}
           if hasattr(harness, "placements") else {}),
    }


def _reports(store: Path) -> list[Report]:
    from harness.report import load_report

    out = []
    for rpath in sorted((store / "reports").glob("*.json")):
        try:
            out.append(load_report(rpath))
        except (ValueError, OSError):
            continue
    return out


def headline(campaign: Campaign, doc: dict[str, Any] | None) -> dict[str, Any]:
    """The campaign's headline figures, each a chain of paired ratios: the champion's speedup over this
    campaign's start (the champion it began from) and over the first champion on record, with the
    links (each promotion's paired ratio against the champion it replaced, oldest first)."""
    lineage = champion_lineage(doc)
    start = campaign.tree.baseline
    start_hash = start.solution.content_hash() if start is not None and start.solution is not None else None
    factors = {e["solution_hash"]: e["factor"] for e in lineage}
    now = lineage[-1] if lineage else None
    f_now = now["factor"] if now else None
    f_start = factors.get(start_hash) if start_hash else None
    idx = next((i for i, e in enumerate(lineage) if e["solution_hash"] == start_hash), None)
    links = [e["summary"].get("speedup_vs_previous") if isinstance(e.get("summary"), dict) else None
             for e in lineage[(idx + 1 if idx is not None else 1):]]
    return {
        "champion": now["solution"] if now else None,
        "speedup_vs_campaign_start": f_now / f_start if f_now is not None and f_start else None,
        "links_since_campaign_start": links if idx is not None else None,
        "speedup_vs_first_champion": f_now,
        "first_champion": lineage[0]["solution"] if lineage else None,
        "how": "product of each promotion's paired geomean ratio against the champion it replaced "
               "(champion.json lineage); never a ratio of two unpaired runs",
    }


def baselines_summary(store: Path) -> dict[str, Any]:
    """The declared baselines of the campaign's evaluations: which ran, and which could not run here and
    why (from the newest report that had any)."""
    from harness.report import load_report

    for rpath in sorted((store / "reports").glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            r = load_report(rpath)
        except (ValueError, OSError):
            continue
        if r.baselines:
            return {"ran": [b.name for b in r.baselines if b.state == "ran"],
                    "could_not_run": {b.name: b.reason for b in r.baselines if b.state != "ran"}}
    return {"ran": [], "could_not_run": {}}

