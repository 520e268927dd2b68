"""kbot's own bench/report/command.yml are thin callers of the reusable kbot-bench/report/command.yml of
the same commit, the files `kbot init` makes adopters call: the jobs' logic lives once. What a caller
holds (triggers, run title, concurrency, the job's permissions, which inputs and secrets it passes) is
what `kbot init` writes for an adopter (skills/init/workflows/), but for the pin and kbot's own defaults
(the H200 runners), so a change to one that is not made to the other fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from wfkit import call_problems, load

from bot.cli.init import WORKFLOWS, Pin, render_workflow

WF = Path(__file__).resolve().parents[2] / ".github" / "workflows"

CALLS = {"bench.yml": "kbot-bench.yml", "report.yml": "kbot-report.yml", "command.yml": "kbot-command.yml"}
ADOPTER = Pin("someone/kbot", "0123456789abcdef0123456789abcdef01234567")
# The `with:` values in which kbot's own callers differ from an adopter's: the pin (kbot runs itself at
# the trusted commit of the event) and the runners' defaults (kbot's own GPU runner is an H200).
OWN_WITH = {
    "bench.yml": {"kbot-repository": "${{ github.repository }}",
                  "kbot-ref": "${{ github.event.pull_request.base.sha || github.sha }}",
                  "runner-labels": """${{ vars.KBOT_RUNNER_LABELS || '["self-hosted", "linux", "gpu", "h200"]' }}""",
                  "gpu-kind": "${{ vars.KBOT_GPU_KIND || 'H200' }}"},
    "report.yml": {"kbot-repository": "${{ github.repository }}", "kbot-ref": "${{ github.sha }}"},
    "command.yml": {"kbot-repository": "${{ github.repository }}", "kbot-ref": "${{ github.sha }}"},
}


def test_every_shipped_caller_is_one_of_kbot_s_own():
    assert set(CALLS) == set(WORKFLOWS) == set(OWN_WITH)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_kbot_s_own_workflow_calls_the_reusable_one(name):
    wf = load(WF / name)
    (job,) = wf["jobs"].values()
    assert job["uses"] == f"./.github/workflows/{CALLS[name]}"  # this commit's file, no other
    # nothing but the call: no steps, no runner, no gate of its own (the called jobs hold those)
    assert set(job) <= {"uses", "with", "secrets", "permissions", "cache-mode"}, set(job)
    assert not call_problems(job, load(WF / CALLS[name]))
    for key, value in OWN_WITH[name].items():
        assert job["with"][key] == value, key
    if name == "bench.yml":
        assert "secrets" not in job  # candidate code never meets a secret
    else:
        assert set(job["secrets"]) == set(load(WF / CALLS[name])["on"]["workflow_call"]["secrets"])


@pytest.mark.parametrize("name", sorted(CALLS))
def test_kbot_calls_its_workflows_as_an_adopter_does(name):
    own = load(WF / name)
    adopter = load_rendered(name)
    for key in ("name", "on", "run-name", "permissions", "concurrency"):
        assert own.get(key) == adopter.get(key), key
    (own_job,), (adopter_job,) = own["jobs"].values(), adopter["jobs"].values()
    assert list(own["jobs"]) == list(adopter["jobs"])
    assert adopter_job["uses"].split("@")[0] == f"{ADOPTER.repository}/.github/workflows/{CALLS[name]}"
    for key in ("permissions", "cache-mode", "secrets"):
        assert own_job.get(key) == adopter_job.get(key), key
    assert set(own_job["with"]) == set(adopter_job["with"])
    differ = {k for k in own_job["with"] if own_job["with"][k] != adopter_job["with"][k]}
    assert differ == set(OWN_WITH[name]), differ


def load_rendered(name: str) -> dict:
    """The workflow `kbot init` writes for an adopter, read as GitHub does."""
    data = yaml.safe_load(render_workflow(name, ADOPTER))
    data["on"] = data.pop(True, data.get("on"))
    return data


def test_the_reusable_workflows_run_nothing_from_a_caller_s_checkout():
    """A local action (`uses: ./...`) in a step of a called workflow resolves against the run's workspace
    (whatever that job checked out), not against the called file's repository: kbot's own run and an
    adopter's would run different code."""
    for called in CALLS.values():
        for job_name, job in load(WF / called)["jobs"].items():
            for step in job.get("steps", []):
                assert not str(step.get("uses", "")).startswith("./"), f"{called}/{job_name}: {step['uses']}"
