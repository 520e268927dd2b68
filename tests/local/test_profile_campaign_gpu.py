"""On a GPU runner (`pytest -m gpu`; not run in this session): a campaign profiles every passing
candidate by default, with ncu sections chosen by the roofline class and the cost recorded per
candidate within its budget. The longer measurement is scripts/gpu/profiled_campaign.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.campaign.local_loop import OptimizeOptions, optimize
from harness.profile.ncu import SECTIONS, find_ncu
from harness.profile.plan import CLASS_SECTIONS, OVERRUN_S
from harness.report import load_report

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("definition", ["rmsnorm_h4096", "gdn_decode_qk4_v8_d128_k_last"])
def test_campaign_profiles_every_passing_candidate_on_the_gpu(tmp_path, definition):
    if find_ncu() is None:
        pytest.skip("ncu not installed on this runner")
    budget = 90.0
    summary = optimize(OptimizeOptions(definition=definition, agent="offline", device="cuda", rounds=1, candidates=2,
                                       workspace=tmp_path / "ws", profile_budget_s=budget))
    assert summary["device"] == "cuda"
    store = tmp_path / "ws" / "campaigns" / definition / "001"
    reports = [load_report(p) for p in sorted((store / "reports").glob("*.json"))]
    assert len(reports) >= 2
    for rep in reports:
        passing = [w for w in rep.workloads if w.status.value == "PASSED"]
        if not passing:
            continue
        prof = rep.profiling
        assert prof is not None and prof["profile"] is True and prof["budget_s"] == budget
        assert prof["profiled"], f"{rep.solution}: no workload profiled with ncu"
        # The budget bounds the whole of it (static compile included), within its stated tolerance.
        assert prof["spent_s"] <= budget + OVERRUN_S and prof["within_budget"], prof
        assert all(w.feedback for w in passing)
        for w in passing:
            plan = w.profile["plan"]
            if plan["classes"]:
                wanted = {s for c in plan["classes"] for s in CLASS_SECTIONS[c]}
                assert set(plan["sections"]) == wanted and set(plan["sections"]) <= set(SECTIONS)
        profiled = [w for w in passing if w.uuid in prof["profiled"]]
        assert all("ncu" in w.profile["evidence"] for w in profiled)
        if definition == "rmsnorm_h4096":
            # Triton kernels all (the contest operator starts from its plain-torch reference): SASS of
            # the kernel ncu found dominating, and the ahead-of-time compile statistics.
            assert prof["static"] == "ok"
            assert all("sass" in w.profile["evidence"] for w in profiled)
