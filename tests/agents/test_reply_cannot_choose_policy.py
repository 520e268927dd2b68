"""A model's reply chooses code, nothing else: it cannot change the build spec that selects the guard
policy (language) or what the guard checks (entry point, target, calling convention), cannot write the
committed ``solution.json``, and cannot add JSON files that the bench would take for more solutions.

Before: a JSON reply's ``spec`` was merged over the parent's (``"language": "python"`` on a Triton
kernel switched it to the looser python policy, with no kernel launch required), and every file of a
reply became a source, ``solution.json`` and ``extra.json`` included.
"""

from __future__ import annotations

import json

import pytest
from fakes.llm_servers import FakeOpenAI

from bot.agents.base import AgentContext, Mode
from bot.agents.calllog import CallLog
from bot.agents.catalog import create_agent
from bot.agents.extract import ExtractionError, build_solution
from bot.agents.providers.offline import load_seeds
from bot.campaign.attempts import AttemptError, solution_files

RUN = "def run(hidden_states, weight, output):\n    return output\n"


def ctx(defn, mode=Mode.OPTIMIZE):
    parent = load_seeds("rmsnorm_h4096")[0]
    assert parent.spec.language.value == "triton"
    return AgentContext(definition=defn, mode=mode, parent=parent)


def json_reply(spec=None, files=None) -> str:
    obj = {"sources": [{"path": p, "content": c} for p, c in (files or {"main.py": RUN}).items()]}
    if spec is not None:
        obj["spec"] = spec
    return "```json\n" + json.dumps(obj) + "\n```"


@pytest.mark.parametrize("spec, field", [
    ({"language": "python"}, "language"),
    ({"language": "cuda", "entry_point": "main.py::run"}, "language"),
    ({"entry_point": "other.py::run"}, "entry_point"),
    ({"target_hardware": ["anything"]}, "target_hardware"),
    ({"destination_passing_style": False}, "destination_passing_style"),
])
def test_a_reply_cannot_change_the_build_spec(rmsnorm_def, spec, field):
    with pytest.raises(ExtractionError, match=f"spec.{field} is fixed"):
        build_solution(json_reply(spec), ctx(rmsnorm_def), "n", "a")


def test_a_reply_may_restate_the_spec_and_name_dependencies(rmsnorm_def):
    c = ctx(rmsnorm_def)
    same = {"language": "Triton", "entry_point": c.parent.spec.entry_point, "dependencies": ["torch", "triton"]}
    sol, _ = build_solution(json_reply(same), c, "n", "a")
    assert sol.spec.language.value == "triton" and sol.spec.dependencies == ["torch", "triton"]
    with pytest.raises(ExtractionError, match="only 'dependencies'"):
        build_solution(json_reply({"binding": "x"}), c, "n", "a")


def test_a_first_kernel_is_pinned_to_the_default_spec(rmsnorm_def):
    c = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL)
    with pytest.raises(ExtractionError, match="spec.language is fixed"):
        build_solution(json_reply({"language": "python"}), c, "n", "a")


@pytest.mark.parametrize("reply", [
    f'<file path="main.py">\n{RUN}</file>\n<file path="solution.json">\n{{"name": "evil"}}\n</file>',
    f'<file path="main.py">\n{RUN}</file>\n<file path="extra.json">\n{{"name": "another"}}\n</file>',
    f'<file path="main.py">\n{RUN}</file>\n<file path="sub/Solution.JSON">\n{{}}\n</file>',
    json_reply(files={"main.py": RUN, "solution.json": '{"name": "evil"}'}),
    json.dumps({"files": {"main.py": RUN, "more.json": "{}"}}),
])
def test_a_reply_has_no_json_files(rmsnorm_def, reply):
    with pytest.raises(ExtractionError, match="no JSON files"):
        build_solution(reply, ctx(rmsnorm_def), "n", "a")


def test_a_json_source_never_reaches_the_branch(rmsnorm_def):
    """Second wall: whatever built the Solution, the attempt writes no JSON file but solution.json."""
    parent = ctx(rmsnorm_def).parent
    data = parent.model_dump(mode="json", exclude_unset=True)
    data["sources"].append({"path": "solution.json", "content": "{}"})
    sol = type(parent).model_validate(data)
    with pytest.raises(AttemptError, match="JSON file"):
        solution_files(sol, "kernels/rmsnorm_h4096/x")


def test_through_a_provider_the_repair_turn_says_what_is_fixed(rmsnorm_def, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0002")
    with FakeOpenAI() as srv:
        srv.push(json_reply({"language": "python"}), f'<file path="main.py">\n{RUN}</file>')
        agent = create_agent("openai", {"model": "gpt-5", "base_url": srv.url + "/v1", "max_attempts": 1})
        c = ctx(rmsnorm_def)
        c.call_log = CallLog(tmp_path / "calls.jsonl")
        [p] = agent.propose(c, 1)
        repair = srv.requests[1].body["messages"][-1]["content"]
    assert "spec.language is fixed" in repair
    assert p.ok and p.solution.spec.language.value == "triton" and p.solution.spec == c.parent.spec
