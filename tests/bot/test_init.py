"""`kbot init` on an empty git repository: its workflows pass actionlint, zizmor (offline, pedantic, no
findings) and GitHub's workflow schema, call kbot's reusable workflows with inputs and secrets those
declare, pin the workflow and the kbot source by one sha; the App manifest holds only GitHub's manifest
parameters, with permission names and levels from GitHub's REST description and events from its webhook
schemas; nothing existing is overwritten; bad input is refused with the reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from bot.cli.init import APP_EVENTS, APP_PERMISSIONS, WORKFLOWS
from tests.workflows.wfkit import call_problems, load, tool

REPO = Path(__file__).resolve().parents[2]
SHA = "0123456789abcdef0123456789abcdef01234567"
PINNED_CALL = re.compile(r"^(?P<repo>[^/]+/[^/]+)/\.github/workflows/(?P<file>[^@]+)@(?P<sha>[0-9a-f]{40})$")

# GitHub's manifest parameters ("Registering a GitHub App from a manifest", GitHub Docs): nothing else
# is accepted in a manifest; `url` is the only required one; names are at most 34 characters.
MANIFEST_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 34},
        "url": {"type": "string", "pattern": "^https?://"},
        "hook_attributes": {"type": "object", "additionalProperties": False, "required": ["url"],
                            "properties": {"url": {"type": "string", "pattern": "^https://"}, "active": {"type": "boolean"}}},
        "redirect_url": {"type": "string", "pattern": "^https?://"},
        "callback_urls": {"type": "array", "maxItems": 10, "items": {"type": "string"}},
        "setup_url": {"type": "string"},
        "description": {"type": "string"},
        "public": {"type": "boolean"},
        "default_events": {"type": "array", "items": {"type": "string"}},
        "default_permissions": {"type": "object"},
        "request_oauth_on_install": {"type": "boolean"},
        "setup_on_update": {"type": "boolean"},
    },
}



def kbot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd)})


@pytest.fixture(scope="module")
def adopted(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("adopter")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    r = kbot("init", "--kbot-repository", "someone/kbot", "--kbot-ref", SHA, "--webhook-url", "https://bot.example.org/webhook", cwd=root)
    assert r.returncode == 0, r.stderr
    return root


def test_it_writes_the_layout(adopted):
    for rel in ("kbot.toml", "definitions/README.md", "kernels/README.md", "skills/bot-policy.yaml", "skills/promotion.yaml",
                ".github/kbot-app.json", ".kbot/app-manifest.html", *(f".github/workflows/{w}" for w in WORKFLOWS)):
        assert (adopted / rel).is_file(), rel
    tomllib.loads((adopted / "kbot.toml").read_text())
    assert ".kbot/" in (adopted / ".gitignore").read_text().splitlines()
    # the policies carry their comments, and the bot reads them as they are
    from bot.commands.bot_policy import BotPolicy
    from bot.promotion.decision import PromotionPolicy

    text = (adopted / "skills" / "bot-policy.yaml").read_text()
    assert text.startswith("#") and BotPolicy.from_yaml(text, "skills/bot-policy.yaml")
    text = (adopted / "skills" / "promotion.yaml").read_text()
    assert text.startswith("#") and PromotionPolicy.from_yaml(text, "skills/promotion.yaml")
    # and kbot now runs in it, from a folder below
    r = kbot("definitions", "list", "--json", cwd=adopted / "kernels")
    assert r.returncode == 0 and {"rmsnorm_h4096"} <= {row["name"] for row in json.loads(r.stdout)}, r.stderr


def test_the_workflows_pass_actionlint_zizmor_and_the_schema(adopted):
    files = sorted((adopted / ".github" / "workflows").glob("*.yml"))
    assert [f.name for f in files] == sorted(WORKFLOWS)
    r = subprocess.run([tool("actionlint"), "-no-color", *map(str, files)], cwd=adopted, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([tool("zizmor"), "--offline", "--persona=pedantic", "--no-progress", str(adopted / ".github" / "workflows")],
                       cwd=adopted, capture_output=True, text=True)
    assert r.returncode == 0 and "No findings to report" in r.stdout, r.stdout + r.stderr
    for f in files:
        r = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(f)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_each_caller_pins_one_sha_and_matches_the_reusable_workflow(adopted):
    """The `uses:` pin and the kbot-ref input are the same sha; every input and secret given is declared
    by kbot's reusable workflow of that name, every required one is given, and the job grants exactly
    the permissions the called jobs ask for."""
    for name in WORKFLOWS:
        wf = load(adopted / ".github" / "workflows" / name)
        assert wf["permissions"] == {} and "concurrency" in wf
        (job,) = wf["jobs"].values()
        m = PINNED_CALL.match(job["uses"])
        assert m and m["repo"] == "someone/kbot" and m["sha"] == SHA, job["uses"]
        assert job["with"]["kbot-ref"] == SHA and job["with"]["kbot-repository"] == "someone/kbot"
        assert not any(v == "write" for v in job["permissions"].values())
        assert not call_problems(job, load(REPO / ".github" / "workflows" / m["file"])), name
    bench = load(adopted / ".github" / "workflows" / "bench.yml")
    assert "secrets" not in bench["jobs"]["bench"]  # candidate code never meets a secret
    # the bench's file name is the one the bot dispatches and recognises
    from bot.names import BENCH_WORKFLOW

    assert (adopted / BENCH_WORKFLOW).is_file()


def test_the_app_manifest_validates(adopted, shared):
    manifest = json.loads((adopted / ".github" / "kbot-app.json").read_text())
    jsonschema.validate(manifest, MANIFEST_SCHEMA)
    api = json.loads((shared / "github" / "rest-api.openapi.json").read_text())
    jsonschema.validate(manifest["default_permissions"], {**api["components"]["schemas"]["app-permissions"], "additionalProperties": False})
    hooks = json.loads((shared / "github" / "webhook-schemas.json").read_text())
    events = {k.removesuffix("_event") for k in hooks["definitions"] if k.endswith("_event")}
    assert set(manifest["default_events"]) <= events and manifest["default_events"] == list(APP_EVENTS)
    assert manifest["hook_attributes"] == {"url": "https://bot.example.org/webhook", "active": True}
    assert manifest["default_permissions"] == APP_PERMISSIONS and manifest["public"] is False
    page = (adopted / ".kbot" / "app-manifest.html").read_text()
    assert 'action="https://github.com/settings/apps/new"' in page and 'name="manifest"' in page


def test_without_a_webhook_the_app_subscribes_to_nothing(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    r = kbot("init", "--kbot-repository", "someone/kbot", "--kbot-ref", SHA, "--org", "acme", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["kbot_ref"] == SHA and ".github/kbot-app.json" in out["written"] and "kbot.toml" in out["written"]
    manifest = json.loads((tmp_path / ".github" / "kbot-app.json").read_text())
    assert "hook_attributes" not in manifest and "default_events" not in manifest
    jsonschema.validate(manifest, MANIFEST_SCHEMA)
    assert "https://github.com/organizations/acme/settings/apps/new" in (tmp_path / ".kbot" / "app-manifest.html").read_text()


def test_it_refuses_bad_input_and_never_overwrites(adopted, tmp_path):
    r = kbot("init", "--kbot-repository", "someone/kbot", "--kbot-ref", SHA, cwd=adopted)
    assert r.returncode == 2 and "already has" in r.stderr and "nothing was written" in r.stderr, r.stderr
    (tmp_path / "plain").mkdir()
    r = kbot("init", "--kbot-repository", "someone/kbot", "--kbot-ref", SHA, cwd=tmp_path / "plain")
    assert r.returncode == 2 and "not a git repository" in r.stderr, r.stderr
    subprocess.run(["git", "init", "-q", str(tmp_path / "g")], check=True)
    r = kbot("init", "--kbot-repository", "someone/kbot", "--kbot-ref", "main", cwd=tmp_path / "g")
    assert r.returncode == 2 and "full commit sha" in r.stderr, r.stderr
    r = kbot("init", "--kbot-repository", "someone/kbot", "--kbot-ref", SHA, "--webhook-url", "http://x", cwd=tmp_path / "g")
    assert r.returncode == 2 and "https://" in r.stderr, r.stderr
    assert not (tmp_path / "g" / "kbot.toml").exists()


def test_the_bot_takes_a_log_level():
    import logging

    import click

    from bot.cli import github_bot

    @click.group()
    def cli() -> None:
        pass

    github_bot.register(cli)
    before = logging.getLogger().level
    try:
        r = CliRunner().invoke(cli, ["bot", "--log-level", "warning", "leaderboard", "--help"])
        assert r.exit_code == 0 and logging.getLogger().level == logging.WARNING, r.output
        r = CliRunner().invoke(cli, ["bot", "--log-level", "loud", "leaderboard", "--help"])
        assert r.exit_code == 2 and "loud" in r.output
        assert "--log-level" in CliRunner().invoke(cli, ["serve", "--help"]).output
    finally:
        logging.getLogger().setLevel(before)
