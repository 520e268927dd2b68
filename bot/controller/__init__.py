"""The controller: a search tree over kernel candidates and the campaign loop around it.

Entry points for the CLI (``kbot optimize``) and the bot: ``Campaign.start`` / ``Campaign.resume`` /
``Campaign.step`` / ``Campaign.report``, ``Tree.from_records`` to rebuild a tree from node records
stored elsewhere (PR bodies), and ``load_campaign_config`` for a config file.
"""

from .budget import Budget, Usage
from .campaign import Campaign, CampaignConfig, CampaignError, Evaluator, StepResult, load_campaign_config
from .memory import SearchMemory
from .summary import summarize
from .tree import Node, SearchConfig, Tree, failed_node_id, solution_node_id

__all__ = [
    "Budget", "Usage", "Campaign", "CampaignConfig", "CampaignError", "Evaluator", "StepResult",
    "load_campaign_config", "SearchMemory", "summarize", "Node", "SearchConfig", "Tree",
    "failed_node_id", "solution_node_id",
]
