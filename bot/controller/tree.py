"""The search tree over kernel candidates, and the policies that pick the next node to expand.

Node = solution + compact report summary (+ feedback inside it). A virtual root (id ``root``, no
solution) has the seeds as children; expanding it means "write a kernel from scratch" (initial mode).

Rewards are ``log(speedup over the campaign's start)`` for nodes that passed every workload, and a
fixed penalty otherwise. The start is the baseline seed (the champion the campaign began from), and the
speedup is a chain of paired ratios: a node was measured paired against some champion (its summary's
``baseline_hash`` and ``speedup_vs_baseline``); that champion's own speedup over the start is found the
same way, back to the start (factor 1). So after three promotions of 1.10x, 1.20x and 1.05x a node
measured 1.03x over the last champion has 1.10 * 1.20 * 1.05 * 1.03 = 1.43x. A champion that is not a
node of this tree (promoted elsewhere while the campaign was interrupted) is looked up in ``lineage``
(``bot.promotion.champion.chain_factors``: the champion lineage's chained factors, divided by the
start's). A node paired against a champion
found in neither has no speedup (``chain_problem`` says why) and the neutral reward 0: its paired
ratio is in another frame, and an unpaired vs-reference ratio is never substituted for it. Only a
node that was never paired at all is placed by the ratio of its vs-reference speedup to the start's.

A node's visits N count the evaluated nodes in its subtree (itself included) and its
value Q is the best reward among them (``backup="max"``, default) or their mean (``backup="mean"``).

UCT policy (the default), per step: while the best reward keeps improving, expand the best node that
may still widen (exploitation); once it stops improving for ``stagnation`` evaluations, alternate such
steps with UCT steps (exploration). A UCT step:
- walk down from the root; at each node, adding a child is one more arm of the bandit, allowed only
  while the node is open (evaluated, not closed by pruning, not exhausted by the agent, not too deep
  in a chain of repairs) and has fewer children than its widening bound ``ceil(k * N**alpha)``; its
  score is the node's own reward plus an exploration bonus; k is larger for improving nodes
  (``k_improving``: passed, faster than the parent beyond noise, not yet beaten by a descendant) than
  for merely passing ones (``k_passed``) or failing ones (``k_repair``);
- expand the node when that arm scores at least as high as every child, else descend to the child with
  the best ``Q + c * sqrt(ln N_parent / N_child)`` among children whose subtree is still open (scores
  within noise are ordered by energy per call when measured);
- a node whose subtree is closed but which may still take children beyond its bound is expanded anyway
  (widening defers children, it never forbids the last open place).
Dead-end pruning: a node whose last ``prune_after`` children all failed is closed.

Greedy policy (baseline for comparisons): expand the open node with the best reward. Random policy:
expand a uniformly random open node.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from harness.schema import Solution

ROOT = "root"
PENDING, EVALUATED, FAILED = "pending", "evaluated", "failed"


@dataclass
class SearchConfig:
    policy: str = "uct"  # uct | greedy | random
    c_uct: float = 1.0  # exploration constant of the UCT steps, in units of log-speedup
    # Exploitation schedule: while the best reward keeps improving (a gain beyond noise within the last
    # `stagnation` evaluations) every step expands the best node that may still widen; once stuck,
    # steps alternate between that and a UCT step. A fixed UCT constant has to choose between wasting
    # evaluations on siblings in a smooth space and never leaving a local optimum; this schedule
    # matched greedy on a smooth tunable space and found the hidden optimum of the deceptive test
    # landscape in 8/8 seeds (docs/controller.md). exploit=False gives plain UCT.
    exploit: bool = True
    stagnation: int = 6
    alpha: float = 0.5  # progressive widening exponent
    k_improving: float = 4.0  # frontier nodes may take a whole tunable neighbourhood
    k_passed: float = 1.0
    k_repair: float = 0.5
    k_root: float = 1.0
    prune_after: int = 3  # close a node whose last m children all failed
    max_repair_depth: int = 2  # consecutive failed ancestors allowed below a node we expand
    failure_penalty: float = -1.0  # reward of a failed node (log-speedup units: -1 ~ 0.37x)
    noise: float = 0.02  # relative differences below this are noise (energy decides ties)
    # How a subtree's value is aggregated. "max" (the best reward below a node) suits a search that
    # keeps the best candidate found; "mean" is classic UCT, which on the deceptive test landscape
    # stayed on the local optimum where max found the global one.
    backup: str = "max"  # mean | max

    def __post_init__(self) -> None:
        if self.policy not in ("uct", "greedy", "random"):
            raise ValueError(f"search.policy must be uct, greedy or random, not '{self.policy}'")
        if self.backup not in ("mean", "max"):
            raise ValueError(f"search.backup must be mean or max, not '{self.backup}'")
        if not 0 < self.alpha <= 1:
            raise ValueError("search.alpha must be in (0, 1]")
        for k in ("k_improving", "k_passed", "k_repair", "k_root"):
            if getattr(self, k) <= 0:
                raise ValueError(f"search.{k} must be > 0")
        if self.prune_after < 1:
            raise ValueError("search.prune_after must be >= 1")
        if self.c_uct < 0:
            raise ValueError("search.c_uct must be >= 0")
        if self.stagnation < 1:
            raise ValueError("search.stagnation must be >= 1")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "SearchConfig":
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown search settings {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}")
        return cls(**d)


@dataclass
class Node:
    id: str
    parent: str | None  # None only for the virtual root
    solution: Solution | None = None
    status: str = PENDING  # pending | evaluated | failed (the agent produced no solution)
    summary: dict[str, Any] | None = None
    agent: str = ""
    model: str | None = None
    prompt_hash: str | None = None
    rationale: str = ""
    config_key: str | None = None
    mode: str | None = None
    failure: str | None = None
    seq: int = 0
    is_baseline: bool = False
    children: list[str] = field(default_factory=list)
    visits: int = 0
    value_sum: float = 0.0
    value_max: float = -math.inf
    exhausted: bool = False  # the agent had nothing new to propose from here

    @property
    def passed(self) -> bool:
        return self.status == EVALUATED and bool(self.summary and self.summary.get("passed"))

    @property
    def failed(self) -> bool:
        return self.status == FAILED or (self.status == EVALUATED and not self.passed)

    def to_record(self, include_solution: bool = True) -> dict[str, Any]:
        """The node as stored. ``include_solution=False`` gives the compact form for places where the
        code lives elsewhere (a PR body next to the PR's files); the tree rebuilds from either."""
        return {
            "node_id": self.id,
            "parent_id": None if self.parent == ROOT else self.parent,
            "solution": self.solution.model_dump(mode="json", exclude_unset=True) if self.solution and include_solution else None,
            "status": self.status,
            "summary": self.summary,
            "agent": self.agent,
            "model": self.model,
            "prompt_hash": self.prompt_hash,
            "rationale": self.rationale,
            "config_key": self.config_key,
            "mode": self.mode,
            "failure": self.failure,
            "seq": self.seq,
            "is_baseline": self.is_baseline,
        }


def solution_node_id(solution: Solution) -> str:
    return solution.content_hash()[:12]


def failed_node_id(parent: str, prompt_hash: str | None, failure: str, salt: int = 0) -> str:
    h = hashlib.sha256(json.dumps([parent, prompt_hash, failure, salt]).encode()).hexdigest()
    return "x" + h[:11]


class Tree:
    def __init__(self, config: SearchConfig | None = None) -> None:
        self.config = config or SearchConfig()
        self.nodes: dict[str, Node] = {ROOT: Node(id=ROOT, parent=None, status=EVALUATED)}
        self._seq = 0
        self._hashes: dict[str, str] = {}
        self.best_reward = -math.inf
        self.since_gain = 0  # evaluations since the best reward last improved beyond noise
        self._by_hash: dict[str, str] = {}  # solution content hash -> node id (the chain's lookups)
        # Champions that may not be nodes here: content hash -> speedup over a common origin (the oldest
        # champion on record); divided by the start's own factor, it is a speedup over this tree's start.
        self.lineage: dict[str, float] = {}

    # -- building ----------------------------------------------------------------------------------
    @property
    def root(self) -> Node:
        return self.nodes[ROOT]

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    def __len__(self) -> int:
        return len(self.nodes) - 1

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def add(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise ValueError(f"node {node.id} is already in the tree")
        parent = node.parent or ROOT
        if parent not in self.nodes:
            raise ValueError(f"node {node.id}: parent {parent} is not in the tree")
        node.parent = parent
        self._index(node)
        if not node.seq:
            node.seq = self.next_seq()
        self._seq = max(self._seq, node.seq)
        self.nodes[node.id] = node
        self.nodes[parent].children.append(node.id)
        if node.status != PENDING:
            self._backup(node)
        return node

    def record(self, node_id: str, summary: dict[str, Any]) -> Node:
        """Attach an evaluation summary to a pending node and back its reward up to the root."""
        node = self.nodes[node_id]
        if node.status != PENDING:
            raise ValueError(f"node {node_id} is already {node.status}; a finished node is never re-evaluated")
        node.summary = summary
        node.status = EVALUATED
        self._index(node)
        self._backup(node)
        return node

    def _index(self, node: Node) -> None:
        h = self._hash(node) or (node.summary or {}).get("solution_hash")
        if isinstance(h, str):
            self._by_hash.setdefault(h, node.id)

    def _backup(self, node: Node) -> None:
        r = self.reward(node)
        if node.passed and r > self.best_reward + math.log1p(self.config.noise):
            self.since_gain = 0
        else:
            self.since_gain += 1
        if node.passed:
            self.best_reward = max(self.best_reward, r)
        cur: Node | None = node
        while cur is not None:
            cur.visits += 1
            cur.value_sum += r
            cur.value_max = max(cur.value_max, r)
            cur = self.nodes.get(cur.parent) if cur.parent else None

    def pending(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.status == PENDING), key=lambda n: n.seq)

    # -- records -----------------------------------------------------------------------------------
    def to_records(self, include_solution: bool = True) -> list[dict[str, Any]]:
        return [n.to_record(include_solution) for n in sorted(self.nodes.values(), key=lambda n: n.seq) if n.id != ROOT]

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]], config: SearchConfig | None = None,
                     lineage: Mapping[str, float] | None = None) -> "Tree":
        """Rebuild a tree from node records (any order); a record whose parent never appears is an error.
        ``lineage``: champions outside the records, as ``Tree.lineage``."""
        recs = list(records)
        by_id: dict[str, dict[str, Any]] = {}
        for r in recs:
            nid = r.get("node_id")
            if not nid or nid == ROOT:
                raise ValueError(f"record without a valid node_id: {str(r)[:200]}")
            if nid in by_id:
                raise ValueError(f"two records for node {nid}")
            by_id[nid] = r
        tree = cls(config)
        tree.lineage = dict(lineage or {})
        # Parents before children; among siblings, creation order (seq) keeps "last m children" right.
        remaining = sorted(recs, key=lambda r: (r.get("seq") or 0, r["node_id"]))
        while remaining:
            progressed = []
            for r in remaining:
                parent = r.get("parent_id") or ROOT
                if parent in tree.nodes:
                    tree.add(_node_from_record(r))
                    progressed.append(r["node_id"])
            if not progressed:
                missing = sorted({r.get("parent_id") for r in remaining})
                raise ValueError(f"records name parents that are not in the records: {missing}")
            remaining = [r for r in remaining if r["node_id"] not in progressed]
        return tree

    # -- values ------------------------------------------------------------------------------------
    @property
    def baseline(self) -> Node | None:
        for n in sorted(self.nodes.values(), key=lambda n: n.seq):
            if n.is_baseline:
                return n
        return None

    def speedup(self, node: Node) -> float | None:
        """Speedup of a passed node over the campaign's start, through the chain of paired ratios (see
        the module docstring); None when it failed or its chain cannot be followed."""
        if not node.passed:
            return None
        return self._chained(node, frozenset())[0]

    def chain_problem(self, node: Node) -> str | None:
        """Why a passed node has no speedup over the start (None when it has one, or did not pass)."""
        return self._chained(node, frozenset())[1] if node.passed else None

    def _start_hash(self) -> str | None:
        base = self.baseline
        if base is None:
            return None
        return self._hash(base) or (base.summary or {}).get("solution_hash")

    def _chained(self, node: Node, seen: frozenset[str]) -> tuple[float | None, str | None]:
        s = node.summary or {}
        base = self.baseline
        if base is None:
            # No start to measure from (records without a champion): the reference is the only frame.
            return s.get("speedup_vs_reference"), None if s.get("speedup_vs_reference") else "no start and no vs-reference speedup"
        mine = self._hash(node) or s.get("solution_hash")
        if node.id == base.id or (mine is not None and mine == self._start_hash()):
            return 1.0, None
        paired, against = s.get("speedup_vs_baseline"), s.get("baseline_hash")
        if against:
            if not (isinstance(paired, (int, float)) and paired > 0):
                return None, f"paired against {str(against)[:12]} without a usable paired ratio"
            factor, why = self._factor_of(against, seen | {node.id})
            return (factor * paired, None) if factor is not None else (None, why)
        # Never paired: the ratio of two unpaired vs-reference speedups is all there is.
        ref, base_ref = s.get("speedup_vs_reference"), (base.summary or {}).get("speedup_vs_reference")
        if base.passed and ref and base_ref:
            return ref / base_ref, None
        return None, "measured alone, and the start has no vs-reference speedup to compare with"

    def _factor_of(self, solution_hash: str, seen: frozenset[str]) -> tuple[float | None, str | None]:
        """The speedup over the start of the champion a node was paired against."""
        if solution_hash == self._start_hash():
            return 1.0, None
        nid = self._by_hash.get(solution_hash)
        if nid is not None and nid not in seen and self.nodes[nid].passed:
            got = self._chained(self.nodes[nid], seen)
            if got[0] is not None:
                return got
        f0 = self.lineage.get(self._start_hash() or "")
        if solution_hash in self.lineage and f0:
            return self.lineage[solution_hash] / f0, None
        return None, f"paired against champion {solution_hash[:12]}, which is neither a passed node of this campaign nor in the champion lineage"

    def _hash(self, node: Node) -> str | None:
        if node.solution is None:
            return None
        if node.id not in self._hashes:
            self._hashes[node.id] = node.solution.content_hash()
        return self._hashes[node.id]

    def reward(self, node: Node) -> float:
        if node.id == ROOT:
            return 0.0
        if not node.passed:
            return self.config.failure_penalty
        sp = self.speedup(node)
        if sp is None or sp <= 0:
            return 0.0  # passed, in an unknown frame: neither credit nor penalty (chain_problem says why)
        return math.log(sp)

    def q(self, node: Node) -> float:
        if node.visits == 0:
            return 0.0
        return node.value_max if self.config.backup == "max" else node.value_sum / node.visits

    def energy(self, node: Node) -> float | None:
        return (node.summary or {}).get("energy_j_per_call") if node.passed else None

    def improving(self, node: Node) -> bool:
        if not node.passed:
            return False
        parent = self.nodes.get(node.parent or ROOT)
        if parent is None or parent.id == ROOT or not parent.passed:
            return True
        return self.reward(node) > self.reward(parent) + math.log1p(self.config.noise)

    def best(self) -> Node | None:
        """The fastest passed node; among those within noise of it, the one with the least energy."""
        passed = [n for n in self.nodes.values() if n.passed]
        if not passed:
            return None
        top = max(self.reward(n) for n in passed)
        near = [n for n in passed if self.reward(n) >= top - math.log1p(self.config.noise)]
        with_energy = [n for n in near if self.energy(n) is not None]
        if len(with_energy) == len(near) and len(near) > 1:
            return min(near, key=lambda n: (self.energy(n), -self.reward(n), n.seq))
        return max(passed, key=lambda n: (self.reward(n), -n.seq))

    # -- widening, pruning -------------------------------------------------------------------------
    def widening_k(self, node: Node) -> float:
        """k of the widening bound: improving frontier nodes get the most children, failing ones the
        fewest. A node whose own descendants beat it (beyond noise) is no longer the frontier: it
        drops to k_passed, so the search deepens below it instead of widening it further."""
        c = self.config
        if node.id == ROOT:
            return c.k_root
        if node.failed:
            return c.k_repair
        superseded = node.value_max > self.reward(node) + math.log1p(c.noise)
        return c.k_improving if self.improving(node) and not superseded else c.k_passed

    def max_children(self, node: Node) -> int:
        return max(1, math.ceil(self.widening_k(node) * max(node.visits, 1) ** self.config.alpha))

    def closed(self, node: Node) -> bool:
        """Dead end: the last ``prune_after`` children all failed."""
        m = self.config.prune_after
        kids = [self.nodes[c] for c in node.children if self.nodes[c].status != PENDING]
        return len(kids) >= m and all(k.failed for k in kids[-m:])

    def repair_depth(self, node: Node) -> int:
        d = 0
        cur: Node | None = node
        while cur is not None and cur.id != ROOT and cur.failed:
            d += 1
            cur = self.nodes.get(cur.parent or ROOT)
        return d

    def expandable(self, node: Node) -> bool:
        """May take another child, ignoring the widening bound."""
        if node.status == PENDING or node.exhausted or self.closed(node):
            return False
        if node.status == FAILED:
            return False  # nothing to repair: the agent produced no code
        if node.failed and self.repair_depth(node) > self.config.max_repair_depth:
            return False
        return True

    def can_widen(self, node: Node) -> bool:
        return self.expandable(node) and len(node.children) < self.max_children(node)

    def open_subtree(self, node: Node, _memo: dict[str, bool] | None = None) -> bool:
        memo = {} if _memo is None else _memo
        if node.id in memo:
            return memo[node.id]
        res = self.expandable(node) or any(self.open_subtree(self.nodes[c], memo) for c in node.children)
        memo[node.id] = res
        return res

    # -- selection ---------------------------------------------------------------------------------
    def select(self, rng: random.Random | None = None) -> Node | None:
        """The node to expand next, or None when nothing in the tree can take a child."""
        rng = rng or random.Random(0)
        if self.config.policy == "greedy":
            return self._select_greedy()
        if self.config.policy == "random":
            cands = [n for n in self.nodes.values() if self.expandable(n)]
            return rng.choice(sorted(cands, key=lambda n: n.seq)) if cands else None
        return self._select_uct(rng)

    def _select_greedy(self) -> Node | None:
        cands = [n for n in self.nodes.values() if n.id != ROOT and n.passed and self.expandable(n)]
        if cands:
            return max(cands, key=lambda n: (self.reward(n), -n.seq))
        # nothing passed (yet) that can grow: repair failures, then write from scratch
        cands = [n for n in self.nodes.values() if n.id != ROOT and self.expandable(n)]
        if cands:
            return min(cands, key=lambda n: n.seq)
        return self.root if self.expandable(self.root) else None

    def exploration(self) -> float:
        return self.config.c_uct

    def exploit_step(self) -> bool:
        """Whether the next UCT-policy step expands the best node (see SearchConfig.exploit)."""
        c = self.config
        return c.exploit and (self.since_gain < c.stagnation or self.since_gain % 2 == 0)

    def uct_score(self, parent: Node, child: Node) -> float:
        if child.visits == 0:
            return math.inf
        return self.q(child) + self.exploration() * math.sqrt(math.log(max(parent.visits, 1)) / child.visits)

    def _select_uct(self, rng: random.Random) -> Node | None:
        if self.exploit_step():
            frontier = [n for n in self.nodes.values() if n.id != ROOT and n.passed and self.can_widen(n)]
            if frontier:
                return max(frontier, key=lambda n: (self.reward(n), -n.seq))
        memo: dict[str, bool] = {}
        node = self.root
        while True:
            kids = [self.nodes[c] for c in node.children if self.open_subtree(self.nodes[c], memo)]
            if not kids:
                return node if self.expandable(node) else None
            # Widening is one more arm of the bandit: a new child is expected to be about as good as
            # its parent, with an exploration bonus that shrinks as the node gets children. Within the
            # widening bound, the node is expanded when that arm beats every existing child.
            if self.can_widen(node) and self.widen_score(node) >= max(self.uct_score(node, k) for k in kids):
                return node
            node = self._best_child(node, kids, rng)

    def widen_score(self, node: Node) -> float:
        own = 0.0 if node.id == ROOT else self.reward(node)
        return own + self.exploration() * math.sqrt(math.log(max(node.visits, 1) + 1) / (len(node.children) + 1))

    def _best_child(self, parent: Node, kids: list[Node], rng: random.Random) -> Node:
        scored = [(self.uct_score(parent, k), k) for k in kids]
        top = max(s for s, _ in scored)
        tol = math.log1p(self.config.noise)
        near = [k for s, k in scored if s >= top - tol] if math.isfinite(top) else [k for s, k in scored if s == top]
        if len(near) == 1:
            return near[0]
        energies = [self.energy(k) for k in near]
        if all(e is not None for e in energies):
            return min(near, key=lambda k: (self.energy(k), k.seq))
        best = max(s for s, k in scored if k in near)
        exact = [k for s, k in scored if k in near and s == best]
        return exact[0] if len(exact) == 1 else rng.choice(sorted(exact, key=lambda k: k.seq))

    # -- views -------------------------------------------------------------------------------------
    def path(self, node_id: str) -> list[Node]:
        out = []
        cur: Node | None = self.nodes[node_id]
        while cur is not None and cur.id != ROOT:
            out.append(cur)
            cur = self.nodes.get(cur.parent or ROOT)
        return list(reversed(out))

    def stats(self) -> dict[str, Any]:
        ns = [n for n in self.nodes.values() if n.id != ROOT]
        return {
            "nodes": len(ns),
            "evaluated": sum(n.status == EVALUATED for n in ns),
            "passed": sum(n.passed for n in ns),
            "failed": sum(n.failed for n in ns),
            "pending": sum(n.status == PENDING for n in ns),
            "closed": sum(self.closed(n) for n in ns),
            "depth": max((len(self.path(n.id)) for n in ns), default=0),
        }


def _node_from_record(r: dict[str, Any]) -> Node:
    sol = Solution.model_validate(r["solution"]) if r.get("solution") else None
    status = r.get("status") or (EVALUATED if r.get("summary") is not None else (FAILED if r.get("failure") else PENDING))
    if status not in (PENDING, EVALUATED, FAILED):
        raise ValueError(f"node {r['node_id']}: unknown status '{status}'")
    if status == FAILED and not r.get("failure"):
        raise ValueError(f"node {r['node_id']}: a failed node record must give the failure reason")
    if status == EVALUATED and r.get("summary") is None:
        raise ValueError(f"node {r['node_id']}: an evaluated node record needs its report summary")
    if sol is not None and solution_node_id(sol) != r["node_id"]:
        raise ValueError(f"node {r['node_id']}: id does not match its solution's content hash")
    return Node(
        id=r["node_id"],
        parent=r.get("parent_id") or ROOT,
        solution=sol,
        status=status,
        summary=r.get("summary"),
        agent=r.get("agent") or "",
        model=r.get("model"),
        prompt_hash=r.get("prompt_hash"),
        rationale=r.get("rationale") or "",
        config_key=r.get("config_key"),
        mode=r.get("mode"),
        failure=r.get("failure"),
        seq=int(r.get("seq") or 0),
        is_baseline=bool(r.get("is_baseline")),
    )
