"""The safe expression language used by rules and roofline formulas."""

import pytest

from harness.feedback.expr import Expr, ExprError, MissingName, evaluate


def test_arithmetic_comparisons_and_functions():
    env = {"M": 128, "N": 4096, "K": 7168, "x": 2.5, "s": "registers"}
    assert evaluate("2 * M * N * K", env) == 2 * 128 * 4096 * 7168
    assert evaluate("max(M, N) // 2 + min(1, x)", env) == 2049
    assert evaluate("ceil(x) + floor(x) + sqrt(16) + log2(8)", env) == 3 + 2 + 4 + 3
    assert evaluate("s == 'registers' and x > 2 or M < 0", env) is True
    assert evaluate("1 < x < 3", env) is True
    assert evaluate("'a' if x > 3 else 'b'", env) == "b"
    assert evaluate("s in ('registers', 'shared_mem')", env) is True
    assert Expr("a * b + max(c, 1)").names == ("a", "b", "c")


@pytest.mark.parametrize("text", [
    "__import__('os')", "x.__class__", "open('f')", "(lambda: 1)()", "[i for i in range(3)]", "x[0]",
    "eval('1')", "{'a': 1}", "f'{x}'", "x := 3", "max(x, key=abs)",
])
def test_disallowed(text):
    with pytest.raises(ExprError):
        Expr(text)(({"x": (1,)}))


def test_missing_and_none_values_are_missing():
    with pytest.raises(MissingName) as e:
        evaluate("x + y", {"x": 1})
    assert e.value.name == "y"
    with pytest.raises(MissingName):
        evaluate("x > 1", {"x": None})
    # Short-circuit lets a rule guard an optional value.
    assert evaluate("x > 1 or y > 1", {"x": 2}) is True


def test_runtime_errors_are_expr_errors():
    with pytest.raises(ExprError, match="division by zero"):
        evaluate("1 / x", {"x": 0})
    with pytest.raises(ExprError, match="too large"):
        evaluate("10 ** 10 ** 10", {})
    with pytest.raises(ExprError):
        evaluate("", {})
