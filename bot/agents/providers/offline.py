"""The offline agent: no network, no model. It proposes variants of existing kernels.

Two sources of variants:
- declared tunables of the parent (see tunables.py): single-knob moves first, ordered by the profiler's
  hints (hints.py) and then by distance from the current value; then two-knob moves; then random
  untried points of the space;
- seed variants in ``skills/seeds/<definition>/*.py`` (alternative kernel structures with their own
  tunables), proposed at the root and whenever the parent has nothing new left.

It never proposes the same configuration twice: every candidate's configuration key is checked against
the search memory (``ctx.memory.has_tried(key)``) and against what this agent already proposed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path
from typing import Any, Iterator

from harness.paths import shipped, skill_dirs
from harness.schema import Solution

from .. import hints
from ..base import Agent, AgentContext, Mode, Proposal
from ..catalog import register
from ..extract import DEFAULT_SPEC
from ..tunables import Tunable, TunableError, apply, config_key_or_none, configuration, solution_tunables, structure_hash

DEFAULT_SEEDS_DIR = shipped() / "skills" / "seeds"  # ours


def load_seeds(definition: str, seeds_dir: str | Path | None = None, spec: dict | None = None) -> list[Solution]:
    """Seed kernels for a definition: each ``<seeds_dir>/<definition>/<stem>.py`` becomes a one-file
    solution (``main.py``, entry ``run``). Without ``seeds_dir``: the repository's
    ``skills/seeds/<definition>/`` when it has one (it replaces ours), else ours."""
    if seeds_dir is None:
        found = skill_dirs(f"seeds/{definition}")
        folder = found[0] if found else DEFAULT_SEEDS_DIR / definition
    else:
        folder = Path(seeds_dir) / definition
    out = []
    for f in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        if f.name.startswith("_"):
            continue
        s = spec or DEFAULT_SPEC
        out.append(
            Solution.model_validate(
                {
                    "name": f"{definition}_seed_{f.stem}",
                    "definition": definition,
                    "author": "kbot-offline",
                    "description": f"seed variant {f.stem} from skills/seeds",
                    "spec": {**s, "entry_point": f"main.py::{s['entry_point'].split('::', 1)[1]}"},
                    "sources": [{"path": "main.py", "content": f.read_text()}],
                }
            )
        )
    return out


@register("offline")
class OfflineAgent(Agent):
    """Config keys: ``seeds_dir`` (default skills/seeds), ``max_pair_moves`` (default 64),
    ``random_tries`` (default 256), ``use_seeds`` (default true)."""

    def __init__(self, config: dict[str, Any] | None = None, **kw: Any) -> None:
        cfg = {**(config or {}), **kw}
        self.seeds_dir = Path(cfg["seeds_dir"]) if cfg.get("seeds_dir") else None  # None: load_seeds' lookup
        self.max_pair_moves = int(cfg.get("max_pair_moves", 64))
        self.random_tries = int(cfg.get("random_tries", 256))
        self.use_seeds = bool(cfg.get("use_seeds", True))
        self._proposed: set[str] = set()

    # -- the interface -----------------------------------------------------------------------------
    def propose(self, ctx: AgentContext, n: int) -> list[Proposal]:
        if n <= 0:
            return []
        out: list[Proposal] = []
        bases: dict[str, tuple[str, dict[str, Any]]] = {}  # content hash -> (structure hash, configuration)
        own = config_key_or_none(ctx.parent) if ctx.parent is not None else None  # never propose the parent itself
        for base, changes, why in self._candidates(ctx):
            # The key is computed before the variant is built: most candidates are already tried, and
            # building (rewrite + parse) is what costs.
            h = base.content_hash()
            if h not in bases:
                try:
                    ts = solution_tunables(base)
                except TunableError:
                    continue
                bases[h] = (structure_hash(base, ts), configuration(ts))
            struct, cfg = bases[h]
            key = f"{struct}:{json.dumps({**cfg, **changes}, sort_keys=True)}"
            if key == own or key in self._proposed or self._tried(ctx, key):
                continue
            sol = base if not changes else self._build(base, changes, ctx.definition.name, {**cfg, **changes})
            if sol is None:
                continue
            self._proposed.add(key)
            sol = sol.model_copy(update={"description": why})
            out.append(Proposal(solution=sol, rationale=why, config_key=key, agent=self.name))
            if len(out) >= n:
                break
        return out

    @staticmethod
    def _build(base: Solution, changes: dict[str, Any], definition: str, full: dict[str, Any]) -> Solution | None:
        h = hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:8]
        try:
            return apply(base, changes, name=f"{definition}_offline_{h}")
        except (TunableError, ValueError):
            return None

    def _tried(self, ctx: AgentContext, key: str) -> bool:
        mem = ctx.memory
        return bool(mem is not None and hasattr(mem, "has_tried") and mem.has_tried(key))

    # -- candidate streams (lazy: stops as soon as n new ones are found) ---------------------------
    def _candidates(self, ctx: AgentContext) -> Iterator[tuple[Solution, dict[str, Any], str]]:
        seeds = load_seeds(ctx.definition.name, self.seeds_dir, self._spec_of(ctx.parent)) if self.use_seeds else []
        if ctx.parent is None:
            for s in seeds:
                yield s, {}, f"seed structure {s.name} at its default configuration"
            for s in seeds:
                yield from self._moves(s, ctx, base_why=f"seed {s.name}: ")
            return
        # A seed at its defaults that this search has not tried (propose() skips tried ones) comes before
        # the parent's moves: a seed file a person has rewritten since the last campaign is new knowledge,
        # and after a champion descends from a seed its moves would otherwise keep the new seed out of
        # reach for as long as the neighbourhood lasts. Not while debugging a failing parent: there the
        # fix moves come first (a passing seed would be recorded as the fix of the parent's error).
        if ctx.mode is not Mode.DEBUG:
            for s in seeds:
                yield s, {}, f"seed structure {s.name} at its default configuration (not tried in this search yet)"
        yield from self._moves(ctx.parent, ctx)
        if ctx.mode is Mode.DEBUG:
            for s in seeds:
                yield s, {}, f"the parent's fixes are exhausted: try seed structure {s.name}"
        for s in seeds:
            yield from self._moves(s, ctx, base_why=f"seed {s.name}: ")

    def _spec_of(self, parent: Solution | None) -> dict | None:
        """The parent's build spec for seed variants, when the parent is itself a kernel of the seeds'
        language; a plain-torch parent (a definition's reference as the starting point) gives seeds
        their own spec, never its language."""
        if parent is None or parent.spec.language.value != DEFAULT_SPEC["language"]:
            return None
        spec = parent.spec.model_dump(mode="json", exclude_none=True)
        return {k: v for k, v in spec.items() if k in ("language", "target_hardware", "entry_point", "dependencies")}

    def _moves(self, parent: Solution, ctx: AgentContext, base_why: str = "") -> Iterator[tuple[Solution, dict[str, Any], str]]:
        try:
            ts = solution_tunables(parent)
        except TunableError:
            return
        if not ts:
            return
        votes = hints.votes(ctx.feedback)
        if ctx.mode is Mode.DEBUG:
            # A failing configuration (out of resources, compile error) is most often fixed by asking
            # for fewer resources: prefer smaller tiles, fewer stages.
            for role in ("block", "stages", "warps"):
                votes[role] = votes.get(role, 0.0) - 1.0
        fired = hints.explain(ctx.feedback)
        rng = random.Random(_seed_of(ctx.seed, parent))

        def make(changes: dict[str, Any], why: str) -> tuple[Solution, dict[str, Any], str]:
            return parent, changes, base_why + why

        singles = []
        for t in ts:
            for j, v in enumerate(t.options):
                if j == t.index:
                    continue
                d = 1 if j > t.index else -1
                score = votes.get(t.role, 0.0) * d
                singles.append((-score, abs(j - t.index), rng.random(), t, v))
        singles.sort(key=lambda x: x[:3])
        for neg, _dist, _, t, v in singles:
            why = f"{t.key}: {t.value!r} -> {v!r}"
            if neg < 0 and fired:
                why += " (profiler: " + "; ".join(fired) + ")"
            yield make({t.key: v}, why)

        pairs = []
        for t1, t2 in itertools.combinations(ts, 2):
            for v1 in _adjacent(t1):
                for v2 in _adjacent(t2):
                    score = votes.get(t1.role, 0.0) * _dir(t1, v1) + votes.get(t2.role, 0.0) * _dir(t2, v2)
                    pairs.append((-score, rng.random(), t1, v1, t2, v2))
        pairs.sort(key=lambda x: x[:2])
        for _, _, t1, v1, t2, v2 in pairs[: self.max_pair_moves]:
            yield make({t1.key: v1, t2.key: v2}, f"{t1.key}: {t1.value!r} -> {v1!r}, {t2.key}: {t2.value!r} -> {v2!r}")

        for _ in range(self.random_tries):
            changes = {t.key: rng.choice(t.options) for t in ts}
            changes = {k: v for k, v in changes.items() if v != configuration(ts)[k]}
            if changes:
                yield make(changes, "random point of the tunable space (neighbourhood exhausted)")


def _adjacent(t: Tunable) -> list[Any]:
    return [t.options[j] for j in (t.index - 1, t.index + 1) if 0 <= j < len(t.options)]


def _dir(t: Tunable, v: Any) -> int:
    return 1 if t.options.index(v) > t.index else -1


def _seed_of(seed: int, parent: Solution) -> int:
    return int(hashlib.sha256(f"{seed}:{parent.content_hash()}".encode()).hexdigest()[:12], 16)
