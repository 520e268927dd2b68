"""The static guard judges file and process capabilities by what a call can do, and stays quiet on
harmless honest code: the calls issue 14 found unflagged (and their aliases), paths built from string
pieces, ``__file__`` used to find the run; printing, stderr writes, and lengths read with
``.item()``/``.tolist()`` to slice, which are not output caches."""

from __future__ import annotations

import textwrap

import pytest

from test_guard_static import py, tri

# (id, code, language, rule that must be raised)
HOSTILE = [
    # ---- the calls issue 14 found unflagged, spelled directly
    ("numpy-savetxt", py("np.savetxt('x.txt', hidden_states.float().numpy())", "import torch\nimport numpy as np\n"), "python", "file-io"),
    ("numpy-savez-compressed", py("np.savez_compressed('x', a=hidden_states.float().numpy())", "import torch\nimport numpy as np\n"), "python", "file-io"),
    ("ndarray-dump", py("hidden_states.float().numpy().dump('x.pkl')"), "python", "file-io"),
    ("untyped-storage-from-file", py("s = torch.UntypedStorage.from_file('traces.json' + 'l', False, 10)"), "python", "file-io"),
    ("byte-storage-from-file", py("s = torch.ByteStorage.from_file('x', False, 10)"), "python", "file-io"),
    ("onnx-export", py("torch.onnx.export(None, (hidden_states,), 'x.onnx')"), "python", "file-io"),
    ("export-save", py("torch.export.save(None, 'x.pt2')"), "python", "file-io"),
    ("memory-dump-snapshot", py("torch.cuda.memory._dump_snapshot('x.pickle')"), "python", "file-io"),
    # ---- and through aliases: the capability, not the spelling
    ("savetxt-from-import", py("st('x', hidden_states.float().numpy())", "import torch\nfrom numpy import savetxt as st\n"), "python", "file-io"),
    ("savez-module-alias", py("f = n.savez_compressed\nf('x', a=1)", "import torch\nimport numpy as n\n"), "python", "file-io"),
    ("storage-class-alias", py("S = torch.UntypedStorage\ns = S.from_file('x', False, 10)"), "python", "file-io"),
    ("storage-getattr", py("s = getattr(torch, 'ByteStorage').from_file('x', False, 1)"), "python", "file-io"),
    ("typed-storage-from-file", py("s = torch.TypedStorage.from_file('x', False, 1)"), "python", "file-io"),
    ("dump-through-a-variable", py("a = hidden_states.float().numpy()\nm = a.dump\nm('x')"), "python", "file-io"),
    ("tofile", py("hidden_states.float().numpy().tofile('x')"), "python", "file-io"),
    ("onnx-module-alias", py("ox.export(None, (), 'x')", "import torch\nimport torch.onnx as ox\n"), "python", "file-io"),
    ("export-from-import", py("save(None, 'x')", "import torch\nfrom torch.export import save\n"), "python", "file-io"),
    ("snapshot-getattr", py("getattr(torch.cuda.memory, '_dump_snapshot')('x')"), "python", "file-io"),
    ("snapshot-module-alias", py("mem._dump_snapshot('x')", "import torch\nimport torch.cuda.memory as mem\n"), "python", "file-io"),
    ("numpy-lib-npyio", py("np.lib.npyio.savetxt('x', [1])", "import torch\nimport numpy as np\n"), "python", "file-io"),
    ("numpy-fromregex", py("np.fromregex('x', 'a', [('a', 'i4')])", "import torch\nimport numpy as np\n"), "python", "file-io"),
    ("numpy-ma-dump", py("np.ma.dump(np.ma.array([1]), 'x')", "import torch\nimport numpy as np\n"), "python", "file-io"),
    ("torch-utils-data", py("pass", "import torch\nfrom torch.utils.data import DataLoader\n"), "python", "file-io"),
    ("torch-utils-file-baton", py("torch.utils.file_baton.FileBaton('x').try_acquire()"), "python", "file-io"),
    ("cupy-save", py("cupy.save('x', cupy.zeros(1))", "import torch\nimport cupy\n"), "python", "file-io"),
    # ---- paths and names built from string pieces
    ("traces-from-pieces", py("p = 'tra' + 'ces' + '.jsonl'"), "python", "reference-access"),
    ("report-fstring-constant", py("p = f'{\"rep\"}ort.json'"), "python", "reference-access"),
    ("join-of-pieces", py("p = ''.join(['rep', 'ort', '.json'])"), "python", "reference-access"),
    ("chr-built", py("p = chr(116) + 'races.jsonl'"), "python", "reference-access"),
    ("kbot-report-key", py("d = {'kbot_' + 'report': 1}"), "python", "reference-access"),
    ("proc-path", py("p = '/pr' + 'oc/self/environ'"), "python", "reference-access"),
    ("percent-format", py("p = '%s.jsonl' % 'traces'"), "python", "reference-access"),
    # ---- reading __file__ (or a module's) to find the run folder
    ("dunder-file", py("here = __file__"), "python", "reference-access"),
    ("module-dunder-file", py("where = torch.__file__"), "python", "reference-access"),
    ("code-filename", py("f = run.__code__.co_filename"), "python", "introspection"),
    ("spec-origin", py("o = __spec__"), "python", "dynamic-code"),
    # ---- sys beyond stdout/stderr
    ("sys-argv", py("a = sys.argv", "import sys\n"), "python", "introspection"),
    ("sys-audit-hook", py("sys.addaudithook(len)", "import sys\n"), "python", "introspection"),
    ("sys-as-value", py("m = sys\nx = m.modules", "import sys\n"), "python", "introspection"),
    ("sys-to-helper", py("_h(sys)", "import sys\ndef _h(m):\n    return m\n"), "python", "introspection"),
    ("stdout-replaced", py("sys.stdout = None", "import sys\n"), "python", "monkey-patch"),
    # ---- an output cache in persistent state is still one, whatever the key is spelled with
    ("item-key-module-dict", py("v = _c.get(hidden_states[0, 0].item())", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("tolist-key-in-module", py("if tuple(hidden_states[0, :4].tolist()) in _c:\n    pass", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("int-key-module-dict", py("v = _c.get(int(hidden_states[0, 0]))", "import torch\n_c = {}\n"), "python", "output-cache"),
    ("item-key-closure", "import torch\n\n\ndef _make():\n    c = {}\n\n    def f(x):\n        return c.get(x[0].item())\n    return f\n\n\n_f = _make()\n\n\ndef run(hidden_states, weight):\n    _f(hidden_states)\n    return hidden_states.clone()\n", "python", "output-cache"),
    ("item-key-self-attr", py("pass", "import torch\nclass C:\n    def __init__(self):\n        self.c = {}\n    def get(self, x):\n        return self.c.get(x.sum().item())\n"), "python", "output-cache"),
    ("ptr-compare-persistent", py("if hidden_states.data_ptr() == _last[0]:\n    pass", "import torch\n_last = [0]\n"), "python", "output-cache"),
    ("mutable-default-cache", "import torch\n\n\ndef run(hidden_states, weight, _c={}):\n    k = hidden_states.data_ptr()\n    if k in _c:\n        return _c[k]\n    _c[k] = hidden_states.clone()\n    return _c[k]\n", "python", "output-cache"),
]


@pytest.mark.parametrize("code,language,rule", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_capability_is_refused(scan, code, language, rule):
    got = scan(code, language)
    assert rule in got, f"expected {rule}, got {sorted(got)}"


# Honest code that must pass: harmless output, variable-length slicing, alignment and aliasing checks.
HONEST = [
    ("print", py("print('rows', hidden_states.shape[0])"), "python"),
    ("print-stderr", py("print('note', file=sys.stderr)", "import torch\nimport sys\n"), "python"),
    ("stderr-write", py("sys.stderr.write('x\\n')\nsys.stdout.write('y\\n')\nsys.stdout.flush()", "import torch\nimport sys\n"), "python"),
    ("from-sys-import-stderr", py("print('x', file=stderr)", "import torch\nfrom sys import stderr\n"), "python"),
    ("sys-maxsize", py("m = sys.maxsize", "import torch\nimport sys\n"), "python"),
    ("triton-print", tri("print('launching')"), "triton"),
    ("device-print", tri("", "").replace("tl.store(y_ptr", "tl.device_print('x', i)\n    tl.store(y_ptr"), "triton"),
    ("item-length-slice", py("n = int(hidden_states.shape[0])\nlens = torch.tensor([1, 2])\nk = lens[0].item()\ny = hidden_states[:k]\nz = hidden_states[lens[1].item():]"), "python"),
    ("tolist-lengths-loop", py("lens = torch.tensor([1, 1])\nstart = 0\nfor n in lens.tolist():\n    seg = hidden_states[start:start + n]\n    start += n"), "python"),
    ("item-index-local", py("i = weight.argmax().item()\nw = weight[i]\nrow = hidden_states[int(weight[0].item()) % 2]"), "python"),
    ("item-in-local-dict", py("d = {}\nd[weight[0].item()] = 1\nv = d.get(weight[1].item())"), "python"),
    ("item-in-tuple", py("if weight[0].item() in (0.0, 1.0):\n    pass"), "python"),
    ("item-compare-constant", py("if hidden_states.abs().max().item() == 0.0:\n    pass"), "python"),
    ("data-ptr-alignment", tri("if hidden_states.data_ptr() % 16 == 0:\n    pass"), "triton"),
    ("data-ptr-aliasing", py("if hidden_states.data_ptr() == weight.data_ptr():\n    pass"), "python"),
    ("official-style-prefill", py(textwrap.dedent("""
        cu = torch.tensor([0, 1, 2])
        for b in range(cu.numel() - 1):
            s = int(cu[b].item())
            e = int(cu[b + 1].item())
            if e <= s:
                continue
            seg = hidden_states[s:e]
    """)), "python"),
    ("clone-then-write", py("new = hidden_states.clone()\nnew[0] = 0\nw = weight.float().clone()\nw[0] = 1"), "python"),
]


@pytest.mark.parametrize("code,language", [c[1:] for c in HONEST], ids=[c[0] for c in HONEST])
def test_honest_code_passes(scan, code, language):
    assert scan(code, language) == set()
