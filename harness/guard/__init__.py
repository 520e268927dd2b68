"""The guard: static policy checks before a solution runs, runtime integrity checks while it runs.

``harness.guard.static.check_solution`` refuses solutions by policy (skills/guard/*.yaml);
``harness.guard.runtime`` holds the checks the worker makes around the candidate. docs/guard.md is the
threat model: which trick each layer catches, and what none of them can.
"""

from .policy import PolicyError, load_policy, load_rules

__all__ = ["PolicyError", "load_policy", "load_rules"]
