"""`kbot report --html DIR` before the first campaign, as a new user runs it (a subprocess, from an empty
folder): a valid page that says there are no campaigns yet and gives the commands that start one, with
exit 0 and nothing created but the report; a folder that is something else is refused with the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.campaign.local_loop import Workspace
from tests.local.test_site_report import assert_rendered

REPO = Path(__file__).resolve().parents[2]


def kbot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd)})


def test_an_empty_folder_gets_a_report_that_says_how_to_start(tmp_path):
    r = kbot("report", "--html", "site", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no kbot workspace at .kbot/workspace yet" in r.stdout and "kbot optimize DEFINITION" in r.stdout
    assert f"open {tmp_path / 'site' / 'index.html'}" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no workspace was created to report on
    assert [p.name for p in (tmp_path / "site").iterdir()] == ["index.html"]
    page = (tmp_path / "site" / "index.html").read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert_rendered(page, timing="No")
    assert "<h2>No campaigns yet</h2>" in page and "There is no kbot workspace at" in page
    assert "kbot optimize rmsnorm_h4096\nkbot report --html site</code>" in page  # the default workspace: no option
    assert "<li><code>rmsnorm_h4096</code></li>" in page  # what can be optimized here
    assert "No pull requests yet." in page and '<table class="prs">' not in page


def test_another_workspace_path_is_in_the_commands(tmp_path):
    r = kbot("report", "--html", "out", "--workspace", "ws", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "out" / "index.html").read_text()
    assert "kbot optimize rmsnorm_h4096 --workspace ws\nkbot report --html out --workspace ws</code>" in page
    assert not (tmp_path / "ws").exists()


def test_a_workspace_without_campaigns_says_so(tmp_path):
    Workspace(tmp_path / "ws")  # the forge and its main, as the first `kbot optimize` leaves them before a campaign
    r = kbot("report", "--html", "out", "--workspace", "ws", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no kbot workspace" not in r.stdout
    page = (tmp_path / "out" / "index.html").read_text()
    assert "The workspace has no campaign yet" in page and "(not created yet)" not in page
    assert "kbot optimize rmsnorm_h4096 --workspace" in page


def test_a_folder_that_is_not_a_workspace_is_refused(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    r = kbot("report", "--html", "out", "--workspace", "notes", cwd=tmp_path)
    assert r.returncode == 2 and "notes is not a kbot workspace (it has no forge/repo.git)" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    (tmp_path / "file").write_text("x")
    r = kbot("report", "--html", "out", "--workspace", "file", cwd=tmp_path)
    assert r.returncode == 2 and "is a file" in r.stderr, r.stderr
