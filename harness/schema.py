"""The FlashInfer-Bench data model: Definition, Workload, Solution, Trace.

Field names and meanings follow the FlashInfer Trace schema (../shared/flashinfer-trace/*.md) so that
official files load unchanged and what we write loads in the official tool. Our extensions live only in
clearly named extra fields (``Evaluation.kbot``), never in a changed meaning of an official field.

Unknown fields are kept (``extra="allow"``) so a newer official file round-trips without loss.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

NonEmpty = Annotated[str, StringConstraints(min_length=1)]

DTYPES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)
DType = Literal[DTYPES]  # type: ignore[valid-type]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SchemaError(ValueError):
    """A file or object that does not follow the schema; the message says where and why."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    # exclude_unset: what a file said (an explicit null included) is written back, defaults are not,
    # so an official file round-trips to the same JSON.
    def to_json(self, **kw: Any) -> str:
        return self.model_dump_json(exclude_unset=True, **kw)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


# --------------------------------------------------------------------------------------- Definition


class AxisConst(_Model):
    type: Literal["const"]
    value: int = Field(ge=0)
    description: str | None = None


class AxisVar(_Model):
    type: Literal["var"]
    parent: str | None = None
    description: str | None = None


Axis = Annotated[Union[AxisConst, AxisVar], Field(discriminator="type")]


class TensorSpec(_Model):
    shape: list[str] | None = None  # None (or absent) = python scalar, [] = 0-d tensor
    dtype: DType
    description: str | None = None


class Definition(_Model):
    name: NonEmpty
    op_type: NonEmpty
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: NonEmpty
    tags: list[str] | None = None
    description: str | None = None
    constraints: list[str] | None = None

    @model_validator(mode="after")
    def _check(self) -> "Definition":
        for group in ("inputs", "outputs"):
            for tname, spec in getattr(self, group).items():
                if not _IDENT.match(tname):
                    raise ValueError(f"{group}.{tname}: not a valid Python identifier")
                for ax in spec.shape or []:
                    if ax not in self.axes:
                        raise ValueError(f"{group}.{tname}: shape uses axis '{ax}', which is not in axes")
        clash = set(self.inputs) & set(self.outputs)
        if clash:
            raise ValueError(f"names used both as input and output: {sorted(clash)}")
        for aname, axis in self.axes.items():
            if isinstance(axis, AxisVar) and axis.parent is not None and axis.parent not in self.axes:
                raise ValueError(f"axes.{aname}: parent '{axis.parent}' is not an axis")
        try:
            tree = ast.parse(self.reference)
        except SyntaxError as e:
            raise ValueError(f"reference: not valid Python (line {e.lineno}: {e.msg})") from e
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
            raise ValueError("reference: must define a top-level function 'run'")
        for c in self.constraints or []:
            try:
                ast.parse(c, mode="eval")
            except SyntaxError as e:
                raise ValueError(f"constraints: '{c}' is not a Python expression") from e
        return self

    # -- helpers used everywhere else -------------------------------------------------------------
    @property
    def const_axes(self) -> dict[str, int]:
        return {k: a.value for k, a in self.axes.items() if isinstance(a, AxisConst)}

    @property
    def var_axes(self) -> list[str]:
        return [k for k, a in self.axes.items() if isinstance(a, AxisVar)]

    def resolve_axes(self, workload_axes: dict[str, int]) -> dict[str, int]:
        """All axis values for a workload; raises SchemaError when one is missing or a constraint fails."""
        missing = [a for a in self.var_axes if a not in workload_axes]
        if missing:
            raise SchemaError(f"workload does not give variable axes {missing} of {self.name}")
        extra = [a for a in workload_axes if a not in self.axes]
        if extra:
            raise SchemaError(f"workload gives axes {extra} that {self.name} does not have")
        for a in workload_axes:
            if a in self.const_axes and workload_axes[a] != self.const_axes[a]:
                raise SchemaError(f"workload sets const axis {a}={workload_axes[a]}, definition says {self.const_axes[a]}")
        values = {**self.const_axes, **{k: int(v) for k, v in workload_axes.items()}}
        for c in self.constraints or []:
            if not _eval_constraint(c, values):
                raise SchemaError(f"constraint '{c}' fails for axes {values}")
        return values

    def shape_of(self, spec: TensorSpec, axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        return tuple(axes[a] for a in spec.shape)

    def content_hash(self) -> str:
        return _sha256(self.to_dict())


def _eval_constraint(expr: str, values: dict[str, int]) -> bool:
    """Evaluate a constraint like ``H_qo == H_kv * H_r`` over integers, with no names but the axes.

    Only arithmetic, comparisons and boolean operators are allowed, so a hostile definition cannot run
    code through its constraints.
    """
    tree = ast.parse(expr, mode="eval")
    allowed = (
        ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Name, ast.Load, ast.Constant,
        ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div, ast.Mod, ast.Pow, ast.USub, ast.UAdd, ast.Not,
        ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.And, ast.Or,
    )
    # Official constraints may also talk about tensor values (``cu_seqlens[-1].item()``,
    # ``sparse_indices.shape[0]``): those cannot be checked from axes alone, so they pass here and are
    # the input generators' job. They are recognized, never evaluated.
    if any(isinstance(n, (ast.Subscript, ast.Attribute, ast.Call)) for n in ast.walk(tree)):
        return True
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise SchemaError(f"constraint '{expr}': {type(node).__name__} is not allowed")
        if isinstance(node, ast.Name) and node.id not in values:
            # Constraints may name axes a workload does not bind (e.g. informative ones); treat as pass.
            return True
    return bool(eval(compile(tree, "<constraint>", "eval"), {"__builtins__": {}}, dict(values)))  # noqa: S307


# --------------------------------------------------------------------------------------- Workload


class RandomInput(_Model):
    type: Literal["random"] = "random"


class ScalarInput(_Model):
    type: Literal["scalar"] = "scalar"
    value: Union[bool, int, float]


class SafetensorsInput(_Model):
    type: Literal["safetensors"] = "safetensors"
    path: NonEmpty
    tensor_key: NonEmpty


class GeneratedInput(_Model):
    """Our extension: a named structured generator (page tables, index tensors, lengths...).

    ``generator`` names an entry of harness.generators.GENERATORS; ``params`` are its keyword arguments.
    Kept as its own type so an official workload never has its meaning changed.
    """

    type: Literal["generated"] = "generated"
    generator: NonEmpty
    params: dict[str, Any] = Field(default_factory=dict)


InputSpec = Annotated[
    Union[RandomInput, ScalarInput, SafetensorsInput, GeneratedInput], Field(discriminator="type")
]


# A workload input ``{"type": "generated", "generator": "absent"}`` passes an optional input as None.
ABSENT = "absent"


class Workload(_Model):
    uuid: NonEmpty
    axes: dict[str, Annotated[int, Field(ge=0)]]
    inputs: dict[str, InputSpec]

    def absent_inputs(self) -> frozenset[str]:
        """Optional inputs this workload leaves out (passed as None): they move no bytes."""
        return frozenset(n for n, s in self.inputs.items() if isinstance(s, GeneratedInput) and s.generator == ABSENT)


# --------------------------------------------------------------------------------------- Solution


class Language(str, Enum):
    PYTHON = "python"
    TRITON = "triton"
    CUDA = "cuda"


class SourceFile(_Model):
    path: NonEmpty
    content: str

    @field_validator("path")
    @classmethod
    def _safe_path(cls, v: str) -> str:
        p = Path(v)
        if p.is_absolute() or ".." in p.parts or v.startswith("~") or "\\" in v or "\x00" in v:
            raise ValueError(f"source path '{v}' must be relative and stay inside the solution folder")
        return v

    @model_validator(mode="after")
    def _python_parses(self) -> "SourceFile":
        if self.path.endswith(".py"):
            try:
                ast.parse(self.content)
            except SyntaxError as e:
                raise ValueError(f"{self.path}:{e.lineno}: not valid Python: {e.msg}") from e
        return self


class BuildSpec(_Model):
    language: Language
    target_hardware: list[NonEmpty] = Field(min_length=1)
    entry_point: NonEmpty
    dependencies: list[NonEmpty] | None = None
    destination_passing_style: bool = True

    @field_validator("language", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        file, sep, fn = v.partition("::")
        if not sep or not file or not fn:
            raise ValueError("entry_point must be '<file>::<function>', e.g. 'main.py::run'")
        if not _IDENT.match(fn):
            raise ValueError(f"entry_point function '{fn}' is not a valid identifier")
        return v

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::", 1)[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::", 1)[1]


class Solution(_Model):
    name: NonEmpty
    definition: NonEmpty
    author: NonEmpty
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "Solution":
        paths = [s.path for s in self.sources]
        dup = {p for p in paths if paths.count(p) > 1}
        if dup:
            raise ValueError(f"duplicate source paths: {sorted(dup)}")
        if self.spec.entry_file not in paths:
            raise ValueError(f"entry file '{self.spec.entry_file}' is not among the sources {paths}")
        if self.spec.language in (Language.PYTHON, Language.TRITON) and not self.spec.entry_file.endswith(".py"):
            raise ValueError("python and triton solutions need a .py entry file")
        return self

    def source(self, path: str) -> str:
        for s in self.sources:
            if s.path == path:
                return s.content
        raise KeyError(path)

    def content_hash(self) -> str:
        """Hash of what determines behaviour (spec + sources), not of names or descriptions."""
        return _sha256({"spec": self.spec.model_dump(mode="json"), "sources": [s.model_dump() for s in self.sources]})


# --------------------------------------------------------------------------------------- Trace


class Status(str, Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    # Ours: the guard refused the solution (static policy or a dynamic anti-cheat check). Exported to
    # official traces as RUNTIME_ERROR with the reason in the log and in evaluation.kbot.
    REJECTED = "REJECTED"


class TraceCorrectness(_Model):
    """A Trace's ``evaluation.correctness`` (the official field); our per-trial result is harness.report.Correctness."""

    # NaN errors (a NaN output) must survive a JSON round trip: written as "NaN", not null.
    model_config = ConfigDict(extra="allow", populate_by_name=True, ser_json_inf_nan="strings")
    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: dict[str, Any] | None = None

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _nonneg(cls, v: float) -> float:
        if not math.isnan(v) and v < 0:
            raise ValueError("must be non-negative or NaN")
        return v


class Performance(_Model):
    latency_ms: float = Field(ge=0.0)
    reference_latency_ms: float = Field(default=0.0, ge=0.0)
    speedup_factor: float = Field(default=0.0, ge=0.0)


class Environment(_Model):
    hardware: NonEmpty
    libs: dict[str, str] = Field(default_factory=dict)


class Evaluation(_Model):
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="strings")
    status: Status
    environment: Environment
    timestamp: NonEmpty
    log: str = ""
    correctness: TraceCorrectness | None = None
    performance: Performance | None = None
    # Our extensions: timing statistics, roofline, guard findings, profile, feedback. See harness/report.py.
    kbot: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _nullable_table(self) -> "Evaluation":
        if self.status is Status.PASSED and (self.correctness is None or self.performance is None):
            raise ValueError("a PASSED evaluation needs correctness and performance")
        if self.status is Status.INCORRECT_NUMERICAL and (self.correctness is None or self.performance is not None):
            raise ValueError("an INCORRECT_NUMERICAL evaluation has correctness and no performance")
        if self.status not in (Status.PASSED, Status.INCORRECT_NUMERICAL) and (
            self.correctness is not None or self.performance is not None
        ):
            raise ValueError(f"a {self.status.value} evaluation has neither correctness nor performance")
        return self


class Trace(_Model):
    definition: NonEmpty
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None

    @property
    def passed(self) -> bool:
        return self.evaluation is not None and self.evaluation.status is Status.PASSED


# --------------------------------------------------------------------------------------- loading


def _sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _format_errors(kind: str, where: str, err: ValidationError) -> str:
    lines = [f"{where}: not a valid {kind}:"]
    for e in err.errors()[:20]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  - {loc}: {e['msg']}")
    return "\n".join(lines)


def _parse(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SchemaError(_format_errors(model.__name__, where, e)) from None


def _read_text(path: Path) -> str:
    """A JSON/JSONL input file as text, or a SchemaError that says what is wrong with it."""
    p = Path(path)
    try:
        return p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SchemaError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SchemaError(f"{path}: is a directory, not a JSON file") from None
    except UnicodeDecodeError as e:
        raise SchemaError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise SchemaError(f"{path}: cannot be read ({e.strerror or e})") from None


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise SchemaError(f"{path}: JSON nested too deeply") from None


def load_definition(path: str | Path) -> Definition:
    return _parse(Definition, _read_json(Path(path)), str(path))


def find_definition(value: str, root: Path | None = None) -> tuple[Definition, Path]:
    """A definition given as a path, or as the name of one of ours (``definitions/NAME/definition.json``)."""
    p = Path(value)
    if not p.exists():
        from .paths import definition_dir  # the repository's definitions/, then ours

        folder = (root / "definitions" / value) if root is not None else definition_dir(value)
        if folder is not None and (folder / "definition.json").exists():
            p = folder / "definition.json"
    return load_definition(p), p


def load_solution(path: str | Path) -> Solution:
    return _parse(Solution, _read_json(Path(path)), str(path))


def parse_solution(data: Any, where: str = "solution") -> Solution:
    return _parse(Solution, data, where)


def parse_definition(data: Any, where: str = "definition") -> Definition:
    return _parse(Definition, data, where)


def _jsonl_records(text: str, where: str):
    """(where, parsed JSON) for every non-blank line, with file:line in every error."""
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{where}:{i}", json.loads(line)
        except json.JSONDecodeError as e:
            raise SchemaError(f"{where}:{i}: not valid JSON: {e.msg}") from None
        except RecursionError:
            raise SchemaError(f"{where}:{i}: JSON nested too deeply") from None


def load_workloads(path: str | Path, definition: Definition | None = None) -> list[Workload]:
    """Workloads from a JSONL file of workload traces (the official layout) or of bare workloads."""
    p = Path(path)
    if p.is_dir():
        raise SchemaError(f"{path}: is a directory, not a JSONL file")
    if not p.is_file():
        raise SchemaError(f"{path}: no such file")
    return parse_workloads(_read_text(p), definition, str(path))


def parse_workloads(text: str, definition: Definition | None = None, where: str = "<workloads>") -> list[Workload]:
    """``load_workloads`` for JSONL text already in hand (e.g. read from the code host); ``where`` names it in errors."""
    workloads: list[Workload] = []
    for at, data in _jsonl_records(text, where):
        if isinstance(data, dict) and "workload" in data:
            t = _parse(Trace, data, at)
            if definition is not None and t.definition != definition.name:
                raise SchemaError(f"{at}: workload is for '{t.definition}', not '{definition.name}'")
            workloads.append(t.workload)
        else:
            workloads.append(_parse(Workload, data, at))
    seen: set[str] = set()
    for w in workloads:
        if w.uuid in seen:  # one trace line per workload: a second one would be measured and reported twice
            raise SchemaError(f"{where}: duplicate workload uuid {w.uuid!r}")
        seen.add(w.uuid)
    if definition is not None:
        for w in workloads:
            definition.resolve_axes(w.axes)
            unknown = set(w.inputs) - set(definition.inputs)
            if unknown:
                raise SchemaError(f"{where}: workload {w.uuid} names inputs {sorted(unknown)} not in {definition.name}")
    return workloads
