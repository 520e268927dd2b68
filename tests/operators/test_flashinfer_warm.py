"""scripts/gpu/flashinfer_warm.py without a GPU or FlashInfer: a stand-in for FlashInfer's JIT specs and its
AOT folder. Each module is installed (and exported) as soon as its own build ends, a failing or slow one does
not cost the others, only the named modules' libraries are copied (not whatever else sits in the JIT cache),
and the rows reach --json as they happen."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import types

import pytest

from opkit import REPO


@pytest.fixture
def warm(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("flashinfer_warm", REPO / "scripts/gpu/flashinfer_warm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jit_dir, aot_dir = tmp_path / "cached_ops", tmp_path / "pkg" / "data" / "aot"
    env = types.SimpleNamespace(FLASHINFER_JIT_DIR=jit_dir, FLASHINFER_AOT_DIR=aot_dir)
    fi, fi_jit = types.ModuleType("flashinfer"), types.ModuleType("flashinfer.jit")
    fi_jit.env = env
    fi.jit = fi_jit
    monkeypatch.setitem(sys.modules, "flashinfer", fi)
    monkeypatch.setitem(sys.modules, "flashinfer.jit", fi_jit)
    (jit_dir / "stranger").mkdir(parents=True)
    (jit_dir / "stranger" / "stranger.so").write_bytes(b"not ours")  # something else in the cache
    gate = threading.Event()

    class Spec:
        def __init__(self, name, fails=False, waits=False):
            self.name, self.fails, self.waits = name, fails, waits
            self.jit_library_path = jit_dir / name / f"{name}.so"

        def build(self):
            if self.waits:
                assert gate.wait(10), "the other module was not installed while this one was still building"
            if self.fails:
                raise RuntimeError("nvcc: error")
            self.jit_library_path.parent.mkdir(parents=True, exist_ok=True)
            self.jit_library_path.write_bytes(self.name.encode())

    specs = {"fast": lambda: Spec("fast_module"), "slow": lambda: Spec("slow_module", waits=True),
             "broken": lambda: Spec("broken_module", fails=True)}
    monkeypatch.setattr(mod, "prebuild_specs", lambda: specs)
    real_install = mod.install

    def install(name, export):
        where = real_install(name, export)
        if name == "fast":
            gate.set()  # the slow build may finish only after the fast one was installed
        return where

    monkeypatch.setattr(mod, "install", install)
    return mod, aot_dir


def test_each_module_is_installed_when_its_build_ends(warm, tmp_path):
    mod, aot = warm
    rows = []
    said = mod.prebuild(["fast", "slow", "broken"], tmp_path / "export", rows.append)
    assert (aot / "fast_module" / "fast_module.so").read_bytes() == b"fast_module"
    assert (aot / "slow_module" / "slow_module.so").read_bytes() == b"slow_module"
    assert not (aot / "broken_module").exists() and "failed" in said["broken"] and "nvcc: error" in said["broken"]
    assert not (aot / "stranger").exists()  # only the named modules' own libraries
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["fast_module.so", "slow_module.so"]
    assert [r["prebuild"] for r in rows][0] in ("fast", "broken")  # rows as they finish, the slow one after the fast


def test_an_unbuilt_module_is_not_installed(warm):
    mod, aot = warm
    with pytest.raises(FileNotFoundError, match="not built"):
        mod.install("broken", None)
    assert not aot.exists() or not any(aot.iterdir())


def test_main_writes_rows_as_it_goes_and_refuses_unknown_modules(warm, tmp_path, monkeypatch, capsys):
    mod, aot = warm
    monkeypatch.setattr(mod, "declared", lambda name: [])  # no baselines: only the builds
    out = tmp_path / "warm.json"
    assert mod.main(["--definition", "x", "--prebuild", "fast", "slow", "--json", str(out)]) == 1  # no baseline ran
    rows = json.loads(out.read_text())["rows"]
    assert {r.get("prebuild") for r in rows} >= {"fast", "slow"}
    assert any(r.get("install") == "broken" and "not installed" in r["result"] for r in rows)
    with pytest.raises(SystemExit):
        mod.main(["--prebuild", "nosuch"])
    assert "unknown module" in capsys.readouterr().err
