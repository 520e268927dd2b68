"""The device scripts can only run on the H200, but what can be checked here is: they parse, the
record.sh steps name scripts that exist, and the CUPTI record parser reads the kernel-record prefix."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "scripts" / "gpu"


def test_every_device_script_parses():
    for p in sorted(GPU.glob("*.py")):
        ast.parse(p.read_text(), filename=str(p))


def test_every_record_step_runs_a_script_that_exists():
    text = (GPU / "record.sh").read_text()
    steps = re.findall(r"^step_(\w+)\(\)", text, flags=re.M)
    assert {"harness", "guard", "observer_cost", "launch_floor", "many", "cupti_timing"} <= set(steps)
    for script in re.findall(r"scripts/gpu/([\w.]+\.(?:py|sh))", text):
        assert (GPU / script).exists(), script
    assert subprocess.run(["bash", "-n", str(GPU / "record.sh")]).returncode == 0


def test_cupti_kernel_record_prefix_parser():
    r = subprocess.run([sys.executable, str(GPU / "cupti_timing.py"), "--selftest"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "selftest ok" in r.stdout, r.stderr


def test_multi_gpu_round_verdicts():
    """scripts/gpu/multi_gpu_round.py's pass/fail rules (time within the slack on distinct GPUs, the same
    decisions in the same order) on made-up figures; the script itself needs several GPUs."""
    r = subprocess.run([sys.executable, str(GPU / "multi_gpu_round.py"), "--selftest"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "selftest ok" in r.stdout, r.stderr


def test_the_baselines_table_says_why_a_baseline_could_not_run(tmp_path):
    """scripts/gpu/baselines.py on the CPU, for one baseline whose library is absent here: the row says
    "could not run here" with the reason, the run exits 0 (said, not failed), three files under $OUT."""
    import os
    from importlib import metadata

    try:
        metadata.version("fla-core")
        pytest.skip("fla-core is installed here: nothing to check about its absence")
    except metadata.PackageNotFoundError:
        pass

    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(GPU / "baselines.py"), "--device", "cpu", "--definitions", "gdn_decode_qk4_v8_d128_k_last",
                        "--only", "fla_fused_recurrent", "--no-champions"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    md = (tmp_path / "out" / "baselines.md").read_text()
    assert "| gdn_decode_qk4_v8_d128_k_last | fla_fused_recurrent | baseline | could not run here: fla-core is not installed" in md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["baselines.json", "baselines.md", "reports.tar.gz"]


def seed_kernels(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GPU / "seed_kernels.py"), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


@pytest.mark.slow
def test_seed_kernels_runs_variants_and_the_champion_on_the_cpu(tmp_path):
    """scripts/gpu/seed_kernels.py's path without a GPU (Triton's interpreter): the definition's own inputs, the
    seed's variants through the offline agent's rewriting and the champion on main, each checked against the
    reference before it would be profiled."""
    out = tmp_path / "k.json"
    p = seed_kernels("indexer", "--workloads-file", "workloads.small.jsonl", "--workload", "1", "--device", "cpu",
                     "--variant", "default=", "--variant", 'separate={"CHAIN_SELECT": false}', "--champion", "--json", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["variant"], r["ok"]) for r in rows] == [("default", True), ("separate", True), ("champion", True)], rows


@pytest.mark.parametrize("args, says", [
    (["nonesuch"], "no definition"),
    (["indexer", "--variant", "x"], "wants NAME=JSON"),
    (["indexer", "--variant", "x={"], "not JSON"),
    (["indexer", "--variant", 'x={"NO_SUCH_TUNABLE": 1}'], "variant x"),
    (["indexer", "--workload", "999", "--workloads-file", "workloads.small.jsonl"], "out of range"),
    (["indexer", "--calls", "0"], "must be at least 1"),
])
def test_seed_kernels_refuses_bad_arguments(args, says):
    p = seed_kernels(*args, "--device", "cpu", timeout=120)
    assert p.returncode == 2 and says in p.stderr, (p.returncode, p.stderr[-800:])


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def _repo(root: Path, files: dict[str, str], gitlinks: dict[str, str] | None = None) -> tuple[Path, str]:
    root.mkdir()
    _git(root, "init", "-q")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "add", ".")
    for path, sha in (gitlinks or {}).items():  # submodule entries, as DeepGEMM's third-party/ holds them
        _git(root, "update-index", "--add", "--cacheinfo", f"160000,{sha},{path}")
    _git(root, "commit", "-qm", "x")
    return root, _git(root, "rev-parse", "HEAD")


def test_pack_deepgemm_takes_the_submodule_commits_from_deepgemms_tree(tmp_path, monkeypatch):
    """The archive holds DeepGEMM's package and csrc at its pinned commit and the CUTLASS / {fmt} headers at
    the commits DeepGEMM's own gitlinks name (not whatever the clones' HEADs are), laid out as the device's
    build expects; a clone that lacks a pinned commit is a clear exit 2."""
    sys.path.insert(0, str(GPU))
    import pack_deepgemm

    cut, cut_old = _repo(tmp_path / "cutlass", {"include/cute/a.hpp": "old cute", "include/cutlass/b.h": "old", "docs/x.md": "no"})
    (cut / "include" / "cute" / "a.hpp").write_text("new cute")
    _git(cut, "commit", "-qam", "newer")  # the clone's HEAD moves past the pin
    fmt, fmt_sha = _repo(tmp_path / "fmt", {"include/fmt/core.h": "fmt", "src/os.cc": "no"})
    dg, dg_sha = _repo(tmp_path / "dg", {"deep_gemm/__init__.py": "x = 1", "deep_gemm/include/deep_gemm/k.cuh": "k",
                                         "csrc/python_api.cpp": "api", "LICENSE": "MIT", "tests/t.py": "no"},
                       {"third-party/cutlass": cut_old, "third-party/fmt": fmt_sha})
    monkeypatch.setattr(pack_deepgemm, "DEEPGEMM_COMMIT", dg_sha)
    out = tmp_path / "out"
    rc = pack_deepgemm.main(["--deepgemm-git", str(dg), "--cutlass-git", str(cut), "--fmt-git", str(fmt), "--out", str(out)])
    assert rc == 0
    import lzma
    import tarfile
    (archive,) = out.glob("deepgemm-*.tar.xz")
    with lzma.open(archive) as xz, tarfile.open(fileobj=xz) as tar:
        got = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}
    assert got["deep_gemm/include/cute/a.hpp"] == "old cute"  # the pinned commit, not the clone's HEAD
    assert {"deep_gemm/__init__.py", "deep_gemm/include/deep_gemm/k.cuh", "deep_gemm/include/cutlass/b.h",
            "deep_gemm/include/cute/a.hpp", "csrc/python_api.cpp", "fmt/include/fmt/core.h", "LICENSE", "PINS"} == set(got)
    assert got["PINS"].split() == ["deepgemm", dg_sha, "cutlass", cut_old, "fmt", fmt_sha]

    _, other = _repo(tmp_path / "fmt2", {"include/fmt/core.h": "other"})
    rc = pack_deepgemm.main(["--deepgemm-git", str(dg), "--cutlass-git", str(cut), "--fmt-git", str(tmp_path / "fmt2"),
                             "--out", str(out)])
    assert rc == 2
