"""Device ceilings: the copy bandwidth and matrix peaks a roofline floor is computed from.

Measured once per runner with ``kbot ceilings`` and cached as JSON per GPU name under
``$KBOT_CACHE/ceilings/`` (default ``~/.cache/kbot/ceilings/``). The numbers are what *this* software
stack reaches on random data (a device-to-device copy, torch matmuls), not datasheet values, so a
kernel at 100% of the floor really is as fast as the best library call we know.

When no measurement exists for an NVIDIA H200, H100 or B200, documented numbers are used (``DOCUMENTED``:
the H200's from an earlier measurement, ../shared/REFERENCES.md; the H100's and B200's datasheet peaks)
and labelled "documented, not measured here"; a measurement always wins. A CPU entry is measured on the fly (it takes well under a
second), which keeps the CPU-only test path honest.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Ceilings",
    "DOCUMENTED",
    "cache_dir",
    "cache_root",
    "ceilings_for",
    "documented_capability",
    "documented_ceilings",
    "documented_kind",
    "load_ceilings",
    "measure_ceilings",
    "save_ceilings",
    "peak_key_for_dtype",
]

DOCUMENTED_LABEL = "documented, not measured here"


class Ceilings(BaseModel):
    model_config = ConfigDict(extra="allow")

    gpu_name: str
    device: Literal["cuda", "cpu"]
    # Bytes read + bytes written per second of a large device-to-device copy, in GB/s (1e9 bytes).
    copy_bandwidth_gbs: float = Field(gt=0)
    # Dense matmul peaks in TFLOP/s keyed bf16 / fp16 / fp8 / fp32 (fp32 = no TF32, i.e. CUDA cores).
    matmul_tflops: dict[str, float] = Field(default_factory=dict)
    source: Literal["measured", "documented"] = "measured"
    note: str = ""
    measured_at: str | None = None
    torch_version: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None  # traffic that can stay on chip: lets a floor check tell L2 hits from cheats
    # The launch floor: the least time any call takes as the harness times it (GPU: an empty kernel
    # between two CUDA events after the harness's hold, the 10th percentile of 400; CPU: an empty Python
    # call between two perf_counter reads). Every roofline floor adds it: no kernel is faster than
    # launching nothing. None in files written before it was measured (the documented value for the GPU
    # stands in, else the floor has no launch term and says so).
    launch_floor_us: float | None = Field(None, ge=0)
    missing: dict[str, str] = Field(default_factory=dict)  # peak key -> why it was not measured
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.copy_bandwidth_gbs * 1e9

    def peak_flops(self, key: str) -> tuple[float, str]:
        """FLOP/s for a peak key, with the key actually used (and a fallback note when it differs).

        Fallbacks keep the floor a *lower* bound on time: a missing fp8 peak becomes 2x bf16 (the
        tensor-core ratio on Hopper), bf16 and fp16 stand in for each other.
        """
        t = self.matmul_tflops
        if key in t:
            return t[key] * 1e12, key
        if key == "fp8" and "bf16" in t:
            return 2 * t["bf16"] * 1e12, "2 x bf16 (fp8 not measured)"
        if key in ("bf16", "fp16"):
            other = "fp16" if key == "bf16" else "bf16"
            if other in t:
                return t[other] * 1e12, f"{other} (as {key})"
        if key == "fp4" and "fp8" in t:
            return 2 * t["fp8"] * 1e12, "2 x fp8 (fp4 not measured)"
        if "fp32" in t:
            return t["fp32"] * 1e12, f"fp32 (as {key})"
        if t:
            k, v = max(t.items(), key=lambda kv: kv[1])
            return v * 1e12, f"{k} (as {key})"
        raise ValueError(f"ceilings for {self.gpu_name} have no matmul peak at all")

    def launch_floor(self) -> tuple[float | None, str]:
        """(launch floor in ms, where it comes from), or (None, why there is none)."""
        if self.launch_floor_us is not None:
            return self.launch_floor_us / 1e3, "measured" if self.source == "measured" else DOCUMENTED_LABEL
        doc = _documented_field(self.gpu_name, "launch_floor_us") if self.device == "cuda" else None
        if doc is not None:
            return doc / 1e3, DOCUMENTED_LABEL
        return None, "no launch floor measured for this device (re-run `kbot ceilings --force`)"

    def to_report(self) -> dict[str, Any]:
        """The compact form stored in ``Roofline.ceilings`` of every report."""
        return {
            "gpu_name": self.gpu_name,
            "copy_bandwidth_gbs": self.copy_bandwidth_gbs,
            "matmul_tflops": dict(self.matmul_tflops),
            "source": self.source if self.source == "measured" else DOCUMENTED_LABEL,
            "measured_at": self.measured_at,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes if self.l2_bytes else _documented_field(self.gpu_name, "l2_bytes"),
            "launch_floor_us": None if self.launch_floor()[0] is None else self.launch_floor()[0] * 1e3,
            "launch_floor_source": self.launch_floor()[1],
        }


# ------------------------------------------------------------------------------------------------ data

# Documented ceilings per GPU kind, used until `kbot ceilings` has measured the runner (a measurement in
# the cache always wins: ``load_ceilings``). A floor must stay a *lower* bound on time, so where nothing
# was measured the rates are datasheet peaks (no kernel exceeds them); measured rates are lower and give a
# tighter floor. Keys match a torch device name as a whole word ("NVIDIA H100 80GB HBM3" is an H100, a
# "GB200" is not a B200). ``compute_capability`` is the nvcc target's source on a machine without a
# visible GPU (harness/build.py, KBOT_GPU_KIND).
DOCUMENTED: dict[str, dict[str, Any]] = {
    # From ../shared/REFERENCES.md, "Hardware we measure on": device-to-device copy ~4.3 TB/s (read + write)
    # and bf16 8192^3 torch matmul ~770-800 TFLOP/s were measured on our H200 (before the harness had its
    # own ceilings run); fp16 is assumed equal to bf16; fp8 and fp32 are datasheet values (dense fp8
    # ~1980, fp32 ~67 TFLOP/s).
    "H200": {
        "copy_bandwidth_gbs": 4300.0,
        "matmul_tflops": {"bf16": 790.0, "fp16": 790.0, "fp8": 1980.0, "fp32": 67.0},
        "sm_count": 132,
        "l2_bytes": 60 * 1024 * 1024,  # REFERENCES.md: 60 MB L2
        "compute_capability": (9, 0),
        # An empty kernel between two events with the harness's protocol: 3.33-3.55 µs by process on our
        # H200 (docs/measurements.md, recordings 09-10, scripts/gpu/launch_floor.py); the low end, so
        # the floor stays a lower bound.
        "launch_floor_us": 3.33,
        "note": (
            f"{DOCUMENTED_LABEL}: copy ~4.3 TB/s and bf16 ~790 TFLOP/s were measured on an H200 in an "
            "earlier measurement (REFERENCES.md); fp16 assumed = bf16; fp8 and fp32 are datasheet values; "
            "the launch floor (3.33 µs) was measured with scripts/gpu/launch_floor.py (docs/measurements.md). "
            "Run `kbot ceilings --device cuda` on the runner to replace them."
        ),
    },
    # H100 SXM datasheet (dense): HBM3 3.35 TB/s, bf16/fp16 989, fp8 1979, fp32 67 TFLOP/s; 132 SMs, 50 MB L2.
    # The PCIe and NVL variants are slower, so these rates bound theirs too (a looser floor, still a bound).
    "H100": {
        "copy_bandwidth_gbs": 3350.0,
        "matmul_tflops": {"bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "fp32": 67.0},
        "sm_count": 132,
        "l2_bytes": 50 * 1024 * 1024,
        "compute_capability": (9, 0),
        "note": (
            f"{DOCUMENTED_LABEL}: H100 SXM datasheet peaks (HBM3 3.35 TB/s; dense bf16 989, fp8 1979, fp32 67 "
            "TFLOP/s), upper bounds on what a kernel reaches, so the floor is a loose lower bound. "
            "Run `kbot ceilings --device cuda` on the runner to replace them."
        ),
    },
    # B200 (HGX, 1000 W) datasheet (dense): HBM3e 8 TB/s, bf16/fp16 2250, fp8 4500, fp4 9000, fp32 80
    # TFLOP/s; 148 SMs. Its L2 size is not documented consistently, so it is left out (no L2 allowance).
    "B200": {
        "copy_bandwidth_gbs": 8000.0,
        "matmul_tflops": {"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 9000.0, "fp32": 80.0},
        "sm_count": 148,
        "compute_capability": (10, 0),
        "note": (
            f"{DOCUMENTED_LABEL}: B200 (HGX, 1000 W) datasheet peaks (HBM3e 8 TB/s; dense bf16 2250, fp8 4500, "
            "fp4 9000, fp32 80 TFLOP/s), upper bounds on what a kernel reaches, so the floor is a loose lower "
            "bound. Run `kbot ceilings --device cuda` on the runner to replace them."
        ),
    },
}


def documented_kind(gpu_name: str) -> str | None:
    """The DOCUMENTED key a device name is (``NVIDIA H100 80GB HBM3`` -> ``H100``), or None."""
    for key in DOCUMENTED:
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", gpu_name, re.I):
            return key
    return None


def documented_capability(gpu_name: str) -> tuple[int, int] | None:
    """The compute capability documented for a GPU kind or device name (``B200`` -> (10, 0))."""
    key = documented_kind(gpu_name)
    return tuple(DOCUMENTED[key]["compute_capability"]) if key else None  # type: ignore[return-value]


def _documented_field(gpu_name: str, key: str) -> Any:
    kind = documented_kind(gpu_name)
    return DOCUMENTED[kind].get(key) if kind else None


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip()).strip("_") or "unknown"


def cache_root() -> Path:
    """kbot's cache folder on this machine: ``$KBOT_CACHE``, default ``~/.cache/kbot``."""
    root = os.environ.get("KBOT_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "kbot"


def cache_dir() -> Path:
    return cache_root() / "ceilings"


def save_ceilings(c: Ceilings) -> Path:
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{_slug(c.gpu_name)}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(c.model_dump_json(indent=2) + "\n")
    tmp.replace(path)
    return path


def documented_ceilings(gpu_name: str) -> Ceilings | None:
    kind = documented_kind(gpu_name)
    if kind is None:
        return None
    data = {k: v for k, v in DOCUMENTED[kind].items() if k != "compute_capability"}
    return Ceilings(gpu_name=gpu_name, device="cuda", source="documented", **data)


def load_ceilings(gpu_name: str) -> Ceilings | None:
    """The cached measurement for this GPU; else documented defaults; else None."""
    path = cache_dir() / f"{_slug(gpu_name)}.json"
    if path.is_file():
        try:
            return Ceilings.model_validate_json(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path}: not a valid ceilings file ({e}); delete it or re-run `kbot ceilings --force`") from None
    return documented_ceilings(gpu_name)


_CPU_MEMO: list[Ceilings] = []


def ceilings_for(device: str = "cuda", *, measure_if_missing: bool = False, never_measure: bool = False) -> Ceilings:
    """Ceilings for the current device: cache, then documented defaults, then (CPU, or when asked) a
    measurement. ``never_measure``: raise instead of measuring (a worker sharing the GPU with the
    observer would measure, and cache, depressed numbers)."""
    if device == "cpu":
        found = load_ceilings(cpu_name())
        if found is not None:
            return found
        if not _CPU_MEMO:  # measured once per process: a report of 50 workloads needs one entry
            _CPU_MEMO.append(measure_ceilings("cpu"))
        return _CPU_MEMO[0]
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible; use device='cpu' or run on a GPU runner")
    name = torch.cuda.get_device_name()
    found = load_ceilings(name)
    if found is not None and not (measure_if_missing and found.source != "measured"):
        return found
    if never_measure:
        raise LookupError(f"no cached or documented ceilings for {name}: run `kbot ceilings` once on this runner")
    c = measure_ceilings("cuda")
    save_ceilings(c)
    return c


def cpu_name() -> str:
    proc = platform.processor() or platform.machine() or "cpu"
    return f"cpu-{proc}-{os.cpu_count()}cores"


# ------------------------------------------------------------------------------------------ measuring


def peak_key_for_dtype(dtype: str) -> str:
    """Ceiling key for a FlashInfer dtype name (``bfloat16`` -> ``bf16``)."""
    if dtype.startswith("float8"):
        return "fp8"
    if dtype.startswith("float4"):
        return "fp4"
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp32"}.get(dtype, "fp32")


def measure_ceilings(device: str = "cuda", *, quick: bool = False) -> Ceilings:
    """Measure copy bandwidth and matmul peaks on ``device`` ("cuda" or "cpu") with torch.

    ``quick`` uses smaller sizes (a rough CPU entry, or a smoke test); the cached numbers a runner
    reports should come from the default sizes.
    """
    import torch

    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    if device == "cpu":
        return _measure_cpu(torch, now)
    if device != "cuda":
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible to torch; cannot measure GPU ceilings here")
    props = torch.cuda.get_device_properties(0)
    details: dict[str, Any] = {}
    missing: dict[str, str] = {}

    def timed(fn: Callable[[], Any], reps: int) -> float:
        """Median seconds per call, timed with CUDA events after a warm-up."""
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        return statistics.median(times)

    # Copy: 1 GiB (or a quarter of free memory) so L2 (60 MB on H200) is irrelevant.
    free, _ = torch.cuda.mem_get_info()
    nbytes = min(1 << 30, free // 4) if not quick else 64 << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    t = timed(lambda: dst.copy_(src), 20)
    bw = 2 * nbytes / t / 1e9
    details["copy"] = {"bytes_each_way": nbytes, "median_s": t}
    src = dst = None  # free the buffers before the next measurement

    peaks: dict[str, float] = {}
    n = 8192 if not quick else 2048
    for key, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        t = timed(lambda a=a, b=b: a @ b, 10)
        peaks[key] = 2 * n**3 / t / 1e12
        details[key] = {"n": n, "median_s": t}
        a = b = None
    # fp32 without TF32: the CUDA-core peak, which is what element-wise and reduction math runs on.
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        m = 4096 if not quick else 1024
        a = torch.randn(m, m, device="cuda")
        b = torch.randn(m, m, device="cuda")
        t = timed(lambda: a @ b, 5)
        peaks["fp32"] = 2 * m**3 / t / 1e12
        details["fp32"] = {"n": m, "median_s": t, "tf32": False}
        a = b = None
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    try:
        fp8 = torch.float8_e4m3fn
        a = torch.randn(n, n, device="cuda").to(fp8)
        b = torch.randn(n, n, device="cuda").to(fp8).t()  # column-major second operand, as cuBLASLt wants
        one = torch.ones((), device="cuda", dtype=torch.float32)
        t = timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 10)
        peaks["fp8"] = 2 * n**3 / t / 1e12
        details["fp8"] = {"n": n, "median_s": t, "via": "torch._scaled_mm e4m3"}
        a = b = None
    except Exception as e:  # fp8 matmul needs sm_89+ and a recent torch; say why it is absent
        missing["fp8"] = f"{type(e).__name__}: {e}"[:300]
    launch_us = measure_launch_floor_cuda(torch)
    details["launch_floor"] = {"samples": 400, "statistic": "10th percentile", "us": launch_us}
    torch.cuda.empty_cache()
    return Ceilings(
        gpu_name=torch.cuda.get_device_name(),
        device="cuda",
        copy_bandwidth_gbs=bw,
        matmul_tflops=peaks,
        source="measured",
        note="measured with torch on random data (copy_ of 1 GiB; a @ b at 8192^3, fp32 at 4096^3 without TF32)",
        measured_at=now,
        torch_version=torch.__version__,
        sm_count=props.multi_processor_count,
        l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
        launch_floor_us=launch_us,
        missing=missing,
        details=details,
    )


def measure_launch_floor_cuda(torch: Any, n: int = 400, hold_cycles: int = 200_000) -> float:
    """An empty kernel (a zero-cycle GPU sleep) between two events, each preceded by the harness's
    L2 flush and GPU hold, so the host's enqueue is off the interval as in a timed call: the 10th
    percentile of ``n``, in µs (the floor is bimodal by process, 3.33-3.55 µs on the H200)."""
    flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device="cuda")
    events = []
    for i in range(n):
        flush.zero_()
        torch.cuda._sleep(hold_cycles)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(0)
        e.record()
        events.append((s, e))
        if i % 25 == 24:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) * 1e3 for s, e in events)
    return times[len(times) // 10]


def measure_launch_floor_cpu(n: int = 2000) -> float:
    """An empty Python call between two ``perf_counter_ns`` reads (how the harness times a CPU call):
    the 10th percentile of ``n``, in µs."""
    def empty() -> None:
        return None

    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        empty()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    times.sort()
    return times[len(times) // 10]


def _measure_cpu(torch: Any, now: str) -> Ceilings:
    """A rough CPU entry: memcpy bandwidth and fp32 matmul, about a quarter of a second."""

    def best(fn: Callable[[], Any], reps: int) -> float:
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)

    nbytes = 64 << 20
    src = torch.ones(nbytes, dtype=torch.uint8)
    dst = torch.empty_like(src)
    t = best(lambda: dst.copy_(src), 5)
    bw = 2 * nbytes / t / 1e9
    n = 512
    a, b = torch.randn(n, n), torch.randn(n, n)
    tm = best(lambda: a @ b, 5)
    return Ceilings(
        gpu_name=cpu_name(),
        device="cpu",
        copy_bandwidth_gbs=bw,
        matmul_tflops={"fp32": 2 * n**3 / tm / 1e12},
        source="measured",
        note="rough CPU entry measured on the fly (64 MiB memcpy, 512^3 fp32 matmul)",
        measured_at=now,
        torch_version=torch.__version__,
        launch_floor_us=measure_launch_floor_cpu(),
        details={"copy": {"bytes_each_way": nbytes, "best_s": t}, "fp32": {"n": n, "best_s": tm}},
    )


def describe(c: Ceilings) -> str:
    """One Markdown block for people."""
    lines = [
        f"**{c.gpu_name}** ({c.device}; {c.source if c.source == 'measured' else DOCUMENTED_LABEL}"
        + (f", {c.measured_at}" if c.measured_at else "")
        + (f", torch {c.torch_version}" if c.torch_version else "")
        + ")",
        "",
        "| ceiling | value |",
        "| --- | --- |",
        f"| copy bandwidth (read + write) | {c.copy_bandwidth_gbs:,.0f} GB/s |",
    ]
    launch, where = c.launch_floor()
    lines.append(f"| launch floor (added to every roofline floor) | {launch * 1e3:.2f} µs ({where}) |" if launch is not None
                 else f"| launch floor | missing: {where} |")
    for k in ("bf16", "fp16", "fp8", "fp32"):
        if k in c.matmul_tflops:
            lines.append(f"| {k} matmul | {c.matmul_tflops[k]:,.1f} TFLOP/s |")
        elif k in c.missing:
            lines.append(f"| {k} matmul | missing: {c.missing[k]} |")
    if c.note:
        lines += ["", c.note]
    return "\n".join(lines)


def dumps(c: Ceilings) -> str:
    return json.dumps(c.model_dump(mode="json"), indent=2)
