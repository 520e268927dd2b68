"""Load probe of the webhook server on loopback (scripts/webhook_load_probe.py, shortened): slowloris
heads, stalled bodies, oversized and large forged uploads and idle connections, all at once, do not
starve real signed deliveries (GitHub's own payload examples), and the server's memory stays bounded.
The figures of a full run are in docs/bot.md."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "webhook_load_probe.py"


def load_probe():
    spec = importlib.util.spec_from_file_location("webhook_load_probe", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_attacks_do_not_starve_real_deliveries_and_memory_stays_bounded(shared):
    probe = load_probe()
    fig = probe.probe(seconds=6, slowloris_n=120, stalled_n=20, oversized_n=3, idle_n=60, real_n=15, forged_n=2,
                      shared=shared)
    s = probe.summary(fig)
    assert s["real deliveries"] == s["answered 202"] == s["jobs done"] == 15, s
    assert s["job done s (median / p95 / max)"][2] < 3.0, s   # every real delivery processed within 3 s
    assert s["rss growth MiB (peak - baseline)"] < 64, s      # ~25 MB bodies are spooled, never held
    attack = s["attack"]
    assert attack.get("slowloris connections", 0) >= 120 and attack.get("idle connections", 0) >= 60
    assert any(k.startswith("oversized (Content-Length) -> 413") for k in attack), attack
    assert any(k.startswith("forged") and k.endswith("-> 401") for k in attack), attack
