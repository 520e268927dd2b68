"""The static report as people read it: a local workspace built by the real loop (synthetic latencies,
one candidate with a failed workload), its pages checked on the HTML: the reviews rendered (no raw
Markdown, no double escapes, no Mermaid source, no evidence blob), the charts drawn as SVG (the
promotion threshold and the promoted attempts marked, the latency against the floor), and the CPU/GPU
notice on every page. The same checks run on a real CPU campaign in test_local_loop_cpu.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.campaign.local_loop import OptimizeOptions, Workspace, optimize
from bot.site.build import build_site
from bot.site.charts import bar_chart, floor_chart, parse_xychart, speedup_chart
from bot.site.markdown_html import render_markdown, sanitize_html
from tests.controller.synthetic import make_report
from tests.local.test_local_loop_synthetic import WORKLOADS, SyntheticHarness

RAW_MARKDOWN = [
    re.compile(r"\*\*[^*\n]+\*\*"),            # emphasis left as asterisks
    re.compile(r"^\s*\|.*\|\s*$", re.M),       # a table row left as text
    re.compile(r"^\|?\s*-{3,}\s*\|", re.M),    # a table rule
    re.compile(r"```"),                        # a fence
    re.compile(r"^#{2,4} ", re.M),             # a heading left as text
    re.compile(r"xychart-beta"),               # Mermaid source instead of a chart
    re.compile(r"&amp;(gt|lt|amp|#96);"),      # an escape escaped twice
    re.compile(r"kbot:evidence|kbot:review"),  # the bot's hidden blocks
    re.compile(r'<pre class="review">'),       # the old way: the review as preformatted text
]


def assert_rendered(page: str, *, timing: str) -> None:
    """One page of the report: no raw Markdown in it, its notice says ``timing`` (CPU or GPU)."""
    text = re.sub(r"<(pre|code)[^>]*>.*?</\1>", "", page, flags=re.S)  # code may show anything
    for pat in RAW_MARKDOWN:
        m = pat.search(text if pat.pattern != "```" else page)
        assert m is None, f"raw Markdown {pat.pattern!r} in the page: …{page[max(0, m.start() - 120):m.end() + 120]}…"
    notice = re.search(r'<p class="timing-notice timing-(\w+)"[^>]*><strong>([^<]+)</strong>', page)
    assert notice is not None, "no CPU/GPU timing notice at the top of the page"
    assert notice.group(2).startswith(f"{timing} timings"), notice.group(0)


class HarnessWithAFailure(SyntheticHarness):
    """The synthetic harness with a roofline floor on every workload, and the first candidate wrong on
    its second workload (so one PR is rejected with a failed workload in its review)."""

    def _ws(self, sol):
        return [{**w, "floor_ms": 0.05} for w in super()._ws(sol)]

    def evaluate(self, solution, baseline):
        key = (solution.content_hash(), baseline.content_hash() if baseline else None)
        if key not in self.cache and self.runs == 1:  # the run after the starting point: the first candidate
            self.runs += 1
            ws = self._ws(solution)
            ws[1] = {"uuid": ws[1]["uuid"], "axes": ws[1]["axes"], "status": "INCORRECT_NUMERICAL",
                     "message": "max abs error 3.2 > atol 0.01 (x > y & <b>)"}
            if baseline is not None:
                ws[0]["baseline_ms"] = self._ws(baseline)[0]["latency_ms"]
            self.cache[key] = make_report(solution, ws, baseline)
        return super().evaluate(solution, baseline)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    summary = optimize(OptimizeOptions(definition="rmsnorm_h4096", agent="offline", device="cpu", workspace=tmp / "ws",
                                       rounds=2, candidates=2, workloads=WORKLOADS), harness=HarnessWithAFailure({}))
    ws = Workspace(tmp / "ws")
    build_site(ws, tmp / "site")
    return {"summary": summary, "dir": tmp / "site", "ws": ws}


def _page(site, name: str) -> str:
    return (site["dir"] / name).read_text()


def test_every_page_is_rendered_and_says_cpu_timings(site):
    pages = sorted(p.name for p in site["dir"].glob("*.html"))
    assert "index.html" in pages and len(pages) >= 3
    for name in pages:
        assert_rendered(_page(site, name), timing="CPU")


def test_the_index_marks_promoted_attempts_and_draws_the_champion_against_its_floor(site):
    index = _page(site, "index.html")
    rows = site["summary"]["candidates"]
    promoted = [r for r in rows if r["decision"] == "promote"]
    assert promoted, "the campaign promoted nothing: the marker check proves nothing"
    for r in promoted:
        assert f">promoted #{r['pr']}</text>" in index
    assert index.count('class="promoted"') == len(promoted) + 1  # + the starting champion
    assert 'aria-label="latency against the roofline floor"' in index
    # the roofline as a percentage with its bound class, not 2.3e-05
    cells = re.findall(r'<td class="n roofline">([^<]*)</td>', index)
    assert cells and all(re.fullmatch(r"[0-9.]+% \((memory|compute|latency)\)|—", c) for c in cells), cells


def test_a_promoted_pr_page_shows_the_review_with_its_chart_and_threshold(site):
    pr = next(r["pr"] for r in site["summary"]["candidates"] if r["decision"] == "promote")
    page = _page(site, f"pr-{pr}.html")
    review = page.split('<div class="review">', 1)[1].split("<h2>Conversation</h2>", 1)[0]
    assert "<strong>Decision: PROMOTE</strong>" in review
    assert "<table>" in review and "<th>axes</th>" in review  # the workload table, as a table
    assert '<figure class="chart"><svg' in review and 'class="threshold"' in review
    assert "<h3>Reproduce</h3>" in review and "kbot eval kernels/rmsnorm_h4096/" in review
    assert "--baseline kernels/rmsnorm_h4096/" in review and "CHAMPION.json" not in review  # the champion's real file
    assert "Next step" not in review  # promoted: nothing to do
    assert 'aria-label="latency against the roofline floor"' in page and "% " in page


def test_a_rejected_pr_page_unfolds_the_failure_and_says_what_to_do(site):
    rejected = [r for r in site["summary"]["candidates"] if r["decision"] == "reject"]
    failed = next(r for r in rejected if r["status"] != "PASSED")
    page = _page(site, f"pr-{failed['pr']}.html")
    assert "<details open><summary>Failed workloads (1)</summary>" in page
    assert "max abs error 3.2 &gt; atol 0.01 (x &gt; y &amp; &lt;b&gt;)" in page  # escaped once, shown as typed
    assert "<code>/optimize rmsnorm_h4096</code>" in page
    assert re.search(r"kbot/harness</th><td>failure", page)  # no green check on a reject


def test_raw_html_in_a_body_is_shown_as_text():
    html = render_markdown("hi <script>alert(1)</script> <img src=x onerror=alert(1)> <details open><summary>s</summary>\n\n"
                           "[x](javascript:alert(1)) <!-- kbot:meta {} -->\n\n</details>")
    assert "<script>" not in html and "&lt;script&gt;" in html and "<img" not in html
    assert "<details open><summary>s</summary>" in html and 'href="javascript' not in html and "kbot:meta" not in html
    assert sanitize_html('<pre onclick="x">a &lt; b</pre>') == '&lt;pre onclick="x"&gt;a &lt; b</pre>'
    img = render_markdown("see ![a <b>chart</b>](https://tracker.example/p.png)")
    assert "<img" not in img and "tracker.example" not in img and "[image: a &lt;b&gt;chart" in img  # nothing fetched


def test_the_review_chart_is_parsed_and_anything_else_is_shown_as_source():
    c = parse_xychart('xychart-beta\n    title "Paired speedup vs champion"\n    x-axis [w1, w2]\n'
                      '    y-axis "speedup (x)" 0 --> 1.5\n    bar [1.2, 0]\n    line [1.03, 1.03]\n')
    assert c is not None and c.labels == ["w1", "w2"] and c.bars == [1.2, 0.0] and c.ymax == 1.5
    html = render_markdown("```mermaid\nxychart-beta\n    x-axis [w1]\n    bar [1.1]\n    line [1.03]\n```")
    assert "<svg" in html and 'class="threshold"' in html
    other = render_markdown("```mermaid\ngraph TD; A-->B\n```")
    assert "<svg" not in other and "graph TD; A--&gt;B" in other and "does not draw" in other
    assert parse_xychart("xychart-beta\n    bar [1, oops]") is None


def test_charts_escape_their_labels_and_handle_empty_input():
    svg = bar_chart(["<w1>"], [1.0], title="a & b", threshold=1.03)
    assert "&lt;w1&gt;" in svg and "a &amp; b" in svg and "<w1>" not in svg
    assert "no workload has both" in floor_chart([("w1", None, 0.1, "memory")])
    assert speedup_chart([]).startswith("<svg")
    assert "failed" in speedup_chart([(1, None, "", None)])


def test_pr_show_renders_the_review_for_a_terminal(site):
    from click.testing import CliRunner

    from harness.cli import _register_plugins, cli

    _register_plugins()
    failed = next(r for r in site["summary"]["candidates"] if r["decision"] == "reject" and r["status"] != "PASSED")
    out = CliRunner().invoke(cli, ["pr", "show", str(failed["pr"]), "--workspace", str(site["ws"].root)])
    assert out.exit_code == 0, out.output
    text = out.output
    assert "Decision: REJECT" in text and "Failed workloads (1)" in text
    assert "kbot:evidence" not in text and "<details" not in text and "```" not in text and "**" not in text
    assert "█" in text and "promotion threshold" in text  # the chart as text bars with the threshold
    assert max(len(line) for line in text.splitlines()) <= 80  # outside a terminal: 80 columns
    raw = CliRunner().invoke(cli, ["pr", "show", str(failed["pr"]), "--workspace", str(site["ws"].root), "--json"])
    import json

    assert "kbot:evidence" in json.loads(raw.output)["review"]  # --json keeps the body as it is


REPO = Path(__file__).resolve().parents[2]
