"""Synthetic search problems for the controller tests: a state is a string of moves, the solution's
source carries it, an agent proposes the state's children, and an evaluator scores states.

Everything goes through the real Campaign / Tree / Report code; only the kernel and the GPU are fake.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any, Callable

from bot.agents.base import Agent, AgentContext, Proposal
from harness.schema import Solution, parse_definition
from tests.controller.synthetic import FunctionEvaluator

DEFINITION = parse_definition({
    "name": "toy_scale",
    "op_type": "toy",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    "reference": "def run(x):\n    return x * 2\n",
})


def state_solution(state: str) -> Solution:
    return Solution.model_validate({
        "name": f"toy_{state or 'root'}",
        "definition": DEFINITION.name,
        "author": "test",
        "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run"},
        "sources": [{"path": "main.py", "content": f"STATE = {state!r}\n\ndef run(x, y):\n    y.copy_(x * 2)\n"}],
    })


def state_of(sol: Solution | None) -> str:
    if sol is None:
        return ""
    m = re.search(r"STATE = '([^']*)'", sol.source("main.py"))
    assert m, "not a toy solution"
    return m.group(1)


class MoveAgent(Agent):
    """Proposes ``state + move`` for each move, in a seeded random order, never the same state twice."""

    name = "moves"

    def __init__(self, moves: str = "LR", seed: int = 0, shuffle: bool = True) -> None:
        self.moves = moves
        self.seed = seed
        self.shuffle = shuffle
        self.seen: set[str] = set()

    def propose(self, ctx: AgentContext, n: int) -> list[Proposal]:
        if ctx.parent is None:
            return []  # the root's only child is the seed; no kernels from scratch here
        st = state_of(ctx.parent)
        rng = random.Random(f"{self.seed}:{st}")
        moves = list(self.moves)
        if self.shuffle:
            rng.shuffle(moves)
        out = []
        for m in moves:
            child = st + m
            if child in self.seen or (ctx.memory is not None and ctx.memory.has_tried(child)):
                continue
            self.seen.add(child)
            out.append(Proposal(solution=state_solution(child), rationale=f"move {m}", config_key=child, agent=self.name))
            if len(out) >= n:
                break
        return out


def jitter(seed: int, state: str, scale: float) -> float:
    h = int(hashlib.sha256(f"{seed}|{state}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return 1.0 + scale * (2 * h - 1)


def deceptive_speedup(state: str, seed: int = 0) -> float:
    """Local optimum right next to the root (1.3x down the L branch, never above ~1.35x); the global
    one (3x) sits down the R-R-R spine behind a first step that is worse than the root (0.8x)."""
    if state == "":
        return 1.0
    if state[0] == "L":
        return 1.3 * jitter(seed, state, 0.03)
    # R branch: only the all-R spine climbs; side branches stay poor.
    if set(state) == {"R"}:
        return {1: 0.8, 2: 1.5, 3: 2.2}.get(len(state), 3.0) * jitter(seed, state, 0.02)
    return 0.9 * jitter(seed, state, 0.05)


def landscape_evaluator(speedup: Callable[[str], float | None], reference_ms: float = 1.0) -> FunctionEvaluator:
    """Workload latency = reference / speedup; ``None`` speedup = a failing candidate."""

    def fn(sol: Solution) -> list[dict[str, Any]]:
        s = speedup(state_of(sol))
        if s is None:
            return [{"axes": {"n": 1024}, "status": "COMPILE_ERROR", "message": "synthetic failure"}]
        return [{"axes": {"n": 1024}, "latency_ms": reference_ms / s, "reference_ms": reference_ms}]

    return FunctionEvaluator(fn)
