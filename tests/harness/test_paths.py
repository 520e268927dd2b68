"""harness/paths.py: the repository kbot runs in is found from kbot.toml, KBOT_REPO or --repo; its
definitions, kernels and skills come before kbot's own; what is missing is named with where it looked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import paths
from harness.guard.policy import clear_caches, load_policy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def user_repo(tmp_path, monkeypatch):
    """A kbot repository of a user's with one definition of its own (a copy of rmsnorm under another name)."""
    monkeypatch.delenv(paths.REPO_ENV, raising=False)
    root = tmp_path / "theirs"
    (root / "definitions").mkdir(parents=True)
    (root / paths.MARKER).write_text("# a kbot repository\n")
    d = json.loads((REPO / "definitions" / "rmsnorm_h4096" / "definition.json").read_text())
    d["name"] = "their_rmsnorm"
    (root / "definitions" / "their_rmsnorm").mkdir()
    (root / "definitions" / "their_rmsnorm" / "definition.json").write_text(json.dumps(d))
    lines = (REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl").read_text().splitlines()
    (root / "definitions" / "their_rmsnorm" / "workloads.jsonl").write_text(
        "".join(json.dumps({**json.loads(x), "definition": "their_rmsnorm"}) + "\n" for x in lines))
    sub = root / "some" / "folder"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    return root


def test_the_marker_is_found_from_a_folder_below(user_repo):
    assert paths.repository() == user_repo.resolve()
    assert paths.definition_dir("their_rmsnorm") == user_repo.resolve() / "definitions" / "their_rmsnorm"
    assert paths.definition_dir("rmsnorm_h4096") == paths.shipped() / "definitions" / "rmsnorm_h4096"
    assert {"their_rmsnorm", "rmsnorm_h4096"} <= set(paths.definition_names())


def test_outside_any_repository_only_the_shipped_files_count(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.REPO_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert paths.repository() is None
    assert paths.roots() == [paths.shipped()]
    with pytest.raises(paths.PathsError, match=r"no kbot\.toml in .* or any folder above it"):
        paths.require_repository()


def test_a_bad_repository_is_refused_with_where(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.REPO_ENV, str(tmp_path / "nope"))
    with pytest.raises(paths.PathsError, match="KBOT_REPO .*nope: no such folder"):
        paths.repository()
    monkeypatch.setenv(paths.REPO_ENV, str(tmp_path))
    with pytest.raises(paths.PathsError, match=r"not a kbot repository \(no kbot\.toml"):
        paths.repository()
    (tmp_path / paths.MARKER).write_text("this is = = not toml")
    with pytest.raises(paths.PathsError, match="not valid TOML"):
        paths.read_marker(paths.repository())


def test_a_repository_file_replaces_the_shipped_one(user_repo):
    shipped = paths.shipped() / "skills" / "guard" / "common.yaml"
    assert paths.skill("guard/common.yaml") == shipped
    theirs = user_repo / "skills" / "guard" / "common.yaml"
    theirs.parent.mkdir(parents=True)
    theirs.write_text(shipped.read_text() + "\nnames:\n  their_forbidden_name: introspection\n")
    clear_caches()
    try:
        assert paths.skill("guard/common.yaml") == theirs.resolve()
        assert "their_forbidden_name" in load_policy("python")["names"]
    finally:
        clear_caches()
    # A folder: one file per name, the repository's first; the shipped ones it does not replace stay.
    rules = user_repo / "skills" / "profiling" / "rules"
    rules.mkdir(parents=True)
    (rules / "10_speed_of_light.yaml").write_text("x: 1\n")
    files = paths.skill_files("profiling/rules", "*.yaml")
    assert rules.resolve() / "10_speed_of_light.yaml" in files
    assert paths.shipped() / "skills" / "profiling" / "rules" / "20_grid_and_waves.yaml" in files


def test_find_file_tries_here_then_the_repository_then_ours(user_repo):
    assert paths.find_file("kernels/rmsnorm_h4096/triton_rows/solution.json") == \
        paths.shipped() / "kernels" / "rmsnorm_h4096" / "triton_rows" / "solution.json"
    mine = user_repo / "kernels" / "x" / "solution.json"
    mine.parent.mkdir(parents=True)
    mine.write_text("{}")
    assert paths.find_file("kernels/x/solution.json") == user_repo.resolve() / "kernels" / "x" / "solution.json"
    with pytest.raises(paths.PathsError) as e:
        paths.find_file("kernels/nope.json", "solution")
    assert str(user_repo.resolve() / "kernels" / "nope.json") in str(e.value) and str(paths.shipped()) in str(e.value)


def test_the_command_line_uses_the_repository(user_repo, tmp_path):
    """`kbot --repo DIR definitions list` lists the repository's definition beside ours; a repository
    without the marker is bad input (exit 2) naming the folder."""
    env_cmd = [sys.executable, "-m", "harness.cli"]
    run = lambda *a: subprocess.run([*env_cmd, *a], cwd=tmp_path, capture_output=True, text=True, timeout=120,  # noqa: E731
                                    env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)})
    r = run("--repo", str(user_repo), "definitions", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row["from"] for row in json.loads(r.stdout)}
    assert rows["their_rmsnorm"] == "repository" and rows["rmsnorm_h4096"] == "kbot"
    r = run("--repo", str(tmp_path), "definitions", "list")
    assert r.returncode == 2 and f"--repo {tmp_path}: not a kbot repository" in r.stderr, r.stderr
    r = run("--repo", str(user_repo), "definitions", "show", "no_such_definition")
    assert r.returncode == 2 and str(user_repo.resolve() / "definitions") in r.stderr, r.stderr
