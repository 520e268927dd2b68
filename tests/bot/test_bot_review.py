"""Review rendering: the numbers in the table, the chart, the feedback, and escaping of hostile text."""

from __future__ import annotations

import re

from reportkit import FB, FINDING, good, lat, report, workload

from bot.forge.markers import REVIEW_MARKER
from bot.promotion.decision import PromotionPolicy, decide
from bot.review.evidence import Evidence, read_evidence
from bot.review.markdown import ZWSP, escape_inline
from bot.review.sticky_review import render_review, status_line
from harness.report import PairedRatio
from harness.schema import Status

HEAD = "a" * 40


def table_rows(md: str) -> list[list[str]]:
    rows = []
    for line in md.splitlines():
        if re.match(r"^\| w\d+ \|", line):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))])
    return rows


def test_table_numbers_and_structure():
    rep = report([workload(0, (1.25, 1.20, 1.31), median=0.0123, vs_ref=3.5, feedback=[FB]),
                  workload(1, (0.98, 0.97, 0.99), median=0.0456, vs_ref=1.5)])
    d = decide(Evidence.from_report(rep, HEAD), PromotionPolicy(), champion_hash="b" * 64, pr_head_sha=HEAD,
               up_to_date=True)
    md = render_review(rep, None, d, head_sha=HEAD)
    assert md.startswith(REVIEW_MARKER + "\n")
    rows = table_rows(md)
    assert len(rows) == 2
    w1, w2 = rows
    assert w1[0] == "w1" and w1[2] == "PASSED"
    assert w1[3] == "0.0123 [0.0121, 0.0125]"
    assert w1[4] == "1.250x [1.200, 1.310]"
    assert w1[5] == "3.500x"
    assert w1[6] == "40% (memory)"
    assert w2[4] == "0.980x [0.970, 0.990]"
    # chart: one bar per workload with the paired medians
    assert "xychart-beta" in md and "bar [1.25, 0.98]" in md and "x-axis [w1, w2]" in md
    # feedback: severity, title, evidence numbers, recommendation
    assert "**HIGH** Loads are not coalesced" in md
    assert "sectors\\_per\\_request = 8.2000" in md
    assert "→ vectorize" in md
    assert "Decision: PROMOTE" in md
    assert "<details><summary>Run details</summary>" in md
    assert f"`{HEAD[:12]}`" in md


def test_failures_in_collapsible_section_with_log():
    rep = report([workload(0), workload(1, status=Status.RUNTIME_ERROR, ratio=None, message="CUDA error",
                                       log="Traceback...\nRuntimeError: boom")])
    md = render_review(rep)
    assert "<details open><summary>Failed workloads (1)</summary>" in md  # unfolded: the reason to read on
    assert "<pre>Traceback...\nRuntimeError: boom</pre>" in md
    assert table_rows(md)[1][4] == "—"


def test_hostile_names_are_escaped():
    evil = "x` | @everyone <img src=x onerror=alert(1)> [click](https://evil.example) <!-- kbot:review -->"
    rep = good(n=1, solution=evil)
    rep.workloads[0].message = evil
    rep.workloads[0].status = Status.INCORRECT_NUMERICAL
    rep.workloads[0].log = "```\n@admin\n</pre><script>x</script>"
    rep.workloads[0].feedback = [FB.model_copy(update={"title": evil, "recommendation": "@you ping"})]
    rep.findings = [FINDING.model_copy(update={"message": evil})]
    md = render_review(rep)
    assert "<img" not in md and "<script" not in md and "</pre><" not in md
    assert "@everyone" not in md and "@admin" not in md and "@you" not in md
    assert f"@{ZWSP}everyone" in md
    assert "](https://" not in md and "https://evil" not in md
    # exactly one live review marker: the first line
    assert md.count("<!-- kbot:review -->") == 1
    # table cells: no unescaped pipe from the name
    for line in md.splitlines():
        if line.startswith("| solution"):
            assert line.count("|") - line.count("\\|") == 3
    # the log stays inside its <pre>, backticks neutralized
    pre = re.findall(r"<pre>(.*?)</pre>", md, re.S)
    assert pre and "```" not in pre[0]


def test_length_caps():
    rep = good(n=1, solution="s" * 5000)
    md = render_review(rep)
    assert "s" * 101 not in md
    assert len(render_review(report([workload(i) for i in range(300)]))) < 65_536


def test_escape_inline_rules():
    assert escape_inline("a|b") == "a\\|b"
    assert escape_inline("<b>") == "&lt;b&gt;"
    assert escape_inline("@x #1") == f"@{ZWSP}x #{ZWSP}1"
    assert escape_inline("a\nb\u202ec") == "a bc"
    assert escape_inline("`x`", code=True) == "&#96;x&#96;"
    assert escape_inline("x" * 50, 10) == "x" * 9 + "…"


def test_evidence_block_embedded_and_status():
    rep = good()
    md = render_review(rep, head_sha=HEAD)
    assert read_evidence(md)["head_sha"] == HEAD
    state, desc = status_line(rep)
    assert state == "success" and desc.startswith("4/4 passed, 1.100x")
    bad = report([workload(0, status=Status.TIMEOUT, ratio=None)])
    assert status_line(bad)[0] == "failure"


def test_champion_report_used_for_lookup():
    champ = good(solution="champ_v1")
    md = render_review(good(), champ)
    assert "champion report run" in md


def test_empty_report_has_no_chart_and_huge_values_stay_plain():
    assert "mermaid" not in render_review(report([]))
    md = render_review(good(ratio=(1e7, 1e7, 1e7)))
    assert "e+" not in re.search(r"bar \[.*\]", md).group(0)


def test_gpu_time_column_appears_only_with_kernel_times():
    from harness.report import KernelTime, LatencyStats

    rep = report([workload(0, (1.25, 1.20, 1.31), median=0.0123, vs_ref=3.5), workload(1, (0.98, 0.97, 0.99), median=0.0456, vs_ref=1.5)])
    assert "GPU time ms (CUPTI)" not in render_review(rep)
    lat = LatencyStats(median=0.0095, mean=0.0095, ci95=(0.0094, 0.0096), stdev=0, sem=0, n=50, min=0.0094, max=0.0096)
    rep.workloads[0].kernel_time = KernelTime(latency_ms=lat)
    rep.workloads[1].kernel_time = KernelTime(withheld="3 spin kernels for 1 timed calls")
    md = render_review(rep)
    header = next(line for line in md.splitlines() if line.startswith("| # |"))
    assert "GPU time ms (CUPTI)" in header
    w1, w2 = table_rows(md)
    assert w1[4] == "0.0095" and w2[4] == "—" and w1[5] == "1.250x [1.200, 1.310]"
    assert len(w1) == len(header.strip("|").split("|"))


def with_baselines(rep):
    """Two declared baselines beside the candidate: fla ran (and was fastest on every workload but the
    last, where it failed), torch_compile ran; flashinfer could not run here."""
    from harness.report import BaselineResult, BaselineRun

    rep.baselines = [
        BaselineRun(name="fla_fused_recurrent", solution="fla", solution_hash="f" * 64, dependencies=["fla-core==0.6.0"], state="ran"),
        BaselineRun(name="torch_compile", solution="tc", solution_hash="e" * 64, dependencies=["torch>=2.4"], state="ran"),
        BaselineRun(name="flashinfer_<b>sm100</b>", solution="fi", solution_hash="d" * 64, dependencies=["flashinfer-python==0.5.2"],
                    state="could not run", reason="needs compute capability 10.0 (sm_100); this GPU is 9.0"),
    ]
    for i, w in enumerate(rep.workloads):
        last = i == len(rep.workloads) - 1
        w.baselines = {
            "fla_fused_recurrent": BaselineResult(status=Status.INCORRECT_NUMERICAL, message="trial 0: max abs error 0.5") if last else
            BaselineResult(status=Status.PASSED, latency_ms=lat(0.004), speedup=PairedRatio(median=0.8, ci95=(0.78, 0.82), n=50)),
            "torch_compile": BaselineResult(status=Status.PASSED, latency_ms=lat(0.02), speedup=PairedRatio(median=2.5, ci95=(2.4, 2.6), n=50)),
        }
    return rep


def test_review_shows_the_best_baseline_that_ran_and_those_that_could_not():
    rep = with_baselines(good(3))
    body = render_review(rep, decision=None, head_sha="a" * 40)
    assert "geomean vs the best baseline that ran" in body
    assert "vs best baseline (paired)" in body
    # Per workload: the fastest that passed (fla, except on the last workload where only torch_compile passed).
    rows = [line for line in body.splitlines() if re.match(r"^\| w\d+ \|", line)]
    assert "0.800x" in rows[0] and "fla\\_fused\\_recurrent" in rows[0]
    assert "2.500x" in rows[2] and "torch\\_compile" in rows[2]
    assert "over 3 / 3 workloads" in body and "fla\\_fused\\_recurrent on 2" in body and "torch\\_compile on 1" in body
    assert "**could not run here**: needs compute capability 10.0" in body and "this GPU is 9.0" in body
    assert "fla-core==0.6.0" in body and "torch&gt;=2.4" in body  # the pins, as plain escaped text
    assert "<b>" not in body  # a baseline's name is escaped like everything else
    assert "did not pass 1 workload(s): w3 INCORRECT\\_NUMERICAL" in body
    state, desc = status_line(rep)
    assert "vs best baseline" in desc and len(desc) <= 140
    # No declared baselines in the run: the review says nothing about them.
    plain = render_review(good(3), decision=None, head_sha="a" * 40)
    assert "best baseline" not in plain


def test_leaderboard_shows_vs_best_baseline_once_a_champion_was_measured_with_baselines():
    from bot.promotion.champion import render_leaderboard, updated_champion

    old = updated_champion(None, "d", {"solution": "a", "solution_hash": "a" * 64, "pr": 1, "summary": {"workloads": 3}})
    assert "vs best baseline" not in render_leaderboard(old)
    s = with_baselines(good(3)).summary()
    new = updated_champion(old, "d", {"solution": "b", "solution_hash": "b" * 64, "pr": 2, "summary": {
        "workloads": 3, "speedup_vs_previous": 1.2, "ci95_vs_previous": [1.1, 1.3],
        **{k: s[k] for k in ("geomean_speedup_vs_best_baseline", "best_baselines", "baselines_could_not_run")}}})
    md = render_leaderboard(new)
    assert "vs best baseline" in md and f"{s['geomean_speedup_vs_best_baseline']:.3f}x" in md
    assert "Baselines that could not run where the champion was measured" in md and "sm\\_100" in md


def test_a_champion_entry_records_the_card_and_the_leaderboard_shows_it():
    """A lineage can span cards (an H200 promotion, then an H100 one): each row says where it was measured."""
    from bot.promotion.champion import render_leaderboard, updated_champion
    from bot.promotion.execute import SUMMARY_KEYS, champion_summary

    rep = good(3)
    rep.device.name = "NVIDIA H100 80GB HBM3"
    s = champion_summary(rep)
    assert s["measured_on"] == "NVIDIA H100 80GB HBM3" and "measured_on" in SUMMARY_KEYS
    assert {k: v for k, v in s.items() if k != "measured_on"} == rep.summary()  # nothing else changes
    old = updated_champion(None, "d", {"solution": "a", "solution_hash": "a" * 64, "pr": 1, "summary": {"workloads": 3}})
    assert "measured on" not in render_leaderboard(old)  # pointers written before the card was recorded render as before
    new = updated_champion(old, "d", {"solution": "b", "solution_hash": "b" * 64, "pr": 2, "summary": {
        "workloads": 3, "speedup_vs_previous": 1.2, "ci95_vs_previous": [1.1, 1.3], "measured_on": s["measured_on"]}})
    md = render_leaderboard(new)
    rows = [line for line in md.splitlines() if line.startswith("| 1") or line.startswith("| 2")]
    assert "measured on" in md and "NVIDIA H100 80GB HBM3" in rows[0] and "| — |" in rows[1]
    header = next(line for line in md.splitlines() if line.startswith("| # |"))
    assert header.count("|") == rows[0].count("|") == rows[1].count("|")


def test_committed_leaderboards_render_as_they_are(repo):
    """The shipped champions' LEADERBOARD.md files are what render_leaderboard makes of champion.json."""
    import json

    from bot.promotion.champion import render_leaderboard

    for champ in sorted((repo / "kernels").glob("*/champion.json")):
        assert render_leaderboard(json.loads(champ.read_text())) == (champ.parent / "LEADERBOARD.md").read_text(), champ


def test_the_roofline_cell_shows_the_bound_class_beside_the_fraction():
    rep = good()  # reportkit: fraction 0.4, memory-bound on every workload
    rep.workloads[1].roofline.bound = "launch"
    md = render_review(rep)
    assert "| 40% (memory) |" in md and "| 40% (launch) |" in md


def _decided(rep, **kw):
    return decide(Evidence.from_report(rep, HEAD), PromotionPolicy(), champion_hash="b" * 64, pr_head_sha=HEAD,
                  up_to_date=kw.pop("up_to_date", True))


def test_review_says_how_to_reproduce_its_measurement_and_names_the_gpu():
    rep = good()
    md = render_review(rep, None, _decided(rep), head_sha=HEAD, policy=PromotionPolicy(),
                       solution_path="kernels/gdn_decode_qk4_v8_d128_k_last/cand_v2/solution.json",
                       champion_path="kernels/gdn_decode_qk4_v8_d128_k_last/champ_v1/solution.json")
    repro = md.split("### Reproduce", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    assert repro.splitlines() == [
        f"git checkout {HEAD}",
        "kbot eval kernels/gdn_decode_qk4_v8_d128_k_last/cand_v2/solution.json --definition gdn_decode_qk4_v8_d128_k_last "
        "--baseline kernels/gdn_decode_qk4_v8_d128_k_last/champ_v1/solution.json --device cuda"]
    # a champion whose file the review does not know: where to find it, not a guessed path
    unknown = render_review(rep, head_sha=HEAD).split("```sh\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert unknown[1].startswith("git show main:kernels/gdn_decode_qk4_v8_d128_k_last/champion.json")
    assert unknown[2].endswith("--baseline CHAMPION.json --device cuda")
    assert "| measured on | GPU NVIDIA H200 (timer cuda\\_events): every figure below is from this GPU |" in md
    cpu = good().model_copy(update={"device": rep.device.model_copy(update={"kind": "cpu", "name": "CPU x86 64", "timer": "cpu_monotonic"})})
    assert "**CPU timing** on CPU x86 64" in render_review(cpu)


def test_repro_command_never_carries_a_name_that_is_not_a_plain_word():
    from bot.review.sticky_review import repro_command

    rep = good(solution="x; rm -rf ~ `id`")
    cmd = repro_command(rep, None, "$(reboot)")
    assert cmd.splitlines()[0] == "git checkout HEAD_SHA"
    assert "kbot eval SOLUTION.json --definition gdn_decode_qk4_v8_d128_k_last" in cmd
    assert ";" not in cmd and "`" not in cmd and "$(" not in cmd


def test_chart_has_a_line_at_the_promotion_threshold():
    rep = good(n=3)
    md = render_review(rep, None, _decided(rep), head_sha=HEAD, policy=PromotionPolicy(min_speedup=1.05))
    chart = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert "    bar [1.1, 1.1, 1.1]" in chart
    assert "    line [1.05, 1.05, 1.05]" in chart  # the threshold, one value per workload
    assert "promotion threshold (1.05x" in md
    first = report([workload(i, ratio=None, vs_ref=2.0) for i in range(2)], baseline=None, baseline_hash=None)
    assert "line [1, 1]" in render_review(first, policy=PromotionPolicy())  # no champion: vs the reference
    assert "line [" not in render_review(rep)  # no policy, no threshold claimed


def test_next_step_after_a_reject_names_the_command():
    slow = good(ratio=(1.01, 0.99, 1.02))
    d = _decided(slow)
    assert d.action == "reject"
    md = render_review(slow, None, d, head_sha=HEAD, policy=PromotionPolicy())
    step = md.split("**Next step:**", 1)[1].split("###", 1)[0]
    assert "`/profile`" in step and "`/optimize gdn_decode_qk4_v8_d128_k_last`" in step
    broken = report([workload(0), workload(1, status=Status.INCORRECT_NUMERICAL, ratio=None, message="max error 3.2")])
    step = render_review(broken, None, _decided(broken), head_sha=HEAD).split("**Next step:**", 1)[1].split("###", 1)[0]
    assert "`/optimize gdn_decode_qk4_v8_d128_k_last`" in step and "`/profile`" not in step
    stale = good(ratio=(1.2, 1.15, 1.25))
    d = _decided(stale, up_to_date=False)
    assert d.action == "rebenchmark"
    assert "`/evaluate`" in render_review(stale, None, d, head_sha=HEAD).split("**Next step:**", 1)[1]
    fast = good(ratio=(1.2, 1.15, 1.25))
    assert "**Next step:**" not in render_review(fast, None, _decided(fast), head_sha=HEAD)


def test_a_rejected_evaluation_carries_no_green_status():
    slow = good(ratio=(1.01, 0.99, 1.02))
    assert status_line(slow)[0] == "success"  # the measurement alone: it passed
    state, desc = status_line(slow, _decided(slow))
    assert state == "failure" and desc.endswith("; reject")
    fast = good(ratio=(1.2, 1.15, 1.25))
    assert status_line(fast, _decided(fast))[0] == "success"
