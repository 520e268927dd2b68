"""Nsight Compute: the command line that profiles only the candidate, and a parser of its raw CSV.

Only the candidate's kernels are profiled: the driver script wraps the candidate call (after its
warm-up) in an NVTX push/pop range named ``kbot_candidate`` and ncu is told ``--nvtx-include
kbot_candidate/``, so input generation, the reference and warm-up never appear. A kernel-name regex
can narrow further. Clocks are left alone (``--clock-control none``): the runner's GPU is shared with
timing, and locked base clocks would make ncu's durations disagree with ours.

``ncu --csv --page raw`` writes one header row of metric names, one row of units, then one row per
profiled kernel launch. Numbers carry thousands separators ("1,234.5"), missing values read "n/a",
and units are scaled per column unless ``--print-units base`` is given; the parser handles both and
normalizes to seconds / bytes / bytes per second / percent.
"""

from __future__ import annotations

import csv
import io
import math
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import Collected
from .child import run_bounded

__all__ = [
    "CANDIDATE_RANGE",
    "LIBRARY_KERNEL_PATTERNS",
    "METRICS",
    "SECTIONS",
    "KernelLaunch",
    "NcuCsvError",
    "find_ncu",
    "is_library_kernel",
    "ncu_command",
    "ncu_evidence",
    "parse_ncu_csv",
    "parse_ncu_launches",
    "run_ncu",
    "section_metrics",
]

CANDIDATE_RANGE = "kbot_candidate"

STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
    "short_scoreboard", "sleeping", "tex_throttle", "wait",
)

# The curated list, in sections (the groups a bottleneck class asks for: harness/profile/plan.py).
# Names follow ../shared/REFERENCES.md and Nsight Compute's metric reference; the GPU script filters
# this list against `ncu --query-metrics` on the runner, so one name a given ncu version lacks does not
# cost the whole profile.
SECTIONS: dict[str, tuple[str, ...]] = {
    "speed_of_light": (
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "dram__bytes.sum.per_second",
        "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed.sum",
    ),
    "launch": (  # launch shape (grid, block, registers, shared memory per block)
        "launch__grid_size",
        "launch__block_size",
        "launch__registers_per_thread",
        "launch__shared_mem_per_block_static",
        "launch__shared_mem_per_block_dynamic",
        "launch__waves_per_multiprocessor",
        "device__attribute_multiprocessor_count",
    ),
    "occupancy": (
        "launch__occupancy_limit_registers",
        "launch__occupancy_limit_shared_mem",
        "launch__occupancy_limit_warps",
        "launch__occupancy_limit_blocks",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "sm__maximum_warps_per_active_cycle_pct",
    ),
    # cycles stalled per issued instruction, by reason
    "warp_stalls": tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS),
    "shared_memory": (  # bank conflicts
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    ),
    "global_access": (  # bytes the threads asked for vs 32-byte sectors moved
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
        "sm__sass_data_bytes_mem_global_op_ld.sum",
        "sm__sass_data_bytes_mem_global_op_ldgsts.sum",  # cp.async: its sectors count as op_ld in l1tex
        "sm__sass_data_bytes_mem_global_op_st.sum",
    ),
    "local_memory": (  # register spills
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
        "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
        "sass__inst_executed_register_spilling",
    ),
    "pipes": (
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    ),
    "caches": (
        "lts__t_sector_hit_rate.pct",
        "l1tex__t_sector_hit_rate.pct",
    ),
}
METRICS: tuple[str, ...] = tuple(m for section in SECTIONS.values() for m in section)  # every section: an unclassified workload


def section_metrics(sections: Iterable[str]) -> tuple[str, ...]:
    """The metrics of ``sections`` in the curated order; an unknown section name is a ValueError."""
    wanted = list(sections)
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown ncu section(s) {unknown}; known: {sorted(SECTIONS)}")
    return tuple(m for name, section in SECTIONS.items() if name in wanted for m in section)


# Kernels that belong to torch / cuBLAS / the runtime, not to a candidate's own code. They are kept in
# the parse (their time is real) but ranked after the candidate's kernels.
LIBRARY_KERNEL_PATTERNS: tuple[str, ...] = (
    r"^void at::", r"at::native::", r"^at_", r"elementwise_kernel", r"vectorized_elementwise",
    r"reduce_kernel", r"^void cutlass", r"^cutlass", r"cublas", r"^sm\d+_xmma", r"^nvjet", r"gemv",
    r"splitKreduce", r"^void cub::", r"^cub::", r"distribution_elementwise", r"fill_kernel", r"CatArrayBatched",
)
_LIB_RE = re.compile("|".join(LIBRARY_KERNEL_PATTERNS))


def is_library_kernel(name: str) -> bool:
    return bool(_LIB_RE.search(name))


def find_ncu() -> str | None:
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu"):
        if cand and Path(cand).is_file():
            return cand
    return None


def ncu_command(
    program: list[str],
    *,
    metrics: Iterable[str] = METRICS,
    ncu: str = "ncu",
    kernel_regex: str | None = None,
    nvtx_range: str | None = CANDIDATE_RANGE,
    kernel_ids: str | None = None,
    launch_count: int | None = 20,
    log_file: str | None = None,
) -> list[str]:
    """argv for profiling ``program`` (e.g. ``[python, driver.py, ...]``) with the curated metrics.

    ``kernel_regex`` becomes ``--kernel-name regex:...``; ``kernel_ids`` is passed to ``--kernel-id``
    (``context:stream:name:invocation``); ``nvtx_range`` restricts to launches inside that push/pop
    range. ``launch_count`` bounds the number of profiled launches so a runaway loop cannot take an hour.
    """
    metrics = list(metrics)
    if not metrics:
        raise ValueError("no metrics to collect")
    bad = [m for m in metrics if not re.fullmatch(r"[A-Za-z0-9_.]+", m)]
    if bad:
        raise ValueError(f"not metric names: {bad}")
    cmd = [
        ncu,
        "--clock-control", "none",
        "--csv", "--page", "raw",
        "--print-units", "base",
        "--metrics", ",".join(metrics),
        "--target-processes", "all",
    ]
    if nvtx_range:
        cmd += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    if kernel_regex:
        re.compile(kernel_regex)  # fail here with a Python error rather than inside ncu
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    if kernel_ids:
        cmd += ["--kernel-id", kernel_ids]
    if launch_count:
        cmd += ["--launch-count", str(int(launch_count))]
    if log_file:
        cmd += ["--log-file", log_file]
    return cmd + list(program)


def command_text(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


# ---------------------------------------------------------------------------------------- parsing


class NcuCsvError(ValueError):
    """The text is not ncu --csv --page raw output; the message says what was expected."""


_FIXED_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                  "Block Size", "Grid Size", "Device", "CC")

# unit -> (factor to the base unit, base unit)
_UNITS: dict[str, tuple[float, str]] = {
    "nsecond": (1e-9, "second"), "usecond": (1e-6, "second"), "msecond": (1e-3, "second"),
    "second": (1.0, "second"), "ns": (1e-9, "second"), "us": (1e-6, "second"), "ms": (1e-3, "second"),
    "s": (1.0, "second"),
    "byte": (1.0, "byte"), "Kbyte": (1e3, "byte"), "Mbyte": (1e6, "byte"), "Gbyte": (1e9, "byte"),
    "Tbyte": (1e12, "byte"), "KB": (1e3, "byte"), "MB": (1e6, "byte"), "GB": (1e9, "byte"),
    "Kibyte": (1024.0, "byte"), "Mibyte": (1024.0**2, "byte"), "Gibyte": (1024.0**3, "byte"),
    "byte/second": (1.0, "byte/second"), "Kbyte/second": (1e3, "byte/second"),
    "Mbyte/second": (1e6, "byte/second"), "Gbyte/second": (1e9, "byte/second"),
    "Tbyte/second": (1e12, "byte/second"), "byte/s": (1.0, "byte/second"), "GB/s": (1e9, "byte/second"),
    "TB/s": (1e12, "byte/second"),
    "hz": (1.0, "hz"), "Khz": (1e3, "hz"), "Mhz": (1e6, "hz"), "Ghz": (1e9, "hz"),
    "cycle": (1.0, "cycle"), "Kcycle": (1e3, "cycle"), "Mcycle": (1e6, "cycle"),
}


def _number(text: str) -> float | None:
    t = text.strip()
    if not t or t.lower() in ("n/a", "nan", "-", "(!) n/a"):
        return None
    t = t.replace(",", "").replace("%", "")
    try:
        return float(t)
    except ValueError:
        return None


def _normalize(value: float, unit: str) -> tuple[float, str]:
    if unit in _UNITS:
        f, base = _UNITS[unit]
        return value * f, base
    # Compound units ncu prints such as "Kinst", "Msector", "Kwarp"... scale by the SI prefix.
    m = re.fullmatch(r"([KMGT])([a-z][a-z_/]*)", unit)
    if m:
        return value * {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(1)], m.group(2)
    return value, unit


@dataclass
class KernelLaunch:
    id: int
    name: str
    metrics: dict[str, float | str | None] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)  # fixed columns: block/grid size, device, CC...

    @property
    def duration_s(self) -> float | None:
        v = self.metrics.get("gpu__time_duration.sum")
        return v if isinstance(v, float) else None

    @property
    def library(self) -> bool:
        return is_library_kernel(self.name)


def _rows(text: str) -> list[list[str]]:
    # ncu mixes its own "==PROF==" lines and the program's stdout into the stream; the CSV starts at the
    # first line that begins with the quoted "ID" header.
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') or ln.startswith("ID,")), None)
    if start is None:
        hint = next((ln for ln in lines if ln.startswith("==ERROR==")), "")
        raise NcuCsvError("no ncu CSV header (a line starting with \"ID\") found" + (f"; ncu said: {hint}" if hint else ""))
    quoted = lines[start].startswith('"')
    # ncu quotes every cell; when it did, a line that does not start with a quote is the profiled
    # program's own output interleaved with the table, not a row.
    body = [lines[start]] + [ln for ln in lines[start + 1:]
                             if ln.strip() and not ln.startswith("==") and (ln.startswith('"') or not quoted)]
    return list(csv.reader(io.StringIO("\n".join(body))))


def parse_ncu_launches(text: str) -> list[KernelLaunch]:
    """Every profiled launch, metrics normalized to base units (seconds, bytes, bytes/second, %)."""
    rows = _rows(text)
    header = rows[0]
    if "Kernel Name" not in header:
        raise NcuCsvError(f"header has no 'Kernel Name' column: {header[:8]}")
    if len(rows) < 2:
        raise NcuCsvError("no units row after the header: is this --page raw output?")
    units = rows[1]
    if _number(units[header.index("Kernel Name")] or "x") is not None or (units and units[0].strip() not in ("",)):
        raise NcuCsvError("the second row is not a units row (its first cell should be empty): is this --page raw output?")
    fixed = [i for i, h in enumerate(header) if h in _FIXED_COLUMNS]
    launches: list[KernelLaunch] = []
    for r_i, row in enumerate(rows[2:], start=3):
        if len(row) != len(header):
            raise NcuCsvError(f"row {r_i}: {len(row)} cells, header has {len(header)}")
        info = {header[i]: row[i] for i in fixed}
        try:
            lid = int(info.get("ID", r_i - 3))
        except ValueError:
            lid = r_i - 3
        launch = KernelLaunch(id=lid, name=info.get("Kernel Name", "?"), info=info)
        for i, name in enumerate(header):
            if i in fixed:
                continue
            unit = units[i].strip() if i < len(units) else ""
            v = _number(row[i])
            if v is None:
                raw = row[i].strip()
                launch.metrics[name] = None if raw.lower() in ("", "n/a", "nan", "-") else raw
                launch.units[name] = unit
                continue
            v, base = _normalize(v, unit)
            launch.metrics[name] = v
            launch.units[name] = base
        launches.append(launch)
    return launches


def parse_ncu_csv(text: str) -> dict[str, dict[str, Any]]:
    """``{kernel_name: {metric: value}}``; several launches of one kernel are averaged.

    Adds ``launch_count`` (how many launches were merged), ``total_duration_s`` (their summed time) and
    ``library`` (True for torch/cuBLAS kernels).
    """
    out: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[KernelLaunch]] = {}
    for launch in parse_ncu_launches(text):
        groups.setdefault(launch.name, []).append(launch)
    for name, ls in groups.items():
        merged: dict[str, Any] = {}
        keys = {k for launch in ls for k in launch.metrics}
        for k in sorted(keys):
            vals = [launch.metrics.get(k) for launch in ls]
            nums = [v for v in vals if isinstance(v, float)]
            if nums:
                merged[k] = sum(nums) / len(nums)
            else:
                merged[k] = next((v for v in vals if v is not None), None)
        durations = [launch.duration_s for launch in ls if launch.duration_s is not None]
        merged["launch_count"] = len(ls)
        merged["total_duration_s"] = sum(durations) if durations else None
        merged["library"] = is_library_kernel(name)
        for fixed in ("Block Size", "Grid Size"):
            if fixed in ls[0].info:
                merged[fixed] = ls[0].info[fixed]
        out[name] = merged
    return out


# ------------------------------------------------------------------------- metrics -> evidence names


def _get(m: dict[str, Any], *names: str) -> float | None:
    for n in names:
        v = m.get(n)
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
            return float(v)
    return None


def _ratio(a: float | None, b: float | None, scale: float = 1.0) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b * scale


def kernel_evidence(m: dict[str, Any]) -> dict[str, Any]:
    """Flat, human-named evidence for one kernel from its ncu metrics (absent metrics are left out)."""
    ev: dict[str, Any] = {}

    def put(name: str, value: float | None) -> None:
        if value is not None:
            ev[name] = value

    dur = _get(m, "gpu__time_duration.sum")
    put("duration_us", dur * 1e6 if dur is not None else None)
    put("sm_throughput_pct", _get(m, "sm__throughput.avg.pct_of_peak_sustained_elapsed"))
    put("mem_throughput_pct", _get(m, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"))
    put("dram_throughput_pct", _get(m, "dram__throughput.avg.pct_of_peak_sustained_elapsed"))
    rd, wr = _get(m, "dram__bytes_read.sum"), _get(m, "dram__bytes_write.sum")
    put("dram_bytes", rd + wr if rd is not None and wr is not None else None)
    put("dram_gbs", (_get(m, "dram__bytes.sum.per_second") or 0) / 1e9 if _get(m, "dram__bytes.sum.per_second") is not None else None)
    put("issue_active_pct", _get(m, "smsp__issue_active.avg.pct_of_peak_sustained_active"))
    put("grid_size", _get(m, "launch__grid_size"))
    put("block_size", _get(m, "launch__block_size"))
    put("registers_per_thread", _get(m, "launch__registers_per_thread"))
    st, dy = _get(m, "launch__shared_mem_per_block_static"), _get(m, "launch__shared_mem_per_block_dynamic")
    if st is not None or dy is not None:
        ev["shared_mem_per_block"] = (st or 0) + (dy or 0)
    put("waves_per_sm", _get(m, "launch__waves_per_multiprocessor"))
    put("sm_count", _get(m, "device__attribute_multiprocessor_count"))
    for lim in ("registers", "shared_mem", "warps", "blocks"):
        put(f"occupancy_limit_{lim}", _get(m, f"launch__occupancy_limit_{lim}"))
    achieved = _get(m, "sm__warps_active.avg.pct_of_peak_sustained_active")
    theoretical = _get(m, "sm__maximum_warps_per_active_cycle_pct")
    put("achieved_occupancy_pct", achieved)
    put("theoretical_occupancy_pct", theoretical)
    if achieved is not None and theoretical is not None:
        ev["occupancy_gap_pct"] = theoretical - achieved
    limits = {k: ev[f"occupancy_limit_{k}"] for k in ("registers", "shared_mem", "warps", "blocks") if f"occupancy_limit_{k}" in ev}
    if limits:
        lowest = min(limits.values())
        # Name the limiter only when it is a real constraint (ties: the resource, not the hardware cap).
        order = ("registers", "shared_mem", "warps", "blocks")
        ev["occupancy_limiter"] = next(k for k in order if limits.get(k) == lowest)
    stalls = {r: _get(m, f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio") for r in STALL_REASONS}
    stalls = {r: v for r, v in stalls.items() if v is not None}
    total = sum(stalls.values())
    if stalls and total > 0:
        ev["stall_total_cycles_per_issue"] = total
        for r, v in stalls.items():
            ev[f"stall_{r}"] = v
            ev[f"stall_{r}_pct"] = v / total * 100
        top = max((r for r in stalls if r != "selected"), key=lambda r: stalls[r], default=None)
        if top:
            ev["top_stall"] = top
            ev["top_stall_pct"] = stalls[top] / total * 100
    conf = [_get(m, f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{o}.sum") for o in ("ld", "st")]
    wave = [_get(m, f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{o}.sum") for o in ("ld", "st")]
    if all(v is not None for v in conf + wave):
        ev["shared_wavefronts"] = wave[0] + wave[1]  # type: ignore[operator]
        ev["shared_bank_conflicts"] = conf[0] + conf[1]  # type: ignore[operator]
        if ev["shared_wavefronts"] > 0:
            ev["shared_bank_conflict_pct"] = ev["shared_bank_conflicts"] / ev["shared_wavefronts"] * 100
    for op, tag in (("ld", "load"), ("st", "store")):
        sectors = _get(m, f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum")
        requests = _get(m, f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum")
        useful = _get(m, f"sm__sass_data_bytes_mem_global_op_{op}.sum")
        if op == "ld":
            # cp.async (LDGSTS) traffic shows up in the L1 op_ld sectors but in its own SASS byte count.
            async_bytes = _get(m, "sm__sass_data_bytes_mem_global_op_ldgsts.sum")
            if async_bytes is not None and useful is not None:
                useful += async_bytes
            elif useful == 0:
                # Sectors moved with zero LDG bytes: the loads are async copies whose bytes were not
                # collected; an efficiency of 0% would be a false alarm, so leave it unknown.
                useful = None
        put(f"global_{tag}_sectors_per_request", _ratio(sectors, requests))
        # Efficiency: bytes the threads asked for over bytes moved in 32-byte sectors (100% = coalesced).
        eff = _ratio(useful, sectors * 32 if sectors is not None else None, 100.0)
        put(f"global_{tag}_efficiency_pct", min(eff, 100.0) if eff is not None else None)
        put(f"global_{tag}_bytes", useful)
    lld, lst = _get(m, "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"), _get(m, "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")
    if lld is not None and lst is not None:
        ev["local_memory_bytes"] = lld + lst
    put("spill_instructions", _get(m, "sass__inst_executed_register_spilling"))
    tensor = [_get(m, n) for n in (
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    )]
    tensor = [t for t in tensor if t is not None]
    if tensor:
        ev["tensor_pipe_pct"] = max(tensor)
    put("fma_pipe_pct", _get(m, "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"))
    put("lsu_pipe_pct", _get(m, "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"))
    put("l2_hit_rate_pct", _get(m, "lts__t_sector_hit_rate.pct"))
    put("l1_hit_rate_pct", _get(m, "l1tex__t_sector_hit_rate.pct"))
    put("instructions", _get(m, "smsp__inst_executed.sum"))
    return ev


def ncu_evidence(csv_text: str, kernel: str | None = None) -> Collected:
    """Evidence from recorded ``ncu --csv --page raw`` text.

    The candidate's dominant kernel (the longest non-library kernel, or ``kernel`` when given: an exact
    name or a regex) supplies the per-kernel evidence; ``kernels_per_call`` and ``kernel_time_us`` cover
    every profiled launch.
    """
    try:
        kernels = parse_ncu_csv(csv_text)
    except NcuCsvError as e:
        return Collected.unavailable("ncu", str(e))
    if not kernels:
        return Collected.unavailable("ncu", "the CSV lists no kernel launches (did the NVTX/kernel filter match?)")
    if kernel is not None:
        names = [n for n in kernels if n == kernel] or [n for n in kernels if re.search(kernel, n)]
        if not names:
            return Collected.unavailable("ncu", f"no profiled kernel matches {kernel!r}; have {sorted(kernels)}")
    else:
        own = [n for n in kernels if not kernels[n]["library"]]
        names = own or list(kernels)

    def total(n: str) -> float:
        return kernels[n].get("total_duration_s") or 0.0

    main = max(names, key=total)
    ev = kernel_evidence(kernels[main])
    all_time = sum(total(n) for n in kernels)
    ev["kernel_name"] = main
    ev["kernels_per_call"] = sum(int(k["launch_count"]) for k in kernels.values())
    ev["kernel_time_us"] = all_time * 1e6
    ev["library_kernel_time_pct"] = (sum(total(n) for n in kernels if kernels[n]["library"]) / all_time * 100) if all_time else 0.0
    ev["main_kernel_time_pct"] = total(main) / all_time * 100 if all_time else 100.0
    # Other own kernels that take a real share of the time get their own kernel-level diagnosis.
    secondary = []
    if kernel is None and all_time:
        for n in sorted(kernels, key=total, reverse=True):
            share = total(n) / all_time
            if n != main and not kernels[n]["library"] and share >= SECONDARY_SHARE:
                secondary.append({"kernel": n, "share": share, "evidence": kernel_evidence(kernels[n])})
    return Collected(source="ncu", evidence=ev, raw={"kernels": kernels, "main_kernel": main, "secondary": secondary})


SECONDARY_SHARE = 0.10  # a kernel under 10% of the call's GPU time is not worth its own advice


# ------------------------------------------------------------------------------------- running ncu

_ALWAYS_KEEP = ("launch__", "device__")  # launch attributes are not always listed by --query-metrics
_known_cache: dict[str, set[str] | None] = {}


def known_metric_bases(ncu: str, timeout: float = 120) -> tuple[set[str] | None, str]:
    """Base metric names this ncu lists for the local GPU (``--query-metrics``); None if it cannot say
    (a query stopped at ``timeout`` is not remembered: the next run asks again)."""
    if ncu in _known_cache:
        return _known_cache[ncu], ""
    try:
        p = run_bounded([ncu, "--query-metrics"], timeout=timeout)
        text = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return None, f"query did not finish in {timeout:.1f} s: {e}"
    except OSError as e:
        _known_cache[ncu] = None
        return None, f"query failed: {e}"
    known = set(re.findall(r"^\s*([a-z0-9_]+__[A-Za-z0-9_]+)", p.stdout, re.M))
    result = known if len(known) >= 50 else None  # a parse problem must not throw the whole list away
    _known_cache[ncu] = result
    return result, text


def filter_metrics(metrics: Iterable[str], known_bases: set[str] | None) -> tuple[list[str], list[str]]:
    """(kept, dropped): a metric is kept when its base name (before the first '.') is known."""
    metrics = list(metrics)
    if known_bases is None:
        return metrics, []
    # Names without a rollup suffix (sm__maximum_warps_per_active_cycle_pct) are not listed by the query
    # on ncu 2025.3 yet are valid; keep them and let run_ncu's retry remove any that are not.
    kept = [m for m in metrics if m.startswith(_ALWAYS_KEEP) or "." not in m or m.split(".", 1)[0] in known_bases]
    if len(kept) < len(metrics) / 2:
        # The query listed names in a shape we did not parse: trust ncu's own errors (run_ncu retries).
        return metrics, []
    return kept, [m for m in metrics if m not in kept]


@dataclass
class NcuRun:
    csv: str  # "" when ncu produced no CSV
    command: list[str]
    returncode: int | None
    log: str  # ncu's stderr (all attempts), for the archive
    dropped: list[str] = field(default_factory=list)  # metrics removed because this ncu rejected them


def run_ncu(program: list[str], *, ncu: str, metrics: Iterable[str] = METRICS, env: dict[str, str] | None = None,
            cwd: str | None = None, timeout: float = 600, attempts: int = 4, **command_kw: Any) -> NcuRun:
    """Run ncu on ``program``; metrics this ncu does not know are dropped (query first, then on error).

    One unknown metric name makes ncu refuse the whole run, and metric sets change between ncu versions
    and GPUs, so the curated list is filtered against ``--query-metrics`` and, if ncu still complains,
    the names on its ``==ERROR==`` lines are removed and it runs again.

    ``timeout`` bounds the whole call (the query and every attempt together, ncu's start-up included):
    each process gets what is left, its process group is killed there, and ``subprocess.TimeoutExpired``
    is raised.
    """
    deadline = time.monotonic() + timeout

    def left() -> float:
        rest = deadline - time.monotonic()
        if rest <= 0:
            raise subprocess.TimeoutExpired([ncu], timeout)
        return rest

    known, _ = known_metric_bases(ncu, timeout=min(120.0, left()))
    wanted, dropped = filter_metrics(metrics, known)
    logs: list[str] = []
    cmd: list[str] = []
    rc: int | None = None
    for attempt in range(attempts):
        cmd = ncu_command(program, metrics=wanted, ncu=ncu, **command_kw)
        p = run_bounded(cmd, timeout=left(), env=env, cwd=cwd)
        rc = p.returncode
        logs.append(f"$ {command_text(cmd)}\n# attempt {attempt}, rc={rc}\n{p.stderr[-20000:]}")
        if re.search(r'^"?ID"?,', p.stdout, re.M):
            return NcuRun(p.stdout, cmd, rc, "\n".join(logs), dropped)
        errors = [ln for ln in (p.stdout + "\n" + p.stderr).splitlines() if "==ERROR==" in ln]
        bad = [m for m in wanted if any(m in ln or m.split(".", 1)[0] in ln for ln in errors)]
        if not bad:
            break
        dropped += bad
        wanted = [m for m in wanted if m not in bad]
    return NcuRun("", cmd, rc, "\n".join(logs), dropped)
