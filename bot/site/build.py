"""A static site of a local workspace: opens from disk, no server, no CDN, no JavaScript.

    index.html        per definition: leaderboard (champion lineage), speedup-over-attempts chart,
                      the search tree, and every attempt with its decision
    pr-<N>.html       one page per pull request: status, decision, workload table, the review, comments

Everything shown is read from the records (champion.json on the workspace's main, the forge store,
the campaign stores and their reports); nothing is measured here. Values go through jinja2's HTML
autoescaping: names, rationales and logs may come from a model. Charts are inline SVG drawn below.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from bot.controller.tree import ROOT, SearchConfig, Tree
from bot.forge.trusted_meta import read_meta
from bot.names import STATUS_CONTEXT
from bot.promotion.champion import read_champion
from bot.review.evidence import find_bot_review
from harness.report import Report, load_report

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
_ENV.filters.update(num=_fmt, x=_x)


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
    roofline: float | None
    pr: int | None
    decision: str | None
    headline: str
    rationale: str
    campaign: str
    children: list["Attempt"] = field(default_factory=list)


def speedup_chart(points: list[tuple[int, float | None, str]], width: int = 640, height: int = 240) -> str:
    """Inline SVG: one dot per attempt (speedup vs the starting point; promoted ones filled green,
    failed ones as red crosses on the axis), and the best-so-far as a step line."""
    pad_l, pad_r, pad_t, pad_b = 48, 12, 12, 32
    ys = [y for _, y, _ in points if y is not None and math.isfinite(y) and y > 0]
    ymax = max(ys + [1.0]) * 1.15
    n = max(len(points), 1)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(i: int) -> float:
        return pad_l + (w * (i + 0.5) / n)

    def py(y: float) -> float:
        return pad_t + h - h * (y / ymax)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
           f'aria-label="speedup over attempts">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
           f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#333"/>',
           f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + h}" stroke="#333"/>']
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        yv = ymax * frac
        out.append(f'<text x="{pad_l - 6}" y="{py(yv) + 4:.1f}" font-size="11" text-anchor="end">{yv:.2f}</text>')
        out.append(f'<line x1="{pad_l}" y1="{py(yv):.1f}" x2="{pad_l + w}" y2="{py(yv):.1f}" stroke="#eee"/>')
    out.append(f'<line x1="{pad_l}" y1="{py(1.0):.1f}" x2="{pad_l + w}" y2="{py(1.0):.1f}" stroke="#999" stroke-dasharray="4 3"/>')
    best = None
    steps = []
    for i, (_seq, y, _decision) in enumerate(points):
        if y is not None and math.isfinite(y) and y > 0:
            best = y if best is None else max(best, y)
        if best is not None:
            steps.append((px(i), py(best)))
    if steps:
        path = "M" + " L".join(f"{a:.1f},{b:.1f}" for a, b in steps)
        out.append(f'<path d="{path}" fill="none" stroke="#2a6" stroke-width="1.5"/>')
    for i, (seq, y, decision) in enumerate(points):
        x = px(i)
        if y is None or not math.isfinite(y) or y <= 0:
            out.append(f'<path d="M{x - 4:.1f},{pad_t + h - 4:.1f} l8,8 m0,-8 l-8,8" stroke="#c33" stroke-width="2"/>')
            continue
        fill = "#2a6" if decision in ("promote", "champion") else "#fff"
        out.append(f'<circle cx="{x:.1f}" cy="{py(y):.1f}" r="5" fill="{fill}" stroke="#235"><title>attempt {seq}: {y:.3f}x</title></circle>')
        out.append(f'<text x="{x:.1f}" y="{pad_t + h + 14}" font-size="10" text-anchor="middle">{seq}</text>')
    out.append(f'<text x="{pad_l + w / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">attempt</text>')
    out.append("</svg>")
    return "\n".join(out)


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
            a = Attempt(seq=len(flat) + 1, node=n.id, parent=None if n.parent == ROOT else n.parent,
                        solution=n.solution.name if n.solution else None, status=str(status).upper(),
                        speedup_vs_start=tree.speedup(n), speedup_vs_champion=s.get("speedup_vs_baseline"),
                        speedup_vs_reference=s.get("speedup_vs_reference"), roofline=s.get("roofline_fraction_min"),
                        pr=o.get("pr"), decision=o.get("decision"), headline=o.get("headline") or "",
                        rationale=n.rationale or "", campaign=f"{definition}/{store.name}")
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


def build_site(ws: Any, out: str | Path) -> list[Path]:
    """Write the site into ``out``; returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    forge = ws.forge
    prs = list(forge.list_prs(state="all"))
    definitions = sorted({p.name for p in ws.campaigns.iterdir() if p.is_dir()} if ws.campaigns.is_dir() else set())
    sections = []
    outcome_of: dict[int, Attempt] = {}
    for d in definitions:
        flat, roots = _attempts(ws, d)
        for a in flat:
            if a.pr is not None:
                outcome_of[a.pr] = a
        champ = read_champion(forge, d) or {}
        lineage = ([{k: champ.get(k) for k in ("solution", "pr", "promoted_at", "summary", "solution_hash")}]
                   + list(champ.get("history") or [])) if champ else []
        chart = speedup_chart([(a.seq, a.speedup_vs_start, a.decision or "") for a in flat])
        sections.append({"definition": d, "champion": champ, "lineage": lineage, "attempts": flat, "roots": roots,
                         "chart": chart})
    written = []
    page = _ENV.get_template("index.html.j2").render(sections=sections, prs=prs, outcome_of=outcome_of,
                                                    workspace=str(ws.root))
    (out / "index.html").write_text(page)
    written.append(out / "index.html")
    for pr in prs:
        meta = read_meta(pr, forge) or {}
        report = _report_for(ws, meta)
        review = find_bot_review(forge, pr.number)
        status = forge.combined_status(pr.head_sha).get(STATUS_CONTEXT)
        comments = list(forge.list_comments(pr.number))
        # hidden machine blocks (marker, evidence) are for the bot, not for people reading the page
        review_text = "\n".join(line for line in review.body.splitlines() if not line.startswith("<!-- kbot:")).strip() if review else None
        html = _ENV.get_template("pr.html.j2").render(pr=pr, meta=meta, report=report, review=review_text, status=status,
                                                     comments=comments, attempt=outcome_of.get(pr.number))
        path = out / f"pr-{pr.number}.html"
        path.write_text(html)
        written.append(path)
    return written
