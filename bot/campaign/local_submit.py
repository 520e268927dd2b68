"""``kbot submit``: a person's kernel as an attempt in the local forge, judged like an agent's.

    kbot submit my_kernel/solution.json --author "Ada Lovelace <ada@example.org>" [--approve]

1. The workspace's forge gets a branch ``submit/<login>/<definition>/<node>`` with ONE commit authored
   and committed by the person (``--author``, else git's ``user.name`` / ``user.email``) adding
   ``kernels/<definition>/<name>/`` (solution.json and its sources), and a PR opened by the person
   whose body names them (the provenance).
2. The bot checks it as any person's PR (``bot.campaign.submission.inspect``: one solution folder, a
   valid solution of a known definition) and writes the submission record for its head: locally the one
   running ``kbot submit`` is the workspace's owner, so the submit is the maintainer's ``/evaluate``.
3. The same evaluation as an agent's candidate (``HarnessEvaluator``, paired with today's champion,
   declared baselines beside it on the GPU), the same sticky review and status, the same promotion
   rules through ``publish_results``. A person's code needs one thing more to be merged: an approving
   review of the measured head by a maintainer. ``--approve`` is the owner's approval of this exact
   head, recorded before the decision; without it the review says the promotion waits, and
   ``kbot pr approve N`` approves later and applies the rules again.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bot.campaign import submission
from bot.campaign.attempts import folder_for, safe_name, solution_files
from bot.campaign.harness_evaluator import HarnessEvaluator
from bot.campaign.local_loop import LoopError, Workspace, starting_point, timing_for
from bot.controller.tree import solution_node_id
from bot.names import STATUS_CONTEXT
from bot.promotion.champion import read_champion
from bot.review.markdown import escape_inline
from bot.review.publish import publish_results
from harness.schema import SchemaError, Solution, load_solution, load_workloads

_AUTHOR = re.compile(r"^\s*([^<>\n]+?)\s*<([^<>\s@]+@[^<>\s@]+)>\s*$")
Event = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Person:
    name: str
    email: str

    @property
    def login(self) -> str:
        """The forge account the person acts as: the e-mail's local part, made a safe name."""
        return safe_name(self.email.split("@", 1)[0].lower())[:39] or "person"


def parse_author(text: str | None, cwd: Path | None = None) -> Person:
    """``Name <email>``, else git's ``user.name`` / ``user.email`` (where the command runs)."""
    if text:
        m = _AUTHOR.match(text)
        if not m:
            raise LoopError(f"--author must be 'Name <email>', not {text!r}")
        return Person(m.group(1), m.group(2))

    def git(key: str) -> str:
        try:
            p = subprocess.run(["git", "config", key], capture_output=True, text=True, cwd=cwd, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return p.stdout.strip() if p.returncode == 0 else ""

    name, email = git("user.name"), git("user.email")
    if not name or not email or not _AUTHOR.match(f"{name} <{email}>"):
        raise LoopError("kbot submit needs an author: --author 'Name <email>' (or git config user.name / user.email)")
    return Person(name, email)


@dataclass
class SubmitOptions:
    solution: Path
    author: Person
    definition: str | None = None  # default: the solution's own
    workspace: Path = Path(".kbot") / "workspace"
    device: str = "auto"
    workloads: Path | None = None
    dataset: Path | None = None
    budget_s: float | None = None
    baselines: bool | None = None  # declared baselines beside the candidate (None: on the GPU only)
    approve: bool = False


def submit(opts: SubmitOptions, event: Event | None = None, harness: Any = None) -> dict[str, Any]:
    """Open the person's PR, record, evaluate, review and decide (see the module docstring). ``harness``:
    a stand-in for the ``HarnessEvaluator``, for tests."""
    from harness.env import resolve_device

    event = event or (lambda kind, data: None)
    try:
        sol = load_solution(opts.solution)
    except SchemaError as e:
        raise LoopError(str(e)) from None
    ws = Workspace(opts.workspace)
    forge = ws.forge
    device = resolve_device(opts.device)
    resolved = ws.inputs(opts.definition or sol.definition, device, opts.dataset, opts.workloads)
    definition = resolved.definition
    if sol.definition != definition.name:
        raise LoopError(f"{opts.solution} is a solution of '{sol.definition}', not of '{definition.name}'")
    try:
        workloads = load_workloads(resolved.workloads_path, definition)
    except SchemaError as e:
        raise LoopError(str(e)) from None

    if read_champion(forge, definition.name) is None:
        ws.install_start(starting_point(definition, resolved.path))
    _, champ = ws.champion_solution(definition.name)

    pr = open_person_pr(ws, sol, opts.author)
    event("pr", {"pr": pr.number, "branch": pr.head_branch, "solution": sol.name, "author": f"{opts.author.name} <{opts.author.email}>"})
    try:
        sub = submission.inspect(forge, pr)
    except submission.SubmissionError as e:
        raise LoopError(f"PR #{pr.number} is not a submission kbot benchmarks: {e}") from None
    submission.record(forge, sub, forge.owner)
    if harness is None:
        harness = HarnessEvaluator(definition, workloads, ws.runs, device=device, timing=timing_for(device, opts.budget_s),
                                   definition_path=resolved.path, provenance=resolved.provenance(len(workloads)),
                                   with_baselines=opts.baselines)
    forge.set_status(pr.head_sha, "pending", context=STATUS_CONTEXT, description=f"evaluating on {harness.device}")
    event("evaluate", {"pr": pr.number, "solution": sol.name, "champion": champ.name if champ else None,
                       "inputs": resolved.describe(len(workloads))})
    try:
        report = harness.evaluate(sol, champ)
    finally:
        if hasattr(harness, "close"):
            harness.close()
    if opts.approve:
        forge.approve(pr.number, pr.head_sha, by=forge.owner, body="Approved with `kbot submit --approve` by the workspace's owner.")
    # Measured by this process (no artifact in between): published as it is, the champion's latest report beside it.
    shown = harness.latest_report(champ.content_hash(), same_inputs=True) if champ is not None else None
    pub = publish_results(forge, pr.number, pr.head_sha, report=report, champion=shown)
    out = {"pr": pr.number, "branch": pr.head_branch, "author": f"{opts.author.name} <{opts.author.email}>",
           "solution": sol.name, "solution_hash": sol.content_hash(), "decision": pub.decision.action if pub.decision else "error",
           "headline": pub.decision.headline if pub.decision else "no usable report", "merged_sha": pub.merged_sha,
           "inputs": resolved.describe(len(workloads)), "summary": report.summary()}
    event("decision", out)
    return out


def open_person_pr(ws: Workspace, sol: Solution, person: Person):
    """Branch + the person's commit + the person's PR (the open one again when the same kernel was
    submitted before and its PR is still open)."""
    forge = ws.forge
    node = solution_node_id(sol)
    branch = f"submit/{person.login}/{sol.definition}/{node}"
    existing = forge.find_open_pr(branch)
    if existing is not None:
        return existing
    if forge.branch_head(branch) is None:
        folder = folder_for(forge, sol)
        _, main = forge.default_head()
        forge.commit_files(branch, main, solution_files(sol, folder),
                           f"{sol.name} for {sol.definition}\n\n{sol.description or ''}".strip(), author=(person.name, person.email))
    body = (f"A kernel submitted by {escape_inline(person.name, 100)} ({escape_inline(person.email, 100)}) with `kbot submit`: "
            f"`{escape_inline(sol.name, 100)}` for `{escape_inline(sol.definition, 128)}`.\n\n"
            + (f"{escape_inline(sol.description, 1000)}\n" if sol.description else ""))
    return forge.open_pr(branch, f"{sol.name} ({sol.definition}), by {person.name}"[:200], body, author=person.login)


def approve(ws: Workspace, number: int) -> str:
    """The owner's approving review of the PR's head, then the promotion rules on its last evaluation
    (what a maintainer's approval and ``/promote`` do on GitHub)."""
    from bot.commands.context import CommandFailed
    from bot.commands.services import ForgeServices

    forge = ws.forge
    pr = forge.get_pr(number)
    if not pr.is_open:
        raise LoopError(f"PR #{number} is not open")
    forge.approve(number, pr.head_sha, by=forge.owner, body="Approved with `kbot pr approve` by the workspace's owner.")
    try:
        return ForgeServices(forge).promote(pr, forge.owner)
    except CommandFailed as e:
        raise LoopError(str(e)) from None
