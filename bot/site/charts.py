"""Inline SVG charts for the static report, drawn in Python when the page is built (no JavaScript, no
CDN: the pages open offline).

    speedup_chart    one dot per attempt over the campaign, promoted ones marked and labelled
    bar_chart        per-workload bars with an optional threshold line (the review's chart)
    floor_chart      each workload's measured latency against its roofline floor, on a log scale
    parse_xychart    the small subset of Mermaid ``xychart-beta`` that our review template writes,
                     so the chart a reviewer sees on GitHub is the one drawn here

Every piece of text that reaches an SVG goes through ``html.escape``: labels can come from a review
body, which is data.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field

PROMOTED = ("promote", "champion")
GREEN, RED, GREY, INK, BLUE = "#2a6", "#c33", "#999", "#235", "#36c"


def _ok(y: float | None) -> bool:
    return y is not None and isinstance(y, (int, float)) and math.isfinite(y) and y > 0


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _open(width: int, height: int, label: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{_esc(label)}" class="chart">',
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>']


def _nice_top(v: float) -> float:
    """A round axis maximum at or above ``v`` (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten)."""
    if not v > 0:
        return 1.0
    p = 10 ** math.floor(math.log10(v))
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * p >= v * 0.999:
            return m * p
    return 10 * p


# --------------------------------------------------------------------------------- speedup over attempts


def speedup_chart(points: list[tuple[int, float | None, str, int | None]], threshold: float | None = None,
                  width: int = 640, height: int = 260) -> str:
    """Speedup vs the starting point per attempt, in creation order. ``points``: (attempt number,
    speedup or None when it failed, decision, PR number). Promoted attempts (and the starting
    champion) are filled green and labelled with their PR; failed ones are red crosses on the axis;
    the green step line is the best so far; a dashed line marks ``threshold`` when given."""
    pad_l, pad_r, pad_t, pad_b = 48, 12, 28, 34
    ys = [y for _, y, _, _ in points if _ok(y)]
    ymax = _nice_top(max(ys + [1.0, threshold or 0.0]) * 1.1)
    n = max(len(points), 1)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(i: int) -> float:
        return pad_l + (w * (i + 0.5) / n)

    def py(y: float) -> float:
        return pad_t + h - h * (y / ymax)

    out = _open(width, height, "speedup over attempts")
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        yv = ymax * frac
        out.append(f'<line x1="{pad_l}" y1="{py(yv):.1f}" x2="{pad_l + w}" y2="{py(yv):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_l - 6}" y="{py(yv) + 4:.1f}" font-size="11" text-anchor="end">{yv:.2f}x</text>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#333"/>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + h}" stroke="#333"/>')
    out.append(f'<line x1="{pad_l}" y1="{py(1.0):.1f}" x2="{pad_l + w}" y2="{py(1.0):.1f}" stroke="{GREY}" stroke-dasharray="4 3"/>')
    if threshold is not None and _ok(threshold):
        out.append(f'<line class="threshold" x1="{pad_l}" y1="{py(threshold):.1f}" x2="{pad_l + w}" y2="{py(threshold):.1f}" '
                   f'stroke="{BLUE}" stroke-dasharray="6 3"/>')
        out.append(f'<text x="{pad_l + w - 2}" y="{py(threshold) - 3:.1f}" font-size="10" text-anchor="end" fill="{BLUE}">'
                   f'promotion threshold {threshold:g}x</text>')
    best, steps = None, []
    for i, (_seq, y, _d, _pr) in enumerate(points):
        if _ok(y):
            best = y if best is None else max(best, y)
        if best is not None:
            steps.append((px(i), py(best)))
    if steps:
        out.append(f'<path d="M{" L".join(f"{a:.1f},{b:.1f}" for a, b in steps)}" fill="none" stroke="{GREEN}" stroke-width="1.5"/>')
    for i, (seq, y, decision, pr) in enumerate(points):
        x = px(i)
        out.append(f'<text x="{x:.1f}" y="{pad_t + h + 14}" font-size="10" text-anchor="middle">{_esc(seq)}</text>')
        if not _ok(y):
            out.append(f'<path class="failed" d="M{x - 4:.1f},{pad_t + h - 4:.1f} l8,8 m0,-8 l-8,8" stroke="{RED}" stroke-width="2">'
                       f'<title>attempt {_esc(seq)}: failed</title></path>')
            continue
        promoted = decision in PROMOTED
        what = {"promote": "promoted", "champion": "starting champion"}.get(decision, decision or "not decided")
        tip = f"attempt {seq}{f' (PR #{pr})' if pr is not None else ''}: {y:.3f}x, {what}"
        cls = "promoted" if promoted else "attempt"
        out.append(f'<circle class="{cls}" cx="{x:.1f}" cy="{py(y):.1f}" r="{6 if promoted else 5}" '
                   f'fill="{GREEN if promoted else "#fff"}" stroke="{INK}"><title>{_esc(tip)}</title></circle>')
        if decision == "promote":
            out.append(f'<text class="promoted-label" x="{x:.1f}" y="{py(y) - 9:.1f}" font-size="10" text-anchor="middle" '
                       f'fill="{GREEN}">promoted{f" #{pr}" if pr is not None else ""}</text>')
    # legend, top left
    lx = pad_l + 6
    out.append(f'<circle cx="{lx}" cy="12" r="5" fill="{GREEN}" stroke="{INK}"/>'
               f'<text x="{lx + 9}" y="16" font-size="11">promoted / champion</text>')
    out.append(f'<circle cx="{lx + 140}" cy="12" r="5" fill="#fff" stroke="{INK}"/>'
               f'<text x="{lx + 149}" y="16" font-size="11">not promoted</text>')
    out.append(f'<path d="M{lx + 240},8 l8,8 m0,-8 l-8,8" stroke="{RED}" stroke-width="2"/>'
               f'<text x="{lx + 253}" y="16" font-size="11">failed</text>')
    out.append(f'<line x1="{lx + 300}" y1="12" x2="{lx + 318}" y2="12" stroke="{GREEN}" stroke-width="1.5"/>'
               f'<text x="{lx + 322}" y="16" font-size="11">best so far</text>')
    out.append(f'<text x="{pad_l + w / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">attempt</text>')
    out.append("</svg>")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ bar chart


def bar_chart(labels: list[str], values: list[float], *, title: str = "", y_label: str = "", ymax: float | None = None,
              threshold: float | None = None, threshold_label: str = "promotion threshold",
              width: int = 640, height: int = 240) -> str:
    """Vertical bars, one per label; bars at or over ``threshold`` green, others grey, zero (a failed
    workload) drawn as a red tick; the threshold as a dashed line with its value."""
    pad_l, pad_r, pad_b = 52, 12, 30
    pad_t = (30 if title else 14) + (14 if threshold is not None else 0)  # room for the threshold's legend
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    top = ymax if ymax is not None and ymax > 0 else _nice_top(max(finite + [1.0, threshold or 0.0]) * 1.1)
    n = max(len(values), 1)
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    slot = w / n
    bw = max(2.0, min(36.0, slot * 0.7))

    def py(y: float) -> float:
        return pad_t + h - h * (min(max(y, 0.0), top) / top)

    out = _open(width, height, title or "bar chart")
    if title:
        out.append(f'<text x="{width / 2:.1f}" y="18" font-size="13" text-anchor="middle" font-weight="600">{_esc(title)}</text>')
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        yv = top * frac
        out.append(f'<line x1="{pad_l}" y1="{py(yv):.1f}" x2="{pad_l + w}" y2="{py(yv):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_l - 6}" y="{py(yv) + 4:.1f}" font-size="11" text-anchor="end">{yv:.3g}</text>')
    if y_label:
        out.append(f'<text x="12" y="{pad_t + h / 2:.1f}" font-size="11" text-anchor="middle" '
                   f'transform="rotate(-90 12 {pad_t + h / 2:.1f})">{_esc(y_label)}</text>')
    every = max(1, math.ceil(n / 30))  # at most ~30 axis labels
    for i, (lab, v) in enumerate(zip(labels, values)):
        cx = pad_l + slot * (i + 0.5)
        if not (isinstance(v, (int, float)) and math.isfinite(v)) or v <= 0:
            out.append(f'<path class="failed" d="M{cx - 4:.1f},{pad_t + h - 4:.1f} l8,8 m0,-8 l-8,8" stroke="{RED}" stroke-width="2">'
                       f'<title>{_esc(lab)}: failed</title></path>')
        else:
            good = threshold is None or v >= threshold
            out.append(f'<rect class="bar" x="{cx - bw / 2:.1f}" y="{py(v):.1f}" width="{bw:.1f}" height="{pad_t + h - py(v):.1f}" '
                       f'fill="{GREEN if good else GREY}"><title>{_esc(lab)}: {v:.4g}</title></rect>')
        if i % every == 0:
            out.append(f'<text x="{cx:.1f}" y="{pad_t + h + 14}" font-size="10" text-anchor="middle">{_esc(lab)}</text>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#333"/>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + h}" stroke="#333"/>')
    if threshold is not None and math.isfinite(threshold) and 0 < threshold <= top:
        out.append(f'<line class="threshold" x1="{pad_l}" y1="{py(threshold):.1f}" x2="{pad_l + w}" y2="{py(threshold):.1f}" '
                   f'stroke="{BLUE}" stroke-width="1.5" stroke-dasharray="6 3"/>')
        # the label as a legend above the plot, so it never sits on a bar
        ly = pad_t - 8
        out.append(f'<line x1="{pad_l + w - 150}" y1="{ly - 4}" x2="{pad_l + w - 128}" y2="{ly - 4}" stroke="{BLUE}" stroke-width="1.5" '
                   f'stroke-dasharray="6 3"/><text x="{pad_l + w - 124}" y="{ly}" font-size="10" fill="{BLUE}">'
                   f'{_esc(threshold_label)} {threshold:g}</text>')
    out.append("</svg>")
    return "\n".join(out)


# ------------------------------------------------------------------------------- latency against floor


def floor_chart(rows: list[tuple[str, float | None, float | None, str | None]], width: int = 640, height: int = 260) -> str:
    """Per workload (label, measured median ms, roofline floor ms, bound class): the floor as a dark
    bar, the measurement as a dot above it, on a log scale, with the gap as a percentage of the floor.
    A workload without a measurement or a floor is left out of the plot and listed as such."""
    pad_l, pad_r, pad_t, pad_b = 64, 12, 28, 30
    drawn = [(lab, m, f, b) for lab, m, f, b in rows if _ok(m) and _ok(f)]
    out = _open(width, height, "latency against the roofline floor")
    if not drawn:
        out.append(f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" font-size="12" text-anchor="middle">'
                   "no workload has both a measured latency and a roofline floor</text></svg>")
        return "\n".join(out)
    lo = min(min(m, f) for _, m, f, _ in drawn)
    hi = max(max(m, f) for _, m, f, _ in drawn)
    d_lo, d_hi = math.floor(math.log10(lo) - 0.5), math.ceil(math.log10(hi))  # a floor bar is never a sliver
    if d_hi == d_lo:
        d_hi += 1
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    n = len(drawn)
    slot = w / n
    bw = max(3.0, min(28.0, slot * 0.5))

    def py(v: float) -> float:
        return pad_t + h - h * (math.log10(v) - d_lo) / (d_hi - d_lo)

    for d in range(d_lo, d_hi + 1):
        y = py(10.0 ** d)
        out.append(f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + w}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{pad_l - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{_ms(10.0 ** d)}</text>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#333"/>')
    out.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + h}" stroke="#333"/>')
    every = max(1, math.ceil(n / 30))
    for i, (lab, m, f, bound) in enumerate(drawn):
        cx = pad_l + slot * (i + 0.5)
        pct = 100.0 * f / m
        out.append(f'<rect class="floor" x="{cx - bw / 2:.1f}" y="{py(f):.1f}" width="{bw:.1f}" height="{pad_t + h - py(f):.1f}" '
                   f'fill="#cdd"><title>{_esc(lab)}: floor {_ms(f)} ({_esc(bound or "bound unknown")})</title></rect>')
        out.append(f'<line x1="{cx:.1f}" y1="{py(f):.1f}" x2="{cx:.1f}" y2="{py(m):.1f}" stroke="{GREY}"/>')
        out.append(f'<circle class="measured" cx="{cx:.1f}" cy="{py(m):.1f}" r="4" fill="{INK}">'
                   f'<title>{_esc(lab)}: measured {_ms(m)}, {pct_text(pct)} of the floor</title></circle>')
        if i % every == 0:
            out.append(f'<text x="{cx:.1f}" y="{pad_t + h + 14}" font-size="10" text-anchor="middle">{_esc(lab)}</text>')
    out.append(f'<rect x="{pad_l + 6}" y="6" width="12" height="10" fill="#cdd"/><text x="{pad_l + 22}" y="15" font-size="11">roofline floor</text>'
               f'<circle cx="{pad_l + 120}" cy="11" r="4" fill="{INK}"/><text x="{pad_l + 128}" y="15" font-size="11">measured median (log scale)</text>')
    missing = len(rows) - n
    if missing:
        out.append(f'<text x="{pad_l + w}" y="15" font-size="10" text-anchor="end">{missing} workload(s) without a figure not drawn</text>')
    out.append("</svg>")
    return "\n".join(out)


def _ms(v: float) -> str:
    if v >= 1:
        return f"{v:g} ms"
    if v >= 1e-3:
        return f"{v * 1e3:g} µs"
    return f"{v * 1e6:g} ns"


def pct_text(p: float | None) -> str:
    """A percentage that keeps two significant digits when it is small (a CPU run reaches 0.0023%)."""
    if p is None or not math.isfinite(p):
        return "—"
    if p >= 10:
        return f"{p:.0f}%"
    if p >= 1:
        return f"{p:.1f}%"
    return f"{p:.2g}%"


# --------------------------------------------------------------------------------- mermaid subset


@dataclass
class XYChart:
    title: str = ""
    labels: list[str] = field(default_factory=list)
    y_label: str = ""
    ymax: float | None = None
    bars: list[float] = field(default_factory=list)
    lines: list[list[float]] = field(default_factory=list)


_TITLE = re.compile(r'^title\s+"([^"]{0,200})"$')
_XAXIS = re.compile(r"^x-axis\s+\[(.{0,20000})\]$")
_YAXIS = re.compile(r'^y-axis\s+(?:"([^"]{0,200})"\s*)?(?:(-?[0-9.eE+]+)\s*-->\s*(-?[0-9.eE+]+))?$')
_SERIES = re.compile(r"^(bar|line)\s+\[(.{0,20000})\]$")


def _numbers(text: str) -> list[float] | None:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        return None
    return vals if all(math.isfinite(v) for v in vals) else None


def parse_xychart(source: str) -> XYChart | None:
    """The ``xychart-beta`` subset our review writes (title, x-axis labels, y-axis label and range, bar
    and line series); None for anything else, so an unknown chart is shown as its source, not guessed."""
    lines = [ln.strip() for ln in source.strip().splitlines() if ln.strip()]
    if not lines or lines[0] != "xychart-beta":
        return None
    c = XYChart()
    for ln in lines[1:]:
        if m := _TITLE.match(ln):
            c.title = m.group(1)
        elif m := _XAXIS.match(ln):
            c.labels = [x.strip().strip('"') for x in m.group(1).split(",") if x.strip()]
        elif m := _YAXIS.match(ln):
            c.y_label = m.group(1) or ""
            if m.group(3) is not None:
                try:
                    c.ymax = float(m.group(3))
                except ValueError:
                    return None
        elif m := _SERIES.match(ln):
            vals = _numbers(m.group(2))
            if vals is None:
                return None
            if m.group(1) == "bar":
                c.bars = vals
            else:
                c.lines.append(vals)
        else:
            return None
    if not c.bars or (c.labels and len(c.labels) != len(c.bars)):
        return None
    return c


def xychart_svg(c: XYChart) -> str:
    """A parsed chart drawn as ``bar_chart``; a constant line series is drawn as its threshold line."""
    threshold = None
    for series in c.lines:
        if series and all(v == series[0] for v in series):
            threshold = series[0]
    labels = c.labels or [f"{i + 1}" for i in range(len(c.bars))]
    return bar_chart(labels, c.bars, title=c.title, y_label=c.y_label, ymax=c.ymax, threshold=threshold)
