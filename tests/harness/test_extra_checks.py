"""kbot's extra checks (sidecar ``checks:``): run beside the official verdict, reported by name, never
changing the status; folded over trials into the report, summarized, printed and shown in the review."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

from harness.compare import CheckOutcome, check_rows_relative_l2, compare
from harness.defconfig import CheckRef, DefinitionConfig, Tolerance
from harness.report import Correctness, DeviceInfo, Report, WorkloadResult
from harness.report_table import check_lines, print_report
from harness.schema import Definition, SchemaError, Status

DEFN = Definition.model_validate({
    "name": "rows_t", "op_type": "t", "axes": {"T": {"type": "var"}, "H": {"type": "const", "value": 64}},
    "inputs": {"x": {"shape": ["T", "H"], "dtype": "float32"}}, "outputs": {"out": {"shape": ["T", "H"], "dtype": "float32"}},
    "reference": "def run(x):\n    return x\n",
})
LOOSE = Tolerance(atol=1.0, rtol=0.3, required_matched_ratio=0.9)


def cfg(**params) -> DefinitionConfig:
    return DefinitionConfig(tolerance=LOOSE, checks={"rows": CheckRef(check="rows_relative_l2", params={"max_error": 0.05, **params}, why="rows")})


def ref(T=16) -> torch.Tensor:
    return torch.randn(T, 64, generator=torch.Generator().manual_seed(0)) * 50


def test_a_uniformly_scaled_row_passes_the_official_rule_and_fails_the_row_check():
    r = ref()
    got = r.clone()
    got[3] *= 1.2  # one token's weight 20 % off: every element within rtol 0.3
    res = compare({"out": got}, {"out": r}, definition=DEFN, axes={"T": 16, "H": 64}, config=cfg())
    assert res.status is Status.PASSED and res.matched_ratio == 1.0
    c = res.checks["rows"]
    assert not c.ok and c.value == pytest.approx(0.2, rel=1e-4) and c.limit == 0.05 and "row 3" in c.message and c.why == "rows"


def test_small_independent_noise_passes_and_the_allowed_rows_are_a_fraction():
    r = ref(2000)
    noisy = r + torch.randn(r.shape, generator=torch.Generator().manual_seed(1)) * 0.02 * r.abs().mean()
    assert compare({"out": noisy}, {"out": r}, definition=DEFN, axes={"T": 2000, "H": 64}, config=cfg()).checks["rows"].ok
    flipped = noisy.clone()
    flipped[7] = -flipped[7]  # a whole row different (a top-k near-tie decided the other way)
    assert not check_rows_relative_l2({"out": flipped}, {"out": r}, definition=DEFN, max_error=0.05).ok
    ok = check_rows_relative_l2({"out": flipped}, {"out": r}, definition=DEFN, max_error=0.05, max_bad_fraction=0.001)
    assert ok.ok and ok.value < 0.05  # 2 rows of 2000 may exceed; the value is the first one that may not
    two = flipped.clone()
    two[8], two[9] = -two[8], -two[9]
    assert not check_rows_relative_l2({"out": two}, {"out": r}, definition=DEFN, max_error=0.05, max_bad_fraction=0.001).ok


def test_zero_rows_are_measured_against_a_floor_and_nan_fails():
    r = ref(4)
    r[1] = 0
    got = r.clone()
    got[1] = 1e-3  # tiny next to rows of norm ~400: fine
    assert check_rows_relative_l2({"out": got}, {"out": r}, definition=DEFN, max_error=0.05).ok
    got[1] = 5.0
    assert not check_rows_relative_l2({"out": got}, {"out": r}, definition=DEFN, max_error=0.05).ok
    got = r.clone()
    got[2, 0] = float("nan")
    o = check_rows_relative_l2({"out": got}, {"out": r}, definition=DEFN, max_error=0.05)
    assert not o.ok and o.value == float("inf")


def test_checks_run_only_on_passed_verdicts_and_unknown_checks_are_an_error():
    r = ref()
    res = compare({"out": r * 3}, {"out": r}, definition=DEFN, axes={"T": 16, "H": 64}, config=cfg())
    assert res.status is Status.INCORRECT_NUMERICAL and res.checks == {}
    bad = DefinitionConfig(checks={"x": CheckRef(check="no_such_check")})
    with pytest.raises(KeyError, match="no_such_check"):
        compare({"out": r}, {"out": r}, definition=DEFN, axes={"T": 16, "H": 64}, config=bad)
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        CheckRef.model_validate({"check": "rows_relative_l2", "unknown": 1})


def test_a_check_that_raises_is_a_failed_outcome_not_a_crash():
    r = ref()
    res = compare({"out": r}, {"out": r}, definition=DEFN, axes={"T": 16, "H": 64}, config=cfg(output="missing"))
    assert res.ok and not res.checks["rows"].ok and res.checks["rows"].value is None and "KeyError" in res.checks["rows"].message


def test_sidecar_rejects_malformed_checks(tmp_path):
    from harness.defconfig import load_config

    (tmp_path / "kbot.yaml").write_text("checks:\n  a: {check: rows_relative_l2, param: {}}\n")
    with pytest.raises(SchemaError, match="checks"):
        load_config("rows_t", tmp_path / "definition.json")


def test_trials_fold_into_one_result_per_check():
    c = Correctness()
    c.add_checks({"rows": CheckOutcome(True, 0.01, 0.05, "t0", "why")})
    c.add_checks({"rows": CheckOutcome(False, 0.2, 0.05, "t1")})
    c.add_checks({"rows": CheckOutcome(True, 0.02, 0.05, "t2")})
    r = c.checks["rows"]
    assert (r.ok, r.trials, r.failed_trials, r.value, r.message, r.why) == (False, 3, 1, 0.2, "t1", "why")
    c.add_checks({"rows": CheckOutcome(False, None, None, "crashed")})
    assert c.checks["rows"].value is None and c.checks["rows"].message == "crashed"


def with_checks(values):
    ws = []
    for i, v in enumerate(values):
        c = Correctness(trials=1)
        c.add_checks({"token_l2": CheckOutcome(v <= 0.08, v, 0.08, f"row 0: {v}", "per-token L2")})
        ws.append(WorkloadResult(uuid=f"w{i}", axes={"T": i + 1}, status=Status.PASSED, correctness=c))
    return Report(run_id="r", definition="rows_t", solution="s", solution_hash="c" * 64,
                  device=DeviceInfo(kind="cpu", name="cpu", timer="cpu_monotonic"), workloads=ws, started="2026-01-01T00:00:00Z")


def test_summary_printed_table_and_review_show_each_check_on_its_own_line(tmp_path):
    rep = with_checks([0.02, 0.03])
    s = rep.summary()["checks"]["token_l2"]
    assert (s["workloads"], s["passed"], s["failed"], s["worst"], s["limit"]) == (2, 2, [], 0.03, 0.08)
    bad = with_checks([0.02, 0.25, 0.01])
    s = bad.summary()["checks"]["token_l2"]
    assert s["failed"] == ["w2"] and s["worst"] == 0.25 and s["worst_message"] == "row 0: 0.25"
    assert all(w.status is Status.PASSED for w in bad.workloads)  # the verdict is untouched
    line = check_lines(bad.summary()["checks"])[0]
    assert "token_l2" in line and "FAILED on w2" in line and "limit 0.08" in line
    buf = io.StringIO()
    print_report(bad, tmp_path, Console(file=buf, width=200))
    assert "kbot check token_l2: 2/3 workloads" in buf.getvalue()
    from bot.review.sticky_review import render_review

    md = render_review(bad)
    assert "kbot check `token\\_l2`" in md and "❌ failed on w2 of 3" in md and "per-token L2" in md
    md = render_review(rep)
    assert "✅ passed on 2/2 workloads (worst 0.0300, limit 0.0800)" in md
    assert "kbot check" not in render_review(Report(**{**with_checks([]).model_dump(), "workloads": [WorkloadResult(uuid="w", axes={}, status=Status.PASSED)]}))
