"""Guided against blind: how many evaluations the offline search needs to come within 2% of the
exhaustive best of a recorded tunable space, with the profiler feedback kbot computes without a GPU
and without any feedback.

Input: a tunable-space table as scripts/gpu/tunable_space.py writes it (the H200 one is
tests/fixtures/tunable/h200_tunable_space.json): per configuration of a seed, the measured latency on
each workload. Every working configuration gets the feedback items a CPU-only kbot produces for it:

- the seed at that configuration compiled ahead of time for sm_90
  (``harness.profile.triton_module.solution_triton_evidence``: registers, spills, SASS load widths);
- the rule engine (``harness.profile.pipeline.analyze``) on that evidence and on the recorded latency
  of each workload against the documented ceilings of the table's device (roofline rules).

Then, for each random seed, the same Campaign (UCT, the offline agent, table lookups as evaluations)
runs twice from the same working start configuration: ``guided`` (each node's report carries its
items, which order the agent's next moves through bot/agents/hints.py) and ``blind`` (no items: the
agent's moves fall back to distance order). A search reaches the target at the first evaluation within
``--within`` of the table's best score (geometric mean over workloads); a miss counts as the size of
the space + 1 (scripts/search_bench.py's conventions).

The compiles are what costs (5-20 s each on a 2-core CPU); they are cached in ``--cache`` (JSON, keyed
by table and configuration), so a second run only searches.

Usage:
    python scripts/guided_bench.py [TABLE.json] [--seeds 20] [--within 0.02] [--only rmsnorm]
                                   [--cache guided-cache.json] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from search_bench import RecordingEvaluator, run_campaign, seed_solution  # noqa: E402

from bot.agents.tunables import apply, configuration, solution_tunables  # noqa: E402
from harness.ceilings import documented_ceilings  # noqa: E402
from harness.profile import Collected  # noqa: E402
from harness.profile.pipeline import analyze  # noqa: E402
from harness.profile.triton_module import solution_triton_evidence  # noqa: E402
from harness.schema import load_definition  # noqa: E402
from tests.controller.synthetic import LatencyTable, canonical  # noqa: E402

DEFAULT_TABLE = REPO / "tests" / "fixtures" / "tunable" / "h200_tunable_space.json"
METHODS = ("guided", "blind")


class GuidedEvaluator(RecordingEvaluator):
    """Table lookups whose workloads carry the configuration's feedback items (none when blind)."""

    def __init__(self, table: LatencyTable, feedback: dict[str, list[list[dict[str, Any]]]]) -> None:
        super().__init__(table)
        self.feedback = feedback  # canonical configuration -> per workload, its items as dicts
        self.items_seen = 0

    def _lookup(self, solution):  # type: ignore[override]
        rows = super()._lookup(solution)
        per_workload = self.feedback.get(canonical(configuration(solution_tunables(solution))))
        if per_workload and all("latency_ms" in r for r in rows):
            for r, items in zip(rows, per_workload):
                r["feedback"] = items
                self.items_seen += len(items)
        return rows


def static_evidence(table: dict[str, Any], cfg: dict[str, Any], definition, cache: dict[str, Any]) -> Collected:
    key = f"{table['name']}|{canonical(cfg)}"
    hit = cache.get(key)
    if hit is None:
        base = seed_solution(table).model_copy(update={"definition": definition.name})
        sol = apply(base, cfg) if cfg != configuration(solution_tunables(base)) else base
        t0 = time.monotonic()
        c = solution_triton_evidence(sol, definition)
        hit = cache[key] = {"evidence": c.evidence, "missing": c.missing, "seconds": round(time.monotonic() - t0, 2)}
    return Collected(source="triton", evidence=hit["evidence"], missing=hit["missing"])


def table_feedback(table: dict[str, Any], device: str, cache: dict[str, Any], save) -> tuple[dict[str, Any], dict[str, Any]]:
    """(canonical configuration -> per-workload item dicts, counts of what fired) for a table."""
    definition = load_definition(REPO / "definitions" / table["definition"] / "definition.json")
    ceilings = documented_ceilings(device)
    out: dict[str, Any] = {}
    fired: dict[str, int] = {}
    compiled = 0
    for row in table["configs"]:
        if row.get("latency_ms") is None:
            continue
        static = static_evidence(table, row["config"], definition, cache)
        compiled += static.ok
        per = []
        for axes, lat in zip(table["workloads"], row["latency_ms"]):
            o = analyze(definition, definition.resolve_axes(axes), [static], ceilings=ceilings, measured_ms=lat)
            per.append([f.model_dump(mode="json") for f in o.feedback])
        out[canonical(row["config"])] = per
        for rule in {f["rule"] for items in per for f in items}:
            fired[rule] = fired.get(rule, 0) + 1
        save()
    return out, {"compiled": compiled, "configs_with_rule": dict(sorted(fired.items()))}


def bench_table(table: dict[str, Any], device: str, seeds: int, within: float, cache: dict[str, Any], save) -> dict[str, Any]:
    lt = LatencyTable(table)
    best_key, best = lt.best()
    target = best * (1 + within)
    feedback, fired = table_feedback(table, device, cache, save)
    ts = solution_tunables(seed_solution(table))
    space = 1
    for t in ts:
        space *= len(t.options)
    measured = sorted(k for k in lt.rows if lt.score(k) is not None)
    per: dict[str, list[int | None]] = {m: [] for m in METHODS}
    items_seen = 0
    for s in range(seeds):
        start_cfg = json.loads(random.Random(1000 + s).choice(measured))  # the same start for both
        for m in METHODS:
            ev = GuidedEvaluator(lt, feedback if m == "guided" else {})
            scores = run_campaign(table, lt, start_cfg, "uct", s, space, target, evaluator=ev)
            per[m].append(next((i for i, x in enumerate(scores, 1) if x is not None and x <= target), None))
            items_seen += ev.items_seen
    summary = {}
    for m, xs in per.items():
        counted = [x if x is not None else space + 1 for x in xs]
        summary[m] = {"mean": statistics.mean(counted), "median": statistics.median(counted),
                      "misses": sum(x is None for x in xs), "per_seed": xs}
    g = [x if x is not None else space + 1 for x in per["guided"]]
    b = [x if x is not None else space + 1 for x in per["blind"]]
    return {"table": table["name"], "space": space, "measured": len(measured), "best_config": json.loads(best_key),
            "best_score_ms": best, "within": within, "seeds": seeds, "evaluations_to_target": summary,
            "paired": {"guided_fewer": sum(x < y for x, y in zip(g, b)), "blind_fewer": sum(x > y for x, y in zip(g, b)),
                       "same": sum(x == y for x, y in zip(g, b))},
            "feedback": {**fired, "items_seen_by_guided_runs": items_seen}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="evaluations to within 2% of the exhaustive best: offline search guided by "
                                             "CPU-computable profiler feedback vs blind")
    ap.add_argument("table", nargs="?", default=str(DEFAULT_TABLE), help="tunable_space.json (default: the recorded H200 one)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--within", type=float, default=0.02)
    ap.add_argument("--only", help="substring of the table names to run")
    ap.add_argument("--cache", help="JSON file keeping the ahead-of-time compiles between runs")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args(argv)
    if a.seeds < 1 or not 0 < a.within < 1:
        ap.error("--seeds must be at least 1 and --within a fraction between 0 and 1")
    path = Path(a.table)
    if not path.is_file():
        ap.error(f"{path}: no such table file")
    data = json.loads(path.read_text())
    device = data.get("device")
    if not isinstance(device, str):
        ap.error(f"{path}: the table names no device (its ceilings are what the roofline rules use)")
    cache_path = Path(a.cache) if a.cache else None
    cache: dict[str, Any] = json.loads(cache_path.read_text()) if cache_path and cache_path.is_file() else {}

    def save() -> None:
        if cache_path:
            cache_path.write_text(json.dumps(cache, sort_keys=True))

    results = []
    for t in data.get("tables", [data]):
        if a.only and a.only not in t.get("name", ""):
            continue
        r = bench_table(t, device, a.seeds, a.within, cache, save)
        results.append(r)
        e = r["evaluations_to_target"]
        print(f"{r['table']}: space {r['space']} ({r['measured']} measured), best {r['best_config']}; "
              f"feedback rules by configurations: {r['feedback']['configs_with_rule']}")
        for m in METHODS:
            print(f"  {m:6s} mean {e[m]['mean']:6.2f}  median {e[m]['median']:5.1f}  misses {e[m]['misses']}/{a.seeds}"
                  f"  per seed {e[m]['per_seed']}")
        p = r["paired"]
        print(f"  paired: guided fewer in {p['guided_fewer']}, blind fewer in {p['blind_fewer']}, same in {p['same']}")
    shown = path.resolve()
    shown = shown.relative_to(REPO) if shown.is_relative_to(REPO) else shown
    out = {"device": device, "table": str(shown), "within": a.within, "seeds": a.seeds, "results": results}
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
