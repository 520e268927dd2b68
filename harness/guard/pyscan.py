"""AST scan of a solution's Python sources against a guard policy.

Names are resolved, not matched: a small symbol pass tracks what every local and module-level name is
bound to (imports, ``from x import y as z``, simple assignments, ``getattr(x, "literal")``), so
``import torch as t; f = t.matmul; f(a, b)`` is seen as ``torch.matmul``. Resolution is flow-insensitive
and keeps every candidate binding of a name (a name assigned twice resolves to both), which errs on the
side of flagging. Objects defined by the solution itself resolve to ``$<module>.<name>``.

What this pass cannot see is documented in docs/guard.md: values computed at run time (a string built
from pieces reaching getattr is flagged as dynamic, but data-dependent control flow is not evaluated).
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

BUILTIN_NAMES = frozenset(dir(builtins))
OWN = "$"  # prefix of names the solution defines itself

# Tensor methods that return metadata (ints, bools, dtypes), not tensors: their results are not tensors.
_METADATA_METHODS = frozenset(
    {"stride", "size", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr", "get_device",
     "storage_offset", "is_contiguous", "is_cuda", "type"}
)
_METADATA_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "requires_grad", "itemsize"})
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data", "base"})  # base: a TMA descriptor's tensor
# Host calls whose result holds their first argument (a tensor) and hands it back as an attribute: typed as tensors,
# so arithmetic on what they return is host compute like arithmetic on the tensor itself.
_TENSOR_HOLDERS = frozenset({"triton.tools.tensor_descriptor.TensorDescriptor",
                             "triton.tools.tensor_descriptor.TensorDescriptor.from_tensor"})
# Elements of a display looked at when the index is known only at run time (`(x, w)[i]`).
_MAX_ELEMENTS = 64
# Display elements one module's scan looks at, at most (honest sources look at a few hundred).
_MAX_ELEMENT_VISITS = 200_000
_UNKNOWN = object()
# Passes of the tensor typing over a scope at most (each in source order; they stop when one types nothing new).
_TYPING_PASSES = 8
# torch calls that answer a question about the device or a value's kind with host numbers, strings or
# bools, never a tensor: `major, minor = torch.cuda.get_device_capability()` then `major >= 9` is a launch
# choice, not host arithmetic on a tensor.
_HOST_VALUED_TORCH = frozenset({
    "torch.cuda.get_device_capability", "torch.cuda.device_count", "torch.cuda.current_device",
    "torch.cuda.get_device_name", "torch.cuda.get_device_properties", "torch.cuda.is_available",
    "torch.cuda.mem_get_info", "torch.cuda.get_arch_list", "torch.cuda.is_bf16_supported",
    "torch.is_tensor", "torch.is_floating_point", "torch.is_complex", "torch.numel", "torch.get_default_dtype",
    "torch.finfo", "torch.iinfo", "torch.get_num_threads", "torch.are_deterministic_algorithms_enabled",
})
# Tensor methods that always return new storage, never their receiver or a view of it.
_ALWAYS_NEW = frozenset({"clone", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "new_empty_strided"})
_MUTATING_CONTAINER_METHODS = frozenset(
    {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "remove",
     "discard", "appendleft", "extendleft", "__setitem__", "__delitem__"}
)
# Builtins that compute when handed tensors (sum([x, y]) is x + y).
_COMPUTING_BUILTINS = frozenset({"builtins.sum", "builtins.abs", "builtins.pow", "builtins.max", "builtins.min",
                                 "builtins.round", "builtins.divmod"})
_KEY_LOOKUP_METHODS = frozenset({"get", "setdefault", "pop", "__contains__", "__getitem__", "__setitem__"})
# Strings that name the harness's data: test data, the run folder's files, the report's own key, the
# worker folders, other processes' /proc entries. Checked on literals and on strings built from pieces.
_TEST_DATA_STRING = re.compile(r"(^|/)(definitions|workloads|traces)/|\.safetensors\b|traces\.jsonl|report\.json|solution\.json"
                               r"|baseline\.json|kbot_report|\.kbot/|kbot-w-|/proc/")
_MAX_FOLDED = 4096  # longest string folded from pieces
_ATTR_IN_STRING = re.compile(r"(?<![A-Za-z0-9])(__[A-Za-z]\w*__|f_back|f_globals|f_locals|f_code|f_builtins|tb_frame|tb_next|gi_frame|cr_frame|ag_frame|co_code|co_consts|_getframe|_cdata)(?![A-Za-z0-9_])")
_KERNEL_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit",
                      "triton.runtime.autotuner", "triton.language.jit")
_SUBCLASS_BASES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.overrides",
                   "torch.utils._python_dispatch", "torch._subclasses", "torch.nn.Parameter")


class _TooComplex(RecursionError):
    """The typing would need more work than a module's scan allows: refused like nesting too deep to check."""


@dataclass
class Hit:
    rule: str
    file: str
    line: int
    message: str


def prefix_match(name: str, table: Iterable[str]) -> str | None:
    """The longest entry of ``table`` that is ``name`` or a dotted prefix of it."""
    best = None
    for p in table:
        if name == p or name.startswith(p + "."):
            if best is None or len(p) > len(best):
                best = p
    return best


def allow_match(name: str, allowed: Iterable[str]) -> bool:
    """Allow-list match: an entry is exact, unless it ends in ``.*`` (then it covers what is below it).
    Exact by default so that allowing ``torch.Tensor`` (the type) does not allow ``torch.Tensor.sum``."""
    for a in allowed:
        if a.endswith(".*"):
            if name == a[:-2] or name.startswith(a[:-1]):
                return True
        elif name == a:
            return True
    return False


def module_name_of(path: str) -> str:
    p = path[:-3] if path.endswith(".py") else path
    parts = [x for x in p.split("/") if x]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class _Func:
    """A function (or lambda) scope: its local bindings and what the call-graph pass needs."""

    qual: str
    node: ast.AST
    params: list[str]
    parent: "_Func | None"
    is_device: bool = False
    bindings: dict[str, set[str]] = field(default_factory=dict)
    globals_declared: set[str] = field(default_factory=set)
    tensors: set[str] = field(default_factory=set)
    # names bound once in the scope, to a tuple display: `t = (x, 64)` makes t[0] the tensor x and t[1] an int
    tuples: dict[str, ast.Tuple] = field(default_factory=dict)
    input_like: set[str] = field(default_factory=set)
    key_tainted: dict[str, str] = field(default_factory=dict)
    mutable_defaults: set[str] = field(default_factory=set)  # parameters whose default is a list/dict/set
    refs: set[str] = field(default_factory=set)  # solution objects referenced (call-graph edges)
    launches: int = 0


class ModuleScan(ast.NodeVisitor):
    """Scans one module. ``ctx`` is the SolutionScan that owns cross-module facts."""

    def __init__(self, ctx: "SolutionScan", path: str, tree: ast.Module):
        self.ctx = ctx
        self.path = path
        self.mod = module_name_of(path)
        self.tree = tree
        self.globals: dict[str, set[str]] = {}
        self.module_level_names: set[str] = set()
        self.kernels: set[str] = set()  # qualified names of @triton.jit (and autotuned) kernels
        self.func_stack: list[_Func] = []
        self.class_stack: list[tuple[int, str]] = []  # (function depth, class name) being visited
        self.except_depth = 0
        self.annotation_depth = 0
        self.functions: dict[str, _Func] = {}
        # (subscript node, scope, names typed so far) -> whether the display element it takes is a tensor: each
        # subscript of a display is worked out once per state of the typing, so nested or repeated indexing of
        # large displays stays linear in the source
        self._element_memo: dict[tuple[int, int, int], bool] = {}
        self._element_visits = 0

    # ------------------------------------------------------------------------------ bindings
    def own(self, name: str) -> str:
        return f"{OWN}{self.mod}.{name}"

    def collect_module_bindings(self) -> None:
        """Module-level names first, so functions see aliases assigned after they are defined."""
        for _ in range(3):  # a few rounds make chains like a = torch; b = a.cuda resolve in any order
            self._collect(self.tree.body, self.globals, None)
        self.module_level_names = set(self.globals)

    def _collect(self, body: list[ast.stmt], into: dict[str, set[str]], func: _Func | None) -> None:
        for node in _walk_scope(body):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self._bind(into, a.asname, {self._abs_module(a.name)})
                    else:
                        top = a.name.split(".")[0]
                        self._bind(into, top, {self._abs_module(top)})
            elif isinstance(node, ast.ImportFrom):
                base = self._from_base(node)
                for a in node.names:
                    if a.name == "*":
                        continue
                    self._bind(into, a.asname or a.name, {f"{base}.{a.name}" if base else a.name})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = self.own(node.name) if func is None else f"{func.qual}.{node.name}"
                self._bind(into, node.name, {qual})
                if isinstance(node, ast.ClassDef):
                    self.ctx.classes.add(qual)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and self._is_kernel_decorated(node, func):
                    self.kernels.add(qual)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = node.value
                for t in targets:
                    for name, sub in _target_names(t, value):
                        if isinstance(sub, ast.Lambda):
                            lam = f"<lambda:{sub.lineno}>"
                            self._bind(into, name, {self.own(lam) if func is None else f"{func.qual}.{lam}"})
                            continue
                        res = self.resolve(sub, func, into) if sub is not None else set()
                        self._bind(into, name, res or {f"{OWN}local:{name}"})
                        if sub is not None and isinstance(sub, ast.Call) and self._is_kernel_expr(sub.func, func, into):
                            # kernel = triton.jit(body)
                            qual = self.own(name) if func is None else f"{func.qual}.{name}"
                            self.kernels.add(qual)
                            into[name] = into[name] | {qual}
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name, _ in _target_names(node.target, None):
                    self._bind(into, name, {f"{OWN}local:{name}"})
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        for name, _ in _target_names(item.optional_vars, None):
                            self._bind(into, name, {f"{OWN}local:{name}"})
            elif isinstance(node, ast.Global) and func is not None:
                func.globals_declared.update(node.names)

    def _bind(self, into: dict[str, set[str]], name: str, values: set[str]) -> None:
        into.setdefault(name, set()).update(values)

    def _abs_module(self, name: str) -> str:
        top = name.split(".")[0]
        return f"{OWN}{name}" if top in self.ctx.own_top_modules else name

    def _from_base(self, node: ast.ImportFrom) -> str:
        if node.level:
            pkg = self.mod.split(".")[: -node.level] if "." in self.mod else []
            base = ".".join(pkg + ([node.module] if node.module else []))
            return f"{OWN}{base}" if base else OWN.rstrip(".")
        return self._abs_module(node.module or "")

    def _is_kernel_expr(self, expr: ast.AST, func: _Func | None, into: dict[str, set[str]] | None = None) -> bool:
        target = expr.func if isinstance(expr, ast.Call) else expr
        return any(prefix_match(q, _KERNEL_DECORATORS) for q in self.resolve(target, func, into))

    def _is_kernel_decorated(self, node: ast.AST, func: _Func | None) -> bool:
        return any(self._is_kernel_expr(d, func, self.globals if func is None else None) for d in node.decorator_list)

    # ------------------------------------------------------------------------------ resolution
    def lookup(self, name: str, func: _Func | None, into: dict[str, set[str]] | None = None) -> set[str]:
        if into is not None and name in into:
            return into[name]
        f = func
        while f is not None:
            if name in f.bindings and name not in f.globals_declared:
                return f.bindings[name]
            f = f.parent
        if name in self.globals:
            return self.globals[name]
        if name in BUILTIN_NAMES or name == "__builtins__":
            return {f"builtins.{name}"}
        return set()

    def resolve(self, node: ast.AST, func: _Func | None = None, into: dict[str, set[str]] | None = None) -> set[str]:
        """Qualified names an expression may denote (empty when unknown)."""
        if isinstance(node, ast.Name):
            return set(self.lookup(node.id, func, into))
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.resolve(node.value, func, into) if not q.startswith(f"{OWN}local:")}
        if isinstance(node, ast.Call):
            fq = self.resolve(node.func, func, into)
            if fq & self.ctx.classes:
                return fq & self.ctx.classes  # an instance of an own class: its methods resolve through it
            lit = _literal_str(node.args[1]) if len(node.args) >= 2 else None
            if "builtins.getattr" in fq and lit is not None:
                return {f"{q}.{lit}" for q in self.resolve(node.args[0], func, into)}
            if fq & {"builtins.__import__", "importlib.import_module"} and node.args:
                mod = _literal_str(node.args[0])
                return {mod} if mod else set()
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value, func, into)
            lit = _literal_str(node.slice)
            if lit and base & {"sys.modules"}:
                return {lit}
            if lit and any(q.endswith(".__dict__") for q in base):
                return {q[: -len(".__dict__")] + "." + lit for q in base if q.endswith(".__dict__")}
        return set()

    # ------------------------------------------------------------------------------ reporting
    def hit(self, rule: str | None, node: ast.AST, message: str) -> None:
        if rule:
            self.ctx.hits.append(Hit(rule, self.path, getattr(node, "lineno", 0), message))

    @property
    def func(self) -> _Func | None:
        return self.func_stack[-1] if self.func_stack else None

    @property
    def on_device(self) -> bool:
        return any(f.is_device for f in self.func_stack)

    def check_name(self, qs: set[str], node: ast.AST) -> bool:
        flagged = False
        for q in sorted(qs):
            if q.startswith(OWN):
                continue
            rule = self.ctx.denied_name(q)
            if rule:
                self.hit(rule, node, f"uses {q}")
                flagged = True
                continue
            if self.ctx.allowed_name(q):
                continue
            member_rule = self.ctx.member_rule(q)
            if member_rule:
                self.hit(member_rule, node, f"uses {q}, which is not among the {q.split('.')[0]} members a solution may use")
                flagged = True
                continue
            # A module reached through another module's namespace (torch.os.system, numpy.sys.modules,
            # torch.serialization.pickle): judge the tail as if it had been imported directly.
            parts = q.split(".")
            for i in range(1, len(parts)):
                tail = ".".join(parts[i:])
                tp = self.ctx.denied_name(tail)
                dm = prefix_match(tail, self.ctx.denied_modules)
                if tp or dm or parts[i] in ("os", "sys"):
                    rule = tp or (self.ctx.denied_modules[dm] if dm else "introspection")
                    self.hit(rule, node, f"reaches {tail} through {'.'.join(parts[:i])}")
                    flagged = True
                    break
        return flagged

    # ------------------------------------------------------------------------------ visiting
    def run(self) -> None:
        self.collect_module_bindings()
        self.visit(self.tree)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_import(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._from_base(node)
        if not base.startswith(OWN):
            self.check_import(base, node)
        for a in node.names:
            if a.name == "*":
                self.hit("dynamic-attr", node, f"'from {base} import *' hides which names are used")
                continue
            q = f"{base}.{a.name}"
            if not base.startswith(OWN):
                flagged = self.check_name({q}, node)
                # `from os import environ` or `from torch import matmul`: the imported object itself
                rule = self.ctx.denied_modules.get(prefix_match(q, self.ctx.denied_modules) or "")
                if rule and not flagged:
                    self.hit(rule, node, f"imports {q}")
                if not flagged and self.ctx.host_check and not self.on_device:
                    self.check_host_callable(q, node, imported=True)
            if a.name in self.ctx.attributes:
                self.hit(self.ctx.attributes[a.name], node, f"imports {a.name}")

    def check_import(self, name: str, node: ast.AST) -> None:
        if name.split(".")[0] in self.ctx.own_top_modules:
            return
        p = prefix_match(name, self.ctx.denied_modules)
        if p:
            self.hit(self.ctx.denied_modules[p], node, f"imports {name}")
            return
        if self.check_name({name}, node):
            return
        if not prefix_match(name, self.ctx.allowed_modules):
            self.hit("import-not-allowed", node, f"imports {name}, which the {self.ctx.language} policy does not allow")

    def _enter_function(self, node: ast.AST, name: str) -> _Func:
        parent = self.func
        # Classes between the enclosing function (or module) and this def are part of its name, so
        # methods are `$mod.Class.method` and reachable when the class is.
        classes = [c for depth, c in self.class_stack if depth == len(self.func_stack)]
        qual = ".".join([f"{OWN}{self.mod}" if parent is None else parent.qual] + classes + [name])
        args = node.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        f = _Func(qual=qual, node=node, params=params, parent=parent)
        f.is_device = qual in self.kernels or (parent is not None and parent.is_device)
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        f.mutable_defaults = {a.arg for a, d in pairs if _mutable_literal(d, self.resolve(d.func, parent) if isinstance(d, ast.Call) else set())}
        for p in params:
            f.bindings[p] = {f"{OWN}local:{p}"}
        body = node.body if isinstance(node.body, list) else [ast.Expr(node.body)]
        self.func_stack.append(f)
        for _ in range(2):
            self._collect(body, f.bindings, f)
        for p in params:  # a parameter is never a module or library object, whatever it is later bound to
            f.bindings[p].add(f"{OWN}local:{p}")
        if classes and params and params[0] in ("self", "cls"):
            # self.method(...) inside a class resolves to the class's own method
            f.bindings[params[0]] = {".".join([f"{OWN}{self.mod}" if parent is None else parent.qual] + classes)}
        if not f.is_device:
            self._type_tensors(f, node, body)
        self.functions[qual] = f
        self.ctx.func_params[qual] = [a.arg for a in args.posonlyargs + args.args] + [a.arg for a in args.kwonlyargs]
        return f

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.visit(node.args)
        if node.returns:
            self.annotation_depth += 1
            self.visit(node.returns)
            self.annotation_depth -= 1
        if node.name in self.ctx.attributes and node.name.startswith("__"):
            self.hit(self.ctx.attributes[node.name], node, f"defines {node.name}")
        f = self._enter_function(node, node.name)
        for stmt in node.body:
            self.visit(stmt)
        self.func_stack.pop()
        self._merge_refs(f)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        f = self._enter_function(node, f"<lambda:{node.lineno}>")
        self.visit(node.body)
        self.func_stack.pop()
        self._merge_refs(f)

    def _merge_refs(self, f: _Func) -> None:
        # Nested functions and lambdas count as part of the function that defines them for reachability.
        if f.parent is not None:
            f.parent.refs |= f.refs | {f.qual}
            f.parent.launches += f.launches

    def visit_arg(self, node: ast.arg) -> None:
        if node.annotation is not None:
            self.annotation_depth += 1
            self.visit(node.annotation)
            self.annotation_depth -= 1

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.annotation_depth += 1
        self.visit(node.annotation)
        self.annotation_depth -= 1
        self.check_store(node.target, node.value)
        if node.value is not None:
            self.visit(node.value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases + [k.value for k in node.keywords]:
            qs = self.resolve(b, self.func)
            if any(prefix_match(q, _SUBCLASS_BASES) for q in qs):
                self.hit("tensor-subclass", node, f"class {node.name} subclasses {sorted(qs)[0]}")
        # Methods of a class are reachable when the class is.
        self.class_stack.append((len(self.func_stack), node.name))
        try:
            self.generic_visit(node)
        finally:
            self.class_stack.pop()
        if self.func is not None:
            self.func.refs.add(f"{self.func.qual}.{node.name}")

    def visit_Global(self, node: ast.Global) -> None:
        if self.func is not None and self.ctx.module_state:
            self.hit("module-state", node, f"rebinds module-level {', '.join(node.names)} from inside a function")

    def visit_While(self, node: ast.While) -> None:
        if isinstance(node.test, ast.Constant) and node.test.value and not _loop_can_exit(node):
            self.hit("infinite-loop", node, "while-true loop with no break, return or raise")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        for stmt in node.body + node.orelse + node.finalbody:
            self.visit(stmt)
        self.except_depth += 1
        for h in node.handlers:
            self.visit(h)
        self.except_depth -= 1

    visit_TryStar = visit_Try

    def check_built_string(self, node: ast.AST) -> None:
        """A string put together from constant pieces ('tra' + 'ces.jsonl', f-strings, ''.join, %,
        .format, chr) is judged like a literal."""
        folded = _fold_str(node, lambda n: self.resolve(n, self.func))
        if folded is not None and _TEST_DATA_STRING.search(folded):
            self.hit("reference-access", node, f"builds a string that names test data or harness output: {folded[:60]!r}")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self.check_built_string(node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or self.ctx.is_docstring(node):
            return
        if _TEST_DATA_STRING.search(node.value):
            self.hit("reference-access", node, f"names test data or harness output: {node.value[:60]!r}")
        # Attribute names in strings reach attributes without an attribute node: format-string gadgets
        # ("{0.__globals__}".format(f)), attrgetter, object.__getattribute__(x, "f_back").
        for m in _ATTR_IN_STRING.finditer(node.value):
            rule = self.ctx.attributes.get(m.group(1))
            if rule:
                self.hit(rule, node, f"names the attribute {m.group(1)} in a string")
                break

    def visit_Name(self, node: ast.Name) -> None:
        qs = self.resolve(node, self.func)
        if node.id == "__builtins__":
            self.hit("monkey-patch", node, "uses __builtins__")
        elif node.id.startswith("__") and node.id in self.ctx.attributes:
            # Module globals with the same meaning as the attributes: __file__ says where the solution
            # runs (and from there, where the run folder is), __spec__/__loader__ how it was loaded.
            self.hit(self.ctx.attributes[node.id], node, f"uses {node.id}")
        if isinstance(node.ctx, ast.Load):
            self.check_name(qs, node)
            self.note_refs(qs)
            self.check_host_reference(node, qs)
            # A module whose members are allow-listed (sys) may not travel as a value: a helper given
            # it could reach any member through a parameter the guard cannot resolve.
            for q in qs:
                if q in self.ctx.members:
                    parent = self.ctx.parents.get(node)
                    if not (isinstance(parent, ast.Attribute) and parent.value is node):
                        self.hit(self.ctx.members[q]["rule"], node, f"uses the {q} module as a value")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.ctx.attributes:
            self.hit(self.ctx.attributes[node.attr], node, f"uses attribute .{node.attr}")
        qs = self.resolve(node, self.func)
        if qs:
            # A resolvable chain (torch.cuda.Stream): check the whole chain once, not each prefix.
            flagged = self.check_name(qs, node)
            self.note_refs(qs)
            if not flagged:
                self.check_host_reference(node, qs)
            inner = node.value
            while isinstance(inner, ast.Attribute):
                if inner.attr in self.ctx.attributes:
                    self.hit(self.ctx.attributes[inner.attr], inner, f"uses attribute .{inner.attr}")
                inner = inner.value
            if not isinstance(inner, ast.Name):
                self.visit(inner)
            elif inner.id == "__builtins__":
                self.hit("monkey-patch", inner, "uses __builtins__")
            return
        self.generic_visit(node)

    def note_refs(self, qs: set[str]) -> None:
        # Module-level references need no edge: reachability starts at the entry function.
        if self.func is not None:
            self.func.refs.update(q for q in qs if q.startswith(OWN) and not q.startswith(f"{OWN}local:"))

    # ---- stores: monkey-patching, module state, input mutation
    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.check_store(t, node.value)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_store(node.target, node.value, aug=True)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.check_store(t, None)

    def check_store(self, target: ast.AST, value: ast.AST | None, aug: bool = False) -> None:
        f = self.func
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.check_store(e, None)
            return
        if isinstance(target, ast.Starred):
            self.check_store(target.value, None)
            return
        if isinstance(target, ast.Name):
            if aug and f is not None and self.ctx.module_state and target.id in f.globals_declared:
                self.hit("module-state", target, f"updates module-level {target.id}")
            if aug and f is not None and not f.is_device and self.ctx.host_check and self._is_tensor(target, f):
                self.hit("host-compute", target, "does in-place tensor arithmetic on the host")
                if self.except_depth:
                    self.hit("try-fallback", target, "an except handler does tensor arithmetic on the host")
            return
        if isinstance(target, ast.Attribute):
            if target.attr in self.ctx.attributes:
                self.hit(self.ctx.attributes[target.attr], target, f"assigns attribute .{target.attr}")
            if (isinstance(target.value, ast.Name) and target.value.id in ("self", "cls")
                    and self.resolve(target.value, f) & self.ctx.classes):
                self.visit(target.value)
                return  # a method setting its own object's state (only where self is one of our classes)
            base = self.resolve(target.value, f)
            libs = sorted(q for q in base if not q.startswith(OWN))
            owns = sorted(q for q in base if q.startswith(OWN) and not q.startswith(f"{OWN}local:"))
            if libs:
                self.hit("monkey-patch", target, f"assigns {libs[0]}.{target.attr}")
            elif owns and self.ctx.module_state and f is not None:
                self.hit("module-state", target, f"assigns attribute {target.attr} of {owns[0][1:]} at run time")
            elif not owns:
                # A parameter, loop variable or call result may be a module (def patch(m): m.x = ...;
                # patch(torch)); only attributes of self/cls and of the solution's own objects are safe.
                if not (target.attr == "data" and f is not None and self._is_tensor(target.value, f)):
                    self.hit("monkey-patch", target, f"assigns .{target.attr} on an object the guard cannot identify")
            if target.attr == "data" and f is not None and self._is_tensor(target.value, f):
                self.hit("input-mutation", target, "replaces a tensor's .data")
            self.visit(target.value)
            return
        if isinstance(target, ast.Subscript):
            base = self.resolve(target.value, f)
            libs = sorted(q for q in base if not q.startswith(OWN))
            if libs:
                self.hit("monkey-patch", target, f"writes into {libs[0]}[...]")
            elif self._is_module_container(target.value, f):
                self.hit("module-state", target, f"writes into module-level {target.value.id}[...] at run time")
            elif f is not None and not f.is_device:
                if self._names_input(target.value, f):
                    self.hit("input-mutation", target, "writes into an input tensor")
                elif self.ctx.host_check and self._is_tensor(target.value, f):
                    self.hit("host-compute", target, "writes tensor elements on the host")
                    if self.except_depth:
                        self.hit("try-fallback", target, "an except handler writes the output on the host")
            self.visit(target.value)
            self.visit(target.slice)
            self.check_key(target.slice, target, target.value)

    def _is_module_container(self, node: ast.AST, f: _Func | None) -> bool:
        """A module-level name used from inside a function (and not rebound locally)."""
        if f is None or not isinstance(node, ast.Name) or not self.ctx.module_state:
            return False
        local = f
        while local is not None:
            if node.id in local.bindings and node.id not in local.globals_declared:
                return False
            local = local.parent
        return node.id in self.module_level_names and not any(
            q.startswith(OWN) and not q.startswith(f"{OWN}local:") for q in self.globals.get(node.id, set())
        ) and not any(not q.startswith(OWN) for q in self.globals.get(node.id, set()))

    # ---- calls
    def visit_Call(self, node: ast.Call) -> None:
        f = self.func
        fq = self.resolve(node.func, f)
        name_lit = _literal_str(node.args[1]) if len(node.args) >= 2 else None
        if fq & {"builtins.getattr", "builtins.hasattr"} and len(node.args) >= 2 and name_lit is None:
            self.hit("dynamic-attr", node, "getattr with a computed attribute name")
        if fq & {"builtins.getattr", "builtins.hasattr"} and name_lit in self.ctx.attributes:
            self.hit(self.ctx.attributes[name_lit], node, f"getattr(..., {name_lit!r})")
        if fq & {"builtins.getattr"} and name_lit is not None:
            # getattr(torch, "matmul") is torch.matmul used as a value
            qs = self.resolve(node, f)
            if not self.check_name(qs, node):
                self.check_host_reference(node, qs)
        if "builtins.type" in fq and len(node.args) == 3:
            self.hit("dynamic-code", node, "builds a class at run time with type(name, bases, dict)")
        self.check_built_string(node)
        if isinstance(node.func, ast.Attribute):
            self._check_method_call(node, f)
        if f is not None or not self.func_stack:
            self._check_launch(node, fq)
        if self.ctx.host_check and not self.on_device and not self.annotation_depth:
            for q in fq:
                self.check_host_callable(q, node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _KEY_LOOKUP_METHODS and node.args:
            self.check_key(node.args[0], node, node.func.value)
        if f is not None and not f.is_device:
            self._record_args(node, fq, f)
            if self.ctx.host_check and fq & _COMPUTING_BUILTINS and any(
                self._is_tensor(a.value if isinstance(a, ast.Starred) else a, f) or _has_tensor_elt(self, a, f) for a in node.args
            ):
                self.hit("host-compute", node, f"applies {sorted(fq & _COMPUTING_BUILTINS)[0][9:]}() to tensors on the host")
                if self.except_depth:
                    self.hit("try-fallback", node, "an except handler computes on tensors with builtins")
        # out= aimed at an input
        for kw in node.keywords:
            if kw.arg == "out" and f is not None and self._names_input(kw.value, f):
                self.hit("input-mutation", node, "writes into an input through out=")
        self.generic_visit(node)

    def _record_args(self, node: ast.Call, fq: set[str], f: _Func) -> None:
        own = [q for q in fq if q.startswith(OWN) and not q.startswith(f"{OWN}local:")]
        if not own:
            return
        pairs: list[tuple[int | str, ast.AST]] = [(i, a) for i, a in enumerate(node.args) if not isinstance(a, ast.Starred)]
        pairs += [(k.arg, k.value) for k in node.keywords if k.arg]
        bound = isinstance(node.func, ast.Attribute)  # obj.method(...): `self` takes no argument
        for key, arg in pairs:
            is_t = self._is_tensor(arg, f)
            is_in = self._names_input(arg, f) if isinstance(arg, (ast.Name, ast.Subscript, ast.Attribute)) else False
            for q in own:
                if is_t:
                    self.ctx.pending_args.add((q, key, "tensor", bound))
                if is_in:
                    self.ctx.pending_args.add((q, key, "input", bound))

    def _check_method_call(self, node: ast.Call, f: _Func | None) -> None:
        meth = node.func.attr
        recv = node.func.value
        if f is not None and self.ctx.module_state and meth in _MUTATING_CONTAINER_METHODS and self._is_module_container(recv, f):
            self.hit("module-state", node, f"mutates module-level {recv.id} with .{meth}() at run time")
        if f is None or f.is_device:
            return
        if meth.endswith("_") and not meth.startswith("_") and self._names_input(recv, f):
            self.hit("input-mutation", node, f"calls in-place .{meth}() on an input")
        if not self.ctx.host_check:
            return
        if any(not q.startswith(f"{OWN}local:") for q in self.resolve(recv, f)):
            return  # torch.x(...), F.x(...), own_module.x(...): judged on the resolved name
        hc = self.ctx.host
        is_t = self._is_tensor(recv, f)
        bad = None
        if meth.startswith("__") and meth.endswith("__") and hc.get("deny_dunder_calls"):
            bad = f"calls {meth} on the host"
        elif meth in hc.get("tensor_methods_denied", []):
            bad = f"calls .{meth}() on the host"
        elif is_t and meth in hc.get("tensor_methods_denied_if_tensor", []):
            bad = f"calls tensor .{meth}() on the host"
        elif is_t and meth not in hc.get("tensor_methods_allowed", []):
            bad = f"calls tensor .{meth}(), which is not an allocation/view/metadata method"
        if bad:
            self.hit("host-compute", node, bad)
            if self.except_depth:
                self.hit("try-fallback", node, f"an except handler {bad}")

    def check_host_callable(self, q: str, node: ast.AST, imported: bool = False) -> None:
        """A resolved library callable used on the host of a triton/cuda solution."""
        if q.startswith(OWN) or self.ctx.denied_name(q):
            return
        hc = self.ctx.host
        root = q.split(".")[0]
        bad = False
        if root == "torch":
            bad = not allow_match(q, hc.get("torch_allowed", []))
            if imported and not bad:
                return
            if imported and _looks_like_type(q):
                return
        elif root == "triton":
            bad = not allow_match(q, hc.get("triton_allowed", []))
        elif root in ("numpy", "cupy", "scipy", "operator", "einops", "jax"):
            bad = not allow_match(q, hc.get("torch_allowed", []))
        elif q == "builtins.sum" or q in ("math.fsum",):
            bad = False
        if bad:
            what = "imports" if imported else "calls"
            self.hit("host-compute", node, f"{what} {q} on the host")
            if self.except_depth:
                self.hit("try-fallback", node, f"an except handler calls {q}")

    def check_host_reference(self, node: ast.AST, qs: set[str]) -> None:
        """A library function passed as a value (map(torch.sqrt, ...), reduce(torch.add, ...))."""
        if not self.ctx.host_check or self.on_device or self.annotation_depth:
            return
        parent = self.ctx.parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return  # calls are judged in visit_Call
        if isinstance(parent, ast.Attribute):
            return  # a prefix of a longer chain
        for q in qs:
            if q.split(".")[0] in ("torch", "numpy") and _looks_like_function(q) and not allow_match(
                q, self.ctx.host.get("torch_allowed", [])
            ):
                self.hit("host-compute", node, f"passes {q} around on the host")

    def _check_launch(self, node: ast.Call, fq: set[str]) -> None:
        """kernel[grid](...) and kernel.run(...) launch a kernel of the solution's own."""
        target = None
        if isinstance(node.func, ast.Subscript):
            target = node.func.value
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            target = node.func.value
        if target is None:
            return
        qs = self.resolve(target, self.func)
        if qs & self.ctx.all_kernels and self.func is not None:
            self.func.launches += 1  # a launch at import time does not make the entry point launch

    # ---- cache keys
    def check_key(self, key: ast.AST, where: ast.AST, container: ast.AST | None = None) -> None:
        """A lookup keyed on tensor data. A pointer or id as a key is flagged wherever it is (no honest
        kernel indexes anything by an address); a value read from a tensor (``.item()``, ``.tolist()``,
        ``int(t)``, however it is spelled) only when the container outlives the call (module state, an
        object's attributes, a closure, a mutable default): a length used to slice, or a key of a dict
        built in the call, is no output cache."""
        if self.on_device:
            return
        kind = self._key_kind(key)
        if kind == "pointer" or (kind and container is not None and self._persistent(container)):
            self.hit("output-cache", where, f"uses a {kind} of a tensor as a lookup key" + ("" if kind == "pointer" else " into state that outlives the call"))

    def visit_Dict(self, node: ast.Dict) -> None:
        for k in node.keys:
            if k is not None:
                self.check_key(k, node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self.check_key(node.slice, node, node.value)
        self.generic_visit(node)

    def _persistent(self, node: ast.AST) -> bool:
        """Whether a container expression can hold values from one call to the next."""
        f = self.func
        if isinstance(node, ast.Name):
            if f is None:
                return node.id in self.module_level_names
            if node.id in f.globals_declared or node.id in f.mutable_defaults:
                return True
            if node.id in f.bindings:
                return False
            g = f.parent
            while g is not None:  # a closure variable of an enclosing function
                if node.id in g.bindings:
                    return True
                g = g.parent
            return node.id in self.module_level_names
        if isinstance(node, ast.Attribute):
            if node.attr in _METADATA_ATTRS or node.attr in _TENSOR_ATTRS:
                return False
            return not (f is not None and self._is_tensor(node.value, f))
        if isinstance(node, ast.Subscript):
            return self._persistent(node.value)
        if isinstance(node, ast.Call):
            qs = self.resolve(node.func, f)
            if any(q.startswith(OWN) and not q.startswith(f"{OWN}local:") for q in qs):
                return True  # a helper of the solution's may hand out module state
            if isinstance(node.func, ast.Attribute) and not qs:
                return self._persistent(node.func.value)
            return False
        return False

    def visit_Compare(self, node: ast.Compare) -> None:
        f = self.func
        if not self.on_device:
            sides = [node.left] + node.comparators
            kinds = [self._key_kind(s) for s in sides]
            keyed = [i for i, k in enumerate(kinds) if k]
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and kinds[0] and self._persistent(node.comparators[0]):
                self.hit("output-cache", node, f"tests membership of a tensor {kinds[0]} in state that outlives the call")
            elif "pointer" in kinds and any(self._persistent(s) for i, s in enumerate(sides) if i not in keyed):
                self.hit("output-cache", node, "compares tensor pointers/ids with state kept across calls")
            elif any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) and kinds.count("content") and any(
                self._is_module_container(s, f) or self._names_module_level(s, f) for s in sides
            ):
                self.hit("output-cache", node, "compares a tensor fingerprint with module-level state")
            arith = any(isinstance(op, (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops)
            if self.ctx.host_check and f is not None and arith and any(self._is_tensor(s, f) for s in sides):
                self.hit("host-compute", node, "compares tensors on the host")
        self.generic_visit(node)

    def _names_module_level(self, node: ast.AST, f: _Func | None) -> bool:
        return isinstance(node, ast.Name) and f is not None and node.id in f.globals_declared

    def _key_kind(self, node: ast.AST) -> str | None:
        pointer, content = self.ctx.key_calls
        f = self.func
        kind = None
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and f is not None:
                k = _lookup_taint(f, sub.id)
                if k == "pointer":
                    return "pointer"
                kind = kind or k
            elif isinstance(sub, ast.Attribute) and sub.attr in pointer:
                return "pointer"
            elif isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Attribute):
                    if sub.func.attr in pointer:
                        return "pointer"
                    if sub.func.attr in content:
                        kind = "content"
                for q in self.resolve(sub.func, f):
                    if q in pointer:
                        return "pointer"
                    # int(t), hash(t), tuple(t): a fingerprint when given a tensor (tuple(x.shape) is none)
                    if q in content and (not q.startswith("builtins.") or (f is not None and any(self._is_tensor(a, f) for a in sub.args))):
                        kind = "content"
                    k = self.ctx.tainted_returns.get(q)
                    if k == "pointer":
                        return "pointer"
                    kind = kind or k
        return kind and ("fingerprint" if kind == "content" else kind)

    # ---- host arithmetic on tensors
    def visit_BinOp(self, node: ast.BinOp) -> None:
        f = self.func
        parent = self.ctx.parents.get(node)
        if isinstance(node.op, (ast.Add, ast.Mod)) and not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add)):
            self.check_built_string(node)  # once, at the outermost piece of a chain
        if self.ctx.host_check and not self.on_device and not self.annotation_depth:
            if isinstance(node.op, ast.MatMult):
                self.hit("host-compute", node, "uses @ (matmul) on the host")
                if self.except_depth:
                    self.hit("try-fallback", node, "an except handler multiplies matrices on the host")
            elif f is not None and (self._is_tensor(node.left, f) or self._is_tensor(node.right, f)):
                self.hit("host-compute", node, "does tensor arithmetic on the host")
                if self.except_depth:
                    self.hit("try-fallback", node, "an except handler does tensor arithmetic on the host")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        f = self.func
        if self.ctx.host_check and f is not None and not self.on_device and not isinstance(node.op, ast.Not):
            if self._is_tensor(node.operand, f):
                self.hit("host-compute", node, "does tensor arithmetic on the host")
        self.generic_visit(node)

    # ---- tensor typing (host functions only)
    def _type_tensors(self, f: _Func, node: ast.AST, body: list[ast.stmt]) -> None:
        is_entry = f.qual == self.ctx.entry_qual
        tensor_names = self.ctx.tensor_names
        args = node.args
        f.tensors |= self.ctx.tensor_params.get(f.qual, set())
        f.input_like |= self.ctx.input_params.get(f.qual, set())
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            ann = self.resolve(a.annotation, f.parent) if a.annotation is not None else set()
            if a.arg in tensor_names or any(prefix_match(q, ["torch.Tensor"]) for q in ann):
                f.tensors.add(a.arg)
            elif is_entry and not tensor_names and a.annotation is None and a.arg not in self.ctx.scalar_names:
                f.tensors.add(a.arg)
            if is_entry and a.arg in self.ctx.input_names:
                f.input_like.add(a.arg)
        # In source order, so a chain of aliases (a = x; b = a; c = b; ...) is typed in one pass; passes repeat
        # while they type something new (a value carried back round a loop), a few at most.
        nodes = sorted((n for n in _walk_scope(body) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.For,
                                                                       ast.comprehension))), key=_source_position)
        binds = _binding_counts(args, body)
        for n in nodes:
            if (isinstance(n, ast.Assign) and isinstance(n.value, ast.Tuple) and len(n.targets) == 1
                    and isinstance(n.targets[0], ast.Name) and binds.get(n.targets[0].id) == 1):
                f.tuples[n.targets[0].id] = n.value
        for _ in range(_TYPING_PASSES):
            before = (len(f.tensors), len(f.input_like))
            for n in nodes:
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        self._type_target(f, t, n.value)
                elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                    self._type_target(f, n.target, n.value)
                elif isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) and self._is_tensor(n.iter, f):
                    f.tensors.add(n.target.id)
            if (len(f.tensors), len(f.input_like)) == before:
                break

    def _type_target(self, f: _Func, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if self._is_tensor(value, f):
                f.tensors.add(target.id)
                if self._derives_from_input(value, f):
                    f.input_like.add(target.id)
            kind = self._key_kind_in(value, f)
            if kind:
                f.key_tainted[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._type_target(f, t, v)
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in (
                "unbind", "split", "chunk"
            ) and self._is_tensor(value.func.value, f):
                for t in target.elts:
                    if isinstance(t, ast.Name):
                        f.tensors.add(t.id)

    def _key_kind_in(self, value: ast.AST, f: _Func) -> str | None:
        saved = self.func_stack
        self.func_stack = saved + [f] if not saved or saved[-1] is not f else saved
        try:
            k = self._key_kind(value)
        finally:
            self.func_stack = saved
        return {"fingerprint": "content"}.get(k, k) if k else None

    def _derives_from_input(self, node: ast.AST, f: _Func) -> bool:
        """Whether a value may share an input's storage: views and methods that can return their
        receiver (``.float()`` of a float tensor is the tensor) keep it, a copy does not."""
        while True:
            if isinstance(node, ast.Name):
                return node.id in f.input_like
            if isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in _ALWAYS_NEW:
                    return False
                node = node.func.value
            elif isinstance(node, ast.Attribute):
                node = node.value
            else:
                return False

    def _names_input(self, node: ast.AST, f: _Func) -> bool:
        base = node
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        return isinstance(base, ast.Name) and base.id in f.input_like

    def _display_of(self, node: ast.AST, f: _Func) -> tuple[ast.AST, _Func] | None:
        """The list, tuple or dict display a subscript indexes: one written in place (`[x][0]`), or the tuple a
        name of this or an enclosing scope was bound to once (`t = (x,)`; lists and dicts can change after
        their display, so a name bound to one is not followed)."""
        if isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
            return node, f
        if isinstance(node, ast.Subscript):  # a display inside a display: [[1, (x,)]][0][1]
            outer = self._display_of(node.value, f)
            inner = self._elements(outer[0], node.slice) if outer is not None else []
            return (inner[0], outer[1]) if len(inner) == 1 and isinstance(inner[0], (ast.List, ast.Tuple, ast.Dict)) else None
        if isinstance(node, ast.Name):
            g = f
            while g is not None:
                if node.id in g.tuples:
                    return g.tuples[node.id], g  # its elements are read in the scope that wrote the display
                if node.id in g.bindings:
                    return None
                g = g.parent
        return None

    def _elements(self, display: ast.AST, index: ast.AST) -> list[ast.AST]:
        """_elements_at, counted: a module's scan looks at _MAX_ELEMENT_VISITS display elements at most, and a
        source that needs more (crafted to make the typing slow) is refused as too complex to check."""
        out = _elements_at(display, index)
        self._element_visits += len(out) + 1
        if self._element_visits > _MAX_ELEMENT_VISITS:
            raise _TooComplex("indexes into displays more than the scan follows")
        return out

    def _is_tensor(self, node: ast.AST, f: _Func) -> bool:
        if isinstance(node, ast.Name):
            g = f
            while g is not None:
                if node.id in g.tensors:
                    return True
                if node.id in g.bindings:
                    return False
                g = g.parent
            return False
        if isinstance(node, ast.Subscript):
            memo = (id(node), id(f), len(f.tensors))
            if memo not in self._element_memo:
                self._element_memo[memo] = False  # a cycle through this subscript adds nothing
                held = self._display_of(node.value, f)
                if held is not None:  # an element of a display, not a tensor's own indexing
                    display, owner = held
                    self._element_memo[memo] = any(self._is_tensor(e, owner) for e in self._elements(display, node.slice))
                else:
                    self._element_memo[memo] = self._is_tensor(node.value, f)
            return self._element_memo[memo]
        if isinstance(node, ast.Attribute):
            return node.attr in _TENSOR_ATTRS and self._is_tensor(node.value, f)
        if isinstance(node, ast.Call):
            qs = self.resolve(node.func, f)
            if any(q.split(".")[0] == "torch" and not _looks_like_type(q) and q not in _HOST_VALUED_TORCH for q in qs):
                return True
            if "builtins.type" in qs and len(node.args) == 1:
                return self._is_tensor(node.args[0], f)  # type(x).sum(x) is x.sum()
            if qs & _TENSOR_HOLDERS and node.args:
                return self._is_tensor(node.args[0], f)
            if isinstance(node.func, ast.Attribute) and node.func.attr not in _METADATA_METHODS:
                return self._is_tensor(node.func.value, f)
        if isinstance(node, ast.BinOp):
            return self._is_tensor(node.left, f) or self._is_tensor(node.right, f)
        return False


class SolutionScan:
    """Facts shared by the modules of one solution, and the hits they produce."""

    def __init__(self, policy: dict[str, Any], files: dict[str, str], entry_file: str, entry_function: str,
                 tensor_names: set[str], input_names: set[str], scalar_names: set[str]):
        self.policy = policy
        self.language = policy.get("language", "?")
        self.files = files
        self.hits: list[Hit] = []
        self.names: dict[str, str] = dict(policy.get("names") or {})
        self.names_allowed: list[str] = list(policy.get("names_allowed") or [])
        self.members: dict[str, dict[str, Any]] = {m: {"allowed": set(v.get("allowed") or []), "rule": v.get("rule", "introspection")}
                                                   for m, v in (policy.get("module_members") or {}).items()}
        self.attributes: dict[str, str] = dict(policy.get("attributes") or {})
        imports = policy.get("imports") or {}
        self.allowed_modules: list[str] = list(imports.get("allowed") or [])
        self.denied_modules: dict[str, str] = dict(imports.get("denied") or {})
        self.host: dict[str, Any] = dict(policy.get("host_compute") or {})
        self.host_check = bool(self.host.get("check"))
        self.module_state = policy.get("module_state", "error") != "off"
        kc = policy.get("cache_key_calls") or {}
        self.key_calls = (set(kc.get("pointer") or []), set(kc.get("content") or []))
        self.own_top_modules = {module_name_of(p).split(".")[0] for p in files}
        self.entry_qual = f"{OWN}{module_name_of(entry_file)}.{entry_function}"
        self.entry_file = entry_file
        self.entry_function = entry_function
        self.tensor_names = tensor_names
        self.input_names = input_names
        self.scalar_names = scalar_names
        self.all_kernels: set[str] = set()
        self.tainted_returns: dict[str, str] = {}
        self._docstrings: set[int] = set()
        self.func_params: dict[str, list[str]] = {}
        self.tensor_params: dict[str, set[str]] = {}
        self.input_params: dict[str, set[str]] = {}
        self.pending_args: set[tuple[str, int | str, str, bool]] = set()
        self.classes: set[str] = set()  # qualified names of the solution's own classes
        self.parents: dict[ast.AST, ast.AST] = {}
        self.modules: list[ModuleScan] = []

    def denied_name(self, q: str) -> str | None:
        """The rule a qualified name is refused with: its longest entry in ``names``, unless a longer
        (more specific) entry of ``names_allowed`` covers it (``torch.utils`` refused, its
        ``cpp_extension`` allowed for cuda solutions)."""
        p = prefix_match(q, self.names)
        if not p:
            return None
        a = prefix_match(q, self.names_allowed)
        return None if a and len(a) > len(p) else self.names[p]

    def allowed_name(self, q: str) -> bool:
        return prefix_match(q, self.names_allowed) is not None

    def member_rule(self, q: str) -> str | None:
        """For a module whose members are allow-listed (``module_members``): the rule when ``q`` names
        one that is not allowed."""
        root, _, rest = q.partition(".")
        m = self.members.get(root)
        if m is None or not rest:
            return None
        return None if rest.split(".")[0] in m["allowed"] else m["rule"]

    def run(self) -> list[Hit]:
        trees: dict[str, ast.Module] = {}
        limit = int(self.policy.get("max_source_bytes", 1_000_000))
        for path, text in self.files.items():
            if len(text.encode("utf-8", "replace")) > limit:
                self.hits.append(Hit("parse-error", path, 1, f"source larger than {limit} bytes"))
                continue
            try:
                trees[path] = ast.parse(text, filename=path)
            except SyntaxError as e:
                self.hits.append(Hit("parse-error", path, e.lineno or 0, f"not valid Python: {e.msg}"))
            except (RecursionError, MemoryError, ValueError) as e:
                self.hits.append(Hit("parse-error", path, 1, f"cannot be parsed ({type(e).__name__}): nested too deeply or malformed"))
        self._check_shadowing()
        scans = [ModuleScan(self, p, t) for p, t in trees.items()]
        # Code nested deeper than the visitor can follow is refused, not half-checked: no honest kernel
        # nests hundreds of levels, and a RecursionError must not take the guard (or the harness) down.
        checked = []
        for s in scans:
            try:
                s.collect_module_bindings()
                self._taint_returns(s)
                self._note_docstrings(s.tree)
                for node in ast.walk(s.tree):
                    for child in ast.iter_child_nodes(node):
                        self.parents[child] = node
                checked.append(s)
            except RecursionError:
                self.hits.append(Hit("parse-error", s.path, 1, "nested too deeply to check"))
        for s in checked:
            self.all_kernels |= s.kernels
        base_hits = list(self.hits)
        # Tensors passed to the solution's own helpers make the helpers' parameters tensors (so
        # `def add(a, b): return a + b; add(x, w)` is tensor arithmetic); iterate to a fixpoint.
        for _ in range(5):
            self.hits = list(base_hits)
            self.pending_args.clear()
            scans_now = [ModuleScan(self, s.path, s.tree) for s in checked]
            for s in scans_now:
                s.collect_module_bindings()
            for s in scans_now:
                try:
                    s.visit(s.tree)
                except RecursionError as e:
                    why = f"too complex to check: {e}" if isinstance(e, _TooComplex) else "nested too deeply to check"
                    self.hits.append(Hit("parse-error", s.path, 1, why))
            self.modules = scans_now
            if not self._propagate_params():
                break
        return self.hits

    def _propagate_params(self) -> bool:
        """Turn recorded (callee, argument position/name, kind) into parameter facts; True if any new."""
        changed = False
        for callee, key, kind, bound in self.pending_args:
            params = self.func_params.get(callee)
            if params is None:
                continue
            if isinstance(key, int) and bound and params and params[0] in ("self", "cls"):
                key += 1
            name = params[key] if isinstance(key, int) and key < len(params) else key if isinstance(key, str) else None
            if name is None or name not in params:
                continue
            facts = self.tensor_params if kind == "tensor" else self.input_params
            if name not in facts.setdefault(callee, set()):
                facts[callee].add(name)
                changed = True
        return changed

    def is_docstring(self, node: ast.Constant) -> bool:
        return id(node) in self._docstrings

    def _note_docstrings(self, tree: ast.Module) -> None:
        for n in ast.walk(tree):
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body:
                first = n.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                    self._docstrings.add(id(first.value))

    def _taint_returns(self, s: ModuleScan) -> None:
        """Own functions that return a pointer or a fingerprint of a tensor: calling one makes a key."""
        pointer, content = self.key_calls
        for node in ast.walk(s.tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            kind = None
            for ret in ast.walk(node):
                if not isinstance(ret, ast.Return) or ret.value is None:
                    continue
                for sub in ast.walk(ret.value):
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                        if sub.func.attr in pointer:
                            kind = "pointer"
                        elif sub.func.attr in content and kind is None:
                            kind = "content"
                    elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and f"builtins.{sub.func.id}" in pointer:
                        kind = "pointer"
            if kind:
                self.tainted_returns[s.own(node.name)] = kind

    def _check_shadowing(self) -> None:
        known = set(sys.stdlib_module_names) | {m.split(".")[0] for m in self.allowed_modules}
        known |= {m.split(".")[0] for m in self.denied_modules} | {"torch", "triton", "numpy", "cupy", "harness", "bot"}
        for path in self.files:
            top = module_name_of(path).split(".")[0]
            if top in known:
                self.hits.append(Hit("monkey-patch", path, 1, f"source file shadows the module '{top}'"))

    def launch_reachable(self) -> bool | None:
        """Whether the entry function can reach a kernel launch; None when the entry is not defined."""
        funcs: dict[str, _Func] = {}
        for s in self.modules:
            funcs.update(s.functions)
        if self.entry_qual not in funcs:
            return None
        seen, todo = set(), [self.entry_qual]
        while todo:
            q = todo.pop()
            if q in seen:
                continue
            seen.add(q)
            f = funcs.get(q)
            if f is None:
                # a class or an alias: reachable methods are those qualified under it
                todo.extend(k for k in funcs if k.startswith(q + "."))
                continue
            if f.launches:
                return True
            todo.extend(f.refs)
        return False


# ---------------------------------------------------------------------------------------- helpers


def _has_tensor_elt(scan: "ModuleScan", node: ast.AST, f: _Func) -> bool:
    """A list/tuple/set literal (or comprehension) with a tensor in it."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return any(scan._is_tensor(e, f) for e in node.elts)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return scan._is_tensor(node.elt, f)
    return False


def _binding_counts(args: ast.arguments, body: list[ast.stmt]) -> dict[str, int]:
    """How many times each name is bound in a scope, every way Python binds one: parameters, assignment and
    loop targets, `del`, imports, def and class names, `except ... as`, match captures; a name declared
    global or nonlocal counts twice (what it holds comes from elsewhere)."""
    counts: dict[str, int] = {}

    def add(name: str, times: int = 1) -> None:
        counts[name] = counts.get(name, 0) + times

    for a in args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
        add(a.arg)
    for n in _walk_scope(body):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for al in n.names:
                add((al.asname or al.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            add(n.name)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            add(n.rest)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                add(name, 2)
    return counts


def _elements_at(display: ast.AST, index: ast.AST) -> list[ast.AST]:
    """What indexing a display can give: the element a constant index or key names, every element for an
    index known only at run time or behind a starred element, nothing for a slice (a slice of a list is a
    list). Work is bounded: displays of more than _MAX_ELEMENTS elements are looked into only at constant
    indices below that, and dicts only by constant key."""
    if isinstance(index, ast.Slice):
        return []
    key = index.value if isinstance(index, ast.Constant) else (
        -index.operand.value if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub)
        and isinstance(index.operand, ast.Constant) and isinstance(index.operand.value, int) else _UNKNOWN)
    if isinstance(display, ast.Dict):
        if len(display.values) > _MAX_ELEMENTS:
            return []
        if key is not _UNKNOWN:
            return [v for k, v in zip(display.keys, display.values) if isinstance(k, ast.Constant) and k.value == key]
        return list(display.values)
    elts = display.elts
    if isinstance(key, int) and not isinstance(key, bool) and -_MAX_ELEMENTS <= key < _MAX_ELEMENTS \
            and -len(elts) <= key < len(elts):
        before = elts[:key + 1] if key >= 0 else elts[key:]  # a starred element there would shift the position
        if not any(isinstance(e, ast.Starred) for e in before):
            return [elts[key]]
        key = _UNKNOWN
    if key is _UNKNOWN and len(elts) <= _MAX_ELEMENTS:  # any element (a starred one's values too)
        return [e.value if isinstance(e, ast.Starred) else e for e in elts]
    return []


def _source_position(n: ast.AST) -> tuple[int, int]:
    at = n.iter if isinstance(n, ast.comprehension) else n  # a comprehension clause has no position of its own
    return getattr(at, "lineno", 0), getattr(at, "col_offset", 0)


def _walk_scope(body: list[ast.stmt]):
    """Every node of a scope's body, not descending into nested function, lambda or class bodies."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield child  # the name is bound here; the body is another scope
                todo.extend(child.decorator_list)
            elif isinstance(child, ast.Lambda):
                continue
            else:
                todo.append(child)


def _target_names(target: ast.AST, value: ast.AST | None):
    """(name, value sub-expression or None) for each name an assignment target binds."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        vals = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
        for i, e in enumerate(target.elts):
            yield from _target_names(e, vals[i] if vals else None)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value, None)


def _mutable_literal(node: ast.AST, called: set[str]) -> bool:
    """A default value that is one object shared by every call: a list/dict/set display or a call to a
    container type."""
    if isinstance(node, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    return isinstance(node, ast.Call) and bool(called & {"builtins.list", "builtins.dict", "builtins.set", "builtins.bytearray",
                                                          "collections.defaultdict", "collections.OrderedDict", "collections.deque",
                                                          "collections.Counter"})


def _literal_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _fold_str(node: ast.AST, resolve, depth: int = 0) -> str | None:
    """The value of a string expression made only of constants ('a' + 'b', f'{"a"}b', ''.join(['a',
    'b']), '%s' % 'a', '{}'.format('a'), chr(97), str('a')), or None. Values computed from data are not
    folded: the OS sandbox, not this pass, is what stops a path built at run time."""
    if depth > 40:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    out: str | None = None
    try:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            # a long chain 'a' + 'b' + ... nests to the left: flattened without recursion
            pieces, todo = [], [node]
            while todo and len(pieces) + len(todo) < 2000:
                n = todo.pop()
                if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                    todo += [n.right, n.left]
                else:
                    pieces.append(_fold_str(n, resolve, depth + 1))
            out = "".join(pieces) if not todo and all(p is not None for p in pieces) else None  # type: ignore[arg-type]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            fmt = _fold_str(node.left, resolve, depth + 1)
            args = _fold_args(node.right, resolve, depth)
            # no widths or precisions: '%999999999s' would be folded into a string that large
            ok = fmt is not None and args is not None and not re.search(r"%[-#0 +]*[\d*.]", fmt)
            out = fmt % args if ok else None
        elif isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    if v.format_spec is not None or v.conversion not in (-1, None):
                        return None
                    inner = _fold_const(v.value, resolve, depth)
                    if inner is None:
                        return None
                    parts.append(str(inner))
                else:
                    piece = _fold_str(v, resolve, depth + 1)
                    if piece is None:
                        return None
                    parts.append(piece)
            out = "".join(parts)
        elif isinstance(node, ast.Call) and not node.keywords:
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("join", "format"):
                base = _fold_str(node.func.value, resolve, depth + 1)
                if base is None:
                    return None
                if node.func.attr == "join" and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
                    items = [_fold_str(e, resolve, depth + 1) for e in node.args[0].elts]
                    out = base.join(items) if all(i is not None for i in items) else None
                elif node.func.attr == "format" and not re.search(r"\{[^}]*[:!]", base):  # no format specs
                    items = [_fold_const(a, resolve, depth) for a in node.args]
                    out = base.format(*items) if all(i is not None for i in items) else None
            elif len(node.args) == 1:
                fq = resolve(node.func)
                arg = _fold_const(node.args[0], resolve, depth)
                if "builtins.chr" in fq and isinstance(arg, int):
                    out = chr(arg)
                elif "builtins.str" in fq and arg is not None:
                    out = str(arg)
    except (TypeError, ValueError, OverflowError, IndexError, KeyError, MemoryError):
        return None
    return out if out is None or len(out) <= _MAX_FOLDED else None


def _fold_const(node: ast.AST, resolve, depth: int) -> str | int | float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    return _fold_str(node, resolve, depth + 1)


def _fold_args(node: ast.AST, resolve, depth: int) -> tuple | str | int | float | None:
    if isinstance(node, ast.Tuple):
        items = tuple(_fold_const(e, resolve, depth) for e in node.elts)
        return items if all(i is not None for i in items) else None
    return _fold_const(node, resolve, depth)


def _lookup_taint(f: _Func, name: str) -> str | None:
    g = f
    while g is not None:
        if name in g.key_tainted:
            return g.key_tainted[name]
        if name in g.bindings:
            return None
        g = g.parent
    return None


def _loop_can_exit(loop: ast.While) -> bool:
    todo = list(loop.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Return, ast.Raise)):
            return True
        if isinstance(n, ast.Break):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.For, ast.While, ast.AsyncFor)):
            # a break in a nested loop leaves only that loop; returns/raises still leave ours
            todo.extend(x for x in ast.walk(n) if isinstance(x, (ast.Return, ast.Raise)))
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


_TYPE_LEAVES = {
    "Tensor", "Size", "device", "dtype", "finfo", "iinfo", "Generator", "layout", "memory_format",
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int16", "int32", "int64",
    "uint8", "bool", "long", "int", "short", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128",
    "contiguous_format", "channels_last", "strided", "no_grad", "inference_mode",
}


def _looks_like_type(q: str) -> bool:
    leaf = q.rsplit(".", 1)[-1]
    return leaf in _TYPE_LEAVES


def _looks_like_function(q: str) -> bool:
    """A torch/numpy leaf that is a lowercase callable (not a dtype, module-ish or class name)."""
    leaf = q.rsplit(".", 1)[-1]
    if "." not in q or leaf in _TYPE_LEAVES or not leaf or leaf[0].isupper():
        return False
    parts = q.split(".")
    # torch.cuda, torch.nn.functional, torch.ops.aten: module objects are harmless until called
    return not (len(parts) <= 3 and leaf in {"cuda", "nn", "functional", "ops", "aten", "linalg", "fft", "special",
                                              "backends", "utils", "version"})
