"""The environment snapshot's background queries: started early, collected or cancelled, never orphaned."""

import subprocess
import sys

from harness import env


def test_cancel_prefetch_stops_queries_nobody_will_collect(monkeypatch):
    monkeypatch.setattr(env, "_started", {})
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    env._started[("nvidia-smi", "--query")] = slow
    env.cancel_prefetch()
    assert env._started == {}
    assert slow.poll() is not None  # killed and reaped, not left to run into someone's timed calls
    env.cancel_prefetch()  # nothing left: a no-op


def test_a_collected_query_returns_its_output_once(monkeypatch):
    monkeypatch.setattr(env, "_started", {})
    cmd = [sys.executable, "-c", "print('abc123')"]
    env._started[tuple(cmd)] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    assert env._run(cmd) == "abc123"
    assert tuple(cmd) not in env._started
