"""scripts/gpu/dev_round.sh: one device call's sweep, pick and submission, driven here with a stand-in for the
GPU sweep (the pick and the candidate writing are the real scripts; NO_SUBMIT stops before the forge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

from opkit import PREFILL, REPO

STAND_IN = r'''
import json, os, subprocess, sys
args = sys.argv[1:]
if args and args[0].endswith("gdn_dev.py"):
    open(os.path.join(os.environ["OUT"], "argv.json"), "w").write(json.dumps(args))
    d = "gdn_prefill_qk4_v8_d128_k_last"
    rows = [{"definition": d, "workload": w, "variant": v, "status": "PASSED", "gpu_us": t}
            for v, times in {"default": (10.0, 21.0), "champion": (10.0, 20.0), "REC_PARALLEL_O=False": (7.0, 20.0),
                             "REC_WARPS=2": (10.0, 25.0), "REC_BV=8": (9.8, 20.5)}.items() for w, t in zip("ab", times)]
    open(os.path.join(os.environ["OUT"], "gdn_dev.json"), "w").write(json.dumps(rows))
    print("table")
    sys.exit(0)
sys.exit(subprocess.call([sys.executable, *args]))
'''


def test_a_gdn_round_sweeps_the_named_tunables_and_picks_the_best_variant(tmp_path):
    stub = tmp_path / "py"
    stub.write_text(f"#!{sys.executable}\n{STAND_IN}")
    stub.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": str(stub), "NO_SUBMIT": "1", "GDN_TUNABLES": "REC_PARALLEL_O REC_WARPS",
           "PYTHONPATH": str(REPO)}
    r = subprocess.run(["bash", str(REPO / "scripts/gpu/dev_round.sh"), "gdn_prefill"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((out / "argv.json").read_text())[1:] == ["--only", "prefill", "--with-tunable", "REC_PARALLEL_O",
                                                               "--with-tunable", "REC_WARPS", "--budget-s", "240"]
    picked = f"{PREFILL}_hand_rec_parallel_o_false.json"  # 1.195x over the champion; REC_WARPS=2 is slower on b
    assert [p.name for p in (out / "candidates").iterdir()] == [picked]
    assert "REC_PARALLEL_O = False" in json.loads((out / "candidates" / picked).read_text())["sources"][0]["content"]
    with tarfile.open(out / "round.tar.gz") as t:
        assert {"gdn_dev.json", "gdn_dev.log", "pick-gdn_prefill.txt"} <= set(t.getnames())
        assert b"over champion" in t.extractfile("pick-gdn_prefill.txt").read()  # what the loop will pair it with
    assert not (out / "candidates-all").exists()


def test_one_gdn_op_per_round(tmp_path):
    r = subprocess.run(["bash", str(REPO / "scripts/gpu/dev_round.sh"), "gdn_prefill", "gdn_decode"],
                       env={**os.environ, "OUT": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "one GDN op per round" in r.stderr
