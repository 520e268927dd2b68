"""Held-out Solution JSONs (tests/operators/solutions/) through the real harness: `kbot eval` on the CPU.

The worker is a separate process; ``harness.inputs`` imports ``harness.operators``, so it knows these
definitions' generators and comparators without any help from the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from opkit import ATTENTION, DECODE, INDEXER, REPO

SOLUTIONS = REPO / "tests" / "operators" / "solutions"
SMALL_WORKLOADS = {
    DECODE: [{"uuid": "e2e-decode-b3", "axes": {"batch_size": 3}, "inputs": {"scale": {"type": "scalar", "value": 0.0}}}],
    ATTENTION: [{"uuid": "e2e-attn-t4", "axes": {"num_tokens": 4, "num_pages": 100},
                 "inputs": {"sparse_indices": {"type": "generated", "generator": "dsa_sparse_indices", "params": {"mix": "mixed", "max_context": 3000}},
                            "sm_scale": {"type": "scalar", "value": 0.0721687836}}}],
    INDEXER: [{"uuid": "e2e-idx-b3", "axes": {"batch_size": 3, "max_num_pages": 40, "num_pages": 160},
               "inputs": {"seq_lens": {"type": "generated", "generator": "dsa_seq_lens", "params": {"mix": "mixed"}}}}],
}
CASES = [
    ("gdn_decode_correct.json", DECODE, "PASSED"),
    ("gdn_decode_wrong_gate.json", DECODE, "INCORRECT_NUMERICAL"),
    ("dsa_attention_no_lse.json", ATTENTION, "PASSED"),
    ("dsa_attention_page_off_by_one.json", ATTENTION, "INCORRECT_NUMERICAL"),
    ("dsa_indexer_correct.json", INDEXER, "PASSED"),
    ("dsa_indexer_duplicates.json", INDEXER, "INCORRECT_NUMERICAL"),
]
# Each `kbot eval` costs ~12 s on a CPU (worker start, guard, trials); by default run one passing and
# two failing cases through it, all six with KBOT_E2E_ALL=1. test_solutions_in_process judges all six
# in-process in a second.
E2E = CASES if os.environ.get("KBOT_E2E_ALL") == "1" else [CASES[1], CASES[2], CASES[5]]


@pytest.mark.parametrize("solution,definition,expected", CASES, ids=[c[0].removesuffix(".json") for c in CASES])
def test_solutions_in_process(solution, definition, expected):
    from harness.schema import load_solution
    from opkit import clone, make, our_run, ours, judge
    from harness.schema import Workload

    sol = load_solution(SOLUTIONS / solution)
    assert sol.definition == definition
    ns = {}
    exec(compile(sol.source("main.py"), solution, "exec"), ns)  # noqa: S102 (our own test solutions)
    defn, cfg = ours(definition)
    w = Workload.model_validate(SMALL_WORKLOADS[definition][0])
    for seed in (0, 1, 2):
        x = make(defn, cfg, w, seed)
        r = judge(defn, cfg, w, x, ns["run"](**clone(x)), our_run(definition)(**clone(x)))
        assert r.status.value == expected, (seed, r.message)


@pytest.mark.slow
@pytest.mark.parametrize("solution,definition,expected", E2E, ids=[c[0].removesuffix(".json") for c in E2E])
def test_heldout_solution_through_kbot_eval(tmp_path, solution, definition, expected):
    wl = tmp_path / "workloads.jsonl"
    wl.write_text("".join(json.dumps(w) + "\n" for w in SMALL_WORKLOADS[definition]))
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "eval", str(SOLUTIONS / solution), "-d", definition, "-w", str(wl),
         "--device", "cpu", "--trials", "2", "--budget", "0.1", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=280,
    )
    report = out / "report.json"
    assert report.is_file(), p.stdout[-3000:] + p.stderr[-3000:]
    statuses = [w["status"] for w in json.loads(report.read_text())["workloads"]]
    assert statuses == [expected], (statuses, p.stdout[-2000:])
