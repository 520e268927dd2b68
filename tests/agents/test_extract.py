from __future__ import annotations

import json

import pytest

from bot.agents.base import AgentContext, Mode
from bot.agents.extract import ExtractionError, build_solution, extract_files
from bot.agents.providers.offline import load_seeds

RUN = "def run(hidden_states, weight, output):\n    return output\n"


def test_tags_with_and_without_inner_fences():
    text = f'intro\n<file path="main.py">\n```python\n{RUN}```\n</file>\n<file path="util/helpers.py">\nX = 1\n</file>'
    files, obj = extract_files(text)
    assert obj is None
    assert files["main.py"] == RUN
    assert files["util/helpers.py"] == "X = 1\n"


def test_json_solution_object_and_files_map():
    sol = {"name": "x", "sources": [{"path": "main.py", "content": RUN}], "spec": {"entry_point": "main.py::run"}}
    files, obj = extract_files("```json\n" + json.dumps(sol) + "\n```")
    assert files == {"main.py": RUN} and obj["spec"]["entry_point"] == "main.py::run"
    files, _ = extract_files(json.dumps({"files": {"main.py": RUN}}))
    assert files == {"main.py": RUN}
    with pytest.raises(ExtractionError, match="sources"):
        extract_files(json.dumps({"sources": [{"path": "main.py"}]}))


@pytest.mark.parametrize(
    "text",
    [
        f"```python main.py\n{RUN}```",
        f"```python path=main.py\n{RUN}```",
        f"```main.py\n{RUN}```",
        f"main.py:\n```python\n{RUN}```",
        f"**main.py**\n```python\n{RUN}```",
        f"### main.py\n```python\n{RUN}```",
        f"`main.py`\n```python\n{RUN}```",
        f"File: main.py\n```python\n{RUN}```",
        f"```python\n# file: main.py\n{RUN}```",
        f"Only one block, no name:\n```python\n{RUN}```",
    ],
)
def test_fenced_blocks_with_a_path_header(text):
    files, _ = extract_files(text, entry_file="main.py")
    assert files == {"main.py": RUN}


def test_two_unnamed_blocks_are_ambiguous():
    with pytest.raises(ExtractionError, match="without file paths"):
        extract_files(f"```python\n{RUN}```\nand\n```python\n{RUN}```")


@pytest.mark.parametrize("text", ["", "   ", "I think you should use larger blocks."])
def test_no_files(text):
    with pytest.raises(ExtractionError):
        extract_files(text)


def test_build_solution_reports_syntax_errors_with_file_and_line(rmsnorm_def):
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL)
    with pytest.raises(ExtractionError, match=r"main.py:1: not valid Python"):
        build_solution('<file path="main.py">\ndef run(hidden_states, weight, output:\n  pass\n</file>', ctx, "n", "a")


def test_build_solution_checks_the_entry_signature(rmsnorm_def):
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL)
    with pytest.raises(ExtractionError, match=r"missing \['weight'\]"):
        build_solution('<file path="main.py">\ndef run(hidden_states, output):\n  pass\n</file>', ctx, "n", "a")
    with pytest.raises(ExtractionError, match="does not define the entry function"):
        build_solution('<file path="main.py">\ndef launch(hidden_states, weight):\n  pass\n</file>', ctx, "n", "a")
    sol, why = build_solution(f'<file path="main.py">\n{RUN}</file><rationale>r</rationale>', ctx, "n", "a")
    assert sol.spec.entry_point == "main.py::run" and why == "r"


def test_optimize_keeps_the_parents_other_files(rmsnorm_def):
    parent = load_seeds("rmsnorm_h4096")[0]
    data = parent.model_dump(mode="json", exclude_unset=True)
    data["sources"].append({"path": "notes.txt", "content": "keep me"})
    parent = type(parent).model_validate(data)
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.OPTIMIZE, parent=parent)
    sol, _ = build_solution(f'<file path="main.py">\n{RUN}</file>', ctx, "n", "a")
    assert sol.source("notes.txt") == "keep me" and sol.source("main.py") == RUN
    assert sol.spec.language.value == parent.spec.language.value


def test_bad_tunable_marks_are_extraction_errors(rmsnorm_def):
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL)
    src = "BLOCK = 300  # kbot: tunable [256, 512]\n" + RUN
    with pytest.raises(ExtractionError, match="bad tunable mark: main.py:1: current value 300"):
        build_solution(f'<file path="main.py">\n{src}</file>', ctx, "n", "a")
