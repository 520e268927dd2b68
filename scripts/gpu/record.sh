#!/usr/bin/env bash
# Run named GPU record steps on the device machine, one log per step, everything packed into a few files
# under $OUT (the device tool returns at most 8). Usage, from the repo root on the device:
#   source scripts/gpu/setup_device.sh; bash scripts/gpu/record.sh harness spread profile
# Steps (minutes on the H200):
#   harness      scripts/gpu/harness_bench.py: spread over 3 processes, agreement, overhead, bandwidth (~1.5)
#   harness_norot the same without (2) and without address rotation (rotate_sets=1) (~1)
#   harness_again the same without (2), current defaults: a second set of 3 processes (~1)
#   harness_rot2g the same with 2 GiB for address rotation (9 sets at 16384 rows instead of 2) (~1)
#   spread       scripts/gpu/timing_spread.py in 3 processes: addresses vs sampling vs drift (~1)
#   profile      pytest -m gpu tests/profile, `kbot profile` and `kbot eval --profile` on rmsnorm (~3)
#   guard        scripts/gpu/guard_gpu.sh: the guard's GPU tests and its corpus on the GPU (~5)
#   gpu_tests    pytest -m gpu for tests/harness, tests/agents (seed kernels) (~2)
#   harness_tests pytest -m gpu tests/harness only (~1)
#   observer_cost scripts/gpu/observer_cost.py: where the CUPTI observer's seconds go (~1)
#   launch_floor scripts/gpu/launch_floor.py: per-process launch floor vs CPU placement (~1)
#   many         scripts/gpu/many_bench.py: kbot eval-many x4, overhead per candidate with spare workers (~1)
#   cupti_cost   scripts/gpu/cupti_cost.py: the kernel-time tracer's host costs, piece by piece (~0.2)
#   cupti_timing scripts/gpu/cupti_timing.py: CUPTI kernel durations vs events across processes (~1.5)
#   operators    scripts/gpu/operators_full.py --official-refs --eval, pytest -m gpu tests/operators (~6)
#   sandbox      the OS sandbox of candidate code on the GPU: scripts/gpu/sandbox_cost.py (enter/seal cost,
#                kbot eval of the shipped rmsnorm kernel with --sandbox required vs off, x3), the sandbox
#                tests (probes refused, CUDA/CUPTI/Triton/cpp_extension inside), the guard's GPU corpus
#                with KBOT_SANDBOX=required (~10)
#   sandbox_cost just the sandbox's cost per candidate (scripts/gpu/sandbox_cost.py) and the rmsnorm honest
#                and hostile corpora on the GPU with KBOT_SANDBOX=required (~4)
#   campaign_profiled kbot optimize rmsnorm_h4096 on the GPU with profiling on (2 rounds x 2 candidates,
#                --profile-budget 20): every candidate's feedback items and profiling seconds (~4)
#   profile_contest `kbot profile` (ncu + SASS) of the MoE champion's GEMMs at 14107 and 901 tokens and of
#                the sparse-attention champion at 64 and 384 tokens and the GDN prefill champion on one 8192-token
#                sequence: where the large workloads' time goes (~5)
#   profile_moe_small `kbot profile` (ncu + SASS) of the MoE champion's swap-AB GEMMs at 56 and 1 tokens: why the
#                small path's GEMM1 streams its weights at ~2.3 TB/s (H100) when the copy rate is ~3 (~2)
# Each step's exit code is in $OUT/steps.txt; the script exits non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/record_out}"
mkdir -p "$OUT/work"
export PATH="$PATH:/usr/local/cuda/bin"
PY="${PYTHON:-python3}"
RMS=kernels/rmsnorm_h4096/triton_rows/solution.json
LARGEST=276033db  # rmsnorm_h4096 batch 16384

step_harness() { OUT="$OUT/work" "$PY" scripts/gpu/harness_bench.py; }
step_harness_norot() { OUT="$OUT/work" "$PY" scripts/gpu/harness_bench.py --no-agreement --tag _norot --timing rotate_sets=1; }
step_harness_rot2g() { OUT="$OUT/work" "$PY" scripts/gpu/harness_bench.py --no-agreement --tag _rot2g --timing rotate_bytes=2147483648; }
step_harness_again() { OUT="$OUT/work" "$PY" scripts/gpu/harness_bench.py --no-agreement --tag _again; }
step_spread() { for i in 1 2 3; do OUT="$OUT/work" "$PY" scripts/gpu/timing_spread.py || return 1; done; }
step_profile() {
  local rc=0
  "$PY" -m pytest -m gpu tests/profile -q -rA -p no:cacheprovider || rc=1
  "$PY" -m harness.cli profile "$RMS" -d rmsnorm_h4096 --workload "$LARGEST" --out "$OUT/work/profile_rms" --json > "$OUT/work/profile_rms.json" || rc=1
  head -c 3000 "$OUT/work/profile_rms.json"; echo
  "$PY" -m harness.cli eval "$RMS" -d rmsnorm_h4096 --device cuda --profile --workload "$LARGEST" --workload 6829b7a7 --out "$OUT/work/eval_profile" || rc=1
  return $rc
}
step_observer_cost() { OUT="$OUT/work" "$PY" scripts/gpu/observer_cost.py; }
step_launch_floor() { OUT="$OUT/work" "$PY" scripts/gpu/launch_floor.py; }
step_many() { OUT="$OUT/work" "$PY" scripts/gpu/many_bench.py; }
step_cupti_cost() { OUT="$OUT/work" "$PY" scripts/gpu/cupti_cost.py; }
step_cupti_timing() { OUT="$OUT/work" "$PY" scripts/gpu/cupti_timing.py; }
step_guard() { OUT="$OUT/work" bash scripts/gpu/guard_gpu.sh; }
step_harness_tests() { "$PY" -m pytest -m gpu tests/harness -q -rA -p no:cacheprovider; }
step_gpu_tests() { "$PY" -m pytest -m gpu tests/harness tests/agents -q -rA -p no:cacheprovider; }
step_sandbox() {
  local rc=0
  OUT="$OUT/work" "$PY" scripts/gpu/sandbox_cost.py --device cuda --reps 3 || rc=1
  KBOT_SANDBOX=required "$PY" -m pytest tests/harness/test_sandbox.py tests/harness/test_sandbox_probes.py -q -rA -p no:cacheprovider || rc=1
  KBOT_SANDBOX=required OUT="$OUT/work/guard_sandboxed" bash scripts/gpu/guard_gpu.sh || rc=1
  # the profiler's children (ncu driver, energy run, Triton statistics) sandboxed too: does ncu still work?
  "$PY" -m harness.cli eval "$RMS" -d rmsnorm_h4096 --device cuda --profile --sandbox required --workload "$LARGEST" \
    --out "$OUT/work/eval_profile_sandboxed" --json > "$OUT/work/eval_profile_sandboxed.json" || rc=1
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("isolation:", r["isolation"].get("summary")); [print(w["uuid"][:8], w["status"], "evidence:", sorted((w.get("profile") or {}).get("evidence") or {}), "missing:", {k: v[:160] for k, v in ((w.get("profile") or {}).get("missing") or {}).items()}) for w in r["workloads"]]' \
    "$OUT/work/eval_profile_sandboxed.json" || rc=1
  return $rc
}
step_sandbox_cost() {
  local rc=0
  OUT="$OUT/work" "$PY" scripts/gpu/sandbox_cost.py --device cuda --reps 3 || rc=1
  KBOT_SANDBOX=required OUT="$OUT/work/guard_sandboxed" bash scripts/gpu/guard_gpu.sh || rc=1
  return $rc
}
step_campaign_profiled() {
  local ws rc=0
  ws=$(mktemp -d)
  "$PY" -m harness.cli optimize rmsnorm_h4096 --agent offline --device cuda --rounds 2 --candidates 2 --budget 0.3 \
    --profile-budget 20 --workspace "$ws" --json > "$OUT/work/campaign_profiled.json" || rc=1
  "$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); [print(r["node"], r["pr"], r["decision"], r["speedup_vs_champion"], (r["headline"] or "")[:100]) for r in s["candidates"]]' \
    "$OUT/work/campaign_profiled.json" || rc=1
  "$PY" -c 'import json,pathlib,sys
for p in sorted(pathlib.Path(sys.argv[1]).rglob("report.json")):
    r = json.loads(p.read_text()); pr = r.get("profiling") or {}
    print(r.get("solution"), "profiling", pr.get("spent_s"), "s of", pr.get("budget_s"), "within", pr.get("within_budget"),
          "steps", [(x["step"], x["outcome"], x["s"]) for x in pr.get("steps") or []],
          "items", sum(len(w.get("feedback") or []) for w in r.get("workloads") or []))' "$ws" || rc=1
  rm -rf "$ws"
  return $rc
}
champion_of() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["solution_path"])' "kernels/$1/champion.json"; }
step_profile_contest() {
  local rc=0 moe=moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048 dsa=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 gdn=gdn_prefill_qk4_v8_d128_k_last
  "$PY" -m harness.cli profile "$(champion_of "$moe")" -d "$moe" --workload c66ecfb6 --workload 47730731 --kernel-regex gemm \
    --no-energy --out "$OUT/work/profile_moe" || rc=1
  "$PY" -m harness.cli profile "$(champion_of "$dsa")" -d "$dsa" --workload c4d99b7a --workload 9a682295 --no-energy \
    --out "$OUT/work/profile_dsa" || rc=1
  "$PY" -m harness.cli profile "$(champion_of "$gdn")" -d "$gdn" --workload 57948903 --no-energy --out "$OUT/work/profile_gdn_prefill" || rc=1
  return $rc
}
step_profile_moe_small() {
  local moe=moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048
  "$PY" -m harness.cli profile "$(champion_of "$moe")" -d "$moe" --workload 232a4324 --workload 92b35caf --kernel-regex swap \
    --no-energy --out "$OUT/work/profile_moe_small"
}
step_operators() {
  local rc=0
  OUT="$OUT/work" "$PY" scripts/gpu/operators_full.py --official-refs --eval --budget-s 240 || rc=1
  "$PY" -m pytest -m gpu tests/operators -q -rA -p no:cacheprovider || rc=1
  return $rc
}

failed=0
for s in "$@"; do
  t0=$(date +%s)
  echo "=== step $s ($(date -u +%FT%TZ))"
  "step_$s" > "$OUT/work/$s.log" 2>&1
  rc=$?
  echo "$s rc=$rc seconds=$(( $(date +%s) - t0 ))" | tee -a "$OUT/steps.txt"
  tail -n 40 "$OUT/work/$s.log"
  [ "$rc" = 0 ] || failed=1
done
tar -C "$OUT" --exclude=build --exclude="build_*" --exclude="*.ncu-rep" -czf "$OUT/record.tar.gz" work && rm -rf "$OUT/work"
exit $failed
