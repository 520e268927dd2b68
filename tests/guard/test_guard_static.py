"""Unit tests for the static guard: one case per rule and per evasion, and the honest patterns that
must stay silent (false positives are bugs too)."""

from __future__ import annotations

import textwrap

import pytest

from harness.guard.static import check_solution
from harness.report import Finding

from guardkit import make_solution

HEAD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)
'''


def tri(body: str = "", prelude: str = "") -> str:
    """A triton solution that launches its kernel, with ``body`` inside run() and ``prelude`` at
    module level; the honest skeleton itself raises nothing (test_skeleton_is_clean)."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") if body.strip() else "    pass"
    return HEAD + textwrap.dedent(prelude) + f'''

def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _k[(triton.cdiv(hidden_states.numel(), 1024),)](hidden_states, out, hidden_states.numel(), BLOCK=1024)
{body}
    return out
'''


def py(body: str, prelude: str = "import torch\n") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return textwrap.dedent(prelude) + f"\n\ndef run(hidden_states, weight):\n{body}\n    return hidden_states.clone()\n"


def test_skeleton_is_clean(scan):
    assert scan(tri()) == set()
    assert scan(py("x = hidden_states.float()"), "python") == set()


# (id, code, language, rule that must be raised)
CASES = [
    # ---- side streams and events
    ("stream", tri("s = torch.cuda.Stream()"), "triton", "side-stream"),
    ("stream-ctx", tri("with torch.cuda.stream(None):\n    pass"), "triton", "side-stream"),
    ("event", tri("e = torch.cuda.Event(enable_timing=True)"), "triton", "side-stream"),
    ("stream-from-import", tri("S()", "from torch.cuda import Stream as S\n"), "triton", "side-stream"),
    ("stream-alias-module", tri("c.Stream()", "import torch.cuda as c\n"), "triton", "side-stream"),
    ("torch-stream", py("torch.Stream()"), "python", "side-stream"),
    ("cupy-stream", py("cupy.cuda.Stream(non_blocking=True)", "import torch\nimport cupy\n"), "python", "side-stream"),
    ("cuda-graph", py("g = torch.cuda.CUDAGraph()"), "python", "side-stream"),
    # ---- threads and processes
    ("threading", py("pass", "import threading\n"), "python", "thread"),
    ("thread-from", py("pass", "from threading import Thread\n"), "python", "thread"),
    ("futures", py("pass", "from concurrent.futures import ThreadPoolExecutor\n"), "python", "thread"),
    ("multiprocessing", py("pass", "import multiprocessing as mp\n"), "python", "thread"),
    ("torch-mp", py("torch.multiprocessing.spawn(None)"), "python", "thread"),
    ("subprocess", py("pass", "import subprocess\n"), "python", "process"),
    ("os-fork", py("os.fork()", "import os\n"), "python", "process"),
    ("os-system-alias", py("s('ls')", "from os import system as s\n"), "python", "process"),
    # ---- monkey-patching
    ("assign-torch", py("torch.matmul = None"), "python", "monkey-patch"),
    ("assign-alias", py("t.allclose = len", "import torch as t\n"), "python", "monkey-patch"),
    ("assign-local-alias", py("T = torch.Tensor\nT.__eq__ = None"), "python", "monkey-patch"),
    ("assign-submodule-alias", py("c.synchronize = len", "import torch.cuda as c\n"), "python", "monkey-patch"),
    ("setattr", py("setattr(torch, 'allclose', len)"), "python", "monkey-patch"),
    ("delattr", py("delattr(torch.Tensor, 'add')"), "python", "monkey-patch"),
    ("builtins-module", py("builtins.len = None", "import builtins\n"), "python", "monkey-patch"),
    ("dunder-builtins", py("__builtins__['len'] = None"), "python", "monkey-patch"),
    ("tf32", py("torch.backends.cuda.matmul.allow_tf32 = True"), "python", "monkey-patch"),
    ("time-patch", py("time.perf_counter = len", "import time\n"), "python", "monkey-patch"),
    ("module-level-patch", "import torch\ntorch.cuda.synchronize = lambda: None\n\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n", "python", "monkey-patch"),
    ("object-setattr", py("object.__setattr__(torch, 'x', 1)"), "python", "monkey-patch"),
    ("set-default-dtype", py("torch.set_default_dtype(torch.float16)"), "python", "monkey-patch"),
    ("torch-library", py("lib = torch.library.Library('aten', 'IMPL')"), "python", "monkey-patch"),
    # ---- the harness, the reference, test data
    ("import-harness", py("pass", "import harness\n"), "python", "harness-access"),
    ("from-harness", py("pass", "from harness.compare import compare\n"), "python", "harness-access"),
    ("import-bot", py("pass", "import bot.forge\n"), "python", "harness-access"),
    ("main", py("pass", "import __main__\n"), "python", "reference-access"),
    ("definition-path", py("p = 'definitions/rmsnorm_h4096/definition.json'"), "python", "reference-access"),
    ("reference-attr", py("src = weight.reference"), "python", "reference-access"),
    ("torch-testing", py("torch.testing.assert_close(hidden_states, hidden_states)"), "python", "harness-access"),
    # ---- introspection
    ("inspect", py("pass", "import inspect\n"), "python", "introspection"),
    ("getframe", py("f = sys._getframe(1)", "import sys\n"), "python", "introspection"),
    ("traceback", py("pass", "import traceback\n"), "python", "introspection"),
    ("gc", py("gc.get_objects()", "import gc\n"), "python", "introspection"),
    ("f-back", py("g = run.f_back"), "python", "introspection"),
    ("globals-attr", py("g = run.__globals__"), "python", "introspection"),
    ("code-attr", py("c = run.__code__"), "python", "introspection"),
    ("subclasses", py("s = object.__subclasses__()"), "python", "introspection"),
    ("dict-attr", py("d = torch.__dict__"), "python", "introspection"),
    ("globals-call", py("g = globals()"), "python", "introspection"),
    ("vars-call", py("v = vars(torch)"), "python", "introspection"),
    ("getattr-dunder", py("g = getattr(run, '__globals__')"), "python", "introspection"),
    ("sys-modules", py("m = sys.modules['torch']", "import sys\n"), "python", "introspection"),
    ("class-attr", py("k = hidden_states.__class__"), "python", "introspection"),
    # ---- caches keyed on pointers and contents
    ("ptr-key-dict", py("_c[hidden_states.data_ptr()] = 1", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("ptr-key-var", py("k = hidden_states.data_ptr()\nif k in _c:\n    return _c[k]", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("id-key", py("v = _c.get(id(hidden_states))", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("tobytes-key", py("k = hash(hidden_states[0].numpy().tobytes())\nv = _c.get(k)", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("tolist-key", py("v = _c[tuple(hidden_states[0, :4].tolist())]", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("helper-fingerprint", py("v = _c.get(_fp(hidden_states))", "import torch\n_c = {}\ndef _fp(t):\n    return t.sum().item()\n"), "python", "output-cache"),
    ("ptr-compare", py("if hidden_states.data_ptr() == _last[0]:\n    pass", "import torch\n_last = [0]\n"), "python", "output-cache"),
    ("dict-literal-key", py("d = {hidden_states.data_ptr(): 1}"), "python", "output-cache"),
    ("lru-cache", "import functools\nimport torch\n\n@functools.lru_cache(maxsize=None)\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n", "python", "output-cache"),
    ("cache-decorator", "import functools\nimport torch\n\n@functools.cache\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n", "python", "output-cache"),
    ("cache-alias", "from functools import lru_cache as memo\nimport torch\n\n@memo()\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n", "python", "output-cache"),
    ("weakref", py("pass", "import weakref\n"), "python", "output-cache"),
    # ---- module state
    ("global-counter", py("global _n\n_n += 1", "import torch\n_n = 0\n"), "python", "module-state"),
    ("module-list-append", py("_calls.append(1)", "import torch\n_calls = []\n"), "python", "module-state"),
    ("module-dict-write", py("_c['k'] = hidden_states", "import torch\n_c = {}\n"), "python", "module-state"),
    ("function-attr", py("run.calls = 1"), "python", "module-state"),
    # ---- input mutation
    ("inplace-input", py("hidden_states.mul_(2)"), "python", "input-mutation"),
    ("inplace-input-view", py("h = hidden_states.view(-1)\nh.zero_()"), "python", "input-mutation"),
    ("setitem-input", py("hidden_states[0] = 0"), "python", "input-mutation"),
    ("out-kwarg-input", py("torch.mul(weight, 2, out=weight)"), "python", "input-mutation"),
    ("data-assign", py("weight.data = hidden_states"), "python", "input-mutation"),
    # ---- files, network, environment, dynamic code, serialization, ffi
    ("open", py("open('x')"), "python", "file-io"),
    ("pathlib", py("pathlib.Path('x').read_text()", "import pathlib\n"), "python", "file-io"),
    ("torch-load", py("torch.load('x.pt')"), "python", "file-io"),
    ("os-environ", py("e = os.environ['X']", "import os\n"), "python", "environment"),
    ("os-getenv", py("e = os.getenv('X')", "import os\n"), "python", "environment"),
    ("environ-from", py("e = environ.get('X')", "from os import environ\n"), "python", "environment"),
    ("socket", py("pass", "import socket\n"), "python", "network"),
    ("urllib", py("pass", "import urllib.request\n"), "python", "network"),
    ("requests", py("pass", "import requests\n"), "python", "network"),
    ("importlib", py("pass", "import importlib\n"), "python", "dynamic-code"),
    ("dunder-import", py("m = __import__('os')"), "python", "dynamic-code"),
    ("exec", py("exec('x = 1')"), "python", "dynamic-code"),
    ("eval", py("y = eval('1')"), "python", "dynamic-code"),
    ("compile", py("c = compile('1', 'x', 'eval')"), "python", "dynamic-code"),
    ("type-3", py("K = type('K', (object,), {})"), "python", "dynamic-code"),
    ("pickle", py("pass", "import pickle\n"), "python", "serialization"),
    ("marshal", py("pass", "import marshal\n"), "python", "serialization"),
    ("ctypes", py("pass", "import ctypes\n"), "python", "ffi"),
    ("cffi", py("pass", "import cffi\n"), "python", "ffi"),
    ("cpp-extension-in-python", py("torch.utils.cpp_extension.load_inline('x', '')"), "python", "dynamic-code"),
    # ---- dynamic attribute names
    ("getattr-computed", py("f = getattr(torch, 'mat' + 'mul')"), "python", "dynamic-attr"),
    ("getattr-variable", py("n = 'x'\nf = getattr(torch, n)"), "python", "dynamic-attr"),
    ("star-import", py("pass", "from torch.nn.functional import *\n"), "python", "dynamic-attr"),
    # ---- process exit, stdout, loops, rng, subclasses, compile
    ("os-exit", py("os._exit(0)", "import os\n"), "python", "process-exit"),
    ("sys-exit", py("sys.exit(0)", "import sys\n"), "python", "process-exit"),
    ("exit-builtin", py("exit()"), "python", "process-exit"),
    ("signal", py("pass", "import signal\n"), "python", "process-exit"),
    ("while-true", py("while True:\n    pass"), "python", "infinite-loop"),
    ("while-1-nested-break", py("while 1:\n    for i in range(3):\n        break"), "python", "infinite-loop"),
    ("manual-seed", py("torch.manual_seed(0)"), "python", "rng-state"),
    ("random", py("pass", "import random\n"), "python", "rng-state"),
    ("rng-state", py("s = torch.get_rng_state()"), "python", "rng-state"),
    ("subclass", py("pass", "import torch\nclass T(torch.Tensor):\n    pass\n"), "python", "tensor-subclass"),
    ("torch-function-def", py("pass", "import torch\nclass T:\n    def __torch_function__(self, *a):\n        pass\n"), "python", "tensor-subclass"),
    ("function-mode", py("pass", "import torch\nfrom torch.overrides import TorchFunctionMode\n"), "python", "tensor-subclass"),
    ("as-subclass", py("y = hidden_states.as_subclass(torch.Tensor)"), "python", "tensor-subclass"),
    ("torch-compile", py("f = torch.compile(len)"), "python", "torch-compile"),
    ("not-allowed-import", py("pass", "import json\n"), "python", "import-not-allowed"),
    ("numpy-in-triton", tri("", "import numpy\n"), "triton", "import-not-allowed"),
    # ---- host compute in triton solutions
    ("matmul", tri("y = torch.matmul(hidden_states, weight)"), "triton", "host-compute"),
    ("matmul-op", tri("y = hidden_states @ weight"), "triton", "host-compute"),
    ("functional", tri("y = F.rms_norm(hidden_states, (4096,), weight)", "import torch.nn.functional as F\n"), "triton", "host-compute"),
    ("functional-full", tri("y = torch.nn.functional.silu(hidden_states)"), "triton", "host-compute"),
    ("rsqrt", tri("y = torch.rsqrt(hidden_states)"), "triton", "host-compute"),
    ("sum-method", tri("y = hidden_states.sum()"), "triton", "host-compute"),
    ("mm", tri("y = torch.mm(hidden_states, hidden_states.t())"), "triton", "host-compute"),
    ("bmm", tri("y = torch.bmm(hidden_states, hidden_states)"), "triton", "host-compute"),
    ("einsum", tri("y = torch.einsum('ij,j->i', hidden_states, weight)"), "triton", "host-compute"),
    ("aten", tri("y = torch.ops.aten.mm.default(hidden_states, weight)"), "triton", "host-compute"),
    ("aten-alias", tri("y = aten.rsqrt.default(hidden_states)", "import torch\naten = torch.ops.aten\n"), "triton", "host-compute"),
    ("tensor-mul", tri("y = hidden_states * 2"), "triton", "host-compute"),
    ("tensor-derived-mul", tri("h = hidden_states.view(-1)\ny = h * weight"), "triton", "host-compute"),
    ("output-arith", tri("out *= 2"), "triton", "host-compute"),
    ("float-method", tri("y = hidden_states.float()"), "triton", "host-compute"),
    ("to-method", tri("y = hidden_states.to(torch.float32)"), "triton", "host-compute"),
    ("unknown-tensor-method", tri("y = hidden_states.frobnicate()"), "triton", "host-compute"),
    ("alias-fn", tri("f = torch.matmul\ny = f(hidden_states, weight)"), "triton", "host-compute"),
    ("module-alias-fn", tri("y = _mm(hidden_states, weight)", "import torch\n_mm = torch.matmul\n"), "triton", "host-compute"),
    ("from-import-as", tri("y = m(hidden_states, weight)", "from torch import matmul as m\n"), "triton", "host-compute"),
    ("import-as", tri("y = t.rsqrt(hidden_states)", "import torch as t\n"), "triton", "host-compute"),
    ("getattr-literal", tri("y = getattr(torch, 'rsqrt')(hidden_states)"), "triton", "host-compute"),
    ("dunder-call", tri("y = hidden_states.__mul__(2)"), "triton", "host-compute"),
    ("map-fn", tri("ys = list(map(torch.sqrt, [hidden_states]))"), "triton", "host-compute"),
    ("lambda-wrapper", tri("y = g(hidden_states)", "import torch\ng = lambda x: torch.rsqrt(x)\n"), "triton", "host-compute"),
    ("def-wrapper", tri("y = g(hidden_states)", "import torch\ndef g(x):\n    return x.pow(2)\n"), "triton", "host-compute"),
    ("setitem-output", tri("out[:] = 0"), "triton", "host-compute"),
    ("tensor-compare", tri("m = hidden_states > 0"), "triton", "host-compute"),
    ("numpy-call", tri("y = np.sqrt(1.0)", "import numpy as np\n"), "triton", "host-compute"),
    ("triton-testing", tri("triton.testing.do_bench(len)"), "triton", "harness-access"),
    ("except-fallback", tri("try:\n    pass\nexcept Exception:\n    out = torch.nn.functional.rms_norm(hidden_states, (4096,), weight)"), "triton", "try-fallback"),
    ("except-arith-fallback", tri("try:\n    pass\nexcept Exception:\n    out = hidden_states * weight"), "triton", "try-fallback"),
    # a TMA descriptor hands its tensor back as .base: arithmetic on it is arithmetic on the tensor
    ("descriptor-base-arith", tri("d = TensorDescriptor.from_tensor(hidden_states, [1, 256])\ny = d.base * 2",
                                  "from triton.tools.tensor_descriptor import TensorDescriptor\n"), "triton", "host-compute"),
    # a tensor taken out of a display is the tensor
    ("display-index", tri("y = [hidden_states][0] * 2"), "triton", "host-compute"),
    ("display-negative-index", tri("y = (weight, 4)[-2] + 1"), "triton", "host-compute"),
    ("display-dict-key", tri("y = {'a': hidden_states, 'n': 4}['a'] * 2"), "triton", "host-compute"),
    ("display-runtime-index", tri("i = hidden_states.shape[0] % 2\ny = (4, weight)[i] * 2"), "triton", "host-compute"),
    ("display-nested", tri("y = [[1, (hidden_states,)]][0][1][0] * 2"), "triton", "host-compute"),
    ("tuple-name", tri("t = (hidden_states, 64)\ny = t[0] * 2"), "triton", "host-compute"),
    ("tuple-name-outer-scope", tri("t = (hidden_states,)\ndef g():\n    return t[0] * 2\ny = g()"), "triton", "host-compute"),
    ("tuple-name-compare", tri("t = (weight,)\nm = t[0] > 0"), "triton", "host-compute"),
    # a parameter rebound to a tuple later (even in dead code) is still the tensor it was passed as
    ("param-rebound-to-tuple", tri("h = hidden_states[1] * 2\nif False:\n    hidden_states = (0,)"), "triton", "host-compute"),
    # an outer tuple's element is what it is where the tuple was written, not in the scope reading it
    ("tuple-element-in-owner-scope", tri("n = hidden_states\ncfg = (4, n)\ndef helper(n: int):\n    return cfg[1] * 2\ny = helper(4)"),
     "triton", "host-compute"),
    # an alias chain is followed to its end, whatever its length (the typing once made three passes, one link each)
    ("alias-chain", tri("a = hidden_states\nb = a\nc = b\nd = c\ne = d\ny = e * 2"), "triton", "host-compute"),
    ("alias-chain-in-loop", tri("a = b = c = d = 0\nfor i in range(4):\n    y = d * 2\n    d = c\n    c = b\n    b = a\n    a = hidden_states"),
     "triton", "host-compute"),
    ("descriptor-base-alias", tri("z = TensorDescriptor(weight, [4096], [1], [256]).base\ny = z + z", "from triton.tools.tensor_descriptor import TensorDescriptor\n"),
     "triton", "host-compute"),
]


@pytest.mark.parametrize("code,language,rule", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_fires(scan, code, language, rule):
    got = scan(code, language)
    assert rule in got, f"expected {rule}, got {sorted(got)}"


def test_case_ids_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


# Honest patterns that must NOT be flagged (each one a false positive we once risked).
CLEAN = [
    ("alloc-and-views", tri("""
        x = hidden_states.contiguous().view(-1, hidden_states.shape[-1])
        n_rows, n_cols = x.shape
        y = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
        z = torch.zeros_like(y)
        s0, s1 = x.stride(0), x.stride(1)
        assert x.is_contiguous() and x.dtype == torch.bfloat16 and n_cols == 4096
        block = triton.next_power_of_2(n_cols)
        grid = lambda meta: (triton.cdiv(n_rows, meta["BLOCK"]),)
        if out is None:
            out = y
    """), "triton"),
    ("shape-config-dict", tri("cfg = {4096: 8}.get(hidden_states.shape[-1], 4)"), "triton"),
    ("torch-dtype-refs", tri("d = torch.float32 if weight.dtype == torch.bfloat16 else torch.float16"), "triton"),
    ("dps-output-write", py("torch.mul(hidden_states, 2, out=output)"), "python"),
    ("python-library", py("y = torch.nn.functional.rms_norm(hidden_states.float(), (4096,), weight.float())\nz = y @ y.t()"), "python"),
    ("while-with-break", py("i = 0\nwhile True:\n    i += 1\n    if i > 3:\n        break"), "python"),
    ("local-dict", py("d = {}\nd['a'] = 1\nd.update(b=2)"), "python"),
    ("self-attr", py("pass", "import torch\nclass Cfg:\n    def __init__(self):\n        self.block = 128\n"), "python"),
    ("module-constants", py("b = _BLOCKS[0] * 2", "import torch\n_BLOCKS = (128, 256)\n"), "python"),
    ("no-grad-decorator", "import torch\n\n@torch.no_grad()\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n", "python"),
    ("data-ptr-as-arg", tri("n = hidden_states.data_ptr() % 16"), "triton"),
    ("tma-descriptor", tri("d = TensorDescriptor.from_tensor(hidden_states, [1, 256])\nrows = d.shape[0] // 2",
                           "from triton.tools.tensor_descriptor import TensorDescriptor\n"), "triton"),
    ("math", tri("b = int(math.sqrt(16))", "import math\n"), "triton"),
    # a display's other elements, slices of it, and names bound more than once are not the tensor it holds
    ("display-elements", tri("""
        blk = (hidden_states, 64)[1] * 2
        cfg = {"x": hidden_states, "BLOCK": 128}
        nb = {"x": hidden_states, "BLOCK": 128}["BLOCK"] // 2 + cfg["BLOCK"]
        pair = (hidden_states, weight.shape[0])
        n2 = pair[1] * 2 + (hidden_states.shape[0], 4)[0] * 2
        sizes = [4096, 2048]
        i = 1
        half = sizes[i] // 2 + (128, 256)[i] * 2
        twice = [hidden_states][0:1] * 2
        t = (hidden_states,)
        t = (4,)
        k = t[0] * 2
        extra = [2, 3]
        lead = (4096, *extra, hidden_states)[0] * 2
        cfg = (out, 4)
        def helper(n: torch.Tensor):
            return cfg[1] * 2
    """), "triton"),
    # device queries answer with host numbers: a launch choice made from them is not tensor arithmetic
    ("device-capability", tri("""
        major, minor = torch.cuda.get_device_capability()
        cap = torch.cuda.get_device_capability(hidden_states.device)
        block = 128 if major >= 9 and cap[0] * 10 + minor >= 90 else 64
        sms = torch.cuda.get_device_properties(0).multi_processor_count * 2 + torch.cuda.device_count() * 0
        eps = torch.finfo(torch.float32).eps * 4
    """), "triton"),
    ("docstring-mentions-dunder", '"""Kernel notes: avoids __dict__ lookups and f_back walks."""\nimport torch\n\n\ndef run(hidden_states, weight):\n    """No __globals__ here either."""\n    return hidden_states.clone()\n', "python"),
]


@pytest.mark.parametrize("code,language", [c[1:] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_honest_pattern_is_clean(scan, code, language):
    if language == "python" and "output" in code:
        got = scan(code.replace("def run(hidden_states, weight)", "def run(hidden_states, weight, output)"), language, dps=True)
    else:
        got = scan(code, language)
    assert got == set()


# ---- kernel launch reachability
def test_triton_without_kernel(scan):
    assert "no-kernel-launch" in scan("import torch\n\ndef run(hidden_states, weight):\n    return torch.empty_like(hidden_states)\n")


def test_triton_kernel_never_launched(scan):
    code = HEAD + "\n\ndef run(hidden_states, weight):\n    return torch.empty_like(hidden_states)\n"
    assert "no-kernel-launch" in scan(code)


def test_triton_launch_in_unreached_helper(scan):
    code = HEAD + "\n\ndef _unused(x, y):\n    _k[(1,)](x, y, 1, BLOCK=16)\n\n\ndef run(hidden_states, weight):\n    return torch.empty_like(hidden_states)\n"
    assert "no-kernel-launch" in scan(code)


def test_triton_launch_through_helpers_and_files(scan):
    helper = HEAD + "\n\ndef launch(x, y):\n    _k[(1,)](x, y, 1, BLOCK=16)\n"
    main = "import torch\nfrom kern import launch\n\n\ndef _go(x, y):\n    launch(x, y)\n\n\ndef run(hidden_states, weight):\n    out = torch.empty_like(hidden_states)\n    _go(hidden_states, out)\n    return out\n"
    assert scan(main, extra={"kern.py": helper}) == set()


def test_triton_launch_autotuned_and_run_method(scan):
    code = HEAD.replace("@triton.jit", "@triton.autotune(configs=[triton.Config({})], key=['n'])\n@triton.jit") + (
        "\n\ndef run(hidden_states, weight):\n    out = torch.empty_like(hidden_states)\n"
        "    _k.run(hidden_states, out, 1, BLOCK=16, grid=(1,), warmup=False)\n    return out\n")
    assert scan(code) == set()


def test_triton_launch_through_a_class(scan):
    code = HEAD + (
        "\n\nclass _Launcher:\n    def __init__(self, block):\n        self.block = block\n\n"
        "    def go(self, x, y):\n        _k[(1,)](x, y, 1, BLOCK=self.block)\n\n\n"
        "def run(hidden_states, weight):\n    out = torch.empty_like(hidden_states)\n"
        "    _Launcher(16).go(hidden_states, out)\n    return out\n")
    assert scan(code) == set()


def test_triton_entry_missing(scan):
    code = HEAD + "\n\ndef other(hidden_states, weight):\n    pass\n"
    assert "no-kernel-launch" in scan(code)


def test_jit_called_as_function(scan):
    code = ("import torch\nimport triton\nimport triton.language as tl\n\n"
            "def _body(x_ptr, BLOCK: tl.constexpr):\n    pass\n\n_k = triton.jit(_body)\n\n"
            "def run(hidden_states, weight):\n    _k[(1,)](hidden_states, BLOCK=16)\n    return torch.empty_like(hidden_states)\n")
    assert "no-kernel-launch" not in scan(code)


# ---- misc
def test_shadowing_module_file(scan):
    got = scan("import torch\n\ndef run(hidden_states, weight):\n    return hidden_states.clone()\n", "python",
               extra={"torch.py": "x = 1\n"})
    assert "monkey-patch" in got


def test_finding_fields(rmsnorm_def):
    sol = make_solution(py("torch.cuda.synchronize = None"), "python")
    fs = check_solution(sol, rmsnorm_def)
    assert fs and all(isinstance(f, Finding) for f in fs)
    f = next(f for f in fs if f.rule == "monkey-patch")
    assert f.file == "main.py" and sol.sources[0].content.splitlines()[f.line - 1].strip() == "torch.cuda.synchronize = None"
    assert f.severity == "error"
    assert "torch.cuda.synchronize" in f.message and len(f.why) > 20


def test_findings_deterministic(rmsnorm_def):
    sol = make_solution(tri("y = hidden_states @ weight\ns = torch.cuda.Stream()", "import os\n"))
    a = [f.model_dump() for f in check_solution(sol, rmsnorm_def)]
    b = [f.model_dump() for f in check_solution(sol, rmsnorm_def)]
    assert a == b and len(a) >= 3


def test_definition_mismatch_is_an_error(rmsnorm_def):
    sol = make_solution(tri()).model_copy(update={"definition": "gemm_n4096_k4096"})
    with pytest.raises(ValueError, match="not 'rmsnorm_h4096'"):
        check_solution(sol, rmsnorm_def)


def test_without_definition_entry_params_are_tensors():
    sol = make_solution(tri("y = hidden_states * 2"))
    assert "host-compute" in {f.rule for f in check_solution(sol, None)}


# ---- cuda sources (lexical)
CUDA_OK = r'''
#include <torch/extension.h>
// std::system("this is a comment and must not count");
/* cudaStreamCreate(&s); also a comment */
__global__ void rms_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, int n) {
    asm volatile("" ::: "memory");
}
torch::Tensor run(torch::Tensor x, torch::Tensor w) {
    auto y = torch::empty_like(x);
    rms_kernel<<<x.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(nullptr, nullptr, 0);
    return y;
}
'''

CUDA_PY = ("import torch\nfrom torch.utils.cpp_extension import load\n\n_m = None\n\n"
           "def run(hidden_states, weight):\n    return _m.run(hidden_states, weight)\n")


def cuda_scan(scan, native: str) -> set[str]:
    return scan(CUDA_PY, "cuda", extra={"kernel.cu": native})


def test_cuda_honest_is_clean(scan):
    assert cuda_scan(scan, CUDA_OK) == set()


@pytest.mark.parametrize("line,rule", [
    ('std::system("ls");', "process"),
    ('FILE* p = popen("ls", "r");', "process"),
    ("pid_t p = fork();", "process"),
    ('void* h = dlopen("libx.so", 0);', "ffi"),
    ('FILE* f = fopen("/tmp/x", "r");', "file-io"),
    ("std::ifstream in(path);", "file-io"),
    ('const char* e = getenv("X");', "environment"),
    ("std::thread t(work);", "thread"),
    ("cudaStream_t s; cudaStreamCreate(&s);", "side-stream"),
    ("cudaEvent_t e; cudaEventCreate(&e);", "side-stream"),
    ("cublasSgemm(h, a, b);", "library-fallback"),
    ("cudnnConvolutionForward(h);", "library-fallback"),
    ("auto z = at::matmul(x, w);", "library-fallback"),
    ("auto z = x.mean(-1);", "library-fallback"),
    ("exit(0);", "process-exit"),
    ("static torch::Tensor cached;", "output-cache"),
    ("int s = socket(AF_INET, SOCK_STREAM, 0);", "network"),
    ("#include <sys/socket.h>", "network"),
])
def test_cuda_native_rule(scan, line, rule):
    src = CUDA_OK.replace("    return y;", f"    {line}\n    return y;")
    assert rule in cuda_scan(scan, src)


def test_cuda_printing_is_not_refused(scan):
    """Output is captured and capped by the harness: printing from host or device code is harmless."""
    src = CUDA_OK.replace("    return y;", '    printf("%d\\n", 1);\n    std::cerr << "x";\n    return y;')
    assert cuda_scan(scan, src) == set()


def test_cuda_std_bind_is_not_network(scan):
    src = CUDA_OK.replace("    return y;", "    auto f = std::bind(g, 1);\n    return y;")
    assert cuda_scan(scan, src) == set()


def test_cuda_without_global_kernel(scan):
    assert "no-kernel-launch" in cuda_scan(scan, "torch::Tensor run(torch::Tensor x) { return x; }\n")


def test_cuda_native_line_numbers(rmsnorm_def):
    src = CUDA_OK.replace("    return y;", '    std::system("x");\n    return y;')
    sol = make_solution(CUDA_PY, "cuda", extra={"kernel.cu": src})
    f = next(f for f in check_solution(sol, rmsnorm_def) if f.rule == "process")
    assert f.file == "kernel.cu" and src.splitlines()[f.line - 1].strip().startswith("std::system")


# ---- evasions found in review
EVASIONS = [
    ("tensor-class-method", tri("y = torch.Tensor.sum(hidden_states)"), "triton", "host-compute"),
    ("tensor-class-dunder", tri("y = torch.Tensor.__matmul__(hidden_states, weight)"), "triton", "host-compute"),
    ("type-of-tensor", tri("y = type(hidden_states).hardtanh(hidden_states)"), "triton", "host-compute"),
    ("patch-through-parameter", py("_patch(torch)", "import torch\ndef _patch(m):\n    m.allclose = len\n"), "python", "monkey-patch"),
    ("patch-through-loop", py("for m in [torch]:\n    m.allclose = len"), "python", "monkey-patch"),
    ("list-of-fns", tri("fs = [torch.matmul]\ny = fs[0](hidden_states, weight)"), "triton", "host-compute"),
    ("default-arg-fn", HEAD + "\n\ndef run(hidden_states, weight, mm=torch.matmul):\n    out = torch.empty_like(hidden_states)\n    _k[(1,)](hidden_states, out, 1, BLOCK=16)\n    return mm(out, weight)\n", "triton", "host-compute"),
    ("class-attr-fn", tri("y = _Ops.mm(hidden_states, weight)", "import torch\nclass _Ops:\n    mm = torch.matmul\n"), "triton", "host-compute"),
    ("del-attr", py("del torch.allclose"), "python", "monkey-patch"),
    ("builtins-dict", py("e = len.__self__.__dict__['eval']"), "python", "introspection"),
    ("import-inside-function", py("import threading\nthreading.Thread(target=len).start()"), "python", "thread"),
    ("walrus-alias", tri("if (f := torch.rsqrt):\n    y = f(hidden_states)"), "triton", "host-compute"),
    ("helper-arith", tri("y = _add(hidden_states, weight)", "def _add(a, b):\n    return a + b\n"), "triton", "host-compute"),
    ("helper-arith-kw", tri("y = _scale(b=weight, a=hidden_states)", "def _scale(a, b):\n    return a * b\n"), "triton", "host-compute"),
    ("helper-chain", tri("y = _outer(hidden_states)", "def _inner(t):\n    return -t\ndef _outer(t):\n    return _inner(t)\n"), "triton", "host-compute"),
    ("lambda-arith", tri("y = _g(hidden_states)", "_g = lambda a: a * 2\n"), "triton", "host-compute"),
    ("builtin-sum", tri("y = sum([hidden_states, weight])"), "triton", "host-compute"),
    ("builtin-abs", tri("y = abs(hidden_states)"), "triton", "host-compute"),
    ("module-through-torch", py("torch.os.system('ls')"), "python", "process"),
    ("environ-through-torch", py("e = torch.nn.modules.os.environ"), "python", "environment"),
    ("sys-through-numpy", py("m = numpy.sys.modules", "import torch\nimport numpy\n"), "python", "introspection"),
    ("attrgetter", py("g = operator.attrgetter('allclose')(torch)", "import torch\nimport operator\n"), "python", "dynamic-attr"),
    ("format-gadget", py("s = '{0.__globals__}'.format(run)"), "python", "introspection"),
    ("getattribute-string", py("f = object.__getattribute__(run, '__code__')"), "python", "introspection"),
    ("profiler", py("p = torch.profiler.profile()"), "python", "introspection"),
    ("method-arith", tri("y = _Ops().add(hidden_states, weight)", "class _Ops:\n    def add(self, a, b):\n        return a + b\n"), "triton", "host-compute"),
    ("self-method-arith", tri("y = _Ops().outer(hidden_states)", "class _Ops:\n    def outer(self, a):\n        return self.inner(a)\n    def inner(self, t):\n        return t * 2\n"), "triton", "host-compute"),
    ("self-named-param", py("_patch(torch)", "import torch\ndef _patch(self):\n    self.allclose = len\n"), "python", "monkey-patch"),
    ("helper-mutates-input", py("_scale(hidden_states)", "import torch\ndef _scale(t):\n    t.mul_(2)\n"), "python", "input-mutation"),
]


@pytest.mark.parametrize("code,language,rule", [c[1:] for c in EVASIONS], ids=[c[0] for c in EVASIONS])
def test_evasion_is_caught(scan, code, language, rule):
    got = scan(code, language)
    assert rule in got, f"expected {rule}, got {sorted(got)}"


# ---- sources built to break the guard itself
def test_deep_nesting_is_refused_not_crashing(rmsnorm_def):
    deep = "import torch\n\ndef run(hidden_states, weight):\n    return " + "-" * 600 + "hidden_states\n"
    sol = make_solution(deep, "python")
    assert {f.rule for f in check_solution(sol, rmsnorm_def)} == {"parse-error"}


def test_huge_source_is_refused(rmsnorm_def):
    big = "import torch\n\n" + "# pad\n" * 200_000 + "def run(hidden_states, weight):\n    return hidden_states.clone()\n"
    assert {f.rule for f in check_solution(make_solution(big, "python"), rmsnorm_def)} == {"parse-error"}


def test_guard_failure_fails_closed(rmsnorm_def, monkeypatch):
    from harness.guard import pyscan

    def boom(self, node):
        raise KeyError("simulated guard bug")

    monkeypatch.setattr(pyscan.ModuleScan, "visit_Call", boom)
    fs = check_solution(make_solution(tri()), rmsnorm_def)
    assert [f.rule for f in fs] == ["guard-error"] and "simulated guard bug" in fs[0].message


def test_every_static_rule_has_a_unit_case():
    import yaml

    from harness.guard.policy import DEFAULT_POLICY_DIR

    static_rules = set(yaml.safe_load((DEFAULT_POLICY_DIR / "rules.yaml").read_text())["static"])
    covered = {c[3] for c in CASES + EVASIONS}
    covered |= {"parse-error", "guard-error", "no-kernel-launch", "library-fallback"}  # dedicated tests above
    assert static_rules - covered == set(), f"rules without a unit case: {sorted(static_rules - covered)}"


def test_indexing_displays_cannot_make_the_scan_slow():
    """Nested tuples indexed at run time and read from many scopes: the element typing is memoized per scope
    and counted, so a crafted source is refused as too complex (or passes) in seconds, not hours."""
    import time

    lines = ["    i = 0", "    t0 = (hidden_states, " + ", ".join(["1"] * 63) + ")"]
    for k in range(1, 40):
        lines.append(f"    t{k} = (" + ", ".join([f"t{k - 1}[i]"] * 64) + ")")
    lines += [f"    f{j} = lambda: t39[i] * 2" for j in range(400)]
    lines += [f"    a{j} = hidden_states\n    b{j} = t39[i]" for j in range(400)]
    code = HEAD + "\n\ndef run(hidden_states, weight):\n    out = torch.empty_like(hidden_states)\n" + "\n".join(lines) + "\n    return out\n"
    t0 = time.monotonic()
    findings = check_solution(make_solution(code))
    assert time.monotonic() - t0 < 30
    assert {f.rule for f in findings} & {"parse-error", "host-compute"}
