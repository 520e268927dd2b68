"""Human-readable report tables for the terminal.

Every table goes through ``print_rows``: a table when it fits the console's width, else one block per
row (its first cell as the heading, the others as ``column: value`` lines), so that at 80 columns, and
outside a terminal (rich then assumes 80), no value is cut to ``…`` or broken across lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from .report import LatencyStats, Report, best_baseline
from .schema import Status


def print_rows(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]], *, title: str | None = None,
               right: Sequence[str] = (), wrap: Sequence[str] = ()) -> None:
    """``rows`` (cells may carry rich markup) as a table when it fits ``console``, else as one block per
    row. ``right``: columns aligned to the right in the table (numbers); ``wrap``: prose columns that
    may wrap at spaces inside the table (every other cell stays whole on its line)."""
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True,
              padding=(0, 1))
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left", no_wrap=col not in wrap)
    for r in rows:
        t.add_row(*r)
    if Measurement.get(console, console.options.update_width(10_000), t).minimum <= console.width:
        console.print(t)
        return
    # soft_wrap: a value longer than the console stays one line (the terminal wraps it), never split by us
    if title:
        console.print(f"[bold]{title}[/]", highlight=False)
    for r in rows:
        console.print(f"[bold]{r[0]}[/]", highlight=False, soft_wrap=True)
        for col, cell in zip(columns[1:], r[1:]):
            console.print(f"  {col}: {cell}", highlight=False, soft_wrap=True)


_STYLE = {Status.PASSED: "green", Status.TIMEOUT: "yellow", Status.REJECTED: "bold red"}


def fmt_ms(s: LatencyStats | None) -> str:
    if s is None:
        return "-"
    unit, k = ("µs", 1000.0) if s.median < 1 else ("ms", 1.0)
    return f"{s.median * k:.3g} {unit} [{s.ci95[0] * k:.3g}, {s.ci95[1] * k:.3g}]"


def roofline_text(r) -> str:
    """A workload's roofline: the fraction of its floor reached, as a percentage that keeps two
    significant digits when small (a CPU run's 0.0024%), and the bound class."""
    if r is None or r.fraction is None:
        return "-"
    p = 100 * r.fraction
    pct = f"{p:.0f}%" if p >= 10 else f"{p:.1f}%" if p >= 1 else f"{p:.2g}%"
    return pct + (f" ({r.bound})" if r.bound else "")


def time_breakdown(report: Report) -> str | None:
    """One line on where a run's seconds went, from the parent's timeline and the workers' phases."""
    marks = dict(report.config.get("timeline_s") or [])
    if not marks:
        return None
    total = max(marks.values())
    parts = [f"{total:.1f} s after the static guard"]
    startup = report.config.get("worker_startup_s") or {}
    if "torch_import" in startup:
        parts.append(f"torch import {startup['torch_import']:.1f} s")
    if "observed" in marks:
        parts.append(f"CUPTI observer done at {marks['observed']:.1f} s")
    phases: dict[str, float] = {}
    for w in report.workloads:
        for k, v in ((w.profile or {}).get("phase_s") or {}).items():
            phases[k] = phases.get(k, 0.0) + float(v)
    if phases:
        parts.append("workloads: " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} s" for k, v in phases.items() if v >= 0.05))
    return "time: " + "; ".join(parts)


def check_lines(checks: dict[str, dict]) -> list[str]:
    """One line per extra kbot check (beside the official verdict, never part of it)."""
    out = []
    for name, c in checks.items():
        worst = f"worst {c['worst']:.4g}" if c["worst"] is not None else "nothing measured"
        limit = f" (limit {c['limit']:g})" if c["limit"] is not None else ""
        verdict = "[green]passed[/]" if not c["failed"] else f"[red]FAILED on {', '.join(c['failed'][:12])}[/]: {c['worst_message'][:300]}"
        out.append(f"kbot check {name}: {c['passed']}/{c['workloads']} workloads, {worst}{limit}; {verdict}")
    return out


def print_report(report: Report, out_dir: Path, console: Console | None = None) -> None:
    console = console or Console()
    if report.unavailable:
        console.print(f"[yellow]{report.solution}: could not run here: {report.unavailable}[/] (nothing was measured)", highlight=False)
        console.print(f"[dim]report: {out_dir / 'report.json'}[/]")
        return
    title = f"{report.solution} on {report.definition} — {report.device.name} ({report.device.timer})"
    title += " — a declared baseline (baseline trust level)" if report.trust == "baseline" else ""
    gpu_col = any(w.kernel_time is not None for w in report.workloads)
    lib_col = any(w.baselines for w in report.workloads)
    columns = (("workload", "axes", "status", "latency (95% CI)") + (("GPU time (CUPTI)",) if gpu_col else ())
               + ("reference", "× ref", "× baseline") + (("× best declared baseline",) if lib_col else ()) + ("roofline",))
    rows = []
    for w in report.workloads:
        best = best_baseline(w)
        ratio = w.speedup_vs_baseline
        kt = w.kernel_time
        rows.append([
            w.uuid[:8],
            ",".join(f"{k}={v}" for k, v in w.axes.items()),
            f"[{_STYLE.get(w.status, 'red')}]{w.status.value}[/]",
            fmt_ms(w.latency_ms),
            *(
                (fmt_ms(kt.latency_ms) if kt and kt.latency_ms and w.status is Status.PASSED else "withheld" if kt and w.status is Status.PASSED else "-",)
                if gpu_col
                else ()
            ),
            fmt_ms(w.reference_latency_ms),
            f"{w.speedup_vs_reference:.3g}" if w.speedup_vs_reference else "-",
            f"{ratio.median:.3f} [{ratio.ci95[0]:.3f}, {ratio.ci95[1]:.3f}]" if ratio else "-",
            *((f"{best[1].speedup.median:.3f} ({best[0]})" if best and best[1].speedup else "-",) if lib_col else ()),
            roofline_text(w.roofline),
        ])
    print_rows(console, columns, rows, title=title)
    for w in report.workloads:
        if w.status is not Status.PASSED and w.message:
            console.print(f"[red]{w.uuid[:8]}[/] {w.status.value}: {w.message[:500]}", highlight=False)
        elif w.message:  # a passing result with a caveat (a busy GPU, a failed reference timing)
            console.print(f"[yellow]{w.uuid[:8]}[/] note: {w.message[:500]}", highlight=False)
        if w.kernel_time is not None and w.kernel_time.withheld and w.status is Status.PASSED:
            console.print(f"[dim]{w.uuid[:8]} GPU time: {w.kernel_time.withheld[:300]}[/]", highlight=False)
        for name, b in w.baselines.items():
            if b.status is not Status.PASSED:
                console.print(f"[dim]{w.uuid[:8]} baseline {name}: {b.status.value}: {b.message[:300]}[/]", highlight=False)
    s = report.summary()
    console.print(
        f"{s['passed']}/{s['workloads']} passed; mean speedup vs reference {s['mean_speedup_vs_reference']:.2f}x"
        + (f"; geomean vs baseline {s['geomean_speedup_vs_baseline']:.3f}x" if s.get("geomean_speedup_vs_baseline") else "")
        + (f"; geomean vs the best declared baseline {s['geomean_speedup_vs_best_baseline']:.3f}x over {s['best_baseline_workloads']} workloads"
           if s.get("geomean_speedup_vs_best_baseline") else "")
    )
    for line in check_lines(s["checks"]):
        console.print(line, highlight=False)
    for b in report.baselines:
        if b.state != "ran":
            console.print(f"[yellow]baseline {b.name}: {b.state} here: {b.reason}[/]", highlight=False)
    if report.device.note:
        console.print(f"[dim]{report.device.note}[/]")
    line = time_breakdown(report)
    if line:
        console.print(f"[dim]{line}[/]", highlight=False)
    console.print(f"[dim]traces: {out_dir / 'traces.jsonl'}  report: {out_dir / 'report.json'}[/]")
