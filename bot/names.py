"""Names kbot writes on the code host, one home each: the candidate branch layout, the labels, the
commit-status context, and the workflow and artifact names the bot looks for.

The workflows (.github/workflows/*.yml) spell the same names in YAML, where Python cannot reach;
tests/test_architecture.py checks they agree with this file.
"""

from __future__ import annotations

from typing import Any

BRANCH_PREFIX = "kbot/"           # every candidate branch: kbot/<definition>/<node>
CANDIDATE_LABEL = "kbot:candidate"  # on every PR the bot opens for a candidate
BENCH_LABEL = "kbot:bench"         # (re)applied by /evaluate: the bench workflow runs on it
PROFILE_LABEL = "kbot:profile"     # (re)applied by /profile: the bench workflow runs with the profiler
STOPPED_LABEL = "kbot:stopped"     # /stop: no further candidates for the thread
KILL_SWITCH_LABEL = "kbot:stop"    # the policy's default kill-switch label: the bot ignores the thread
STATUS_CONTEXT = "kbot/harness"    # the commit status every evaluation reports under
BENCH_WORKFLOW = ".github/workflows/bench.yml"
RESULTS_ARTIFACT_PREFIX = "kbot-results-"  # the bench workflow's result artifacts
CALLS_ARTIFACT_PREFIX = "kbot-calls-"  # command.yml / report.yml: every model call of the run (+ run id)
# The run-name of a bench the bot dispatched for a person's PR (bench.yml spells it in `format(...)`):
# the report step reads the PR and the authorized sha back from it (bot.campaign.submission).
DISPATCH_TITLE = "kbot bench of PR #{pr} at {sha}"


def attempt_branch(definition: str, node: str) -> str:
    """``kbot/<definition>/<node>``: the node id is the first 12 hex digits of the solution's content
    hash, so the same kernel always lands on the same branch."""
    return f"{BRANCH_PREFIX}{definition}/{node}"


def definition_branch_prefix(definition: str) -> str:
    """The prefix every candidate branch of ``definition`` starts with."""
    return f"{BRANCH_PREFIX}{definition}/"


def is_candidate_branch(branch: Any) -> bool:
    return isinstance(branch, str) and branch.startswith(BRANCH_PREFIX)


def is_candidate_pr(pr: Any) -> bool:
    """A pull request from a kbot branch of this repository (not a fork). Says nothing about who
    opened it: ``bot.promotion.candidate_gate`` decides whether the bot may trust and merge it."""
    return is_candidate_branch(pr.head_branch) and not pr.from_fork
