"""Kernels from people: a person's pull request as an attempt, judged like an agent's.

A person's PR (a branch of this repository, or a fork) adds one solution folder
``kernels/<definition>/<name>/`` (``solution.json`` and its sources). It carries no trusted metadata:
the bot's ``kbot:meta`` block is only for PRs the bot opened. What the later stages need (which
definition, which solution and its content hash, where it lives, which head was authorized) comes from
the **submission record**, written by the bot when someone allowed to benchmark (``/evaluate``, by
API-checked permission; locally ``kbot submit``) asks for it:

* the bot reads the PR's files at its head through the forge, as data (nothing is executed), and
  accepts only a PR whose every changed file is under one ``kernels/<definition>/<name>/`` folder
  holding a valid solution of a definition on the default branch (``inspect``);
* the record is a sticky comment of the bot's own (``<!-- kbot:submission -->``) with one metadata
  block (``bot.forge.markers``), signed with ``KBOT_META_KEY`` when configured, for this PR number
  (``read_record`` trusts only the bot's comment, and with a key only a block that verifies);
* it names the head sha it was made for: a new push needs a new ``/evaluate``, and a bench result or
  a promotion for any other sha finds no record.

The same review, the same rules and the same sha-guarded merge then apply; on top of them a person's
code reaches the default branch only with an approving review of the measured head by someone the
promotion policy names (``people_approval``; ``bot.promotion.candidate_gate``).

On GitHub the bench for a person's PR is a ``workflow_dispatch`` of the bench workflow (its file from
the default branch, never the PR's) with the PR number and the authorized sha; the run's title carries
them back (``dispatch_title``), and ``dispatched_target`` accepts a run only for a sha the record
authorized.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from bot.forge.base import ForgeError, PullRequest
from bot.forge.markers import MarkerError, decode_meta, has_marker, sticky_marker, with_meta
from bot.forge.trusted_meta import meta_key
from bot.names import BENCH_WORKFLOW, DISPATCH_TITLE
from harness.schema import Solution

SUBMISSION_MARKER = sticky_marker("submission")
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_FOLDER = re.compile(rf"^kernels/({_SEGMENT})/({_SEGMENT})/")
_SHA = re.compile(r"^[0-9a-f]{40}$")
_DISPATCH_TITLE = re.compile("^" + re.escape(DISPATCH_TITLE).replace(r"\{pr\}", "([1-9][0-9]{0,8})").replace(r"\{sha\}", "([0-9a-f]{40})") + "$")
MAX_FILES = 64


class SubmissionError(ValueError):
    """A person's PR the bot will not benchmark; the message says why (shown to the maintainer)."""


@dataclass(frozen=True)
class Submission:
    pr: int
    head_sha: str
    definition: str
    solution: str
    solution_hash: str
    solution_path: str  # kernels/<definition>/<name>/solution.json
    author: str  # the PR's author (the person)
    authorized_by: str  # who asked for the benchmark (checked by API before this record was written)
    authorized_at: str = ""

    def meta(self) -> dict[str, Any]:
        """The fields the review and promotion stages read, shaped like a bot PR's meta block."""
        return {"definition": self.definition, "solution": self.solution, "solution_hash": self.solution_hash,
                "solution_path": self.solution_path, "person": self.author, "head_sha": self.head_sha}


def _context(number: int) -> str:
    return f"submission:pr{number}"


def is_person_pr(forge: Any, pr: PullRequest) -> bool:
    return not (isinstance(pr.author, str) and pr.author.lower() == forge.info.bot_login.lower())


def inspect(forge: Any, pr: PullRequest) -> Submission:
    """The submission a person's PR makes at its current head, read as data; ``SubmissionError`` when it
    is not one kbot benchmarks (files outside one solution folder, no valid solution, unknown definition)."""
    if not is_person_pr(forge, pr):
        raise SubmissionError("this PR was opened by the bot: it is an agent's attempt, not a person's")
    if not pr.is_open:
        raise SubmissionError("the PR is closed")
    if not _SHA.match(pr.head_sha or ""):
        raise SubmissionError("the PR has no head commit to benchmark")
    try:
        files = list(forge.changed_files(pr.head_sha, pr.base_branch))
    except ForgeError as e:
        raise SubmissionError(f"could not list the PR's files ({type(e).__name__}: {e})") from None
    if not files:
        raise SubmissionError("the PR changes no files")
    if len(files) > MAX_FILES:
        raise SubmissionError(f"the PR changes {len(files)} files; a submission is one solution folder (at most {MAX_FILES} files)")
    folders = {m.group(0) if (m := _FOLDER.match(p)) else None for p in files}
    if None in folders or len(folders) != 1 or any(".." in p.split("/") for p in files):
        outside = sorted(p for p in files if not _FOLDER.match(p))
        raise SubmissionError("a submission changes exactly one folder kernels/<definition>/<name>/"
                              + (f"; this PR also changes {outside[0]}" if outside else f"; this PR changes {len(folders)} folders"))
    folder = folders.pop().rstrip("/")  # type: ignore[union-attr]
    definition = folder.split("/")[1]
    path = f"{folder}/solution.json"
    raw = forge.read_file(path, ref=pr.head_sha)
    if raw is None:
        raise SubmissionError(f"no {path} at the PR head")
    try:
        sol = Solution.model_validate_json(raw)
    except ValueError as e:
        raise SubmissionError(f"{path} is not a valid solution: {str(e).splitlines()[0][:300]}") from None
    if sol.definition != definition:
        raise SubmissionError(f"{path} is a solution of '{sol.definition}', in the folder of '{definition}'")
    if forge.read_file(f"definitions/{definition}/definition.json", ref=forge.default_branch()) is None:
        raise SubmissionError(f"'{definition}' is not a definition on the default branch (definitions/{definition}/definition.json)")
    for src in sol.sources:  # the files beside solution.json must be what it embeds (people review the files)
        if f"{folder}/{src.path}" in files:
            text = forge.read_file(f"{folder}/{src.path}", ref=pr.head_sha)
            if text is not None and (text.decode() if isinstance(text, bytes) else text) != src.content:
                raise SubmissionError(f"{folder}/{src.path} differs from the copy inside solution.json (run `kbot pack` or fix one of them)")
    return Submission(pr.number, pr.head_sha, definition, sol.name, sol.content_hash(), path, pr.author, "")


def record(forge: Any, sub: Submission, authorized_by: str) -> Submission:
    """Write (or replace) the bot's submission record on the PR: ``sub`` authorized by ``authorized_by``."""
    sub = Submission(**{**asdict(sub), "authorized_by": authorized_by,
                        "authorized_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
    text = (f"{SUBMISSION_MARKER}\n**kbot: submission authorized for benchmarking** by {_plain(authorized_by)} at "
            f"`{sub.head_sha[:12]}`: `{_plain(sub.solution_path)}` for `{_plain(sub.definition)}`, by {_plain(sub.author)}.\n\n"
            "A new push needs a new `/evaluate`. Merging it also needs a maintainer's approving review of the measured head.")
    try:
        body = with_meta(text, asdict(sub), key=meta_key(), context=_context(sub.pr))
    except MarkerError as e:
        raise SubmissionError(str(e)) from None
    forge.upsert_comment(sub.pr, SUBMISSION_MARKER, body)
    return sub


def _plain(text: str) -> str:
    from bot.review.markdown import escape_inline

    return escape_inline(text, 200)


def read_record(forge: Any, pr: PullRequest) -> Submission | None:
    """The bot's submission record of ``pr`` (its own comment; signed when a key is configured), or None."""
    if not is_person_pr(forge, pr):
        return None
    bot = forge.info.bot_login.lower()
    found = None
    for c in forge.list_comments(pr.number):
        if c.author.lower() != bot or not has_marker(c.body, SUBMISSION_MARKER):
            continue
        data = decode_meta(c.body, key=meta_key(), context=_context(pr.number))
        if isinstance(data, dict):
            found = data
    if found is None:
        return None
    try:
        sub = Submission(**{k: found[k] for k in Submission.__dataclass_fields__})
    except (KeyError, TypeError):
        return None
    ok = (sub.pr == pr.number and isinstance(sub.head_sha, str) and _SHA.match(sub.head_sha)
          and isinstance(sub.solution_path, str) and _FOLDER.match(sub.solution_path)
          and sub.solution_path == f"kernels/{sub.definition}/{sub.solution_path.split('/')[2]}/solution.json")
    return sub if ok else None


def trusted_meta(forge: Any, pr: PullRequest) -> dict[str, Any] | None:
    """What the later stages may trust about ``pr``: the bot's meta block of a bot PR, or the submission
    record of a person's PR (None when neither)."""
    from bot.forge.trusted_meta import read_meta

    if not is_person_pr(forge, pr):
        return read_meta(pr, forge)
    sub = read_record(forge, pr)
    return sub.meta() if sub is not None else None


def dispatch_title(pr: int, sha: str) -> str:
    return DISPATCH_TITLE.format(pr=pr, sha=sha)


def request_bench(forge: Any, sub: Submission, *, profile: bool = False) -> None:
    """Start the bench workflow for a recorded submission (GitHub: a ``workflow_dispatch`` from the
    default branch; the workflow file and the harness are the default branch's, only kernels/ comes from
    the authorized sha)."""
    inputs = {"pr": str(sub.pr), "sha": sub.head_sha, "profile": "true" if profile else "false"}
    forge.dispatch_workflow(BENCH_WORKFLOW.rsplit("/", 1)[-1], forge.default_branch(), inputs)


def dispatched_target(forge: Any, run: Mapping[str, Any]) -> tuple[PullRequest, str] | None:
    """(PR, measured sha) of a dispatched bench run whose title names a PR and a sha the bot's
    submission record authorized; None for anything else (a hand-made dispatch of some other sha)."""
    title = run.get("display_title")
    m = _DISPATCH_TITLE.match(title) if isinstance(title, str) else None
    if m is None:
        return None
    number, sha = int(m.group(1)), m.group(2)
    try:
        pr = forge.get_pr(number)
    except ForgeError:
        return None
    sub = read_record(forge, pr)
    if sub is None or sub.head_sha != sha:
        return None
    return pr, sha
