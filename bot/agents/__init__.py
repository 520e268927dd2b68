"""Agents: context in, candidate solutions plus rationale out (see base.py); built by name through
the catalog (bot.agents.providers: anthropic, openai, offline, replay, composite; plugins in the
``kbot.agents`` entry-point group)."""

from .base import Agent, AgentContext, AgentError, Mode, Proposal, StructuredError
from .calllog import CallLog, CallRecord, prompt_hash
from .catalog import available, create_agent, get_agent_class, register
from .config import build_agent, load_config_file

__all__ = [
    "Agent", "AgentContext", "AgentError", "Mode", "Proposal", "StructuredError",
    "CallLog", "CallRecord", "prompt_hash",
    "build_agent", "load_config_file",
    "available", "create_agent", "get_agent_class", "register",
]
