"""/optimize [definition] [--candidates N] [--agent A] [--rounds N] [model=M] [endpoint=NAME]
[temperature=T] [max_tokens=N] [top_p=P]: ask for candidates.

On an issue the definition is required. On a kbot candidate PR it defaults to the PR's definition
and the PR becomes the parent node (iterate on this kernel with its feedback).

The agent's settings come from the policy (``optimize.agent_settings``); a comment may move them only
within the policy's limits: a model it lists, an endpoint it names (a comment never writes a URL: the
bot would send its API key there), sampling inside its ranges. Anything else is refused with the reason.
"""

from __future__ import annotations

from bot.agents.catalog import available as available_agents
from bot.campaign.request import OptimizeRequest
from bot.commands.context import CommandContext, CommandFailed, CommandResult
from bot.commands.parser import Flag, Invocation, Positional
from bot.commands.spec import CommandSpec
from bot.forge.trusted_meta import read_meta
from bot.names import STOPPED_LABEL, is_candidate_pr
from bot.review.markdown import escape_inline

DEFINITION_RE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
# the policy's name of a setting (bot.commands.bot_policy.CHOICES) -> the comment's option
SETTING_FLAGS = {"model": "model", "endpoint": "endpoint", "temperature": "temperature",
                 "max_tokens": "max-tokens", "top_p": "top-p"}


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
    choice = {key: inv.args[flag] for key, flag in SETTING_FLAGS.items() if flag in inv.args}
    try:
        config = bounds.resolve_agent(agent, choice)
    except ValueError as e:
        raise CommandFailed(f"not started: {escape_inline(e, 400)}") from None
    req = OptimizeRequest(definition=definition, candidates=candidates, agent=agent, rounds=rounds,
                          requested_by=ctx.actor, thread=ctx.number, parent_pr=parent_pr, parent_meta=meta,
                          comment_id=ctx.comment_id, agent_config=config, agent_choice=choice)
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
        # the agent's settings; the policy's optimize.agent_settings says which values it allows
        "model": Flag("model", "text", "a model the policy allows for the agent", pattern=r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}"),
        "endpoint": Flag("endpoint", "text", "an endpoint the policy names for the agent", pattern=r"[a-z][a-z0-9_-]{0,31}"),
        "temperature": Flag("temperature", "number", "sampling temperature", lo=0, hi=2),
        "max-tokens": Flag("max-tokens", "int", "output tokens per call", lo=1, hi=1_000_000),
        "top-p": Flag("top-p", "number", "nucleus sampling", lo=0, hi=1),
    },
    permission="write", rate_limit=4, rank=30,
)
