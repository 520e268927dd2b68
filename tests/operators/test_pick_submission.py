"""scripts/gpu/pick_submission.py: the device-side choice of which prepared submission to send."""

from __future__ import annotations

import importlib.util
import json

from opkit import REPO

spec = importlib.util.spec_from_file_location("pick_submission", REPO / "scripts" / "gpu" / "pick_submission.py")
pick = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pick)


def rows(variant, times, failed=()):
    return [{"variant": variant, "seq_len": s, "status": "ERROR x" if s in failed else "PASSED",
             **({} if s in failed else {"do_bench_ms": t})} for s, t in times.items()]


def run(tmp_path, capsys, data, *args):
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps({"phase_a": data}))
    assert pick.main([str(f), *args]) == 0
    return capsys.readouterr().out.strip()


def test_picks_the_fastest_qualifying_variant(tmp_path, capsys):
    data = rows("default", {1: 1.0, 2: 2.0}) + rows("a", {1: 0.9, 2: 1.8}) + rows("b", {1: 0.8, 2: 1.6})
    assert run(tmp_path, capsys, data, "a=A.json", "b=B.json", "--min", "1.05") == "B.json"
    # b is fastest but not offered: a is taken
    assert run(tmp_path, capsys, data, "a=A.json", "--min", "1.05") == "A.json"


def test_nothing_below_the_threshold_or_with_a_failure(tmp_path, capsys):
    data = rows("default", {1: 1.0, 2: 2.0}) + rows("a", {1: 0.99, 2: 1.99}) + rows("b", {1: 0.5, 2: 1.0}, failed=(2,))
    assert run(tmp_path, capsys, data, "a=A.json", "b=B.json", "--min", "1.03") == ""  # a too slow, b failed one


def test_a_variant_run_on_fewer_seq_lens_is_compared_where_it_ran(tmp_path, capsys):
    """moe_dev.py runs a small-path variant only on the small seq_lens: that is not a failure."""
    data = rows("default", {1: 1.0, 901: 5.0}) + rows("small", {1: 0.8})
    assert run(tmp_path, capsys, data, "small=S.json", "--min", "1.05") == "S.json"


def test_a_slower_workload_disqualifies_under_worst(tmp_path, capsys):
    data = rows("default", {1: 1.0, 2: 2.0}) + rows("a", {1: 0.5, 2: 2.1})  # 1.38x geomean, 0.95x on 2
    assert run(tmp_path, capsys, data, "a=A.json", "--min", "1.03") == "A.json"
    assert run(tmp_path, capsys, data, "a=A.json", "--min", "1.03", "--worst", "0.97") == ""


def test_reads_a_dsa_dev_sweep(tmp_path, capsys):
    """dsa_dev.py's phase B: variant -> workload -> {ok, us}; a cell the time budget skipped (ok None) is
    not a failure, a wrong result is."""
    grid = {"default": {"w1": {"ok": True, "us": 10.0}, "w2": {"ok": True, "us": 20.0}},
            "fast": {"w1": {"ok": True, "us": 8.0}, "w2": {"ok": None, "us": None}},
            "wrong": {"w1": {"ok": False, "us": None}, "w2": {"ok": True, "us": 1.0}}}
    f = tmp_path / "dsa_dev.json"
    f.write_text(json.dumps({"ops": {"attention": {"B": grid}}}))
    assert pick.main([str(f), "--op", "attention", "fast=F.json", "wrong=W.json"]) == 0
    assert capsys.readouterr().out.strip() == "F.json"


def test_a_dsa_sweep_is_read_by_gpu_time_where_it_has_it(tmp_path, capsys):
    """Event time of short calls is host-bound: the GPU time (CUPTI) decides where the sweep has it."""
    grid = {"default": {"w1": {"ok": True, "us": 60.0, "gpu_us": 10.0}},
            "a": {"w1": {"ok": True, "us": 50.0, "gpu_us": 12.0}},  # faster by events, slower on the GPU
            "b": {"w1": {"ok": True, "us": 61.0, "gpu_us": 8.0}}}
    f = tmp_path / "dsa_dev.json"
    f.write_text(json.dumps({"ops": {"indexer": {"B": grid}}}))
    assert pick.main([str(f), "--op", "indexer", "a=A.json", "b=B.json"]) == 0
    assert capsys.readouterr().out.strip() == "B.json"


def test_writes_the_swept_variants_as_submissions_and_picks_among_them(tmp_path, capsys):
    """--write-candidates: each swept variant becomes the seed with its tunables (what the sweep ran), so
    a stale file of the same name cannot be sent instead."""
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import apply, solution_tunables

    from opkit import ATTENTION

    grid = {"default": {"w1": {"ok": True, "us": 50.0, "gpu_us": 10.0}},
            "swap16": {"w1": {"ok": True, "us": 50.0, "gpu_us": 8.0}},
            "t264": {"w1": {"ok": True, "us": 50.0, "gpu_us": 9.0}}}
    variants = {"default": {}, "swap16": {"SWAP_FROM_T": 16}, "t264": {"TARGET_PROGRAMS": 264}}
    f = tmp_path / "dsa_dev.json"
    f.write_text(json.dumps({"ops": {"attention": {"definition": ATTENTION, "B": grid, "variants": variants}}}))
    out = tmp_path / "cands"
    assert pick.main([str(f), "--op", "attention", "--write-candidates", str(out)]) == 0
    picked = capsys.readouterr().out.strip()
    assert picked == str(out / f"{ATTENTION}_hand_swap16.json")
    assert sorted(p.name for p in out.iterdir()) == [f"{ATTENTION}_hand_swap16.json", f"{ATTENTION}_hand_t264.json"]
    sent = json.loads((out / f"{ATTENTION}_hand_swap16.json").read_text())
    want = json.loads(apply(load_seeds(ATTENTION)[0], {"SWAP_FROM_T": 16}).model_dump_json())
    assert sent["sources"] == want["sources"] and sent["definition"] == ATTENTION
    from harness.schema import Solution

    assert {t.key: t.value for t in solution_tunables(Solution.model_validate(sent))}["SWAP_FROM_T"] == 16


def test_writes_a_moe_sweeps_variants_and_refuses_a_sweep_without_its_definition(tmp_path, capsys):
    """A moe_dev.py result (phase A rows, its variants and definition at the top level) gives candidates the
    same way; one that names no definition is refused with the reason, not guessed."""
    import pytest

    from opkit import MOE

    data = rows("default", {1: 1.0, 901: 2.0}) + rows("tma", {901: 1.5}) + rows("small_tma", {1: 0.99})
    f = tmp_path / "moe_dev.json"
    f.write_text(json.dumps({"definition": MOE, "phase_a": data,
                             "variants": {"default": {}, "tma": {"W_TMA": True}, "small_tma": {"SMALL_W_TMA": True}}}))
    out = tmp_path / "cands"
    assert pick.main([str(f), "--write-candidates", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / f"{MOE}_hand_tma.json")  # small_tma: 1.01x, under --min 1.03
    sent = json.loads((out / f"{MOE}_hand_tma.json").read_text())
    assert "W_TMA = True" in sent["sources"][0]["content"] and sent["definition"] == MOE
    f.write_text(json.dumps({"phase_a": data, "variants": {"tma": {"W_TMA": True}}}))
    with pytest.raises(SystemExit, match="names no definition"):
        pick.main([str(f), "--write-candidates", str(out)])


def test_ranks_by_gpu_time_where_the_sweep_has_it(tmp_path, capsys):
    """A moe_dev.py row's gpu_ms (CUPTI) outranks its do_bench_ms: event time counts host work (a variant
    can look 2x faster by do_bench and be no faster on the GPU)."""
    data = [{"variant": v, "seq_len": s, "status": "PASSED", "do_bench_ms": db, "gpu_ms": g}
            for v, s, db, g in (("default", 1, 0.26, 0.148), ("a", 1, 0.18, 0.148), ("b", 1, 0.27, 0.120))]
    assert run(tmp_path, capsys, data, "a=A.json", "b=B.json") == "B.json"  # by do_bench it would be A (1.44x)


def test_never_divides_one_timing_by_the_other(tmp_path, capsys):
    """A pair of rows is compared by GPU time only where both have it, else by do_bench where both have
    that: a 0.1 ms GPU time over a 0.3 ms event time would read as a 3x loss that is not there."""
    data = [{"variant": "default", "seq_len": 1, "status": "PASSED", "do_bench_ms": 0.30, "gpu_ms": 0.10},
            {"variant": "a", "seq_len": 1, "status": "PASSED", "do_bench_ms": 0.25}]
    assert run(tmp_path, capsys, data, "a=A.json") == "A.json"  # 0.30 / 0.25 = 1.2x by do_bench
    assert pick.ratios(data, "default")["a"][0] == 0.30 / 0.25


def test_reads_a_gdn_dev_sweep_and_writes_its_variants(tmp_path, capsys):
    """A gdn_dev.py result is a list of rows of both GDN definitions, variants labelled NAME=VALUE,...: with
    --definition its rows are compared by GPU time and its labelled variants become submissions (the seed
    with those tunables); the champion and fla rows are compared but are never written; without
    --definition it is refused."""
    import pytest

    from opkit import PREFILL

    def row(variant, w, us, status="PASSED", d=PREFILL):
        return {"definition": d, "workload": w, "variant": variant, "status": status, "gpu_us": us}

    data = [row("default", "a", 10.0), row("default", "b", 20.0),
            row("REC_PARALLEL_O=False,REC_WARPS=2", "a", 8.0), row("REC_PARALLEL_O=False,REC_WARPS=2", "b", 20.0),
            row("TRANSITION_FROM=2048", "a", 10.0), row("TRANSITION_FROM=2048", "b", 30.0, status="INCORRECT_NUMERICAL"),
            row("champion", "a", 5.0), row("champion", "b", 5.0), row("fla", "a", 1.0), row("fla", "b", 1.0),
            row("default", "a", 99.0, d="gdn_decode_qk4_v8_d128_k_last")]
    f = tmp_path / "gdn_dev.json"
    f.write_text(json.dumps(data))
    out = tmp_path / "cands"
    assert pick.main([str(f), "--definition", PREFILL, "--write-candidates", str(out)]) == 0
    name = f"{PREFILL}_hand_rec_parallel_o_false_rec_warps_2"
    assert capsys.readouterr().out.strip() == str(out / f"{name}.json")  # 1.118x; the transitions row failed
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{name}.json", f"{PREFILL}_hand_transition_from_2048.json"])
    src = json.loads((out / f"{name}.json").read_text())["sources"][0]["content"]
    assert "REC_PARALLEL_O = False" in src and "REC_WARPS = 2" in src  # not the seed's defaults
    with pytest.raises(SystemExit, match="--definition"):
        pick.main([str(f), "--write-candidates", str(out)])


def test_a_gdn_sweep_is_picked_against_the_champion_when_asked(tmp_path, capsys):
    """The seed's default is not always the champion's code (recording 37: 3 % slower on two workloads), so a
    variant that only beats the seed's default must not be sent: over --baseline champion it is ruled out and
    one that beats the champion is picked; a baseline the sweep never ran is refused, not silently empty."""
    import pytest

    from opkit import PREFILL

    def rows(variant, a, b):
        return [{"definition": PREFILL, "workload": w, "variant": variant, "status": "PASSED", "gpu_us": t}
                for w, t in (("a", a), ("b", b))]

    data = (rows("default", 10.0, 21.0) + rows("champion", 10.0, 20.0) + rows("REC_BV=8", 9.0, 21.0)
            + rows("REC_PARALLEL_O=True", 9.5, 20.0))
    f = tmp_path / "gdn_dev.json"
    f.write_text(json.dumps(data))
    out = tmp_path / "cands"
    # over the seed's default both qualify and REC_BV=8 is ahead (1.054x against 1.051x)
    assert pick.main([str(f), "--definition", PREFILL, "--write-candidates", str(out), "--min", "1.02", "--worst", "0.98"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"{PREFILL}_hand_rec_bv_8.json")
    # over the champion REC_BV=8 is 0.952x on b: out; REC_PARALLEL_O is 1.026x with no workload slower
    assert pick.main([str(f), "--definition", PREFILL, "--write-candidates", str(out), "--min", "1.02", "--worst", "0.98",
                      "--baseline", "champion"]) == 0
    got = capsys.readouterr()
    assert got.out.strip().endswith(f"{PREFILL}_hand_rec_parallel_o_true.json")
    assert "over champion" in got.err
    desc = json.loads((out / f"{PREFILL}_hand_rec_parallel_o_true.json").read_text())["description"]
    assert "'champion' rows" in desc
    with pytest.raises(SystemExit, match="no 'best' rows"):
        pick.main([str(f), "--definition", PREFILL, "--baseline", "best"])
    for r in data:  # the champion failed on the device: refused too, not an empty pick
        if r["variant"] == "champion":
            r.update(status="ERROR", gpu_us=None)
    f.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="no 'champion' row of the sweep passed"):
        pick.main([str(f), "--definition", PREFILL, "--baseline", "champion"])
