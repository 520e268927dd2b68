"""A static site of a local workspace: opens from disk, no server, no CDN, no JavaScript.

    index.html        per definition: leaderboard (champion lineage), speedup-over-attempts chart
                      (promoted attempts marked), the champion's latency against its roofline floor,
                      the search tree, and every attempt with its decision and roofline
    pr-<N>.html       one page per pull request: status, decision, workload table with the roofline
                      as a percentage and its bound class, latency against the floor, the review
                      (rendered Markdown, its chart drawn), the conversation

Every page says at its top whether its timings are CPU or GPU figures (and from which device). A
workspace with no campaign yet, or none at all (``ws`` None: nothing is created), gets an index that
says so and gives the commands that start one (``start_hint``).
Everything shown is read from the records (champion.json on the workspace's main, the forge store,
the campaign stores and their reports); nothing is measured here. Values go through jinja2's HTML
autoescaping: names, rationales and logs may come from a model; review and comment bodies are
rendered by ``bot.site.markdown_html`` (raw HTML in them sanitized). Charts are inline SVG from
``bot.site.charts``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from bot.controller.tree import ROOT, SearchConfig, Tree
from bot.forge.markers import strip_hidden
from bot.forge.trusted_meta import read_meta
from bot.names import STATUS_CONTEXT
from bot.promotion.champion import read_champion
from bot.review.evidence import find_bot_review
from bot.site.charts import floor_chart, pct_text, speedup_chart
from bot.site.markdown_html import render_markdown
from harness.report import Report, load_report
from harness.schema import Status

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        # CPU-interpreter speedups vs the reference are ~0.001: keep three significant digits there.
        return f"{x:.{digits}g}" if x != 0 and abs(x) < 0.1 else f"{x:.{digits}f}"
    return "—"


def _x(x: Any) -> str:
    s = _fmt(x)
    return s + "x" if s != "—" else s


_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
def _pct(fraction: Any) -> str:
    """A roofline fraction as a percentage of the floor (``0.0024%`` on a CPU, ``71%`` on a GPU)."""
    if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and math.isfinite(fraction):
        return pct_text(100.0 * fraction)
    return "—"


_ENV.filters.update(num=_fmt, x=_x, pct=_pct, markdown=render_markdown)


@dataclass(frozen=True)
class RooflineCell:
    """The roofline of one evaluation as a table shows it: the least fraction of the floor reached over
    its passing workloads, and the bound class of that workload."""

    fraction: float | None
    bound: str | None

    @property
    def text(self) -> str:
        if self.fraction is None:
            return "—"
        return _pct(self.fraction) + (f" ({self.bound})" if self.bound else "")


def roofline_cell(report: Report | None, fallback: float | None = None) -> RooflineCell:
    rows = [w.roofline for w in (report.workloads if report else []) if w.status is Status.PASSED
            and w.roofline is not None and w.roofline.fraction is not None]
    if rows:
        worst = min(rows, key=lambda r: r.fraction)  # type: ignore[arg-type, return-value]
        return RooflineCell(worst.fraction, worst.bound)
    return RooflineCell(fallback if isinstance(fallback, (int, float)) else None, None)


def timing_notice(reports: list[Report]) -> dict[str, str]:
    """Whether the timings of a page are CPU or GPU figures, and from which device: ``kind`` (cpu,
    gpu, mixed, none) and one sentence."""
    kinds = {r.device.kind for r in reports}
    names = sorted({r.device.name for r in reports})
    where = ", ".join(names)
    if not reports:
        return {"kind": "none", "text": "No timings on this page: nothing was measured yet."}
    if kinds == {"cpu"}:
        return {"kind": "cpu", "text": f"Measured on {where} with the CPU clock (Triton through its interpreter): "
                                       "not GPU measurements; compare them with each other only."}
    if kinds == {"cuda"}:
        return {"kind": "gpu", "text": f"GPU timings, measured on {where} (CUDA events)."}
    return {"kind": "mixed", "text": f"Mixed CPU and GPU timings ({where}): each table says its device; do not compare "
                                     "figures across devices."}


def floor_rows(report: Report) -> list[tuple[str, float | None, float | None, str | None]]:
    return [(f"w{i}", w.latency_ms.median if w.latency_ms and w.status is Status.PASSED else None,
             w.roofline.floor_ms if w.roofline else None, w.roofline.bound if w.roofline else None)
            for i, w in enumerate(report.workloads, start=1)]


@dataclass
class Attempt:
    seq: int
    node: str
    parent: str | None
    solution: str | None
    status: str
    speedup_vs_start: float | None
    speedup_vs_champion: float | None
    speedup_vs_reference: float | None
    roofline: RooflineCell
    pr: int | None
    decision: str | None
    headline: str
    rationale: str
    campaign: str
    device: str = ""  # "cpu" / "cuda" and the device's name, from its report
    report: Report | None = None
    children: list["Attempt"] = field(default_factory=list)


def _attempts(ws: Any, definition: str) -> tuple[list[Attempt], list[Attempt]]:
    """(flat list in creation order over all campaigns, roots of the search trees)."""
    flat: list[Attempt] = []
    roots: list[Attempt] = []
    folder = ws.campaigns / definition
    for store in sorted(folder.glob("[0-9][0-9][0-9]")) if folder.is_dir() else []:
        records = [json.loads(p.read_text()) for p in sorted((store / "nodes").glob("*.json"))]
        if not records:
            continue
        tree = Tree.from_records(records, SearchConfig())
        outcomes = json.loads((store / "outcomes.json").read_text()) if (store / "outcomes.json").exists() else {}
        by_id: dict[str, Attempt] = {}
        for n in sorted(tree.nodes.values(), key=lambda n: n.seq):
            if n.id == ROOT:
                continue
            s = n.summary or {}
            o = outcomes.get(n.id, {})
            status = (s.get("status") or n.status) if n.status != "failed" else "AGENT_FAILED"
            rp = store / "reports" / f"{n.id}.json"
            report = load_report(rp) if rp.is_file() else None
            a = Attempt(seq=len(flat) + 1, node=n.id, parent=None if n.parent == ROOT else n.parent,
                        solution=n.solution.name if n.solution else None, status=str(status).upper(),
                        speedup_vs_start=tree.speedup(n), speedup_vs_champion=s.get("speedup_vs_baseline"),
                        speedup_vs_reference=s.get("speedup_vs_reference"), roofline=roofline_cell(report, s.get("roofline_fraction_min")),
                        pr=o.get("pr"), decision=o.get("decision"), headline=o.get("headline") or "",
                        rationale=n.rationale or "", campaign=f"{definition}/{store.name}",
                        device=f"{report.device.kind}: {report.device.name}" if report else "", report=report)
            by_id[n.id] = a
            flat.append(a)
            parent = by_id.get(a.parent) if a.parent else None
            (parent.children if parent else roots).append(a)
    return flat, roots


def _report_for(ws: Any, meta: dict[str, Any]) -> Report | None:
    camp, node = meta.get("campaign"), meta.get("node")
    if not isinstance(camp, str) or not isinstance(node, str) or ".." in camp or "/" in node:
        return None
    path = ws.campaigns / camp / "reports" / f"{node}.json"
    return load_report(path) if path.exists() else None


def start_hint(workspace: Path, out: str | Path) -> dict[str, Any]:
    """How to start a first campaign and see it here: the commands (with ``--workspace`` where it is not
    the default) and the definitions this repository offers (``kbot definitions list``)."""
    from bot.campaign.local_loop import DEFAULT_WORKSPACE
    from harness.paths import definition_names

    names = definition_names()
    example = "rmsnorm_h4096" if "rmsnorm_h4096" in names else names[0] if names else "DEFINITION"
    where = "" if Path(workspace).resolve() == DEFAULT_WORKSPACE.resolve() else f" --workspace {workspace}"
    return {"definitions": names, "optimize": f"kbot optimize {example}{where}", "report": f"kbot report --html {out}{where}"}


def build_site(ws: Any | None, out: str | Path, *, workspace: str | Path | None = None) -> list[Path]:
    """Write the site into ``out``; returns the files written. ``workspace``: the workspace's path as the
    user gave it (for the commands the page suggests); ``ws`` None: there is no workspace there yet, and
    the site is its index alone, saying so (nothing is created there)."""
    if ws is None and workspace is None:
        raise ValueError("build_site needs a workspace, or the path where there is none yet")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    forge = ws.forge if ws is not None else None
    root = ws.root if ws is not None else Path(workspace).resolve()  # type: ignore[arg-type]
    prs = list(forge.list_prs(state="all")) if forge is not None else []
    definitions = sorted({p.name for p in ws.campaigns.iterdir() if p.is_dir()}) if ws is not None and ws.campaigns.is_dir() else []
    sections = []
    outcome_of: dict[int, Attempt] = {}
    every_report: list[Report] = []
    for d in definitions:
        flat, roots = _attempts(ws, d)
        for a in flat:
            if a.pr is not None:
                outcome_of[a.pr] = a
        reports = [a.report for a in flat if a.report is not None]
        every_report += reports
        champ = read_champion(forge, d) or {}
        lineage = ([{k: champ.get(k) for k in ("solution", "pr", "promoted_at", "summary", "solution_hash")}]
                   + list(champ.get("history") or [])) if champ else []
        chart = speedup_chart([(a.seq, a.speedup_vs_start, a.decision or "", a.pr) for a in flat])
        # the champion's latest evaluation: the attempt that is the champion now (promoted last, or the start)
        champ_attempt = next((a for a in reversed(flat) if a.report is not None and a.solution == champ.get("solution")), None)
        sections.append({"definition": d, "champion": champ, "lineage": lineage, "attempts": flat, "roots": roots,
                         "chart": chart, "timing": timing_notice(reports), "champion_attempt": champ_attempt,
                         "floor_chart": floor_chart(floor_rows(champ_attempt.report)) if champ_attempt and champ_attempt.report else None})
    written = []
    page = _ENV.get_template("index.html.j2").render(sections=sections, prs=prs, outcome_of=outcome_of,
                                                    workspace=str(root), exists=ws is not None,
                                                    start=start_hint(Path(workspace) if workspace is not None else root, out) if not sections else None,
                                                    timing=timing_notice(every_report))
    (out / "index.html").write_text(page)
    written.append(out / "index.html")
    for pr in prs:
        meta = read_meta(pr, forge) or {}
        report = _report_for(ws, meta)
        review = find_bot_review(forge, pr.number)
        status = forge.combined_status(pr.head_sha).get(STATUS_CONTEXT)
        comments = list(forge.list_comments(pr.number))
        # hidden machine blocks (marker, evidence) are for the bot, not for people reading the page
        review_text = strip_hidden(review.body) if review else None
        html = _ENV.get_template("pr.html.j2").render(
            pr=pr, meta=meta, report=report, review=review_text, status=status,
            comments=[{"author": c.author, "created_at": getattr(c, "created_at", None), "body": strip_hidden(c.body)} for c in comments],
            attempt=outcome_of.get(pr.number), timing=timing_notice([report] if report else []),
            roofline=roofline_cell(report), floor_chart=floor_chart(floor_rows(report)) if report else None)
        path = out / f"pr-{pr.number}.html"
        path.write_text(html)
        written.append(path)
    return written
