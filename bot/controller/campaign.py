"""A campaign: the search loop over one definition, used by both the bot and ``kbot optimize``.

    campaign = Campaign.start(definition, seeds, agent, evaluator, config, store_dir, workloads=...)
    while not (r := campaign.step()).stopped:
        ...
    campaign.report()

One step = select a node -> the agent proposes candidates -> each is evaluated -> tree and memory are
updated. Every node is written to ``store_dir/nodes/<id>.json`` when proposed (status ``pending``) and
rewritten when evaluated, before the next evaluation starts, so ``Campaign.resume`` after a crash
rebuilds the tree from those records, never re-evaluates a finished node, and evaluates the pending
ones first.

Node records are the one way back to a campaign: ``resume`` reads them from the store,
``from_records`` takes them from elsewhere (the GitHub campaign reads them from the PRs), and both go
through ``_rebuilt``. Without a store a campaign lives in memory and writes nothing (on GitHub the
repository is the database); without an evaluator it only proposes (``propose_next``), and its
candidates are evaluated elsewhere.

Store layout::

    campaign.json     definition name, config, agent description, baseline node
    definition.json   the definition (so a resume needs nothing else)
    workloads.jsonl   the workloads the evaluator runs (prompts show their regimes)
    nodes/<id>.json   one record per node (Tree.from_records input)
    reports/<id>.json full evaluation reports
    calls.jsonl       every model call (bot.agents.calllog)
    memory.json       the search memory
    state.json        usage counters, exhausted nodes
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Protocol

from harness.report import Report
from harness.schema import Definition, Solution, Workload, parse_definition

from ..agents.base import Agent, AgentContext, Mode, Proposal, StructuredError
from ..agents.calllog import CallLog
from ..agents.tunables import config_key_or_none
from .budget import Budget, Usage, converged, exceeded
from .memory import SearchMemory
from .summary import feedback_items, summarize
from .tree import EVALUATED, FAILED, PENDING, ROOT, Node, SearchConfig, Tree, failed_node_id, solution_node_id


class Evaluator(Protocol):
    """Measures a candidate, paired with ``baseline`` when one is given."""

    def evaluate(self, solution: Solution, baseline: Solution | None) -> Report: ...

    # Optional: ``inputs_fingerprint() -> str``, what its measurements depend on besides the solutions
    # (see inputs_fingerprint below); without it the definition's and the workloads' content stand in.


def definition_inputs_fingerprint(definition: Definition, workloads: list[Workload], config: Any = None) -> str:
    """The definition's content and the workloads' full content (and, given, a sidecar fingerprint)."""
    h = hashlib.sha256(json.dumps({
        "definition": definition.content_hash(),
        **({"config": config} if config is not None else {}),
        "workloads": [w.model_dump(mode="json") for w in workloads],
    }, sort_keys=True).encode())
    return h.hexdigest()[:16]


def own_fingerprint(evaluator: Any) -> str | None:
    """``evaluator.inputs_fingerprint()`` where it has one (and it gives one), else None."""
    fp = getattr(evaluator, "inputs_fingerprint", None)
    return fp() if callable(fp) else None


def inputs_fingerprint(definition: Definition, workloads: list[Workload], evaluator: Any) -> str:
    """What this campaign's measurements depend on besides the kernel: the evaluator's own fingerprint
    when it has one (the harness evaluator adds the definition's sidecar and reference code), else the
    definition's content and the workloads' content."""
    own = own_fingerprint(evaluator)
    return str(own) if own is not None else definition_inputs_fingerprint(definition, workloads)


def _memory_path(cfg: "CampaignConfig", store: Path | None) -> Path | None:
    """Where the campaign's search memory lives: ``memory_path`` (relative to the store when relative),
    else ``<store>/memory.json``; None for a campaign without a store."""
    if cfg.memory_path:
        p = Path(cfg.memory_path)
        return p if p.is_absolute() or store is None else store / p
    return store / "memory.json" if store else None

class CampaignError(RuntimeError):
    pass


@dataclass
class CampaignConfig:
    search: SearchConfig = field(default_factory=SearchConfig)
    budget: Budget = field(default_factory=Budget)
    proposals_per_step: int = 1  # candidates asked of the agent per step (one PR each in the bot)
    seed: int = 0
    memory_path: str | None = None  # default: <store_dir>/memory.json; point several campaigns at one file to share
    # (a relative path is relative to the store, so a store moved with its workspace still finds it)
    # fsync every record: survives power loss, not only a crash of the process (atomic renames cover
    # that). Off in tests, where it is most of the run time.
    fsync: bool = True

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "CampaignConfig":
        d = dict(d or {})
        known = {"search", "budget", "proposals_per_step", "seed", "memory_path", "fsync"}
        unknown = set(d) - known - {"agent"}  # an agent section may share the file
        if unknown:
            raise ValueError(f"unknown campaign settings {sorted(unknown)}; known: {sorted(known)}")
        cfg = cls(
            search=SearchConfig.from_dict(d.get("search")),
            budget=Budget.from_dict(d.get("budget")),
            proposals_per_step=int(d.get("proposals_per_step", 1)),
            seed=int(d.get("seed", 0)),
            memory_path=d.get("memory_path"),
            fsync=bool(d.get("fsync", True)),
        )
        if cfg.proposals_per_step < 1:
            raise ValueError("proposals_per_step must be >= 1")
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return {
            "search": asdict(self.search),
            "budget": asdict(self.budget),
            "proposals_per_step": self.proposals_per_step,
            "seed": self.seed,
            "memory_path": self.memory_path,
            "fsync": self.fsync,
        }


@dataclass
class StepResult:
    step: int
    kind: str  # "expand" | "pending" (finished nodes left by a crash or the seeds) | "stop"
    selected: str | None = None
    mode: str | None = None
    new_nodes: list[str] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)
    duplicates: int = 0
    best: str | None = None
    best_speedup: float | None = None
    stopped: bool = False
    reason: str | None = None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write_json(path: Path, data: Any, fsync: bool = True) -> None:
    """Atomic write: a crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, allow_nan=True)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)


class Campaign:
    def __init__(
        self,
        definition: Definition,
        agent: Agent,
        evaluator: Evaluator | None,
        config: CampaignConfig,
        store_dir: Path | None,
        workloads: list[Workload],
        tree: Tree,
        memory: SearchMemory,
        usage: Usage,
    ) -> None:
        self.definition = definition
        self.agent = agent
        self.evaluator = evaluator
        self.config = config
        self.store = Path(store_dir) if store_dir is not None else None
        self.workloads = workloads
        self.tree = tree
        self.memory = memory
        if self.memory.session is None and self.store is not None:
            self.memory.session = self.store.name  # this campaign's attempts, apart from earlier ones'
        if self.memory.inputs is None:  # what "tried" means: on these inputs (bot.controller.memory)
            self.memory.inputs = inputs_fingerprint(definition, workloads, evaluator)
        self.usage = usage
        self.calls = CallLog(self.store / "calls.jsonl" if self.store else None, fsync=config.fsync)
        self.memory.fsync = config.fsync
        self.rng = random.Random(config.seed * 1_000_003 + usage.steps)
        self.stopped_reason: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        definition: Definition,
        seeds: list[Solution],
        agent: Agent,
        evaluator: Evaluator,
        config: CampaignConfig | dict[str, Any] | None,
        store_dir: str | Path,
        workloads: list[Workload] | None = None,
        lineage: Mapping[str, float] | None = None,
    ) -> "Campaign":
        """A new campaign in an empty (or absent) ``store_dir``; the seeds become the first nodes
        (the first seed is the start every speedup is chained from) and are evaluated by the first
        ``step()``. ``lineage``: champions' chained factors (``Tree.lineage``), for an evaluator that
        pairs against champions promoted outside this campaign."""
        cfg = config if isinstance(config, CampaignConfig) else CampaignConfig.from_dict(config)
        store = Path(store_dir)
        if (store / "campaign.json").exists():
            raise CampaignError(f"{store} already holds a campaign; use Campaign.resume")
        for s in seeds:
            if s.definition != definition.name:
                raise CampaignError(f"seed {s.name} is for '{s.definition}', not '{definition.name}'")
        store.mkdir(parents=True, exist_ok=True)
        _write_json(store / "definition.json", definition.to_dict())
        (store / "workloads.jsonl").write_text("".join(w.to_json() + "\n" for w in workloads or []))
        memory = SearchMemory.load(definition.name, _memory_path(cfg, store))
        tree = Tree(cfg.search)
        tree.lineage = dict(lineage or {})
        camp = cls(definition, agent, evaluator, cfg, store, list(workloads or []), tree, memory, Usage())
        for i, s in enumerate(seeds):
            nid = solution_node_id(s)
            if nid in camp.tree:
                continue  # the same seed twice
            node = Node(id=nid, parent=ROOT, solution=s, agent="seed", rationale=s.description or "seed",
                        mode="seed", is_baseline=(i == 0))
            camp._add_node(node, config_key=config_key_or_none(s))
        _write_json(store / "campaign.json", {
            "definition": definition.name,
            "config": cfg.to_dict(),
            "agent": agent.describe(),
            "created": _now(),
            "baseline": camp.tree.baseline.id if camp.tree.baseline else None,
        })
        camp._save_state()
        return camp

    @classmethod
    def resume(cls, store_dir: str | Path, agent: Agent, evaluator: Evaluator | None, evaluate_pending: bool = True,
               lineage: Mapping[str, float] | None = None) -> "Campaign":
        """Reopen a campaign from its store: the tree comes from the node records; nodes that were
        proposed but not evaluated are evaluated now (finished ones never again). ``lineage``: as in
        ``start`` (read again now: a champion may have been promoted while the campaign was stopped)."""
        store = Path(store_dir)
        meta_path = store / "campaign.json"
        if not meta_path.exists():
            raise CampaignError(f"{store}: no campaign.json, nothing to resume")
        meta = json.loads(meta_path.read_text())
        cfg = CampaignConfig.from_dict(meta["config"])
        definition = parse_definition(json.loads((store / "definition.json").read_text()), str(store / "definition.json"))
        wl_path = store / "workloads.jsonl"
        workloads = [Workload.model_validate_json(line) for line in wl_path.read_text().splitlines() if line.strip()] if wl_path.exists() else []
        records = [json.loads(p.read_text()) for p in sorted((store / "nodes").glob("*.json"))]
        tree = Tree.from_records(records, cfg.search, lineage)
        state = json.loads((store / "state.json").read_text()) if (store / "state.json").exists() else {}
        for nid in state.get("exhausted", []):
            if nid in tree:
                tree.nodes[nid].exhausted = True
        camp = cls._rebuilt(definition, agent, evaluator, cfg, store, workloads, tree, Usage.from_dict(state.get("usage", {})))
        if evaluate_pending and camp._evaluate_pending():
            # the interrupted step ends now, as ``step`` ends one it finds pending: the step count (and the
            # agent's seed derived from it) is what an uninterrupted campaign would have
            camp._end_step()
        return camp

    @classmethod
    def from_records(
        cls,
        records: list[dict[str, Any]],
        definition: Definition,
        agent: Agent,
        evaluator: Evaluator | None,
        config: CampaignConfig | dict[str, Any] | None,
        store_dir: str | Path | None = None,
        workloads: list[Workload] | None = None,
        lineage: Mapping[str, float] | None = None,
        calls_path: str | Path | None = None,
    ) -> "Campaign":
        """A campaign continued from node records kept elsewhere (the bot: its PRs).

        The records are checked by ``Tree.from_records`` first. Nodes whose record carries no solution
        (compact records) keep their place and their results but cannot be expanded: fill
        ``record["solution"]`` from the PR's files to let the search continue below them. Pending nodes
        stay pending (their PRs may still be benchmarked; feed the reports with ``record_report``).
        With ``store_dir`` (which must not hold a campaign yet) the campaign is written there and
        resumes like any other; without one it lives in memory and writes nothing, except its model
        calls when ``calls_path`` names a file for them (appended; the bot on GitHub keeps them so).
        """
        cfg = config if isinstance(config, CampaignConfig) else CampaignConfig.from_dict(config)
        tree = Tree.from_records(records, cfg.search, lineage)  # validates before anything is written
        for n in tree.nodes.values():
            if n.id != ROOT and n.solution is None:
                n.exhausted = True
        store = Path(store_dir) if store_dir is not None else None
        if store is not None:
            if (store / "campaign.json").exists():
                raise CampaignError(f"{store} already holds a campaign; use Campaign.resume")
            store.mkdir(parents=True, exist_ok=True)
            _write_json(store / "definition.json", definition.to_dict())
            (store / "workloads.jsonl").write_text("".join(w.to_json() + "\n" for w in workloads or []))
        camp = cls._rebuilt(definition, agent, evaluator, cfg, store, list(workloads or []), tree, Usage())
        if calls_path is not None:
            camp.calls = CallLog(calls_path, fsync=cfg.fsync)
        if store is not None:
            for n in tree.nodes.values():
                if n.id != ROOT:
                    camp._write_node(n)
            _write_json(store / "campaign.json", {
                "definition": definition.name,
                "config": cfg.to_dict(),
                "agent": agent.describe(),
                "created": _now(),
                "baseline": tree.baseline.id if tree.baseline else None,
                "restored_from_records": len(tree),
            })
            camp._save_state()
        return camp

    @classmethod
    def _rebuilt(cls, definition: Definition, agent: Agent, evaluator: Evaluator | None, cfg: CampaignConfig,
                 store: Path | None, workloads: list[Workload], tree: Tree, usage: Usage) -> "Campaign":
        """A campaign around a tree rebuilt from node records. The records are the truth: counters and
        memory are brought in line with them (a crash may have fallen between writing a node and
        writing the state; records from PRs come with no state at all)."""
        mem_path = _memory_path(cfg, store)
        memory = SearchMemory.load(definition.name, mem_path) if mem_path else SearchMemory(definition.name)
        camp = cls(definition, agent, evaluator, cfg, store, workloads, tree, memory, usage)
        camp.usage.candidates = len(tree)
        camp.usage.eval_seconds = sum((n.summary or {}).get("eval_seconds", 0.0) for n in tree.nodes.values())
        totals = camp.calls.totals()
        camp.usage.tokens_in, camp.usage.tokens_out = int(totals["tokens_in"]), int(totals["tokens_out"])
        camp.usage.cost_usd, camp.usage.model_calls = float(totals["cost_usd"]), int(totals["calls"])
        for n in tree.nodes.values():
            if n.id == ROOT:
                continue
            camp.memory.note_proposed(n.config_key, n.id)
            # A node evaluated on other inputs was just noted as proposed on these: its result (on the
            # record) is noted again, so the entry does not stay pending.
            restamped = n.config_key is not None and (camp.memory.tried.get(n.config_key) or {}).get("status") == "pending"
            if n.status == EVALUATED and (restamped or not any(a["node"] == n.id for a in camp.memory.attempts)):
                camp._note_result(n)
        camp.memory.save()
        return camp

    # -- the loop ----------------------------------------------------------------------------------
    def step(self) -> StepResult:
        """One synchronous step: propose, then evaluate with the injected evaluator."""
        reason = self.stop_reason()
        if reason:
            return self._result(kind="stop", stopped=True, reason=reason)
        pending = self.tree.pending()
        if pending:
            done = self._evaluate_pending()
            self._end_step()
            return self._result(kind="pending", evaluated=done, stopped=False)
        r = self.propose_next()
        if r.stopped:
            return r
        r.evaluated = self._evaluate_pending()
        self._end_step()
        r.step = self.usage.steps
        return r

    def propose_next(self, at: Node | None = None) -> StepResult:
        """Select a node and ask the agent, writing the new nodes as ``pending`` without evaluating them.

        For callers that evaluate elsewhere (the bot: one PR per pending node, benchmarked by a GPU
        runner); feed each report back with ``record_report``. Failed proposals are recorded at once.
        ``at``: expand this node instead of the one selection would pick (``/optimize`` on a
        candidate PR), or stop when it cannot be expanded.
        """
        reason = self.stop_reason()
        if reason:
            return self._result(kind="stop", stopped=True, reason=reason)
        if at is not None:
            node = at if self.tree.expandable(at) else None
        else:
            node = self.tree.select(self.rng)
        if node is None:
            self.stopped_reason = "nothing left to expand (every node is closed or exhausted)"
            return self._result(kind="stop", stopped=True, reason=self.stopped_reason)
        mode = self._mode(node)
        n = self._batch(node)
        ctx = self._context(node, mode)
        proposals = self.agent.propose(ctx, n)
        new: list[str] = []
        dups = 0
        for p in proposals:
            self._account(p)
            nid = self._add_proposal(node, p, mode)
            if nid is None:
                dups += 1
            else:
                new.append(nid)
        if not new:
            node.exhausted = True  # nothing new from here: selection moves on
        self._save_state()
        return self._result(kind="expand", selected=node.id, mode=mode.value, new_nodes=new, duplicates=dups)

    def record_report(self, node_id: str, report: Report) -> Node:
        """Attach an evaluation report, measured elsewhere, to a pending node (the bot's path)."""
        node = self.tree.nodes.get(node_id)
        if node is None:
            raise CampaignError(f"no node {node_id} in this campaign")
        if node.status != PENDING:
            raise CampaignError(f"node {node_id} is {node.status}; a finished node is never re-evaluated")
        if node.solution is not None and report.solution_hash != node.solution.content_hash():
            raise CampaignError(f"report is for solution {report.solution_hash[:12]}, not node {node_id}")
        self._store_report(node, report)
        if not self.tree.pending():
            self._end_step()
        return node

    def pending(self) -> list[Node]:
        return self.tree.pending()

    def run(self, max_steps: int | None = None) -> list[StepResult]:
        out = []
        while max_steps is None or len(out) < max_steps:
            r = self.step()
            out.append(r)
            if r.stopped:
                break
        return out

    def stop_reason(self) -> str | None:
        if self.stopped_reason:
            return self.stopped_reason
        best = self.tree.best()
        frac = (best.summary or {}).get("roofline_fraction_min") if best else None
        finished = sorted((n for n in self.tree.nodes.values() if n.id != ROOT and n.status != PENDING), key=lambda n: n.seq)
        return exceeded(self.config.budget, self.usage) or converged(self.config.budget, [self.tree.reward(n) for n in finished], frac)

    # -- pieces ------------------------------------------------------------------------------------
    def _mode(self, node: Node) -> Mode:
        if node.id == ROOT or node.solution is None:
            return Mode.INITIAL
        return Mode.OPTIMIZE if node.passed else Mode.DEBUG

    def _batch(self, node: Node) -> int:
        n = self.config.proposals_per_step
        if self.config.search.policy == "uct":  # the widening bound caps a UCT expansion, not the baselines
            n = max(1, min(n, self.tree.max_children(node) - len(node.children)))
        if self.config.budget.max_candidates is not None:
            n = max(1, min(n, self.config.budget.max_candidates - self.usage.candidates))
        return n

    def _context(self, node: Node, mode: Mode) -> AgentContext:
        err = (node.summary or {}).get("error") if node.failed else None
        return AgentContext(
            definition=self.definition,
            mode=mode,
            parent=node.solution,
            parent_node=None if node.id == ROOT else node.id,
            parent_summary=node.summary,
            feedback=feedback_items(node.summary),
            error=StructuredError(message=err["message"], file=err.get("file"), line=err.get("line"), status=err.get("status")) if err else None,
            workloads=self.workloads,
            memory=self.memory,
            call_log=self.calls,
            seed=self.config.seed * 1_000_003 + self.usage.steps,
        )

    def _account(self, p: Proposal) -> None:
        t_in, t_out = p.tokens
        self.usage.tokens_in += t_in
        self.usage.tokens_out += t_out
        self.usage.cost_usd += p.cost_usd
        self.usage.model_calls += len(p.calls)

    def _add_proposal(self, parent: Node, p: Proposal, mode: Mode) -> str | None:
        common = dict(agent=p.agent or self.agent.name, model=p.model, prompt_hash=p.prompt_hash,
                      rationale=p.rationale, mode=mode.value)
        if p.solution is None:
            salt = 0
            while (nid := failed_node_id(parent.id, p.prompt_hash, p.failure or "", salt)) in self.tree:
                salt += 1
            node = Node(id=nid, parent=parent.id, status=FAILED, failure=p.failure, **common)
            self._add_node(node, config_key=None)
            self._note_result(node)
            self.memory.save()
            return nid
        if p.solution.definition != self.definition.name:
            p = Proposal(solution=None, failure=f"solution is for '{p.solution.definition}', not '{self.definition.name}'",
                         rationale=p.rationale, calls=p.calls, agent=p.agent, model=p.model)
            return self._add_proposal(parent, p, mode)
        nid = solution_node_id(p.solution)
        key = p.config_key or config_key_or_none(p.solution)
        if nid in self.tree or (key and self.memory.has_tried(key) and self.memory.tried[key].get("node") in self.tree):
            return None  # the same kernel again: never evaluated twice
        node = Node(id=nid, parent=parent.id, solution=p.solution, config_key=key, **common)
        self._add_node(node, config_key=key)
        return nid

    def _add_node(self, node: Node, config_key: str | None) -> None:
        node.config_key = node.config_key or config_key
        self.tree.add(node)
        self.usage.candidates += 1
        self._write_node(node)
        # Saved with the next evaluation; a resume re-derives it from the node records anyway.
        self.memory.note_proposed(node.config_key, node.id)

    def _write_node(self, node: Node) -> None:
        if self.store is not None:
            _write_json(self.store / "nodes" / f"{node.id}.json", node.to_record(), self.config.fsync)

    def _evaluate_pending(self) -> list[str]:
        done = []
        for node in self.tree.pending():
            self._evaluate(node)
            done.append(node.id)
        return done

    def _evaluate(self, node: Node) -> None:
        assert node.status == PENDING and node.solution is not None
        if self.evaluator is None:
            raise CampaignError("this campaign only proposes: its candidates are evaluated elsewhere (record_report)")
        base = self.tree.baseline
        baseline = None if base is None or base.id == node.id or not base.solution else base.solution
        report = self.evaluator.evaluate(node.solution, baseline)
        if not isinstance(report, Report):
            raise CampaignError(f"evaluator returned {type(report).__name__}, not a harness.report.Report")
        self._store_report(node, report)

    def _store_report(self, node: Node, report: Report) -> None:
        if self.store is not None:
            (self.store / "reports").mkdir(parents=True, exist_ok=True)
            report.dump(self.store / "reports" / f"{node.id}.json")
        summary = summarize(report)
        self.tree.record(node.id, summary)
        self.usage.eval_seconds += summary["eval_seconds"]
        self._write_node(node)  # on disk before the next evaluation starts
        self._note_result(node)
        self.memory.save()  # counters (state.json) are re-derived from the records on resume

    def _note_result(self, node: Node) -> None:
        parent = self.tree.nodes.get(node.parent or ROOT)
        parent_err = (parent.summary or {}).get("error") if parent is not None and parent.failed else None
        if node.status == FAILED:
            status, err = "AGENT_FAILED", {"message": node.failure or ""}
        else:
            status, err = (node.summary or {}).get("status", "UNKNOWN"), (node.summary or {}).get("error")
        self.memory.note_result(
            node=node.id,
            parent=None if node.parent == ROOT else node.parent,
            key=node.config_key,
            rationale=node.rationale,
            status=status,
            speedup=self.tree.speedup(node),
            parent_error=parent_err,
            error=err,
        )

    def _end_step(self) -> None:
        self.usage.steps += 1
        best = self.tree.best()
        self.usage.best_history.append(self.tree.reward(best) if best else float("-inf"))
        self._save_state()

    def _save_state(self) -> None:
        if self.store is None:
            return
        _write_json(self.store / "state.json", {
            "usage": self.usage.to_dict(),
            "exhausted": sorted(n.id for n in self.tree.nodes.values() if n.exhausted),
            "updated": _now(),
        }, self.config.fsync)

    def _result(self, **kw: Any) -> StepResult:
        best = self.tree.best()
        return StepResult(step=self.usage.steps, best=best.id if best else None,
                          best_speedup=self.tree.speedup(best) if best else None, **kw)

    # -- reporting ---------------------------------------------------------------------------------
    def records(self, include_solution: bool = True) -> list[dict[str, Any]]:
        """Node records in creation order (what the bot stores in PR bodies; compact without solutions)."""
        return self.tree.to_records(include_solution)

    def report(self) -> dict[str, Any]:
        best = self.tree.best()
        history = []
        for n in sorted(self.tree.nodes.values(), key=lambda n: n.seq):
            if n.id == ROOT:
                continue
            history.append({
                "seq": n.seq,
                "node": n.id,
                "parent": None if n.parent == ROOT else n.parent,
                "mode": n.mode,
                "agent": n.agent,
                "model": n.model,
                "status": n.status if n.status != EVALUATED else (n.summary or {}).get("status"),
                # Over the start, chained through paired ratios (Tree.speedup); the paired ratio itself
                # and the champion it was measured against beside it.
                "speedup": self.tree.speedup(n),
                "speedup_vs_champion": (n.summary or {}).get("speedup_vs_baseline") if n.passed else None,
                "measured_against": (n.summary or {}).get("baseline_hash"),
                "chain_problem": self.tree.chain_problem(n),
                "reward": self.tree.reward(n) if n.status != PENDING else None,
                "config_key": n.config_key,
                "rationale": n.rationale[:200],
                "failure": n.failure,
            })
        return {
            "definition": self.definition.name,
            "store": str(self.store) if self.store is not None else None,
            "agent": self.agent.describe(),
            "best": None if best is None else {
                "node": best.id,
                "solution": best.solution.name if best.solution else None,
                "speedup_vs_baseline": self.tree.speedup(best),
                "speedup_vs_reference": (best.summary or {}).get("speedup_vs_reference"),
                "roofline_fraction_min": (best.summary or {}).get("roofline_fraction_min"),
                "roofline_fraction_largest": (best.summary or {}).get("roofline_fraction_largest"),
                "roofline_bound_largest": (best.summary or {}).get("roofline_bound_largest"),
                "roofline_fraction_geomean": (best.summary or {}).get("roofline_fraction_geomean"),
                "energy_j_per_call": (best.summary or {}).get("energy_j_per_call"),
                "path": [p.id for p in self.tree.path(best.id)],
            },
            "baseline": self.tree.baseline.id if self.tree.baseline else None,
            "history": history,
            "tree": self.tree.stats(),
            "budget": {"limits": asdict(self.config.budget), "used": self.usage.to_dict()},
            "stop_reason": self.stop_reason(),
        }



def load_campaign_config(source: str | Path | dict[str, Any]) -> tuple[CampaignConfig, dict[str, Any] | None]:
    """(campaign settings, the ``agent:`` section or None) from a YAML/TOML/JSON file or a dict.

    Build the agent with ``bot.agents.build_agent(whole_config)`` or ``create_agent(name, section)``.
    """
    from ..agents.config import load_config_file

    data = load_config_file(source) if not isinstance(source, dict) else dict(source)
    agent = data.get("agent")
    return CampaignConfig.from_dict({k: v for k, v in data.items() if k != "agent"}), agent
