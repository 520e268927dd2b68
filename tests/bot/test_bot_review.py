"""Review rendering: the numbers in the table, the chart, the feedback, and escaping of hostile text."""

from __future__ import annotations

import re

from reportkit import FB, FINDING, good, report, workload

from bot.forge.markers import REVIEW_MARKER
from bot.promotion.decision import PromotionPolicy, decide
from bot.review.evidence import Evidence, read_evidence
from bot.review.markdown import ZWSP, escape_inline
from bot.review.sticky_review import render_review, status_line
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
    assert w1[6] == "40%"
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
    assert "<details><summary>Failed workloads (1)</summary>" in md
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
