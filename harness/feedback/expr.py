"""A tiny, safe expression language for rules and roofline formulas.

Rules and formulas live in YAML that people edit (and that a pull request could change), so they are
never handed to ``eval``. An expression is parsed with :mod:`ast`, every node is checked against a
whitelist, and the tree is evaluated by the small interpreter below. Allowed: numbers, strings,
``True``/``False``/``None``, names (looked up in the environment), ``+ - * / // % **``, comparisons,
``and``/``or``/``not``, ``x if c else y`` and calls to a fixed set of math functions.
"""

from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache
from typing import Any, Callable, Mapping

__all__ = ["Expr", "ExprError", "MissingName", "compile_expr", "evaluate"]


class ExprError(ValueError):
    """The expression is not allowed, or cannot be evaluated on these values."""


class MissingName(ExprError):
    """The expression names a value the environment does not have (e.g. evidence not collected)."""

    def __init__(self, name: str):
        super().__init__(f"'{name}' is not available")
        self.name = name


def _log2(x: float) -> float:
    return math.log2(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log2": _log2,
    "round": round,
}

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ALLOWED = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.Name,
    ast.Load, ast.Constant, ast.Tuple, ast.List, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
    *_BINOPS, *_CMPOPS,
)
_MAX_POW = 64  # keeps ``10 ** 10 ** 10`` from eating the machine


class Expr:
    """A checked, parsed expression. ``names`` are the environment values it reads."""

    def __init__(self, text: str):
        if not isinstance(text, str) or not text.strip():
            raise ExprError(f"expression must be a non-empty string, got {text!r}")
        self.text = text.strip()
        try:
            self.tree = ast.parse(self.text, mode="eval")
        except SyntaxError as e:
            raise ExprError(f"'{self.text}': not a valid expression ({e.msg})") from None
        names: list[str] = []
        for node in ast.walk(self.tree):
            if not isinstance(node, _ALLOWED):
                raise ExprError(f"'{self.text}': {type(node).__name__} is not allowed")
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                    raise ExprError(f"'{self.text}': only {sorted(FUNCTIONS)} may be called")
                if node.keywords:
                    raise ExprError(f"'{self.text}': keyword arguments are not allowed")
            elif isinstance(node, ast.Name) and node.id not in names:
                names.append(node.id)
            elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
                raise ExprError(f"'{self.text}': constant {node.value!r} is not allowed")
        # Function names appear as Name nodes too; they are not environment values.
        called = {n.func.id for n in ast.walk(self.tree) if isinstance(n, ast.Call)}
        self.names = tuple(n for n in names if n not in called)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def __call__(self, env: Mapping[str, Any]) -> Any:
        try:
            return _eval(self.tree.body, env)
        except ExprError:
            raise
        except ZeroDivisionError:
            raise ExprError(f"'{self.text}': division by zero") from None
        except (TypeError, ValueError, OverflowError) as e:
            raise ExprError(f"'{self.text}': {e}") from None


@lru_cache(maxsize=4096)
def compile_expr(text: str) -> Expr:
    return Expr(text)


def evaluate(text: str, env: Mapping[str, Any]) -> Any:
    return compile_expr(text)(env)


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            value = env[node.id]
            if value is None:
                raise MissingName(node.id)
            return value
        if node.id in ("True", "False", "None"):  # pragma: no cover - parsed as Constant in 3.8+
            return {"True": True, "False": False, "None": None}[node.id]
        raise MissingName(node.id)
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > _MAX_POW:
            raise ExprError(f"exponent {right} is too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BoolOp):
        # Short-circuit like Python so ``x_present and x > 3`` can guard a missing value.
        if isinstance(node.op, ast.And):
            result: Any = True
            for v in node.values:
                result = _eval(v, env)
                if not result:
                    return result
            return result
        result = False
        for v in node.values:
            result = _eval(v, env)
            if result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, ast.Call):
        fn = FUNCTIONS[node.func.id]  # type: ignore[attr-defined]
        return fn(*[_eval(a, env) for a in node.args])
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, env) for e in node.elts)
    raise ExprError(f"{type(node).__name__} is not allowed")  # pragma: no cover - whitelist checked at parse
