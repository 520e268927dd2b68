"""The reusable workflows kbot publishes for adopters (kbot-bench/report/command.yml) keep the gates and
steps of kbot's own bench/report/command.yml: kbot's own run the harness from their checkout, the
reusable ones from kbot's source at the pinned sha with the adopter's repository as --repo; everything
else must agree, so a change to one that is not made to the other fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

WF = Path(__file__).resolve().parents[2] / ".github" / "workflows"
PAIRS = [("bench.yml", "kbot-bench.yml"), ("report.yml", "kbot-report.yml"), ("command.yml", "kbot-command.yml")]


def load(name: str) -> dict:
    data = yaml.safe_load((WF / name).read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data


def _steps(job: dict) -> dict[str, dict]:
    return {s.get("id") or s.get("name") or s["uses"].split("@")[0]: s for s in job["steps"]}


@pytest.mark.parametrize(("ours", "published"), PAIRS, ids=[p[1] for p in PAIRS])
def test_the_same_jobs_permissions_and_gates(ours, published):
    own, pub = load(ours), load(published)
    assert list(pub["on"]) == ["workflow_call"]
    assert set(own["jobs"]) == set(pub["jobs"])
    for name, job in own["jobs"].items():
        other = pub["jobs"][name]
        assert job["permissions"] == other["permissions"], name
        gate = str(job.get("if", "")).replace("vars.KBOT_BOT_LOGIN", "inputs.bot-login")
        assert gate == str(other.get("if", "")), f"{name}: the job gates differ"
        for key in ("needs", "strategy", "timeout-minutes", "outputs"):
            assert job.get(key) == other.get(key), f"{name}.{key}"


def test_the_bench_plans_and_uploads_alike():
    own, pub = load("bench.yml")["jobs"], load("kbot-bench.yml")["jobs"]
    assert _steps(own["plan"])["plan"] == _steps(pub["plan"])["plan"]  # which solutions, and the kernels/-only rule
    for step in ("Upload results",):
        assert _steps(own["bench"])[step] == _steps(pub["bench"])[step]
    own_env = _steps(own["bench"])["Evaluate"]["env"]
    pub_env = _steps(pub["bench"])["Evaluate"]["env"]
    for key in ("EXPECTED_HEAD", "SOLUTION", "PROFILE", "PROFILE_BUDGET", "KBOT_VENV", "KBOT_SANDBOX"):
        assert own_env.get(key) == pub_env.get(key), key
    # the same script but for where the harness comes from and which repository it serves (two lines more)
    own_run = _steps(own["bench"])["Evaluate"]["run"].replace(
        'PYTHONPATH="$PWD" "$KBOT_VENV/bin/python" -m harness.cli eval',
        'PYTHONPATH="$kbot_src" "$KBOT_VENV/bin/python" -m harness.cli --repo "$PWD" eval').splitlines()
    pub_run = _steps(pub["bench"])["Evaluate"]["run"].splitlines()
    extra = [line for line in pub_run if line not in own_run]
    assert [line for line in pub_run if line in own_run] == own_run
    assert len(extra) == 2 and "KBOT_REF" in extra[0] and extra[1] == 'kbot_src="$PWD/kbot"', extra


@pytest.mark.parametrize(("ours", "published", "step"), [("report.yml", "kbot-report.yml", "Review, status, promotion"),
                                                          ("command.yml", "kbot-command.yml", "Handle the comment")])
def test_the_bot_runs_alike(ours, published, step):
    (own,), (pub,) = load(ours)["jobs"].values(), load(published)["jobs"].values()
    own_step, pub_step = _steps(own)[step], _steps(pub)[step]
    for key, value in own_step["env"].items():
        if key == "PYTHONPATH":
            continue  # the published job exports kbot's source and the repository instead
        want = value.replace("vars.KBOT_BOT_LOGIN", "inputs.bot-login").replace("vars.KBOT_CAMPAIGN", "inputs.campaign")
        assert pub_step["env"].get(key) == want, key
    for line in own_step["run"].splitlines():
        assert line.strip() in pub_step["run"], line
    uploads = lambda job: [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]  # noqa: E731
    assert uploads(own) == uploads(pub)
