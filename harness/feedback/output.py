"""Feedback output: Markdown for people and JSON for machines (agents, reports), from one FeedbackResult."""

from __future__ import annotations

from typing import Any

from ..report import Roofline
from .engine import FeedbackResult, format_value

_ICON = {"critical": "🔴", "high": "🟠", "medium": "🟡", "low": "🔵", "info": "⚪"}


def roofline_line(r: Roofline) -> str:
    extra = r.model_extra or {}
    parts = [
        f"bytes {r.bytes:.3g}",
        f"FLOPs {r.flops:.3g}",
        f"intensity {r.intensity:.3g} FLOP/B",
        f"floor {r.floor_ms * 1e3:.2f} us",
    ]
    if r.fraction is not None:
        parts.append(f"at {r.fraction:.0%} of the floor")
    parts.append(f"**{r.bound}-bound**" + (f" ({extra['bound_reason']})" if extra.get("bound_reason") else ""))
    src = r.ceilings.get("source") if isinstance(r.ceilings, dict) else None
    gpu = r.ceilings.get("gpu_name") if isinstance(r.ceilings, dict) else None
    if gpu:
        parts.append(f"ceilings: {gpu}, {src}")
    return "; ".join(parts)


def render_markdown(result: FeedbackResult, roofline: Roofline | None = None, *, title: str | None = None,
                    missing: dict[str, str] | None = None, max_items: int | None = None) -> str:
    lines: list[str] = []
    if title:
        lines += [f"### {title}", ""]
    if roofline is not None:
        lines += ["Roofline: " + roofline_line(roofline), ""]
    if result.stop:
        lines += ["**Stop signal:** this kernel runs at 95% or more of its roofline floor; further work here is noise.", ""]
    items = list(result)[: max_items or None]
    if not items:
        lines.append("No rule fired: nothing to fix that the evidence can see.")
    for i, it in enumerate(items, 1):
        lines.append(f"{i}. {_ICON.get(it.severity, '')} **{it.severity.upper()}** `{it.rule}`: {it.title}")
        lines.append(f"   - *Why:* {it.cause}")
        lines.append(f"   - *Do:* {it.recommendation}")
        ev = ", ".join(f"{k}={format_value(v, '')}" for k, v in it.evidence.items() if not k.startswith("threshold."))
        if ev:
            lines.append(f"   - *Evidence:* {ev}")
        also = getattr(it, "also", None)
        if also:
            lines.append(f"   - *Also seen by:* {', '.join(also)}")
    if max_items and len(result) > max_items:
        lines.append(f"... and {len(result) - max_items} more (see the JSON)")
    if result.not_evaluated:
        lines += ["", "<details><summary>Rules not evaluated (" + str(len(result.not_evaluated)) + ")</summary>", ""]
        lines += [f"- `{n.rule}`: {n.reason}" for n in result.not_evaluated]
        lines += ["", "</details>"]
    if missing:
        lines += ["", "Evidence sources missing: " + "; ".join(f"{k}: {v}" for k, v in sorted(missing.items()))]
    return "\n".join(lines) + "\n"


def to_json(result: FeedbackResult, roofline: Roofline | None = None, **extra: Any) -> dict[str, Any]:
    data = result.to_dict()
    data["roofline"] = roofline.model_dump(mode="json") if roofline is not None else None
    data.update(extra)
    return data
