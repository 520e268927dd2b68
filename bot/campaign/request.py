"""What a campaign is asked to do on the code host, and the one way it says no.

``/optimize`` builds an OptimizeRequest (``bot.commands.optimize``), so does the next round of a
campaign (``bot.campaign.github_campaign.continue_after_results``); the campaign answers with the PRs it
opened, or raises CampaignRefused with a sentence that is safe to show the person who asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


class CampaignRefused(Exception):
    """The request cannot be carried out (unknown definition, parent without evaluation, agent not
    available). The message is Markdown built from escaped pieces: shown to the user as it is."""


@dataclass(frozen=True)
class OptimizeRequest:
    definition: str
    candidates: int
    agent: str
    rounds: int
    requested_by: str
    thread: int                      # issue or PR number the command came from
    parent_pr: int | None = None     # when /optimize was asked on a candidate PR: iterate on it
    parent_meta: Mapping[str, Any] | None = None  # that PR's kbot:meta block
    comment_id: int | None = None    # the comment that asked: a redelivery of it is the same request
    # The agent's config section (model, base_url, sampling), resolved from the policy and the comment
    # (bot.commands.bot_policy.OptimizeBounds.resolve_agent); None: the agent's own defaults.
    agent_config: Mapping[str, Any] | None = None
    # What the comment asked for (model, endpoint NAME, sampling): recorded in the PRs' meta blocks so a
    # later round asks the same, resolved again against that day's policy.
    agent_choice: Mapping[str, Any] | None = None
