"""``kbot init``: turn an existing git repository into a kbot repository, without forking kbot.

What it writes (never over an existing file unless ``--force``; the templates are ``skills/init/``):

* ``kbot.toml``: the marker by which kbot finds the repository (harness/paths.py);
* ``.github/workflows/bench.yml``, ``report.yml``, ``command.yml``: thin callers of the reusable
  workflows kbot publishes (``.github/workflows/kbot-*.yml`` of the kbot repository), each pinned by one
  sha that is also the kbot source the jobs run (``kbot-ref``);
* ``skills/bot-policy.yaml`` and ``skills/promotion.yaml``: kbot's policies with their comments, for the
  repository to edit (the bot reads them from the default branch);
* ``definitions/README.md`` and ``kernels/README.md``: the folder layout, what goes where;
* ``.gitignore``: ``.kbot/`` (local state) added;
* ``.github/kbot-app.json``: the GitHub App manifest (its permissions and, with a webhook URL, its
  events), and ``.kbot/app-manifest.html``, a page whose one button creates the App from it on GitHub.

The workflow file names and the bench's path are the ones ``bot/names.py`` knows (``bench.yml``), so the
bot dispatches and recognises the bench exactly as in kbot's own repository.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import click

from harness.paths import MARKER, shipped, source_checkout

SHA = re.compile(r"^[0-9a-f]{40}$")
REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
WORKFLOWS = ("bench.yml", "report.yml", "command.yml")
MANIFEST = ".github/kbot-app.json"
# What the bot does with its App token, and the permission each needs (GitHub's app-permissions names):
# branches, commits and merges; PRs, their reviews and labels; comments and reactions; the kbot/harness
# status; dispatching bench.yml and downloading its artifacts; reading check runs; team membership for
# `teams:` grants in the bot policy.
APP_PERMISSIONS = {
    "contents": "write", "pull_requests": "write", "issues": "write", "statuses": "write", "actions": "write",
    "checks": "read", "metadata": "read", "members": "read",
}
# The webhook events App mode (`kbot serve`) handles (bot/intake/events.py); Actions mode needs none.
APP_EVENTS = ("issue_comment", "pull_request", "workflow_run")


class InitError(click.ClickException):
    exit_code = 2


@dataclass(frozen=True)
class Pin:
    repository: str  # owner/name of kbot on GitHub
    ref: str  # the 40-hex commit both the `uses:` lines and the kbot source are pinned to


def _git(folder: Path, *args: str) -> str | None:
    r = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def default_pin(repository: str | None, ref: str | None) -> Pin:
    """The pin from the options, else from the kbot checkout this runs from (its HEAD and origin); an
    installed wheel knows neither, so there both options are needed."""
    checkout = source_checkout()
    if ref is None and checkout is not None:
        if _git(checkout, "status", "--porcelain", "--untracked-files=no"):
            raise InitError(f"the kbot checkout {checkout} has uncommitted changes: its HEAD is not what the workflows "
                            "would run; commit them, or pass --kbot-ref SHA")
        ref = _git(checkout, "rev-parse", "HEAD")
    if repository is None and checkout is not None:
        url = _git(checkout, "remote", "get-url", "origin") or ""
        m = re.search(r"github\.com[:/]([^/]+/[^/]+?)(?:\.git)?$", url)
        repository = m.group(1) if m else None
    if not ref:
        raise InitError("pass --kbot-ref SHA: the kbot commit the workflows pin (an installed kbot does not know its commit)")
    if not repository:
        raise InitError("pass --kbot-repository OWNER/NAME: the GitHub repository of kbot the workflows call")
    if not SHA.match(ref):
        raise InitError(f"--kbot-ref {ref}: a full commit sha (40 lowercase hex digits), not a branch or tag: "
                        "a pin that can move is no pin")
    if not REPOSITORY.match(repository):
        raise InitError(f"--kbot-repository {repository}: expected OWNER/NAME")
    return Pin(repository, ref)


def _kbot_version() -> str:
    try:
        return metadata.version("kbot")
    except metadata.PackageNotFoundError:
        return "source"


def render_workflow(name: str, pin: Pin) -> str:
    text = (shipped() / "skills" / "init" / "workflows" / name).read_text()
    return (text.replace("@KBOT_REPOSITORY@", pin.repository).replace("@KBOT_REF@", pin.ref)
            .replace("@KBOT_VERSION@", _kbot_version()))


def app_manifest(name: str, homepage: str, webhook_url: str | None = None, redirect_url: str | None = None) -> dict:
    """The GitHub App manifest (GitHub's manifest parameters). Without a webhook URL the App is only the
    bot's identity for the workflows (Actions mode); with one, `kbot serve` receives its events."""
    if not 1 <= len(name) <= 34:
        raise InitError(f"--app-name {name!r}: GitHub App names are 1 to 34 characters")
    for what, url in (("--homepage", homepage), ("--webhook-url", webhook_url), ("--redirect-url", redirect_url)):
        if url is not None and not re.match(r"^https://[^\s/]+", url):
            raise InitError(f"{what} {url}: an https:// URL")
    manifest: dict = {
        "name": name,
        "url": homepage,
        "description": "kbot: LLM agents optimize GPU kernels, one pull request per attempt; GPU runners benchmark them.",
        "public": False,
        "default_permissions": dict(APP_PERMISSIONS),
    }
    if webhook_url:
        manifest["hook_attributes"] = {"url": webhook_url, "active": True}
        manifest["default_events"] = list(APP_EVENTS)
    if redirect_url:
        manifest["redirect_url"] = redirect_url
    return manifest


def manifest_page(manifest: dict, org: str | None) -> str:
    """A local page whose one button posts the manifest to GitHub's "new App" form (GitHub's manifest flow)."""
    target = f"https://github.com/organizations/{org}/settings/apps/new" if org else "https://github.com/settings/apps/new"
    value = html.escape(json.dumps(manifest), quote=True)
    return ("<!doctype html>\n<meta charset=\"utf-8\"><title>Create the kbot GitHub App</title>\n"
            f"<form action=\"{html.escape(target)}\" method=\"post\">\n"
            f"  <input type=\"hidden\" name=\"manifest\" value=\"{value}\">\n"
            f"  <p>Creates the GitHub App <b>{html.escape(manifest['name'])}</b> with kbot's permissions "
            f"({html.escape(', '.join(f'{k}: {v}' for k, v in manifest['default_permissions'].items()))}).</p>\n"
            "  <button type=\"submit\">Create the GitHub App</button>\n</form>\n")


def files_for(pin: Pin, manifest: dict) -> dict[str, str]:
    """Repository path -> text of everything ``kbot init`` writes into the repository."""
    init = shipped() / "skills" / "init"
    out = {MARKER: (init / "kbot.toml").read_text()}
    for name in WORKFLOWS:
        out[f".github/workflows/{name}"] = render_workflow(name, pin)
    for policy in ("bot-policy.yaml", "promotion.yaml"):
        out[f"skills/{policy}"] = (shipped() / "skills" / policy).read_text()
    out["definitions/README.md"] = (init / "definitions-README.md").read_text()
    out["kernels/README.md"] = (init / "kernels-README.md").read_text()
    out[MANIFEST] = json.dumps(manifest, indent=2) + "\n"
    return out


def init_repository(folder: Path, pin: Pin, manifest: dict, *, force: bool = False, org: str | None = None) -> list[str]:
    """Write the files into the git repository at (or above) ``folder``; returns the paths written."""
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None:
        raise InitError(f"{folder}: not a git repository (run `git init` there first, or name one)")
    root = Path(top)
    files = files_for(pin, manifest)
    existing = sorted(p for p in files if (root / p).exists())
    if existing and not force:
        raise InitError(f"{root} already has {', '.join(existing)}: nothing was written (--force replaces them)")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    # .kbot/ holds local state (runs, the workspace, this page): never committed.
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    if ".kbot/" not in lines:
        ignore.write_text("\n".join([*lines, ".kbot/"]) + "\n")
    page = root / ".kbot" / "app-manifest.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(manifest_page(manifest, org))
    return sorted([*files, ".gitignore", str(page.relative_to(root))])


def register(cli: click.Group) -> None:
    @cli.command("init")
    @click.argument("folder", required=False, type=click.Path(file_okay=False, exists=True), default=".")
    @click.option("--kbot-repository", metavar="OWNER/NAME", help="The kbot repository the workflows call (default: this kbot checkout's origin).")
    @click.option("--kbot-ref", metavar="SHA", help="The kbot commit the workflows pin (default: this kbot checkout's HEAD).")
    @click.option("--app-name", help="Name of the GitHub App (default: kbot-<folder name>, at most 34 characters).")
    @click.option("--homepage", help="The App's homepage URL (default: the kbot repository on GitHub).")
    @click.option("--webhook-url", help="App mode: the https:// URL `kbot serve` receives events at (default: none, Actions mode).")
    @click.option("--redirect-url", help="Where GitHub sends the browser after the App is created (optional).")
    @click.option("--org", help="Create the App under this organization (default: your account).")
    @click.option("--force", is_flag=True, help="Replace files that exist already.")
    @click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
    def init_cmd(folder: str, kbot_repository: str | None, kbot_ref: str | None, app_name: str | None, homepage: str | None,
                 webhook_url: str | None, redirect_url: str | None, org: str | None, force: bool, as_json: bool) -> None:
        """Make FOLDER (a git repository; default: here) a kbot repository: kbot.toml, the workflows (thin
        callers of kbot's reusable workflows, pinned by sha), the policies, the folder layout, and the
        GitHub App manifest. docs/adopting.md walks through the rest."""
        pin = default_pin(kbot_repository, kbot_ref)
        root = Path(folder).resolve()
        manifest = app_manifest(app_name or f"kbot-{root.name}"[:34], homepage or f"https://github.com/{pin.repository}",
                                webhook_url, redirect_url)
        written = init_repository(root, pin, manifest, force=force, org=org)
        if as_json:
            click.echo(json.dumps({"root": str(root), "kbot_repository": pin.repository, "kbot_ref": pin.ref, "written": written}, indent=2))
            return
        click.echo(f"kbot {pin.repository}@{pin.ref[:12]} initialised {root}:")
        for rel in written:
            click.echo(f"  {rel}")
        click.echo("next: open .kbot/app-manifest.html and create the App; set its secrets and KBOT_BOT_LOGIN; "
                   "register a GPU runner; commit and push (docs/adopting.md)")
