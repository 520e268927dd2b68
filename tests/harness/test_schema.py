"""The data model: official files load unchanged and round-trip; bad input gets a clear error."""

import json

import pytest

from harness.schema import Definition, SchemaError, Solution, load_definition, load_solution, load_workloads, parse_solution


def test_every_official_definition_loads_and_round_trips(shared):
    files = sorted((shared / "flashinfer-trace" / "definitions").rglob("*.json"))
    assert len(files) > 100
    for f in files:
        raw = json.loads(f.read_text())
        d = load_definition(f)
        assert d.to_dict() == raw, f
        assert Definition.model_validate_json(d.to_json()).to_dict() == raw


def test_every_official_workload_file_loads(shared):
    root = shared / "flashinfer-trace"
    for f in sorted((root / "workloads").rglob("*.jsonl")):
        name = f.stem
        dfile = next((root / "definitions").rglob(f"{name}.json"))
        ws = load_workloads(f, load_definition(dfile))
        assert ws and all(w.uuid for w in ws)


def _solution(**over):
    base = {"name": "s", "definition": "d", "author": "a",
            "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run"},
            "sources": [{"path": "main.py", "content": "def run(x):\n    return x\n"}]}
    base.update(over)
    return base


def test_solution_defaults_follow_the_official_model():
    s = parse_solution(_solution())
    assert s.spec.destination_passing_style is True
    assert s.spec.entry_file == "main.py" and s.spec.entry_function == "run"
    assert "destination_passing_style" not in s.to_dict()["spec"]  # unset defaults are not written


@pytest.mark.parametrize("over, words", [
    ({"sources": [{"path": "../evil.py", "content": ""}]}, "stay inside"),
    ({"sources": [{"path": "/etc/passwd", "content": ""}]}, "stay inside"),
    ({"spec": {"language": "python", "target_hardware": ["x"], "entry_point": "main.py"}}, "<file>::<function>"),
    ({"spec": {"language": "rust", "target_hardware": ["x"], "entry_point": "main.py::run"}}, "language"),
    ({"sources": [{"path": "main.py", "content": "def run(:\n"}]}, "not valid Python"),
    ({"sources": [{"path": "other.py", "content": ""}]}, "entry file"),
])
def test_bad_solutions_get_clear_errors(over, words):
    with pytest.raises(SchemaError) as e:
        parse_solution(_solution(**over))
    assert words in str(e.value)


def test_load_errors_name_the_file_and_line(tmp_path):
    p = tmp_path / "s.json"
    p.write_text("{not json")
    with pytest.raises(SchemaError, match=r"s.json:1:2: not valid JSON"):
        load_solution(p)
    w = tmp_path / "w.jsonl"
    w.write_text('{"uuid": "u", "axes": {"M": 1}, "inputs": {}}\n{"uuid": 3}\n')
    with pytest.raises(SchemaError, match=r"w.jsonl:2"):
        load_workloads(w)


def test_constraints_cannot_run_code(tmp_path):
    marker = tmp_path / "pwned"
    d = load_definition_from({"constraints": [f"open({str(marker)!r}, 'w') is None"]})
    d.resolve_axes({"M": 4})  # calls are recognized and never evaluated
    assert not marker.exists()
    d2 = load_definition_from({"constraints": ["[M, M] == M"]})
    with pytest.raises(SchemaError, match="not allowed"):
        d2.resolve_axes({"M": 4})


def test_axes_are_checked():
    d = load_definition_from({})
    assert d.resolve_axes({"M": 4}) == {"M": 4, "N": 8}
    with pytest.raises(SchemaError, match="variable axes"):
        d.resolve_axes({})
    with pytest.raises(SchemaError, match="const axis"):
        d.resolve_axes({"M": 1, "N": 9})
    d2 = load_definition_from({"constraints": ["M % 2 == 0"]})
    with pytest.raises(SchemaError, match="constraint"):
        d2.resolve_axes({"M": 3})


def load_definition_from(over):
    base = {"name": "t", "op_type": "x", "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
            "inputs": {"a": {"shape": ["M", "N"], "dtype": "float32"}}, "outputs": {"b": {"shape": ["M", "N"], "dtype": "float32"}},
            "reference": "def run(a):\n    return a\n"}
    base.update(over)
    return Definition.model_validate(base)


def test_solution_hash_ignores_names_but_not_code():
    a = Solution.model_validate(_solution())
    b = Solution.model_validate(_solution(name="other", description="x"))
    c = Solution.model_validate(_solution(sources=[{"path": "main.py", "content": "def run(x):\n    return x * 1\n"}]))
    assert a.content_hash() == b.content_hash() != c.content_hash()
