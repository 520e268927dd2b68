"""Issue 22 on a multi-GPU host: a round of N candidates on N GPUs takes about the time of one, with
the same decisions as the one-GPU run. NOT RUN YET: no multi-GPU machine has been lent so far.

    source scripts/gpu/setup_device.sh && OUT=/tmp/o/multi python scripts/gpu/multi_gpu_round.py [--gpus N]

Two parts, each a comparison of the same work on one GPU and on N (N: --gpus, default every GPU
nvidia-smi lists):

A. Time. ``kbot eval-many`` of N copies of the shipped rmsnorm kernel (the same work per candidate,
   each copy a separate evaluation with fresh processes): one copy on one GPU (``--gpus 1``: the time
   of one), the N copies one after another on one GPU (no ``--gpus``, CUDA_VISIBLE_DEVICES=0: the
   one-GPU round), and the N copies with ``--gpus N``. Passes when the N-GPU round takes at most
   ``--slack`` (1.5) times the one copy, and every copy ran on a GPU of its own.
B. Decisions. ``kbot optimize`` from the weak start, ``--rounds R --candidates N``, once on one GPU
   (no ``--gpus``, CUDA_VISIBLE_DEVICES=0) and once with ``--gpus N``, in two fresh workspaces, with
   the offline agent (its proposals depend only on the tree, so both runs propose the same
   candidates as long as they decide alike). Passes when the candidates, PRs and decisions are the
   same in the same order. A difference is printed with both paired ratios and intervals: GPU timing
   is not bit-reproducible, so a candidate within noise of the threshold can flip; the script says
   which it was rather than hiding it.

Writes $OUT/multi_gpu_round.json (both parts, every wall time, per-GPU ceilings, the decision lists)
and the commands' outputs under $OUT/; prints a table last. Exit 0 when both parts pass, 1 when one
does not, 3 when a command failed. Record the table in docs/measurements.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOL = REPO / "kernels/rmsnorm_h4096/triton_rows/solution.json"


def judge_time(one_s: float, round_s: float, gpus_used: list[int | None], n: int, slack: float) -> tuple[bool, str]:
    """Part A's verdict: the N-GPU round within ``slack`` times one candidate, on N distinct GPUs."""
    if len(gpus_used) != n or None in gpus_used or len(set(gpus_used)) != n:
        return False, f"the {n} copies did not run on {n} distinct GPUs: {gpus_used}"
    ratio = round_s / one_s if one_s > 0 else float("inf")
    ok = ratio <= slack
    return ok, f"{n} candidates on {n} GPUs took {round_s:.1f} s = {ratio:.2f}x one candidate ({one_s:.1f} s); limit {slack}x"


def judge_decisions(one: list[dict], many: list[dict]) -> tuple[bool, list[str]]:
    """Part B's verdict: the same candidates, PRs and decisions, in the same order; the differences."""
    diffs = []
    for i in range(max(len(one), len(many))):
        a = one[i] if i < len(one) else None
        b = many[i] if i < len(many) else None
        key = lambda r: None if r is None else (r["node"], r["pr"], r["decision"])  # noqa: E731
        if key(a) != key(b):
            diffs.append(f"#{i}: one GPU {key(a)} (vs champion {a and a.get('speedup_vs_champion')}) | "
                         f"N GPUs {key(b)} (vs champion {b and b.get('speedup_vs_champion')}); headlines: "
                         f"{a and a.get('headline')!r} / {b and b.get('headline')!r}")
    return not diffs and bool(one), diffs


def selftest() -> None:
    ok, _ = judge_time(10.0, 12.0, [0, 1, 2], 3, 1.5)
    assert ok
    assert not judge_time(10.0, 16.0, [0, 1, 2], 3, 1.5)[0]  # slower than the slack
    assert not judge_time(10.0, 10.0, [0, 0, 1], 3, 1.5)[0]  # two copies on one GPU
    rows = [{"node": "a", "pr": 1, "decision": "promote"}, {"node": "b", "pr": 2, "decision": "reject"}]
    assert judge_decisions(rows, [dict(r) for r in rows]) == (True, [])
    ok, diffs = judge_decisions(rows, [rows[0], {**rows[1], "decision": "promote"}])
    assert not ok and len(diffs) == 1 and diffs[0].startswith("#1:")
    assert not judge_decisions([], [])[0]  # nothing decided is no evidence
    print("selftest ok")


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float]:
    t0 = time.monotonic()
    with log.open("w") as f:
        rc = subprocess.run(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}).returncode
    return rc, time.monotonic() - t0


def gpu_count() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True).stdout
    return len([x for x in out.split() if x.strip().isdigit()])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, help="N (default: every GPU nvidia-smi lists)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--slack", type=float, default=1.5)
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        selftest()
        return 0
    n = args.gpus or gpu_count()
    if n < 2:
        print(f"needs at least 2 GPUs, found {n}: blocked", file=sys.stderr)
        return 3
    out = Path(os.environ.get("OUT", "/tmp/out")) / "multi_gpu_round"
    out.mkdir(parents=True, exist_ok=True)
    k = [sys.executable, "-m", "harness.cli"]
    one_gpu = {"CUDA_VISIBLE_DEVICES": "0"}
    rec: dict = {"gpus": n, "time": {}, "decisions": {}}

    # A. time
    runs = {"one": (["--gpus", "1"], [str(SOL)], {}), "seq": ([], [str(SOL)] * n, one_gpu), "par": (["--gpus", str(n)], [str(SOL)] * n, {})}
    for name, (extra, sols, env) in runs.items():
        d = out / f"many-{name}"
        rc, wall = run([*k, "eval-many", *sols, "-d", "rmsnorm_h4096", "--device", "cuda", "--out", str(d), "--json", *extra], out / f"many-{name}.log", env)
        if rc not in (0,):
            print(f"eval-many ({name}) exited {rc}: see {out}/many-{name}.log", file=sys.stderr)
            return 3
        summary = json.loads((d / "summary.json").read_text())
        rec["time"][name] = {"wall_s": round(wall, 2), "summary_wall_s": summary.get("wall_s"),
                             "gpus_used": [r.get("gpu") for r in summary["runs"]], "per_gpu": summary.get("gpus")}
    t = rec["time"]
    ok_a, why_a = judge_time(t["one"]["summary_wall_s"] or t["one"]["wall_s"], t["par"]["summary_wall_s"] or t["par"]["wall_s"],
                             t["par"]["gpus_used"], n, args.slack)
    rec["time"]["verdict"] = why_a

    # B. decisions
    summaries = {}
    for name, extra, env in (("one", [], one_gpu), ("many", ["--gpus", str(n)], {})):
        ws = out / f"ws-{name}"
        subprocess.run(["rm", "-rf", str(ws)])
        cmd = [*k, "optimize", "rmsnorm_h4096", "--agent", "offline", "--device", "cuda", "--rounds", str(args.rounds),
               "--candidates", str(n), "--workspace", str(ws), "--json", *extra]
        t0 = time.monotonic()
        with (out / f"optimize-{name}.json").open("w") as so, (out / f"optimize-{name}.log").open("w") as se:
            rc = subprocess.run(cmd, cwd=REPO, stdout=so, stderr=se, env={**os.environ, **env}).returncode
        if rc != 0:
            print(f"optimize ({name}) exited {rc}: see {out}/optimize-{name}.log", file=sys.stderr)
            return 3
        summaries[name] = json.loads((out / f"optimize-{name}.json").read_text())
        rec["decisions"][name] = {"wall_s": round(time.monotonic() - t0, 2),
                                  "candidates": [{k2: r.get(k2) for k2 in ("node", "pr", "decision", "speedup_vs_champion", "headline", "gpu")}
                                                 for r in summaries[name]["candidates"]],
                                  "champion": summaries[name]["champion"], "gpus": summaries[name].get("gpus")}
    ok_b, diffs = judge_decisions(rec["decisions"]["one"]["candidates"], rec["decisions"]["many"]["candidates"])
    rec["decisions"]["differences"] = diffs
    (out / "multi_gpu_round.json").write_text(json.dumps(rec, indent=1))

    print(f"| part | one GPU | {n} GPUs | verdict |\n|---|---|---|---|")
    print(f"| A eval-many, {n} copies | {t['seq']['wall_s']:.1f} s in sequence (one copy {t['one']['wall_s']:.1f} s) | "
          f"{t['par']['wall_s']:.1f} s | {'PASS' if ok_a else 'FAIL'}: {why_a} |")
    d = rec["decisions"]
    print(f"| B optimize, {args.rounds} rounds x {n} | {d['one']['wall_s']:.1f} s | {d['many']['wall_s']:.1f} s | "
          f"{'PASS: same decisions' if ok_b else 'FAIL: ' + '; '.join(diffs)} |")
    return 0 if ok_a and ok_b else 1


if __name__ == "__main__":
    sys.exit(main())
