"""The experiment behind harness/cupti_activity.py (docs/measurements.md, recording 14): do CUPTI
kernel durations reproduce across processes where event times do not? (They did.)

The launch-floor probe found that a few-µs kernel's event-timed median carries a per-process offset: an empty
kernel between two events reads ~3.36 or ~3.50 µs depending on the process (scripts/gpu/launch_floor.py),
so three processes disagree by 5-20%. CUPTI's activity records give each kernel's own start and end on
the GPU, without the launch processing between two events. Each child process here times the shipped
rmsnorm kernel with the harness's protocol (L2 flush, GPU hold, events) and, in the same calls, reads
the kernel's CUPTI duration; a second pass with activity tracing off shows whether tracing disturbs the
event times. The parent runs three children and prints the spread of both medians per batch size.

CUPTI through ctypes, no compiler: ``cuptiActivityRegisterCallbacks`` with Python buffer callbacks,
``CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL``. Kernel records since CUpti_ActivityKernel4 share a prefix
(kind u32 @0, start u64 @16, end u64 @24, streamId u32 @48, gridX i32 @52, correlationId u32 @92, name
char* @104); the child checks it against what it launched (grid size, name) and says so when the
layout does not hold. ``--selftest`` parses a synthetic buffer on any machine.

Writes $OUT/cupti_timing.json and prints a table last.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("OUT", "."))
KIND_CONCURRENT_KERNEL = 10
# (field, struct format, byte offset) of the kernel-record prefix shared by CUpti_ActivityKernel4..N
PREFIX = {"kind": ("<I", 0), "start": ("<Q", 16), "end": ("<Q", 24), "stream": ("<I", 48), "grid_x": ("<i", 52),
          "correlation": ("<I", 92), "name_ptr": ("<Q", 104)}
RECORD_MIN = 112


def parse_kernel_record(raw: bytes) -> dict:
    """The prefix fields of one kernel record (bytes from its start)."""
    if len(raw) < RECORD_MIN:
        raise ValueError(f"record of {len(raw)} bytes is shorter than the kernel prefix ({RECORD_MIN})")
    return {k: struct.unpack_from(fmt, raw, off)[0] for k, (fmt, off) in PREFIX.items()}


def selftest() -> int:
    buf = bytearray(160)
    name = ctypes.create_string_buffer(b"rmsnorm_kernel")
    for k, v in {"kind": KIND_CONCURRENT_KERNEL, "start": 1_000, "end": 5_250, "stream": 7, "grid_x": 3, "correlation": 42,
                 "name_ptr": ctypes.addressof(name)}.items():
        fmt, off = PREFIX[k]
        struct.pack_into(fmt, buf, off, v)
    r = parse_kernel_record(bytes(buf))
    assert r["end"] - r["start"] == 4_250 and r["grid_x"] == 3 and r["correlation"] == 42
    assert ctypes.string_at(r["name_ptr"]) == b"rmsnorm_kernel"
    try:
        parse_kernel_record(bytes(40))
    except ValueError:
        pass
    else:
        raise AssertionError("a short record must be refused")
    print("selftest ok")
    return 0


CHILD = r'''
import ctypes, json, statistics, sys
sys.path.insert(0, sys.argv[1])
import torch
from harness.build import build
from harness.guard.cupti_callbacks import find_library
from harness.schema import load_solution
sys.path.insert(0, sys.argv[1] + "/scripts/gpu")
from cupti_timing import KIND_CONCURRENT_KERNEL, parse_kernel_record

trace = sys.argv[2] == "trace"
fn, res = build(load_solution(sys.argv[1] + "/kernels/rmsnorm_h4096/triton_rows/solution.json"), __import__("pathlib").Path(sys.argv[3]), device="cuda")
assert res.ok, res
lib = ctypes.CDLL(find_library())
buffers, records = {}, []
REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.c_size_t)
def requested(buf, size, maxrec):
    b = (ctypes.c_uint64 * (1 << 17))()  # 1 MiB, 8-byte aligned
    buffers[ctypes.addressof(b)] = b
    buf[0] = ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8))
    size[0] = ctypes.sizeof(b)
    maxrec[0] = 0
def completed(ctx, stream, buf, size, valid):
    rec = ctypes.POINTER(ctypes.c_uint8)()
    while lib.cuptiActivityGetNextRecord(buf, ctypes.c_size_t(valid), ctypes.byref(rec)) == 0:
        addr = ctypes.addressof(rec.contents)
        kind = ctypes.c_uint32.from_address(addr).value
        if kind == KIND_CONCURRENT_KERNEL:
            r = parse_kernel_record(ctypes.string_at(addr, 112))
            ptr = r.pop("name_ptr")
            r["name"] = ctypes.string_at(ptr).decode(errors="replace") if ptr else ""
            records.append(r)
    buffers.pop(ctypes.cast(buf, ctypes.c_void_p).value, None)
req_cb, done_cb = REQ(requested), DONE(completed)
if trace:
    assert lib.cuptiActivityRegisterCallbacks(req_cb, done_cb) == 0
    assert lib.cuptiActivityEnable(KIND_CONCURRENT_KERNEL) == 0
flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device="cuda")
out = {}
for b in (1, 128, 2048, 16384):
    x = torch.randn(b, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    for _ in range(10):
        fn(hidden_states=x, weight=w, output=y)
    torch.cuda.synchronize()
    if trace:
        lib.cuptiActivityFlushAll(0)
        records.clear()
    evs = []
    for i in range(400):
        flush.zero_()
        torch.cuda._sleep(400_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(hidden_states=x, weight=w, output=y); e.record()
        evs.append((s, e))
        if i % 25 == 24:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    ev_us = sorted(s.elapsed_time(e) * 1e3 for s, e in evs)
    row = {"event_median_us": ev_us[len(ev_us) // 2]}
    if trace:
        lib.cuptiActivityFlushAll(0)
        mine = [r for r in records if "rms" in r["name"]]
        durs = sorted((r["end"] - r["start"]) / 1e3 for r in mine)
        row.update({"cupti_median_us": durs[len(durs) // 2] if durs else None, "cupti_records": len(mine),
                    "other_kernels": sorted({r["name"][:40] for r in records if "rms" not in r["name"]})[:4],
                    "grid_x_seen": sorted({r["grid_x"] for r in mine})[:4]})
    out[b] = row
print(json.dumps(out))
'''


def main() -> int:
    if "--selftest" in sys.argv:
        return selftest()
    script = OUT / "cupti_timing_child.py"
    script.write_text(CHILD)
    rows = []
    for i in range(6):  # alternate: traced, untraced, three of each
        mode = "trace" if i % 2 == 0 else "plain"
        p = subprocess.run([sys.executable, str(script), str(REPO), mode, str(OUT / f"build_ct{i}")], capture_output=True, text=True, timeout=300)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {"error": (p.stderr or p.stdout)[-1500:]}
        rows.append({"mode": mode, "result": r})
        print(json.dumps(rows[-1])[:1500], flush=True)
    (OUT / "cupti_timing.json").write_text(json.dumps(rows, indent=2))
    print("\nbatch  mode   medians (µs) over processes -> spread")
    for b in ("1", "128", "2048", "16384"):
        for mode, key in (("trace", "event_median_us"), ("trace", "cupti_median_us"), ("plain", "event_median_us")):
            ms = [r["result"][b][key] for r in rows if r["mode"] == mode and "error" not in r["result"] and r["result"][b].get(key)]
            if ms:
                print(f"{b:>6} {mode:<5} {key:<16} {[round(m, 3) for m in ms]} -> {100 * (max(ms) - min(ms)) / statistics.median(ms):.2f}%")
    return 0 if all("error" not in r["result"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
