"""The workflows pass actionlint, zizmor (offline, no findings) and GitHub's workflow JSON schema, and
keep the security properties the design depends on (checked structurally, so a later edit that drops
one fails here even if the linters have no rule for it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflows.gh_expr import evaluate, interpolate
from tests.workflows.wfkit import load, tool

REPO = Path(__file__).resolve().parents[2]
WF = REPO / ".github" / "workflows"
FILES = sorted(WF.glob("*.yml"))
SHA_PIN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
# A job that calls a reusable workflow of this same commit (kbot's own bench/report/command.yml).
LOCAL_CALL = re.compile(r"^\./\.github/workflows/(?P<file>[A-Za-z0-9_.-]+\.ya?ml)$")



def test_expected_workflows_exist():
    assert {p.name for p in FILES} >= {"bench.yml", "report.yml", "command.yml", "ci.yml"}


def test_actionlint():
    r = subprocess.run([tool("actionlint"), "-no-color", *map(str, FILES)], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_zizmor_offline_no_findings():
    r = subprocess.run([tool("zizmor"), "--offline", "--persona=pedantic", "--no-progress", str(WF)], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No findings to report" in r.stdout, r.stdout


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_schema(path):
    r = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_privilege_and_pinning(path):
    wf = load(path)
    assert wf["permissions"] == {}, "top-level permissions must be {}"
    if list(wf["on"]) != ["workflow_call"]:  # a reusable workflow's concurrency is its caller's
        assert "concurrency" in wf
    for name, job in wf["jobs"].items():
        assert "permissions" in job, f"{name}: job without explicit permissions"
        assert not any(v == "write" for v in (job["permissions"] or {}).values()), f"{name}: write permission"
        if "uses" in job:  # a call of a reusable workflow: this commit's (./) or one pinned by full sha
            assert LOCAL_CALL.match(job["uses"]) or SHA_PIN.match(job["uses"]), f"{name}: {job['uses']}"
            assert job.get("secrets") != "inherit", f"{name}: secrets: inherit"
        for step in job.get("steps", []):
            if "uses" in step:
                assert SHA_PIN.match(step["uses"]), f"{name}: {step['uses']} is not pinned by full SHA"
                if step["uses"].startswith("actions/checkout@"):
                    assert step.get("with", {}).get("persist-credentials") is False, f"{name}: persist-credentials"
            if "run" in step:
                assert "${{" not in step["run"], f"{name}: expression inside run: (use env:)"


def _called(caller: str) -> tuple[dict, dict, dict]:
    """kbot's own workflow ``caller``, its one job (the call), and the reusable workflow it calls."""
    wf = load(WF / caller)
    (job,) = wf["jobs"].values()
    m = LOCAL_CALL.match(job["uses"])
    assert m, f"{caller}: {job['uses']} is not a call of this commit's reusable workflow"
    return wf, job, load(WF / m["file"])


def _inputs(job: dict, ctx: dict) -> dict:
    """The inputs a caller's job passes for the event ``ctx``, as GitHub evaluates its ``with:``."""
    return {k: interpolate(v, ctx) if isinstance(v, str) else v for k, v in (job.get("with") or {}).items()}


def _checkouts(job: dict) -> list[dict]:
    return [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]


def test_bench_is_gated_read_only_and_secret_free():
    wf, call, bench_wf = _called("bench.yml")
    # pull_request for the bot's own branches; workflow_dispatch (the bot, after a maintainer's /evaluate)
    # for a person's PR: for a dispatch this file and the harness are the default branch's.
    assert list(wf["on"]) == ["pull_request", "workflow_dispatch"]
    assert set(wf["on"]["workflow_dispatch"]["inputs"]) == {"pr", "sha", "profile"}
    # the caller passes no secret, the called workflow declares none and reads none
    assert "secrets" not in call and "secrets" not in bench_wf["on"]["workflow_call"]
    for path in (WF / "bench.yml", WF / "kbot-bench.yml"):
        text = path.read_text()
        assert "secrets." not in text and "pull_request_target" not in text, path.name
    assert "format('kbot bench of PR #{0} at {1}', inputs.pr, inputs.sha)" in wf["run-name"]
    from bot.names import DISPATCH_TITLE
    assert DISPATCH_TITLE.format(pr="{0}", sha="{1}") in wf["run-name"]  # the spelling the report step parses
    assert call["permissions"] == {"contents": "read"}
    jobs = bench_wf["jobs"]
    gate = jobs["plan"]["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in gate
    assert "startsWith(github.event.pull_request.head.ref, 'kbot/')" in gate
    assert "github.event.pull_request.user.login == inputs.bot-login" in gate
    assert call["with"]["bot-login"] == "${{ vars.KBOT_BOT_LOGIN }}"
    plan_run = next(st["run"] for st in jobs["plan"]["steps"] if st.get("id") == "plan")
    assert '"$current" != "$DISPATCH_SHA"' in plan_run  # a dispatch benches only the authorized sha
    assert "grep -v '^kernels/'" in plan_run  # and a head that changes only kernels/
    bench = jobs["bench"]
    assert bench["needs"] == "plan"  # inherits the gate: it cannot start if plan was skipped
    base, harness, head = _checkouts(bench)
    # the trusted repository and the harness: the PR's base commit (a dispatch: the default branch)
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha || github.sha }}" and base["with"]["path"] == "base"
    assert harness["with"] == {"repository": "${{ inputs.kbot-repository }}", "ref": "${{ inputs.kbot-ref }}",
                               "path": "kbot", "persist-credentials": False}
    assert call["with"]["kbot-repository"] == "${{ github.repository }}"
    assert call["with"]["kbot-ref"] == base["with"]["ref"]  # kbot's harness is its own base commit, never the head
    assert head["with"]["path"] == "head"
    evaluate_run = next(st["run"] for st in bench["steps"] if st.get("name") == "Evaluate")
    assert "EXPECTED_HEAD" in evaluate_run and 'PYTHONPATH="$kbot_src"' in evaluate_run
    # the runner labels are the repository's setting (vars.KBOT_RUNNER_LABELS), our H200's by default;
    # an actions-runner-controller scale set is targeted by name: the variable then holds a JSON string
    assert bench["runs-on"] == "${{ fromJSON(inputs.runner-labels) }}"
    runs_on = lambda ctx: evaluate(bench["runs-on"].strip()[3:-2], {"inputs": _inputs(call, ctx)})  # noqa: E731
    assert runs_on({"vars": {}}) == ["self-hosted", "linux", "gpu", "h200"]
    assert runs_on({"vars": {"KBOT_RUNNER_LABELS": '"kbot-h200"'}}) == "kbot-h200"
    assert runs_on({"vars": {"KBOT_RUNNER_LABELS": '["self-hosted", "b200"]'}}) == ["self-hosted", "b200"]
    assert _inputs(call, {"vars": {}})["gpu-kind"] == "H200"
    assert bench["permissions"] == {"contents": "read"}
    assert "matrix" in bench["strategy"]
    uploads = [s for s in bench["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    # exactly the fixed layout report.yml reads (bot/review/results.py), rooted at results/
    from bot.review.results import BENCH_SIDECAR, PROFILE_FOLDER, RUN_FILES, RUN_FOLDER

    want = {f"results/*/{BENCH_SIDECAR}", f"results/*/{RUN_FOLDER}/{PROFILE_FOLDER}/*/*"}
    want |= {f"results/*/{RUN_FOLDER}/{name}" for name in RUN_FILES}
    assert uploads and set(uploads[0]["with"]["path"].split()) == want
    assert wf["concurrency"]["cancel-in-progress"] is True


def test_report_runs_trusted_code_only():
    wf, call, report_wf = _called("report.yml")
    assert list(wf["on"]) == ["workflow_run"] and wf["on"]["workflow_run"]["workflows"] == ["bench"]
    assert wf["concurrency"]["cancel-in-progress"] is False  # merges are never cancelled half-way
    # the bot is kbot's own source at the commit the workflow_run runs (the default branch's)
    assert call["with"]["kbot-repository"] == "${{ github.repository }}" and call["with"]["kbot-ref"] == "${{ github.sha }}"
    (job,) = report_wf["jobs"].values()
    repo, kbot = _checkouts(job)
    assert repo["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    assert kbot["with"]["repository"] == "${{ inputs.kbot-repository }}" and kbot["with"]["ref"] == "${{ inputs.kbot-ref }}"
    assert "startsWith(github.event.workflow_run.head_branch, 'kbot/')" in job["if"]
    assert "head_repository.full_name == github.repository" in job["if"]
    assert "head_sha }}" not in "".join(str(s.get("with", "")) for s in job["steps"])  # never checked out
    assert "head_sha" not in str(call["with"])
    assert "bot.cli.github_bot bot report" in (WF / "kbot-report.yml").read_text()


def test_command_reads_the_comment_only_from_the_event_file():
    wf, call, command_wf = _called("command.yml")
    assert wf["on"] == {"issue_comment": {"types": ["created"]}}
    assert call["with"]["kbot-repository"] == "${{ github.repository }}" and call["with"]["kbot-ref"] == "${{ github.sha }}"
    (job,) = command_wf["jobs"].values()
    repo, kbot = _checkouts(job)
    assert repo["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    assert kbot["with"]["ref"] == "${{ inputs.kbot-ref }}"
    for value in [*call["with"].values(), *(v for s in job["steps"] for v in (s.get("env") or {}).values())]:
        assert "comment.body" not in str(value)
    assert "GITHUB_EVENT_PATH" in (WF / "kbot-command.yml").read_text()


def test_ci_runs_the_cpu_checks():
    wf = load(WF / "ci.yml")
    assert set(wf["on"]) == {"push", "pull_request"}
    assert any(s.get("run") == ".ci/run" for s in wf["jobs"]["ci"]["steps"])


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_run_scripts_parse_as_bash(path):
    for name, job in load(path)["jobs"].items():
        for step in job.get("steps", []):
            if "run" in step:
                r = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True)
                assert r.returncode == 0, f"{path.name}/{name}: {r.stderr}"


TRUSTED = [p for p in FILES if "secrets." in p.read_text()]
REQUIREMENTS = REPO / "requirements"


def test_trusted_workflows_install_pinned_versions_with_hashes():
    """A workflow that holds secrets installs nothing but requirements/bot.txt, with --require-hashes."""
    assert {p.name for p in TRUSTED} >= {"report.yml", "command.yml"}
    for path in TRUSTED:
        for name, job in load(path)["jobs"].items():
            for step in job.get("steps", []):
                run = step.get("run", "")
                for line in run.splitlines():
                    if re.search(r"\bpip\b.*\binstall\b|\bpip3\b|\buv\b|\bpipx\b|\bconda\b|\bnpm\b", line):
                        assert "--require-hashes -r requirements/bot.txt" in line, f"{path.name}/{name}: {line.strip()}"
                        assert not re.search(r"install .*['\"][A-Za-z]", line), f"{path.name}/{name}: an unpinned name"


def test_the_bot_requirements_pin_everything_with_hashes():
    entries: list[str] = []
    for line in (REQUIREMENTS / "bot.txt").read_text().splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        if line[0].isspace():
            entries[-1] += line  # a --hash continuation line
        else:
            entries.append(line)
    assert len(entries) > 10
    for entry in entries:
        assert re.match(r"^[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+( ;|\s*\\)", entry), entry[:80]
        assert "--hash=sha256:" in entry, f"{entry.split()[0]} has no hash"


COMPILE = REPO / "scripts" / "compile_bot_requirements.py"


def _pinned() -> dict[str, list[str]]:
    """Each package requirements/bot.txt pins (canonical name) -> what its `# via` annotation names."""
    out: dict[str, list[str]] = {}
    current = None
    for line in (REQUIREMENTS / "bot.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==", line)
        if m:
            current = out.setdefault(re.sub(r"[-_.]+", "-", m[1]).lower(), [])
        elif current is not None and re.match(r"^\s+#\s+(via\s+)?\S", line) and "--hash" not in line:
            current.append(re.sub(r"^\s+#\s+(via\s*)?", "", line).strip())
    return {k: [v for v in vias if v] for k, vias in out.items()}


def _compile(*args: str, root: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(COMPILE), *args, "--root", str(root)], capture_output=True, text=True, timeout=60)


def test_the_bot_requirements_are_compiled_from_pyproject():
    """bot.in is what pyproject.toml gives (the `bot` extra and the core dependencies the jobs import)
    and bot.txt pins each of those in its range; the header says how to regenerate it."""
    r = _compile("--check")
    assert r.returncode == 0, r.stderr
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bot"]
    pinned = _pinned()
    for req in extra:
        assert re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0]).lower() in pinned, req
    assert "#    python scripts/compile_bot_requirements.py\n" in (REQUIREMENTS / "bot.txt").read_text().split("\n\n")[0] + "\n"


def test_the_check_notices_a_stale_file(tmp_path):
    """--check fails, saying what to run, once pyproject.toml moves on without the files."""
    (tmp_path / "requirements").mkdir()
    for name in ("bot.in", "bot.txt"):
        (tmp_path / "requirements" / name).write_text((REQUIREMENTS / name).read_text())
    text = (REPO / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text)
    assert _compile("--check", root=tmp_path).returncode == 0
    (tmp_path / "pyproject.toml").write_text(text.replace('"markdown-it-py>=3"', '"markdown-it-py>=3", "rich-click>=1"'))
    r = _compile("--check", root=tmp_path)
    assert r.returncode == 1 and "bot.in is not what pyproject.toml gives" in r.stderr and "rich-click" in r.stderr
    assert "run `python scripts/compile_bot_requirements.py`" in r.stderr
    (tmp_path / "pyproject.toml").write_text(text.replace('"PyGithub>=2.3"', '"PyGithub>=99"'))
    assert "outside >=99" in _compile("--check", root=tmp_path).stderr


def test_every_pin_is_there_for_a_reason():
    """Each pin is named by bot.in or by another pin (pip-compile's `# via`): nothing pinned by hand, no
    dependency left over from an older resolution."""
    pinned = _pinned()
    listed = {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]).lower()
              for line in (REQUIREMENTS / "bot.in").read_text().splitlines() if line.strip() and not line.startswith("#")}
    for name, vias in pinned.items():
        assert vias, f"{name} has no `# via`"
        for via in vias:
            if via == "-r requirements/bot.in":
                assert name in listed, f"{name} says it comes from bot.in, which does not list it"
            else:
                assert re.sub(r"[-_.]+", "-", via).lower() in pinned, f"{name} comes from {via}, which is not pinned"
    assert listed <= set(pinned)


# What the trusted jobs run: `python -m bot.cli.github_bot` with the default campaign, the artifact
# fetcher, every chat command and every model provider (found by discovery, so named here by folder).
JOB_ROOTS = ("bot.cli.github_bot", "bot.campaign.github_campaign", "bot.intake.artifacts")
JOB_FOLDERS = ("bot.commands.", "bot.agents.providers.")


def test_the_bot_requirements_hold_every_package_the_jobs_import():
    import ast
    from importlib.metadata import packages_distributions

    modules = {}
    for path in [*REPO.glob("bot/**/*.py"), *REPO.glob("harness/**/*.py")]:
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    todo = [*JOB_ROOTS, *(m for m in modules if m.startswith(JOB_FOLDERS))]
    seen, third = set(), {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for node in ast.walk(ast.parse(modules[module].read_text())):  # function-level imports too
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module, *(f"{node.module}.{a.name}" for a in node.names)] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top in ("bot", "harness"):
                    if name in modules:
                        todo.append(name)
                elif top not in sys.stdlib_module_names and top != "__future__":
                    third.setdefault(top, module)
    assert {"github", "pydantic", "yaml", "anthropic"} <= set(third)  # the walk reaches the bot's imports
    dists = packages_distributions()
    pinned = _pinned()
    for top, module in sorted(third.items()):
        assert top in dists, f"{module} imports {top}, which no installed distribution provides"
        assert any(re.sub(r"[-_.]+", "-", d).lower() in pinned for d in dists[top]), \
            (f"{module} imports {top} ({dists[top]}), which requirements/bot.txt does not pin: add it to pyproject.toml's "
             f"bot extra (or, a core dependency, to JOB_CORE in {COMPILE.name}) and run it")
