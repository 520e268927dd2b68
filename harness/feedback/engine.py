"""The rule engine: every relevant rule, run deterministically, before any LLM sees a counter.

A rule (``skills/profiling/rules/*.yaml``) names the evidence it needs, thresholds, a boolean trigger,
a severity (fixed or conditional), an impact estimate, and the analysis / recommendation text with
``{name}`` placeholders. The engine

1. builds the evidence table: the collectors' values plus values derived from the roofline
   (``roofline_fraction``, ``floor_us``, ``bound``...) and cross-source ratios;
2. keeps the rules whose ``applies_to`` matches the workload's bottleneck class (the roofline's class
   or its intensity class; all rules when there is no roofline) -- the others are listed as not
   applicable, never silently dropped;
3. evaluates each: rules whose evidence is missing go to ``not_evaluated`` with the missing names and,
   when known, why the source that provides them did not run;
4. returns the triggered items sorted by severity, then estimated impact; of several triggered rules
   in one ``group`` (e.g. three ways of seeing register spills) the first is kept and names the others.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..paths import shipped, skill_files
from ..report import SEVERITIES, FeedbackItem, Roofline
from .expr import Expr, ExprError, MissingName, compile_expr

__all__ = [
    "RULES_DIR",
    "FeedbackResult",
    "NotEvaluated",
    "Rule",
    "RuleError",
    "bottleneck_classes",
    "derived_evidence",
    "load_rules",
    "kernel_level",
    "merge_results",
    "run_rules",
    "source_of",
]

RULES_DIR = shipped() / "skills" / "profiling" / "rules"  # ours; a repository's file of the same name replaces one
CLASSES = ("memory", "compute", "latency")
_RULE_KEYS = {"name", "title", "applies_to", "requires", "optional", "thresholds", "trigger", "analysis",
              "recommendation", "severity", "impact", "group", "stop", "description"}


class RuleError(ValueError):
    """A rule file that does not follow the rule format; the message names the file and the rule."""


@dataclass
class _Severity:
    when: Expr | None
    level: str


@dataclass
class Rule:
    name: str
    title: str
    applies_to: tuple[str, ...]
    requires: tuple[str, ...]
    thresholds: dict[str, float]
    trigger: Expr
    analysis: str
    recommendation: str
    severity: list[_Severity]
    impact: Expr | None = None
    optional: tuple[str, ...] = ()
    group: str | None = None
    stop: bool = False
    file: str = ""

    def applies(self, classes: set[str] | None) -> bool:
        return classes is None or "any" in self.applies_to or bool(classes & set(self.applies_to))


@dataclass
class NotEvaluated:
    rule: str
    reason: str
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "reason": self.reason, "missing": self.missing}


class FeedbackResult(list):
    """The triggered FeedbackItems (a list, best first) plus what was not evaluated and why."""

    def __init__(self, items: Iterable[FeedbackItem] = (), *, not_evaluated: list[NotEvaluated] | None = None,
                 not_applicable: list[NotEvaluated] | None = None, evaluated: list[str] | None = None,
                 evidence: dict[str, Any] | None = None, classes: set[str] | None = None):
        super().__init__(items)
        self.not_evaluated = not_evaluated or []
        self.not_applicable = not_applicable or []
        self.evaluated = evaluated or []
        self.evidence = evidence or {}
        self.classes = classes

    @property
    def stop(self) -> bool:
        """True when a stop-signal rule fired (the kernel runs at >= 95% of its floor)."""
        return any(getattr(i, "stop", False) for i in self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": [i.model_dump(mode="json") for i in self],
            "not_evaluated": [n.to_dict() for n in self.not_evaluated],
            "not_applicable": [n.to_dict() for n in self.not_applicable],
            "evaluated": list(self.evaluated),
            "classes": sorted(self.classes) if self.classes else None,
            "stop": self.stop,
            "evidence": {k: v for k, v in self.evidence.items() if isinstance(v, (int, float, str, bool))},
        }


# ------------------------------------------------------------------------------------------ loading


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _check_template(text: str, where: str) -> None:
    """Placeholders are ``{expression}`` or ``{expression:format}`` in the safe expression language."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as e:
        raise RuleError(f"{where}: bad template ({e})") from None
    for _, fname, _, conv in parts:
        if fname is None:
            continue
        if conv is not None:
            raise RuleError(f"{where}: placeholder {{{fname}!{conv}}}: conversions (and '!=') are not allowed")
        try:
            compile_expr(fname)
        except ExprError as e:
            raise RuleError(f"{where}: placeholder {{{fname}}}: {e}") from None


def _parse_rule(d: dict[str, Any], file: str) -> Rule:
    where = f"{file}: rule {d.get('name', '?')!r}"
    unknown = set(d) - _RULE_KEYS
    if unknown:
        raise RuleError(f"{where}: unknown keys {sorted(unknown)}")
    for key in ("name", "trigger", "analysis", "recommendation", "severity"):
        if key not in d:
            raise RuleError(f"{where}: missing '{key}'")
    applies = tuple(_as_list(d.get("applies_to", ["any"])))
    bad = [a for a in applies if a not in (*CLASSES, "any")]
    if bad:
        raise RuleError(f"{where}: applies_to {bad} not in {[*CLASSES, 'any']}")
    thresholds = dict(d.get("thresholds") or {})
    for k, v in thresholds.items():
        if not k.isidentifier() or not isinstance(v, (int, float)) or isinstance(v, bool):
            raise RuleError(f"{where}: threshold {k}={v!r} must be a name and a number")
    try:
        trigger = compile_expr(str(d["trigger"]))
        impact = compile_expr(str(d["impact"])) if d.get("impact") is not None else None
        sev: list[_Severity] = []
        raw_sev = d["severity"]
        if isinstance(raw_sev, str):
            sev.append(_Severity(None, raw_sev))
        else:
            for s in _as_list(raw_sev):
                if not isinstance(s, dict) or "level" not in s:
                    raise RuleError(f"{where}: severity entries need a 'level' (and optionally 'when')")
                sev.append(_Severity(compile_expr(str(s["when"])) if s.get("when") else None, s["level"]))
    except ExprError as e:
        raise RuleError(f"{where}: {e}") from None
    for s in sev:
        if s.level not in SEVERITIES:
            raise RuleError(f"{where}: severity {s.level!r} not in {SEVERITIES}")
    if sev[-1].when is not None:
        raise RuleError(f"{where}: the last severity entry must have no 'when' (the default)")
    requires = tuple(_as_list(d.get("requires")))
    optional = tuple(_as_list(d.get("optional")))
    # Every name the trigger reads must be evidence (declared in requires, or in optional when the
    # trigger only reads it behind a short-circuit) or a threshold.
    undeclared = [n for n in trigger.names if n not in requires and n not in optional and n not in thresholds]
    if undeclared:
        raise RuleError(f"{where}: trigger reads {undeclared}, which are neither in requires, optional nor thresholds")
    for key in ("analysis", "recommendation", "title"):
        if key in d:
            _check_template(str(d[key]), f"{where} {key}")
    return Rule(
        name=str(d["name"]), title=str(d.get("title", d["name"])), applies_to=applies, requires=requires,
        thresholds=thresholds, trigger=trigger, analysis=str(d["analysis"]).strip(),
        recommendation=str(d["recommendation"]).strip(), severity=sev, impact=impact, optional=optional,
        group=d.get("group"), stop=bool(d.get("stop", False)), file=file,
    )


def load_rules(rules_dir: str | Path | None = None) -> list[Rule]:
    """All rules of a directory, in file then document order; names must be unique."""
    d = Path(rules_dir) if rules_dir else RULES_DIR
    if not d.is_dir():
        raise RuleError(f"{d}: no such rules directory")
    # Without a folder: skills/profiling/rules/ of the repository and ours, one file per name (harness/paths.py).
    files = sorted(d.glob("*.yaml")) if rules_dir else skill_files("profiling/rules", "*.yaml")
    rules: list[Rule] = []
    for path in files:
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as e:
            raise RuleError(f"{path.name}: not valid YAML: {e}") from None
        docs = data.get("rules") if isinstance(data, dict) and "rules" in data else [data]
        for doc in docs or []:
            if not isinstance(doc, dict):
                raise RuleError(f"{path.name}: each rule must be a mapping")
            rules.append(_parse_rule(doc, path.name))
    seen: dict[str, str] = {}
    for r in rules:
        if r.name in seen:
            raise RuleError(f"rule name {r.name!r} is used in {seen[r.name]} and {r.file}")
        seen[r.name] = r.file
    return rules


# ------------------------------------------------------------------------------------------- evidence


def source_of(name: str) -> str:
    """Which collector provides an evidence name (for 'missing X' messages)."""
    for prefix, src in (("sass_", "sass"), ("triton_", "triton"), ("energy_", "nvml"), ("roofline_", "roofline"),
                        ("floor_", "roofline"), ("measured_", "timing")):
        if name.startswith(prefix):
            return src
    if name in ("bound", "intrinsic_bound", "compute_unit", "intensity", "memory_fraction_pct",
                "compute_fraction_pct", "dram_excess_ratio"):
        return "roofline"
    return "ncu"


def derived_evidence(evidence: dict[str, Any], roofline: Roofline | None) -> dict[str, Any]:
    """Evidence plus roofline values and cross-source ratios (nothing is overwritten)."""
    ev = dict(evidence)
    if roofline is not None:
        extra = roofline.model_extra or {}
        ev.setdefault("floor_us", roofline.floor_ms * 1e3)
        ev.setdefault("bound", roofline.bound)
        ev.setdefault("intrinsic_bound", extra.get("intrinsic_bound", roofline.bound))
        ev.setdefault("compute_unit", extra.get("compute_unit"))
        ev.setdefault("intensity", roofline.intensity)
        ev.setdefault("roofline_bytes", roofline.bytes)
        # The floor if the whole L2 served traffic for free: a measured time below it is impossible,
        # one between it and floor_us is plausible (outputs still in L2, inputs L2-resident).
        c = roofline.ceilings if isinstance(roofline.ceilings, dict) else {}
        l2, bw = c.get("l2_bytes"), c.get("copy_bandwidth_gbs")
        if l2 and bw and extra.get("memory_floor_ms") is not None:
            mem_l2_ms = max(0.0, extra["memory_floor_ms"] - l2 / (bw * 1e9) * 1e3)
            launch_ms = extra.get("launch_floor_ms") or 0.0  # floor_us includes it: so does this one
            ev.setdefault("floor_l2_us", (max(mem_l2_ms, extra.get("compute_floor_ms") or 0.0) + launch_ms) * 1e3)
        ev.setdefault("roofline_flops", roofline.flops)
        if roofline.fraction is not None:
            ev.setdefault("roofline_fraction", roofline.fraction)
            ev.setdefault("measured_us", roofline.floor_ms / roofline.fraction * 1e3)
        if extra.get("memory_fraction") is not None:
            ev.setdefault("memory_fraction_pct", extra["memory_fraction"] * 100)
        if extra.get("compute_fraction") is not None:
            ev.setdefault("compute_fraction_pct", extra["compute_fraction"] * 100)
        if isinstance(roofline.ceilings, dict) and roofline.ceilings.get("sm_count"):
            ev.setdefault("sm_count", roofline.ceilings["sm_count"])
    if ev.get("dram_bytes") is not None and ev.get("roofline_bytes"):
        ev.setdefault("dram_excess_ratio", ev["dram_bytes"] / ev["roofline_bytes"])
    glob = [ev.get("global_load_bytes"), ev.get("global_store_bytes")]
    if ev.get("local_memory_bytes") is not None and all(g is not None for g in glob) and sum(glob) > 0:  # type: ignore[arg-type]
        ev.setdefault("local_to_global_pct", ev["local_memory_bytes"] / sum(glob) * 100)  # type: ignore[arg-type]
    return {k: v for k, v in ev.items() if v is not None and not (isinstance(v, float) and math.isnan(v))}


# ------------------------------------------------------------------------------------------ running


def format_value(v: Any, spec: str) -> str:
    if spec:
        try:
            return format(v, spec)
        except (ValueError, TypeError):
            return str(v)
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if v == 0 or math.isinf(v):
            return str(v)
        if abs(v) >= 1e6 or abs(v) < 1e-3:
            return f"{v:.3g}"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    return str(v)


def _render(template: str, env: dict[str, Any]) -> str:
    out = []
    for literal, fname, spec, _ in string.Formatter().parse(template):
        out.append(literal)
        if fname is None:
            continue
        try:
            out.append(format_value(compile_expr(fname)(env), spec or ""))
        except ExprError:
            out.append("n/a")
    return "".join(out)


def bottleneck_classes(roofline: Roofline | None) -> set[str] | None:
    """The workload's classes for ``applies_to``: the roofline's bound and its intrinsic bound (None
    without a roofline: every rule applies)."""
    if roofline is None or roofline.bound is None:
        return None
    c = {roofline.bound}
    if roofline.bound == "launch":
        c.add("latency")  # launch-bound: the latency rules (grid size, launch overhead) are the ones that apply
    intrinsic = (roofline.model_extra or {}).get("intrinsic_bound")
    if intrinsic:
        c.add(intrinsic)
    return c


def run_rules(evidence: dict[str, Any], roofline: Roofline | None = None, rules_dir: str | Path | None = None, *,
              kernel: str | None = None, missing: dict[str, str] | None = None,
              rules: list[Rule] | None = None) -> FeedbackResult:
    """Run every rule relevant to the workload's bottleneck class on ``evidence``.

    ``missing`` maps a collector name ("ncu", "sass", "triton", "nvml", "timing"...) to why it did not
    run, so a rule that needed it says so. Returns a :class:`FeedbackResult` (a list of FeedbackItem).
    """
    rules = rules if rules is not None else load_rules(rules_dir)
    ev = derived_evidence(evidence, roofline)
    classes = bottleneck_classes(roofline)
    missing = dict(missing or {})
    if roofline is None:
        missing.setdefault("roofline", "no roofline (definition or ceilings not given)")
    items: list[tuple[int, float, int, FeedbackItem]] = []
    not_eval: list[NotEvaluated] = []
    not_app: list[NotEvaluated] = []
    evaluated: list[str] = []
    for order, rule in enumerate(rules):
        if not rule.applies(classes):
            not_app.append(NotEvaluated(rule.name, f"applies to {'/'.join(rule.applies_to)}-bound, workload is "
                                        f"{'/'.join(sorted(classes or []))}"))
            continue
        absent = [n for n in rule.requires if n not in ev]
        if absent:
            why = sorted({f"{source_of(n)}: {missing[source_of(n)]}" for n in absent if source_of(n) in missing})
            not_eval.append(NotEvaluated(rule.name, f"not evaluated (missing {', '.join(absent)})"
                                         + (f" -- {'; '.join(why)}" if why else ""), absent))
            continue
        env = {**rule.thresholds, **ev}
        try:
            fired = bool(rule.trigger(env))
        except MissingName as e:
            not_eval.append(NotEvaluated(rule.name, f"not evaluated (missing {e.name})", [e.name]))
            continue
        except ExprError as e:
            not_eval.append(NotEvaluated(rule.name, f"not evaluated ({e})"))
            continue
        evaluated.append(rule.name)
        if not fired:
            continue
        level = rule.severity[-1].level
        for s in rule.severity:
            if s.when is None:
                level = s.level
                break
            try:
                if s.when(env):
                    level = s.level
                    break
            except ExprError:
                continue  # a condition on evidence we lack does not hold
        impact = 0.0
        if rule.impact is not None:
            try:
                impact = float(rule.impact(env))
            except (ExprError, TypeError, ValueError):
                impact = 0.0
        shown = {n: ev[n] for n in dict.fromkeys([*rule.requires, *rule.optional, *rule.trigger.names]) if n in ev}
        shown.update({f"threshold.{k}": v for k, v in rule.thresholds.items()})
        item = FeedbackItem(
            rule=rule.name,
            severity=level,  # type: ignore[arg-type]
            title=_render(rule.title, env),
            evidence=shown,
            cause=_render(rule.analysis, env),
            recommendation=_render(rule.recommendation, env),
            kernel=kernel or (ev.get("kernel_name") if isinstance(ev.get("kernel_name"), str) else None),
            impact=round(max(0.0, min(1.0, impact)), 4),
            group=rule.group,
            stop=rule.stop,
        )
        items.append((SEVERITIES.index(level), -impact, order, item))
    items.sort(key=lambda t: t[:3])
    kept: list[FeedbackItem] = []
    by_group: dict[str, FeedbackItem] = {}
    for _, _, _, item in items:
        g = getattr(item, "group", None)
        if g and g in by_group:
            also = list(getattr(by_group[g], "also", []) or [])
            by_group[g].also = also + [item.rule]  # type: ignore[attr-defined]
            continue
        if g:
            by_group[g] = item
        kept.append(item)
    return FeedbackResult(kept, not_evaluated=not_eval, not_applicable=not_app, evaluated=evaluated,
                          evidence=ev, classes=classes)


_CALL_LEVEL = {"kernels_per_call", "kernel_time_us"}


def kernel_level(rule: Rule) -> bool:
    """A rule about one kernel's counters (not the call, the roofline, SASS or Triton statistics)."""
    return bool(rule.requires) and all(source_of(n) == "ncu" for n in rule.requires) and not _CALL_LEVEL & set(rule.requires)


def merge_results(main: FeedbackResult, others: list[tuple[FeedbackResult, float]]) -> FeedbackResult:
    """Add the items of other kernels (with their share of the call's time) to the main kernel's result.

    An item's impact is scaled by its kernel's share, so a flaw in a kernel that takes 15% of the time
    ranks below the same flaw in the kernel that takes 85%. Not-evaluated lists stay the main kernel's.
    """
    items = [(SEVERITIES.index(i.severity), -float(getattr(i, "impact", 0) or 0), n, i) for n, i in enumerate(main)]
    k = len(items)
    for res, share in others:
        for i in res:
            i.impact = round(float(getattr(i, "impact", 0) or 0) * share, 4)  # type: ignore[attr-defined]
            i.kernel_share = round(share, 4)  # type: ignore[attr-defined]
            items.append((SEVERITIES.index(i.severity), -i.impact, k, i))  # type: ignore[attr-defined]
            k += 1
    items.sort(key=lambda t: t[:3])
    return FeedbackResult([t[3] for t in items], not_evaluated=main.not_evaluated, not_applicable=main.not_applicable,
                          evaluated=main.evaluated, evidence=main.evidence, classes=main.classes)
