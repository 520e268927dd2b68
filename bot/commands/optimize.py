"""/optimize [definition] [--candidates N] [--agent A] [--rounds N]: ask for candidates.

On an issue the definition is required. On a kbot candidate PR it defaults to the PR's definition
and the PR becomes the parent node (iterate on this kernel with its feedback).
"""

from __future__ import annotations

from bot.agents.catalog import available as available_agents
from bot.campaign.request import OptimizeRequest
from bot.commands.context import CommandContext, CommandFailed, CommandResult
from bot.commands.parser import Flag, Invocation, Positional
from bot.commands.spec import CommandSpec
from bot.forge.trusted_meta import read_meta
from bot.names import STOPPED_LABEL, is_candidate_pr

DEFINITION_RE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    if STOPPED_LABEL in ctx.labels:
        raise CommandFailed(f"this thread was stopped (`{STOPPED_LABEL}` label); remove the label to resume.")
    bounds = ctx.policy.optimize
    definition = inv.args.get("definition")
    parent_pr = None
    meta = None
    if ctx.is_pr:
        pr = ctx.forge.get_pr(ctx.number)
        # Only a PR the bot opened carries trusted metadata (a person's kbot/ PR is a plain thread).
        meta = (read_meta(pr, ctx.forge)
                if is_candidate_pr(pr) else None)
        if meta:
            parent_pr = pr.number
            meta_def = meta.get("definition")
            if definition is None and isinstance(meta_def, str):
                definition = meta_def
    if definition is None:
        raise CommandFailed("which definition? Write `/optimize <definition>` (no kbot metadata on this thread)")
    candidates = inv.args.get("candidates", bounds.default_candidates)
    rounds = inv.args.get("rounds", bounds.default_rounds)
    agent = inv.args.get("agent", bounds.default_agent)
    if candidates > bounds.max_candidates:
        raise CommandFailed(f"--candidates is limited to {bounds.max_candidates} by the policy")
    if rounds > bounds.max_rounds:
        raise CommandFailed(f"--rounds is limited to {bounds.max_rounds} by the policy")
    if agent not in bounds.agents:
        raise CommandFailed(f"agent `{agent}` is not enabled by the policy (enabled: {', '.join(bounds.agents)})")
    req = OptimizeRequest(definition=definition, candidates=candidates, agent=agent, rounds=rounds,
                          requested_by=ctx.actor, thread=ctx.number, parent_pr=parent_pr, parent_meta=meta,
                          comment_id=ctx.comment_id)
    return CommandResult(True, ctx.services.start_campaign(req))


SPEC = CommandSpec(
    name="optimize",
    summary="generate candidate kernels, one PR each",
    handler=run,
    positionals=(Positional("definition", "a definition name: letters, digits, _ . -", DEFINITION_RE),),
    flags={
        "candidates": Flag("candidates", "int", "candidates per round", lo=1, hi=64),
        # any agent the catalog offers (plugins included); the policy says which ones are enabled
        "agent": Flag("agent", "choice", "which agent writes them", choices=available_agents,
                      listed=lambda policy: policy.optimize.agents),
        "rounds": Flag("rounds", "int", "rounds of search", lo=1, hi=100),
    },
    permission="write", rate_limit=4, rank=30,
)
