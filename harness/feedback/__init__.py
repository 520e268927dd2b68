"""Semantic feedback: deterministic rules (skills/profiling/rules/*.yaml) that turn evidence into advice."""
