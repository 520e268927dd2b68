"""Default Services: the command effects carried out through the forge.

* ``/optimize`` calls an injected campaign function (the controller's campaign API in production, a
  small generator in tests); without one the command fails with a clear message.
* ``/evaluate`` and ``/profile`` on the bot's own candidate re-trigger the bench workflow by
  (re)applying the ``kbot:bench`` or ``kbot:profile`` label: a label event made with the App token
  starts ``bench.yml``, which is gated on bot branches of this repository. On a person's PR (a fork, or
  a branch a person opened, ``kbot/`` names included) they check the PR is one solution folder, write
  the submission record for its head and dispatch the bench workflow from the default branch
  (``bot.campaign.submission``). The commit status goes to pending only once a bench was started: a
  PR that will not be benchmarked is told why and keeps no pending status.
* ``/promote`` reads the evidence block of our own sticky review and runs the promotion rules with
  today's facts (champion, PR head, default branch); it never bypasses a rule.
* ``/stop`` labels the thread ``kbot:stopped`` (further /optimize refused) and calls an injected
  stopper so a running campaign ends.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from bot.campaign import submission
from bot.campaign.request import CampaignRefused, OptimizeRequest
from bot.campaign.submission import is_person_pr
from bot.commands.context import CommandFailed
from bot.forge.base import Forge, ForgeError, PullRequest, UnsupportedError
from bot.names import BENCH_LABEL, BRANCH_PREFIX, PROFILE_LABEL, STATUS_CONTEXT, STOPPED_LABEL, is_candidate_pr
from bot.promotion.champion import read_champion
from bot.promotion.execute import bring_up_to_date, resume_pointer, run_promotion
from bot.review.evidence import Evidence, find_evidence
from bot.review.markdown import escape_inline

CampaignFn = Callable[[OptimizeRequest], Any]
StopFn = Callable[[int, str], Any]


def _pr_list(prs: Iterable[Any]) -> str:
    nums = []
    for p in prs:
        n = getattr(p, "number", p)
        if isinstance(n, int):
            nums.append(f"#{n}")
    return ", ".join(nums)


class ForgeServices:
    def __init__(self, forge: Forge, campaign: CampaignFn | None = None, stopper: StopFn | None = None):
        self.forge = forge
        self.campaign = campaign
        self.stopper = stopper

    def start_campaign(self, request: OptimizeRequest) -> str:
        if self.campaign is None:
            raise CommandFailed("no campaign runner is configured for this bot instance (see docs/bot.md, 'App mode').")
        try:
            result = self.campaign(request)
        except CampaignRefused as e:
            raise CommandFailed(str(e)) from None
        prs = getattr(result, "prs", result)
        opened = _pr_list(prs if isinstance(prs, (list, tuple)) else [])
        head = (f"Started {request.candidates} candidate(s) × {request.rounds} round(s) for "
                f"`{escape_inline(request.definition, 128)}` with the `{request.agent}` agent")
        if request.parent_pr:
            head += f", iterating on #{request.parent_pr}"
        return head + (f".\n\nCandidate PRs: {opened}" if opened else ".")

    def stop_campaign(self, thread: int, actor: str) -> str:
        self.forge.add_labels(thread, [STOPPED_LABEL])
        if self.stopper is not None:
            self.stopper(thread, actor)
        return f"Stopped: no new candidates for this thread (label `{STOPPED_LABEL}`; remove it to resume)."

    def request_evaluation(self, pr: PullRequest, *, profile: bool = False, actor: str = "") -> str:
        if not pr.is_open:
            raise CommandFailed("the PR is closed.")
        if is_person_pr(self.forge, pr):
            return self._evaluate_person(pr, profile=profile, actor=actor)
        if not is_candidate_pr(pr):
            raise CommandFailed("only kbot candidate branches (`kbot/...`) of this repository are benchmarked.")
        label = PROFILE_LABEL if profile else BENCH_LABEL
        # Remove first: adding a label that is already there sends no event.
        self.forge.remove_label(pr.number, label)
        self.forge.add_labels(pr.number, [label])
        self.forge.set_status(pr.head_sha, "pending", context=STATUS_CONTEXT,
                              description="profile requested" if profile else "benchmark requested")
        what = "Benchmark with profiling" if profile else "Benchmark"
        return f"{what} requested for `{pr.head_sha[:12]}`; the review will be updated when it finishes."

    def _evaluate_person(self, pr: PullRequest, *, profile: bool, actor: str) -> str:
        """A person's kernel: checked as data, recorded for its head, benched by a dispatch (no status
        unless the bench was started)."""
        try:
            sub = submission.inspect(self.forge, pr)
        except submission.SubmissionError as e:
            raise CommandFailed(f"not benchmarked: {escape_inline(e, 400)}") from None
        sub = submission.record(self.forge, sub, actor)
        try:
            submission.request_bench(self.forge, sub, profile=profile)
        except UnsupportedError:
            raise CommandFailed("this forge cannot start the GPU bench (locally, `kbot submit` evaluates a person's kernel).") from None
        except ForgeError as e:
            raise CommandFailed(f"could not start the bench workflow ({escape_inline(type(e).__name__, 60)}); try again.") from None
        self.forge.set_status(pr.head_sha, "pending", context=STATUS_CONTEXT,
                              description="profile requested (a person's kernel)" if profile else "benchmark requested (a person's kernel)")
        what = "Benchmark with profiling" if profile else "Benchmark"
        return (f"{what} of `{escape_inline(sub.solution_path, 200)}` by {escape_inline(sub.author, 80)} requested for "
                f"`{pr.head_sha[:12]}`; the review will be updated when it finishes. A new push needs a new `/evaluate`; "
                "merging needs an approving review of the measured head (see docs/bot.md).")

    def promote(self, pr: PullRequest, actor: str) -> str:
        person = is_person_pr(self.forge, pr)
        if person and submission.read_record(self.forge, pr) is None:
            raise CommandFailed("this person's PR has no submission record yet; a maintainer's `/evaluate` writes it.")
        if not person and not is_candidate_pr(pr):
            raise CommandFailed("only kbot candidate PRs of this repository can be promoted.")
        # The rest of the gate (bot-only commits, files only under the solution folder, report = meta)
        # is checked by run_promotion right before the merge (bot.promotion.candidate_gate).
        if pr.merged:
            # A promotion interrupted after its merge: write the champion pointer it never got.
            resumed = resume_pointer(self.forge, pr)
            if resumed is None:
                raise CommandFailed("this PR is merged and already recorded as a champion (or has no kbot evaluation).")
            if not resumed.pointer_sha:
                raise CommandFailed(f"merged, pointer not written: {escape_inline(resumed.note, 300)} "
                                    f"({escape_inline(resumed.decision.headline, 300)})")
            return (f"Resumed the interrupted promotion: champion pointer written in `{resumed.pointer_sha[:12]}`."
                    + (f"\n\nClosed the other evaluated candidates: {_pr_list(resumed.closed)}." if resumed.closed else ""))
        data = find_evidence(self.forge, pr.number)
        if data is None:
            raise CommandFailed("this PR has no kbot evaluation yet; run `/evaluate` first.")
        try:
            ev = Evidence.from_block(data)
        except ValueError as e:
            raise CommandFailed(f"the evaluation record is unreadable ({escape_inline(e, 200)}); run `/evaluate`.") from None
        out = run_promotion(self.forge, pr, ev)
        d = out.decision
        lines = [f"Decision: **{d.action}** — {escape_inline(d.headline, 400)}"]
        if out.merged_sha:
            lines.append(f"Merged as `{out.merged_sha[:12]}`; champion pointer updated"
                         + (f" in `{out.pointer_sha[:12]}`." if out.pointer_sha else f" failed: {out.note}"))
        if out.closed:
            lines.append(f"Closed the other evaluated candidates: {_pr_list(out.closed)}.")
        if d.action == "rebenchmark":
            refresh = bring_up_to_date(self.forge, self.forge.get_pr(pr.number), d)
            if refresh.head:
                lines.append(escape_inline(refresh.note, 600))
            else:
                lines.append((escape_inline(refresh.note, 400) + " " if refresh.note else "")
                             + "Run `/evaluate` to measure the current head against the current champion.")
        return "\n\n".join(lines)

    def status(self, thread: int, pr: PullRequest | None) -> str:
        lines: list[str] = []
        if pr is not None:
            st = self.forge.combined_status(pr.head_sha).get(STATUS_CONTEXT)
            lines.append(f"PR head `{pr.head_sha[:12]}`: kbot/harness is **{st.state if st else 'not reported'}**"
                         + (f" ({escape_inline(st.description, 140)})" if st and st.description else ""))
            data = find_evidence(self.forge, pr.number)
            if data:
                w = data.get("w") or []
                passed = sum(1 for x in w if isinstance(x, list) and len(x) > 1 and x[1] == "PASSED")
                lines.append(f"Last evaluation: {passed}/{len(w)} workloads passed, measured at "
                             f"`{escape_inline(str(data.get('head_sha'))[:12], 12)}`.")
            meta = submission.trusted_meta(self.forge, pr) if (is_candidate_pr(pr) or is_person_pr(self.forge, pr)) else None
            definition = meta.get("definition") if meta else None
            if isinstance(definition, str):
                champ = read_champion(self.forge, definition)
                lines.append(f"Champion of `{escape_inline(definition, 128)}`: "
                             + (f"{escape_inline(champ.get('solution'), 100)} (#{champ.get('pr')})" if champ else "none yet") + ".")
        else:
            open_prs = [p for p in self.forge.list_prs(state="open", head_prefix=BRANCH_PREFIX)][:30]
            lines.append(f"Open kbot candidate PRs: {_pr_list(open_prs) or 'none'}.")
        return "\n\n".join(lines)
