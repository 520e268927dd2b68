"""Prompts from the jinja2 templates in ``skills/prompts/``.

``system.md.j2`` is the system prompt; ``initial.md.j2``, ``debug.md.j2`` and ``optimize.md.j2`` are the
user turn of each mode and include ``_context.md.j2`` (definition, reference, workload regimes,
operator notes, search memory); ``repair.md.j2`` is the one repair turn after malformed output.
Rendering is deterministic (no clocks, sorted keys) so the same context gives the same prompt hash,
which is what replay relies on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from harness.paths import shipped, skill_dirs
from harness.schema import Definition

from .base import AgentContext, Mode

PROMPTS_DIR = shipped() / "skills" / "prompts"  # ours; a repository's skills/prompts/<file> replaces one
OPERATORS_DIR = shipped() / "skills" / "operators"
# Keys the templates may read from a node summary (bot.controller.summary); absent ones are None.
SUMMARY_DEFAULTS = {k: None for k in ("status", "statuses", "speedup_vs_reference", "speedup_vs_baseline",
                                       "roofline_fraction_min", "energy_j_per_call", "noise", "error")}


class PromptBuilder:
    def __init__(self, prompts_dir: str | Path | None = None, operators_dir: str | Path | None = None) -> None:
        # None: the repository's skills/prompts (skills/operators) first, then ours (harness/paths.py)
        self.prompts_dirs = [Path(prompts_dir)] if prompts_dir else skill_dirs("prompts") or [PROMPTS_DIR]
        self.operators_dirs = [Path(operators_dir)] if operators_dir else skill_dirs("operators") or [OPERATORS_DIR]
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([str(d) for d in self.prompts_dirs]),
            undefined=jinja2.StrictUndefined,  # a template naming a missing field is a bug, not silence
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,
        )
        self.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=1, sort_keys=True, default=str)

    def operator_notes(self, definition: Definition) -> str:
        """The most specific notes for the definition's name (the name itself, then shorter prefixes at
        ``_``: fused_add_rmsnorm_h4096 -> fused_add_rmsnorm), then the op_type's notes when different."""
        parts: list[str] = []
        segs = definition.name.split("_")
        for i in range(len(segs), 0, -1):
            p = self._note("_".join(segs[:i]) + ".md")
            if p is not None:
                parts.append(p.read_text().strip())
                break
        p = self._note(f"{definition.op_type}.md")
        if p is not None and p.read_text().strip() not in parts:
            parts.append(p.read_text().strip())
        return "\n\n".join(parts)

    def _note(self, name: str) -> Path | None:
        return next((d / name for d in self.operators_dirs if (d / name).is_file()), None)

    def variables(self, ctx: AgentContext, index: int = 0, n: int = 1, previous: list[str] | None = None) -> dict[str, Any]:
        d = ctx.definition
        definition_json = d.model_dump(mode="json", exclude_unset=True)
        definition_json.pop("reference", None)
        memory = ctx.memory.prompt_view() if ctx.memory is not None and hasattr(ctx.memory, "prompt_view") else None
        parent_files = [{"path": s.path, "content": s.content} for s in ctx.parent.sources] if ctx.parent else []
        return {
            "mode": ctx.mode.value,
            "definition": d,
            "definition_json": json.dumps(definition_json, indent=1, sort_keys=True),
            "reference": d.reference,
            "regimes": ctx.regimes(),
            "operator_notes": self.operator_notes(d),
            "parent": ctx.parent,
            "parent_files": parent_files,
            "parent_node": ctx.parent_node,
            "summary": {**SUMMARY_DEFAULTS, **(ctx.parent_summary or {})},
            "feedback": [f.model_dump(mode="json") for f in ctx.feedback],
            "error": ctx.error.to_dict() if ctx.error else None,
            "memory": memory,
            "index": index + 1,
            "n": n,
            "previous": previous or [],
            "entry_point": ctx.parent.spec.entry_point if ctx.parent else "main.py::run",
            "language": ctx.parent.spec.language.value if ctx.parent else "triton",
            "signature": ", ".join(list(d.inputs) + list(d.outputs)),
            "inputs": list(d.inputs),
            "outputs": list(d.outputs),
        }

    def render(self, ctx: AgentContext, index: int = 0, n: int = 1, previous: list[str] | None = None) -> tuple[str, list[dict[str, str]]]:
        """(system prompt, [user message]) for the context's mode."""
        v = self.variables(ctx, index, n, previous)
        template = {Mode.INITIAL: "initial.md.j2", Mode.DEBUG: "debug.md.j2", Mode.OPTIMIZE: "optimize.md.j2"}[ctx.mode]
        system = self.env.get_template("system.md.j2").render(**v).strip()
        user = self.env.get_template(template).render(**v).strip()
        return system, [{"role": "user", "content": user}]

    def repair(self, error: str, ctx: AgentContext) -> str:
        v = self.variables(ctx)
        return self.env.get_template("repair.md.j2").render(problem=error, **v).strip()
