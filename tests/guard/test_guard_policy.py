"""Policies are data: they load, merge as documented, per-definition overrides apply, typos fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from harness.guard.policy import DEFAULT_POLICY_DIR, LANGUAGES, PolicyError, clear_caches, load_policy, load_rules, merge
from harness.guard.static import check_solution

from guardkit import make_solution


def test_every_language_loads():
    rules = load_rules()
    for lang in LANGUAGES:
        p = load_policy(lang)
        assert p["language"] == lang
        assert set(p["names"].values()) <= set(rules)


def test_every_rule_has_a_why():
    for rid, why in load_rules().items():
        assert why.endswith(".") and len(why) > 30, rid


def test_merge_semantics():
    base = {"a": {"x": 1, "y": 2}, "l": [1, 2], "s": "old"}
    over = {"a": {"y": None, "z": 3}, "l": [2, 3], "s": "new"}
    assert merge(base, over) == {"a": {"x": 1, "z": 3}, "l": [1, 2, 3], "s": "new"}
    assert base == {"a": {"x": 1, "y": 2}, "l": [1, 2], "s": "old"}  # not mutated


def test_cuda_policy_lifts_cpp_extension():
    assert "torch.utils.cpp_extension" in load_policy("python")["names"]
    assert "torch.utils.cpp_extension" not in load_policy("cuda")["names"]


def test_unknown_language():
    with pytest.raises(PolicyError, match="no guard policy"):
        load_policy("fortran")


@pytest.fixture
def policy_dir(tmp_path):
    d = tmp_path / "guard"
    shutil.copytree(DEFAULT_POLICY_DIR, d)
    clear_caches()
    yield d
    clear_caches()


def test_override_per_definition(policy_dir, rmsnorm_def):
    code = "import torch\nimport json\n\n\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n"
    sol = make_solution(code, "python")
    assert "import-not-allowed" in {f.rule for f in check_solution(sol, rmsnorm_def, policy_dir)}
    (policy_dir / "overrides").mkdir(exist_ok=True)
    (policy_dir / "overrides" / "rmsnorm_h4096.yaml").write_text(yaml.safe_dump({"python": {"imports": {"allowed": ["json"]}}}))
    clear_caches()
    assert check_solution(sol, rmsnorm_def, policy_dir) == []
    # the override is per definition and per language: triton keeps refusing json
    assert "json" not in load_policy("triton", "rmsnorm_h4096", policy_dir)["imports"]["allowed"]


def test_override_can_lift_a_name(policy_dir, rmsnorm_def):
    code = "import torch\n\n\ndef run(hidden_states, weight):\n    g = torch.cuda.CUDAGraph\n    return hidden_states.clone()\n"
    sol = make_solution(code, "python")
    assert "side-stream" in {f.rule for f in check_solution(sol, rmsnorm_def, policy_dir)}
    (policy_dir / "overrides").mkdir(exist_ok=True)
    (policy_dir / "overrides" / "rmsnorm_h4096.yaml").write_text("names:\n  torch.cuda.CUDAGraph: null\n")
    clear_caches()
    assert check_solution(sol, rmsnorm_def, policy_dir) == []


def test_unknown_rule_is_refused(policy_dir):
    (policy_dir / "python.yaml").write_text("names:\n  torch.matmul: no-such-rule\n")
    clear_caches()
    with pytest.raises(PolicyError, match="unknown rule 'no-such-rule'"):
        load_policy("python", None, policy_dir)


def test_bad_yaml_is_refused(policy_dir):
    (policy_dir / "triton.yaml").write_text("names: [unclosed\n")
    clear_caches()
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy("triton", None, policy_dir)


def test_bad_native_pattern_is_refused(policy_dir):
    (policy_dir / "cuda.yaml").write_text("native:\n  - {pattern: '(', rule: process}\n")
    clear_caches()
    with pytest.raises(PolicyError, match="bad pattern"):
        load_policy("cuda", None, policy_dir)
