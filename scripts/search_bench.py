"""How many evaluations does each search need to come within 2% of the exhaustive best?

Input: a table of (configuration -> measured latency per workload), as written by
scripts/gpu/tunable_space.py (``{"tables": [...]}``, each table carries the seed's source). For every
table and every random seed, the three searches start from the same random (working) configuration,
which counts as their first evaluation:

- mcts:   the real Campaign (UCT, widening, pruning) with the offline agent, evaluator = table lookup;
- greedy: the same Campaign and agent with the greedy policy (always expand the best node);
- random: uniformly random configurations without repetition.

The score of a configuration is the geometric mean of its latencies over the table's workloads; a
search "reaches" the target at the first evaluation whose score is within ``--within`` (2%) of the
best score in the table. Failed configurations count as evaluations. A search that never reaches the
target within the budget (the size of the space) counts as budget + 1 and is reported as a miss.

Usage:
    python scripts/search_bench.py TABLE.json [--seeds 10] [--within 0.02] [--out result.json]
    python scripts/search_bench.py --synthetic   # a made-up table over the real gemm seed space
    python scripts/search_bench.py TABLE.json --search '{"exploit": false}'   # plain UCT
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bot.agents.providers.offline import OfflineAgent  # noqa: E402
from bot.agents.tunables import apply, configuration, solution_tunables  # noqa: E402
from bot.controller.campaign import Campaign  # noqa: E402
from harness.schema import Solution, parse_definition  # noqa: E402
from tests.controller.synthetic import LatencyTable, TableEvaluator, canonical  # noqa: E402

METHODS = ("mcts", "greedy", "random")


def seed_solution(table: dict[str, Any]) -> Solution:
    return Solution.model_validate({
        "name": f"{table['definition']}_bench_seed",
        "definition": table["definition"],
        "author": "search_bench",
        "spec": {"language": "triton", "target_hardware": ["NVIDIA_H200"], "entry_point": "main.py::run"},
        "sources": [{"path": "main.py", "content": table["source"]}],
    })


def bench_definition(table: dict[str, Any]):
    """A minimal definition for the campaign (the table decides everything the search sees)."""
    axis = sorted(table["workloads"][0])[0]
    return parse_definition({
        "name": table["definition"], "op_type": table["definition"].split("_")[0],
        "axes": {axis: {"type": "var"}},
        "inputs": {"x": {"shape": [axis], "dtype": "float32"}},
        "outputs": {"y": {"shape": [axis], "dtype": "float32"}},
        "reference": "def run(x):\n    return x\n",
    })


class RecordingEvaluator(TableEvaluator):
    def __init__(self, table: LatencyTable) -> None:
        super().__init__(table)
        self.scores: list[float | None] = []

    def evaluate(self, solution: Solution, baseline: Solution | None):
        # Only the candidate counts (the baseline is looked up again for the paired ratio).
        self.scores.append(self.table.score(canonical(configuration(solution_tunables(solution)))))
        return super().evaluate(solution, baseline)


def evals_to_target(scores: list[float | None], target: float) -> int | None:
    for i, s in enumerate(scores, 1):
        if s is not None and s <= target:
            return i
    return None


def run_campaign(table_json, table, start_cfg, policy, seed, budget, target=0.0, search=None,
                 evaluator: RecordingEvaluator | None = None) -> list[float | None]:
    """The scores of the campaign's evaluations in order (``evaluator``: a RecordingEvaluator of the
    table, e.g. one that adds feedback items: scripts/guided_bench.py)."""
    base = seed_solution(table_json)
    start = apply(base, start_cfg) if start_cfg != configuration(solution_tunables(base)) else base
    ev = evaluator if evaluator is not None else RecordingEvaluator(table)
    # The store is scratch here; keep it in memory-backed /dev/shm when there is one (thousands of
    # small atomic writes are slow on a shared disk).
    scratch = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        camp = Campaign.start(
            bench_definition(table_json), [start], OfflineAgent({"use_seeds": False}), ev,
            {"search": {"policy": policy, **(search or {})}, "seed": seed, "fsync": False,
             "budget": {"max_candidates": budget, "patience": None, "roofline_target": None}},
            Path(d) / "c",
        )
        # Only the evaluations up to the target matter: stop there.
        while not camp.step().stopped:
            if any(s is not None and s <= target for s in ev.scores):
                break
    return ev.scores


def run_random(table, keys, seed, budget, start_key) -> list[float | None]:
    """Uniform sampling without repetition; the first sample is the common start configuration."""
    order = [k for k in keys if k != start_key]
    random.Random(seed).shuffle(order)
    return [table.score(k) for k in [start_key, *order][:budget]]


def bench_table(table_json: dict[str, Any], seeds: int, within: float, search: dict | None = None) -> dict[str, Any]:
    table = LatencyTable(table_json)
    best_key, best = table.best()
    target = best * (1 + within)
    base = seed_solution(table_json)
    ts = solution_tunables(base)
    # The whole declared space, measured or not: a configuration missing from the table (time budget
    # ran out) is a failed evaluation for every method alike.
    keys = [canonical(dict(zip([t.key for t in ts], vals))) for vals in itertools.product(*[t.options for t in ts])]
    budget = len(keys)
    measured = sorted(k for k in keys if table.score(k) is not None)
    per: dict[str, list[int | None]] = {m: [] for m in METHODS}
    for s in range(seeds):
        rng = random.Random(1000 + s)
        start_cfg = json.loads(rng.choice(measured))  # the same working start for every method
        per["mcts"].append(evals_to_target(run_campaign(table_json, table, start_cfg, "uct", s, budget, target, search), target))
        per["greedy"].append(evals_to_target(run_campaign(table_json, table, start_cfg, "greedy", s, budget, target), target))
        per["random"].append(evals_to_target(run_random(table, keys, s, budget, canonical(start_cfg)), target))
    summary = {}
    for m, xs in per.items():
        counted = [x if x is not None else budget + 1 for x in xs]
        summary[m] = {
            "mean": statistics.mean(counted),
            "median": statistics.median(counted),
            "misses": sum(x is None for x in xs),
            "per_seed": xs,
        }
    return {
        "table": table_json.get("name", table_json["definition"]),
        "space": budget,
        "measured": len(measured),
        "best_config": json.loads(best_key),
        "best_score_ms": best,
        "within": within,
        "seeds": seeds,
        "evaluations_to_target": summary,
    }


def synthetic_tables() -> list[dict[str, Any]]:
    """A made-up but GEMM-like surface over the real gemm seed space: a broad basin plus a narrow,
    better basin (large tiles, more stages) and a band of out-of-resources failures."""
    from bot.agents.providers.offline import load_seeds

    [seed] = load_seeds("gemm_n4096_k4096")
    ts = solution_tunables(seed)
    rows = []
    for values in itertools.product(*[t.options for t in ts]):
        c = dict(zip([t.key for t in ts], values))
        smem = (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2 * c["NUM_STAGES"]
        if smem > 228 * 1024:
            rows.append({"config": c, "latency_ms": None, "error": "OutOfResources: shared memory"})
            continue
        broad = 1.0 + 0.2 * abs(math.log2(c["BLOCK_M"] / 128)) + 0.2 * abs(math.log2(c["BLOCK_N"] / 128)) \
            + 0.1 * abs(math.log2(c["BLOCK_K"] / 64)) + (0.05 if c["GROUP_M"] == 1 else 0) \
            + (0.1 if c["NUM_WARPS"] == 4 else 0)
        narrow = 0.8 if (c["BLOCK_M"], c["BLOCK_N"], c["NUM_STAGES"], c["NUM_WARPS"]) == (256, 128, 3, 8) else 1.0
        lat = broad * narrow
        rows.append({"config": c, "latency_ms": [0.02 * lat, 0.1 * lat, 0.3 * lat]})
    return [{
        "name": "synthetic/gemm_n4096_k4096/tiled", "definition": "gemm_n4096_k4096",
        "source": seed.source("main.py"), "workloads": [{"M": 128}, {"M": 1024}, {"M": 4096}],
        "reference_ms": [0.03, 0.12, 0.35], "configs": rows,
    }]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="evaluations to come within 2% of the exhaustive best: MCTS vs greedy vs random")
    ap.add_argument("table", nargs="?", help="tunable_space.json from scripts/gpu/tunable_space.py")
    ap.add_argument("--synthetic", action="store_true", help="use a made-up table over the gemm seed space")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--within", type=float, default=0.02)
    ap.add_argument("--only", help="substring of the table names to run")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--search", default="{}", help='JSON overrides of the MCTS search settings, e.g. \'{"exploit": false}\'')
    a = ap.parse_args(argv)
    if a.synthetic == bool(a.table):
        ap.error("give a table file or --synthetic (one of them)")
    if a.synthetic:
        tables, device = synthetic_tables(), "synthetic"
    else:
        data = json.loads(Path(a.table).read_text())
        tables, device = data.get("tables", [data]), data.get("device", "unknown")
    results = []
    for t in tables:
        if a.only and a.only not in t.get("name", ""):
            continue
        if not any(r.get("latency_ms") for r in t["configs"]):
            print(f"{t.get('name')}: no measured configuration, skipped")
            continue
        r = bench_table(t, a.seeds, a.within, json.loads(a.search))
        results.append(r)
        e = r["evaluations_to_target"]
        print(f"{r['table']}: space {r['space']} ({r['measured']} measured), best {r['best_config']} "
              f"{r['best_score_ms']:.4g} ms (geomean over workloads)")
        for m in METHODS:
            print(f"  {m:7s} mean {e[m]['mean']:6.1f}  median {e[m]['median']:5.1f}  misses {e[m]['misses']}/{a.seeds}"
                  f"  per seed {e[m]['per_seed']}")
    out = {"device": device, "within": a.within, "seeds": a.seeds, "search": json.loads(a.search), "results": results}
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
