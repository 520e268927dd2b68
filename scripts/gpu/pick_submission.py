"""Pick which prepared submission to send through kbot's loop from a dev sweep, inside the same device call.

    python3 scripts/gpu/pick_submission.py $OUT/moe_dev.json --min 1.04 fp8_g2=A.json g1_bt32=B.json
    python3 scripts/gpu/pick_submission.py $OUT/dsa_dev.json --op attention --worst 0.97 swap16=A.json
    python3 scripts/gpu/pick_submission.py $OUT/dsa_dev.json --op attention --write-candidates $OUT/candidates
    python3 scripts/gpu/pick_submission.py $OUT/moe_dev.json --write-candidates $OUT/candidates
    python3 scripts/gpu/pick_submission.py $OUT/gdn_dev.json --definition gdn_prefill_qk4_v8_d128_k_last --write-candidates $OUT/candidates

Reads a ``moe_dev.py`` result (phase A rows: variant, seq_len, status, gpu_ms or do_bench_ms) or, with ``--op``, a
``dsa_dev.py`` one (phase B: variant -> workload -> ok, us), or, with ``--definition``, a ``gdn_dev.py`` one (a list of
rows: definition, workload, variant label ``NAME=VALUE,...``, status, gpu_us), takes each named variant's geomean ratio
over the ``--baseline`` variant (default ``default``, the seed; ``champion`` where the sweep ran the
champion on main beside it, as gdn_dev.py does: the seed's default is not always the champion's code,
recording 37) on the workloads both ran, and prints the file of
the best one whose ratio is at least ``--min``, whose slowest workload is at least ``--worst`` of the
baseline (the promotion rules reject a workload measured slower), and none of whose rows failed (a
variant of one path runs only on that path's workloads); prints nothing when none qualifies. Each
variant's ratios go to stderr. The sweep only chooses: the promotion decision is still the harness's
paired evaluation in ``kbot submit``. Rows are ranked by GPU time (CUPTI) where the sweep has it: do_bench's
event time counts host work too, and picked a MoE variant at 1.105x whose GPU time was 1.025x (paired: 1.018x,
rejected; docs/measurements.md recording 35).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def dsa_rows(sweep: dict, op: str) -> list[dict]:
    """A ``dsa_dev.py`` result's phase B as rows of the ``moe_dev.py`` shape (the workload as the key),
    timed by GPU time (CUPTI) where the sweep has it: its event time is host-bound for short calls."""
    grid = sweep.get("ops", {}).get(op, {}).get("B", {})
    rows = []
    for v, cells in grid.items():
        for u, c in cells.items():
            if c.get("ok") is None:  # not measured (time budget)
                continue
            t = c.get("gpu_us") or c.get("us")
            rows.append({"variant": v, "seq_len": u, "status": "PASSED" if c.get("ok") and t else "FAILED",
                         **({"do_bench_ms": t} if c.get("ok") and t else {})})
    return rows


def gdn_sweep(rows: list[dict], definition: str) -> dict:
    """A ``gdn_dev.py`` result (rows of both GDN definitions) as the ``moe_dev.py`` shape for one definition: its
    rows keyed by workload and timed by GPU time (CUPTI), and the seed variants' tunables parsed back from their
    labels (``default`` is the seed; ``champion`` and ``fla`` are compared but are not seed variants)."""
    import ast

    mine = [r for r in rows if r.get("definition") == definition]
    if not mine:
        raise SystemExit(f"the sweep has no rows of {definition}")
    out_rows, variants = [], {"default": {}}
    for r in mine:
        t = r.get("gpu_us")
        out_rows.append({"variant": r["variant"], "seq_len": r["workload"], "status": r.get("status"),
                         **({"gpu_ms": t / 1e3} if t else {})})
        label = r["variant"]
        if label not in variants and "=" in label:
            changes = {}
            for part in label.split(","):
                k, _, v = part.partition("=")
                try:
                    changes[k] = ast.literal_eval(v)
                except (ValueError, SyntaxError):
                    changes[k] = v
            variants[label] = changes
    return {"definition": definition, "phase_a": out_rows, "variants": variants}


def _slug(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")


def write_candidates(sweep: dict, op: str | None, out: Path, baseline: str = "default") -> dict[str, str]:
    """Every swept variant of a ``dsa_dev.py`` result (its ``op``) or of a ``moe_dev.py`` one (``op`` None) as
    a submission written into ``out``: the seed with that variant's tunables, exactly as the sweep built it
    (so what is sent is what was measured)."""
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import apply

    o = sweep["ops"][op] if op else sweep
    if "definition" not in o:
        raise SystemExit("the sweep names no definition (a moe_dev.py result older than its 'definition' key)")
    (seed,) = load_seeds(o["definition"])
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for v, changes in o.get("variants", {}).items():
        if not changes:
            continue
        data = json.loads(apply(seed, changes, name=f"{o['definition']}_hand_{_slug(v)}").model_dump_json())
        data["author"] = "kbot-team"
        over = "the seed's defaults" if baseline == "default" else f"the sweep's '{baseline}' rows"
        data["description"] = (f"the seed with {json.dumps(changes)}, picked from a device sweep by its GPU time over "
                               f"{over} (scripts/gpu/dev_round.sh)")
        path = out / f"{data['name']}.json"
        path.write_text(json.dumps(data, indent=1) + "\n")
        files[v] = str(path)
    return files


def ratios(rows: list[dict], baseline: str) -> dict[str, tuple[float, int, bool, float]]:
    """{variant: (geomean of baseline / variant time, workloads compared, no row of the variant failed,
    the smallest per-workload ratio)}."""
    ms: dict[str, dict[int, tuple[float | None, float | None]]] = {}  # (GPU time, do_bench time)
    failed: set[str] = set()  # a row that ran and did not pass (a seq_len a variant was not scheduled on has no row)
    for r in rows:
        gpu, event = r.get("gpu_ms") or None, r.get("do_bench_ms") or None
        if "seq_len" in r and (gpu or event) and r.get("status") == "PASSED":
            ms.setdefault(r["variant"], {})[r["seq_len"]] = (gpu, event)
        elif "variant" in r:
            failed.add(r["variant"])
    base = ms.get(baseline, {})
    out = {}
    for v, cells in ms.items():
        ratios = []
        for s in sorted(set(cells) & set(base)):
            # GPU time (CUPTI) where both rows have it, else do_bench where both have that: never one over the other
            k = 0 if cells[s][0] and base[s][0] else 1 if cells[s][1] and base[s][1] else None
            if k is not None:
                ratios.append(base[s][k] / cells[s][k])
        if v == baseline or not ratios:
            continue
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        out[v] = (g, len(ratios), v not in failed, min(ratios))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", help="moe_dev.json")
    ap.add_argument("choices", nargs="*", help="VARIANT=SUBMISSION.json")
    ap.add_argument("--baseline", default="default",
                    help="the variant the ratios are taken over: the seed's 'default', or 'champion' where the sweep ran "
                         "the champion on main beside the seed (gdn_dev.py does): what the loop will pair against")
    ap.add_argument("--min", type=float, default=1.03, help="least geomean ratio over the baseline")
    ap.add_argument("--worst", type=float, default=0.0, help="least ratio on any one workload")
    ap.add_argument("--op", help="read a dsa_dev.py result, this op's phase B (indexer or attention)")
    ap.add_argument("--definition", help="read a gdn_dev.py result, this definition's rows")
    ap.add_argument("--write-candidates", metavar="DIR",
                    help="write every swept variant as a submission into DIR and choose among those")
    a = ap.parse_intermixed_args(argv)  # VARIANT=FILE choices may follow options (choices may be none)
    sweep = json.load(open(a.sweep))
    if isinstance(sweep, list):
        if not a.definition:
            raise SystemExit("a gdn_dev.py result holds both GDN definitions: name one with --definition")
        sweep = gdn_sweep(sweep, a.definition)
    files = dict(c.split("=", 1) for c in a.choices)
    if a.write_candidates:
        files.update(write_candidates(sweep, a.op, Path(a.write_candidates), a.baseline))
    rows = dsa_rows(sweep, a.op) if a.op else sweep.get("phase_a", [])
    have = sorted({r["variant"] for r in rows if "variant" in r})
    timed = {r["variant"] for r in rows if r.get("status") == "PASSED" and (r.get("gpu_ms") or r.get("do_bench_ms"))}
    # else every ratio would be empty and nothing picked, silently
    if a.baseline not in have:
        raise SystemExit(f"the sweep has no '{a.baseline}' rows to compare against (variants: {', '.join(have) or 'none'})")
    if a.baseline not in timed:
        raise SystemExit(f"no '{a.baseline}' row of the sweep passed with a time: nothing to compare against")
    rs = ratios(rows, a.baseline)
    for v, (g, n, full, worst) in sorted(rs.items(), key=lambda kv: -kv[1][0]):
        print(f"{v}: {g:.3f}x over {a.baseline} on {n} workloads, worst {worst:.3f}x{'' if full else ' (not all passed)'}",
              file=sys.stderr)
    ok = [(g, v) for v, (g, _n, full, worst) in rs.items() if v in files and full and g >= a.min and worst >= a.worst]
    if ok:
        print(files[max(ok)[1]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
