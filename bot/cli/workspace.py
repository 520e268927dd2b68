"""The local workspace commands of ``kbot`` (registered through the ``kbot.commands`` entry points).

    kbot optimize DEFINITION       a campaign on the local forge (see bot/campaign/local_loop.py)
    kbot submit SOLUTION.json      a person's kernel as a PR, judged like an agent's (bot/campaign/local_submit.py)
    kbot pr list | kbot pr show N  the local pull requests, their reviews, statuses and decisions
    kbot pr approve N              a maintainer's approval of a person's PR, then the promotion rules
    kbot leaderboard [DEFINITION]  champion lineage from the workspace's main
    kbot report --html DIR         static site of the workspace (opens from disk)
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import click

from bot.names import STATUS_CONTEXT
from harness.dataset import click_option as dataset_click_option

DATASET_OPT = dataset_click_option()
WORKSPACE_OPT = click.option("--workspace", type=click.Path(file_okay=False), default=".kbot/workspace",
                             show_default=True, help="Local workspace: forge (bare git repo + store), runs, campaigns.")


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


def _workspace(path: str, *, must_exist: bool = True):
    from bot.campaign.local_loop import Workspace

    if must_exist and not (Path(path) / "forge" / "repo.git").exists():
        _fail(f"no kbot workspace at {path}; run `kbot optimize DEFINITION` first (or pass --workspace)")
    return Workspace(path)


def _x(v: Any) -> str:
    if isinstance(v, (int, float)) and v == v:
        return f"{v:.3g}x" if abs(v) < 0.1 else f"{v:.3f}x"
    return "—"


def _progress_printer(console: Any):
    """Progress lines on stderr while a campaign runs (stdout stays clean for --json)."""
    t0 = time.monotonic()

    def say(msg: str) -> None:
        console.print(f"[dim]{time.monotonic() - t0:6.1f}s[/dim] {msg}", highlight=False)

    def event(kind: str, d: dict[str, Any]) -> None:
        if kind == "campaign":
            say(f"campaign [bold]{d['id']}[/bold] ({'resumed' if d['resume'] else 'new'}) — agent {d['agent']}, "
                f"device {d['device']}{' (CPU timing: Triton interpreter, not a GPU measurement)' if d['device'] == 'cpu' else ''}; "
                f"{d.get('inputs') or str(d['n_workloads']) + ' workloads from ' + d['workloads']}")
        elif kind == "start":
            say(f"no champion yet: starting point [bold]{d['solution']}[/bold] ({d['description']})")
        elif kind == "pr":
            say(f"opened PR [bold]#{d['pr']}[/bold] {d['branch']} ({d['solution']})")
        elif kind == "harness.start":
            say(f"evaluating {d['solution']}" + (f" paired with champion {d['baseline']}" if d.get("baseline") else " (alone)")
                + (" — resuming an interrupted run" if d.get("resume") else ""))
        elif kind == "harness.cached":
            say(f"{d['solution']}: finished evaluation found, not repeated")
        elif kind == "harness.workload":
            w = d.get("obj")
            if w is not None and hasattr(w, "status"):
                lat = f", median {w.latency_ms.median:.3f} ms" if w.latency_ms else ""
                sp = f", {w.speedup_vs_baseline.median:.3f}x vs champion" if w.speedup_vs_baseline else ""
                say(f"  workload {w.axes}: {w.status.value}{lat}{sp}")
        elif kind == "harness.profiled":
            left = [*(d.get("left_out") or []), *(x for x in d.get("steps") or [] if x.get("outcome") == "stopped at the budget")]
            say(f"  profiled {d['solution']}: {d.get('items', 0)} feedback items, {d.get('spent_s', 0):.1f} s"
                + (f" (budget {d['budget_s']:g} s)" if d.get("budget_s") else "")
                + (f"; cut for the budget: {', '.join(x['step'] + (' of ' + str(x['workload'])[:8] if x.get('workload') else '') for x in left)}"
                   if left else "")
                + ("; over the budget" if d.get("within_budget") is False else ""))
        elif kind == "decision":
            style = {"promote": "green", "reject": "red", "rebenchmark": "yellow"}.get(d["decision"], "white")
            say(f"PR #{d['pr']}: [{style}]{d['decision']}[/{style}] — {d['headline']}"
                + (f"; merged as {d['merged_sha'][:12]}" if d.get("merged_sha") else ""))
        elif kind == "gpus.round":
            say(f"measuring {d['evaluations']} evaluation(s) at once on GPUs {', '.join(map(str, d['gpus']))}")
        elif kind == "gpus.start":
            say(f"  GPU {d['gpu']}: {d['solution']}" + (f" paired with {d['champion']}" if d.get("champion") else " (alone)"))
        elif kind == "gpus.lost":
            say(f"[red]GPU {d['gpu']} lost[/red] under {d['solution']} ({d['why']}): its result is set aside, measured again elsewhere")
        elif kind == "step" and d.get("stopped"):
            say(f"campaign stopped: {d.get('reason')}")

    return event


def _print_summary(console: Any, s: dict[str, Any]) -> None:
    """The campaign's candidates as a table (one block per candidate when the table is wider than the
    console: at 80 columns and in a log nothing is cut)."""
    from harness.report_table import print_rows

    with_baselines = any(r.get("speedup_vs_best_baseline") is not None for r in s["candidates"])
    on_gpus = any("gpu" in r for r in s["candidates"])
    cols = ["node", "PR", "status", "mean ms", "vs champion", "vs start", "vs reference"] + (["vs best baseline"] if with_baselines else [])
    cols += (["GPU"] if on_gpus else []) + ["roofline largest / geomean", "decision"]
    rows = []
    for r in s["candidates"]:
        lat = f"{r['mean_latency_ms']:.3f}" if r["mean_latency_ms"] is not None else "—"
        # At the largest workload (with its bound class) / the geometric mean over workloads.
        roof = (f"{_pct(r['roofline_fraction_largest'])}" + (f" ({r['roofline_bound_largest']})" if r.get("roofline_bound_largest") else "")
                + f" / {_pct(r['roofline_fraction_geomean'])}"
                if r.get("roofline_fraction_largest") is not None and r.get("roofline_fraction_geomean") is not None else "—")
        dec = r["decision"] or "—"
        style = {"promote": "green", "reject": "red", "champion": "cyan"}.get(dec, "white")
        rows.append([r["node"], f"#{r['pr']}" if r["pr"] else "—", r["status"] or "—", lat, _x(r["speedup_vs_champion"]),
                     _x(r["speedup_vs_start"]), _x(r["speedup_vs_reference"]),
                     *((_x(r.get("speedup_vs_best_baseline")),) if with_baselines else ()),
                     *((str(r.get("gpu", "—")),) if on_gpus else ()), roof, f"[{style}]{dec}[/{style}]"])
    print_rows(console, cols, rows, title=f"{s['campaign']} — {s['timing']}",
               right=["PR", "mean ms", "vs champion", "vs start", "vs reference", "vs best baseline", "roofline largest / geomean"])


def _pct(v: Any) -> str:
    if not isinstance(v, (int, float)) or v != v:
        return "—"
    p = 100 * v
    return f"{p:.0f}%" if p >= 10 else f"{p:.1f}%" if p >= 1 else f"{p:.2g}%"


def _baselines_lines(s: dict[str, Any]) -> list[str]:
    """Under the summary table: the declared baselines that could not run here, and why."""
    b = s.get("baselines") or {}
    return [f"baseline {name}: could not run here: {why}" for name, why in sorted((b.get("could_not_run") or {}).items())]


_PRE = re.compile(r"<pre>(.*?)</pre>", re.S)
_SUMMARY = re.compile(r"^<details(?: open)?><summary>(.*?)</summary>\s*$", re.M)
_MERMAID = re.compile(r"^```mermaid\n(.*?)\n```$", re.S | re.M)


def _text_chart(source: str) -> str:
    """The review's bar chart as text bars (a fenced block), the threshold as a ``|`` on each bar."""
    from bot.site.charts import parse_xychart

    c = parse_xychart(source)
    if c is None:
        return f"```\n{source}\n```"
    threshold = next((line[0] for line in c.lines if line and all(v == line[0] for v in line)), None)
    top = max(c.bars + [threshold or 0.0, 1e-9])
    width = 40
    rows = [c.title] if c.title else []
    labels = c.labels or [str(i + 1) for i in range(len(c.bars))]
    for label, v in zip(labels, c.bars):
        cells = list("█" * round(width * v / top) + " " * (width - round(width * v / top)))
        if threshold is not None:
            cells[min(width - 1, round(width * threshold / top))] = "|"
        rows.append(f"{label:>5} {''.join(cells)} {v:g}x" if v > 0 else f"{label:>5} {''.join(cells)} failed")
    if threshold is not None:
        rows.append(f"      | = promotion threshold {threshold:g}x")
    return "```\n" + "\n".join(rows) + "\n```"


def for_terminal(body: str) -> str:
    """A review or comment body as Markdown rich can render: without the hidden machine lines (the
    marker, the base64 evidence block), ``<details>`` folds as bold headings, ``<pre>`` blocks as
    fenced code with their entities decoded, the Mermaid chart as text bars."""
    import html

    from bot.forge.markers import strip_hidden

    text = strip_hidden(body)
    text = _MERMAID.sub(lambda m: _text_chart(m.group(1)), text)

    def pre(m: re.Match) -> str:
        content = html.unescape(m.group(1)).strip("\n")
        fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", content)), default=0) + 1)
        return f"\n{fence}\n{content}\n{fence}\n"

    text = _PRE.sub(pre, text)
    text = _SUMMARY.sub(lambda m: f"**{m.group(1)}**", text)
    return re.sub(r"^</details>\s*$", "", text, flags=re.M)


def _gpu_lines(s: dict[str, Any]) -> list[str]:
    """Under the summary table of a --gpus run: each GPU, its ceilings, what it measured, whether it was lost."""
    out = []
    for g in s.get("gpus") or []:
        c = g.get("ceilings") or {}
        ceil = (f"copy {c['copy_bandwidth_gbs']:.0f} GB/s ({c.get('source', '?')})" if isinstance(c.get("copy_bandwidth_gbs"), (int, float))
                else "no ceilings")
        out.append(f"GPU {g['index']} {g.get('name', '')}: {ceil}; {len(g.get('evaluations') or [])} evaluations"
                   + (f"; LOST: {g['lost']}" if g.get("lost") else ""))
    return out


def evaluation_options(fn):
    """What a local evaluation takes (``optimize`` and ``submit``): device, workspace, workloads, dataset, budget."""
    for opt in reversed((
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True),
        WORKSPACE_OPT,
        click.option("--workloads", type=click.Path(dir_okay=False, exists=True),
                     help="Workloads JSONL (default on CPU: the definition's workloads.small.jsonl when present)."),
        DATASET_OPT,
        click.option("--budget", "budget_s", type=click.FloatRange(0.01, 600), help="Timing budget per workload in seconds."),
        click.option("--baselines/--no-baselines", "baselines", default=None,
                     help="Measure the definition's declared baselines beside each candidate (default: on the GPU "
                          "only). --no-baselines spares their time (a torch.compile baseline compiles for every "
                          "workload); the review then has no 'vs best baseline' column."),
    )):
        fn = opt(fn)
    return fn


def _dataset(arg: str | None) -> Path | None:
    """``--dataset`` / ``FIB_DATASET_PATH``, checked (exit 2 when it is not a dataset)."""
    from harness.dataset import dataset_root
    from harness.schema import SchemaError

    try:
        return dataset_root(arg)
    except SchemaError as e:
        _fail(str(e))
        raise  # unreachable


def _known_agent(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--agent`` checked against the agent catalog (asked only when the option is given)."""
    if value is None:
        return None
    from bot.agents.catalog import available

    known = available()
    if value not in known:
        raise click.BadParameter(f"{value!r} is not one of {', '.join(map(repr, known))}.")
    return value


def register(cli: click.Group) -> None:
    @cli.command("optimize")
    @click.argument("definition")
    @click.option("--agent", callback=_known_agent, metavar="NAME",
                  help="An agent of the catalog (offline, anthropic, openai, plugins). "
                       "Default: anthropic/openai when ANTHROPIC_API_KEY/OPENAI_API_KEY is set, else offline.")
    @click.option("--model", help="The model the agent calls (anthropic, openai and LLM plugins).")
    @click.option("--base-url", "base_url", metavar="URL", help="The API endpoint (an OpenAI- or Anthropic-compatible gateway).")
    @click.option("--temperature", type=float, help="Sampling temperature (0..2).")
    @click.option("--max-tokens", "max_tokens", type=int, help="Output tokens per model call.")
    @click.option("--top-p", "top_p", type=float, help="Nucleus sampling (0..1].")
    @click.option("--agent-config", "agent_config", type=click.Path(dir_okay=False, exists=True),
                  help="An agent config file (YAML/TOML/JSON: an `agent:` section or just its keys); the options above win.")
    @click.option("--rounds", type=click.IntRange(1, 100), default=2, show_default=True, help="Rounds of search (one agent call each).")
    @click.option("--candidates", type=click.IntRange(1, 16), default=2, show_default=True, help="Candidates (PRs) per round.")
    @evaluation_options
    @click.option("--new", "new", is_flag=True, help="Start a new campaign even if an interrupted one can be resumed.")
    @click.option("--gpus", "gpus", metavar="N|all|I,J,...",
                  help="Measure a round's candidates concurrently, one per GPU of this host (a count, all, or indices "
                       "such as 0,2); decisions stay one at a time in candidate order.")
    @click.option("--profile/--no-profile", "profile", default=True, show_default=True,
                  help="Feedback items for every candidate: roofline and ahead-of-time compile statistics everywhere, "
                       "ncu/SASS/energy on the GPU (they steer the agent's next move).")
    @click.option("--profile-budget", "profile_budget_s", type=click.FloatRange(1, 3600), default=120.0, show_default=True,
                  help="Seconds of GPU profiling per candidate (the cost is recorded in each report).")
    @click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
    def optimize_cmd(definition: str, agent: str | None, model: str | None, base_url: str | None,
                     temperature: float | None, max_tokens: int | None, top_p: float | None, agent_config: str | None,
                     rounds: int, candidates: int, device: str, workspace: str,
                     workloads: str | None, dataset_arg: str | None, budget_s: float | None, baselines: bool | None, new: bool,
                     gpus: str | None, profile: bool, profile_budget_s: float, as_json: bool) -> None:
        """Run the optimization loop on a local forge: each candidate is a branch + PR, evaluated by the
        harness against the champion, reviewed, and merged if the promotion policy says so.
        Re-running after an interruption resumes: finished evaluations and PRs are not repeated."""
        from rich.console import Console

        from bot.campaign.local_loop import LoopError, OptimizeOptions, optimize

        err = Console(stderr=True, soft_wrap=True)  # one line per event, even in a log file
        opts = OptimizeOptions(definition=definition, agent=agent, rounds=rounds, candidates=candidates, device=device,
                               workspace=Path(workspace), workloads=Path(workloads) if workloads else None,
                               dataset=_dataset(dataset_arg), budget_s=budget_s, baselines=baselines, new=new, gpus=gpus,
                               agent_settings={"model": model, "base_url": base_url, "temperature": temperature,
                                               "max_tokens": max_tokens, "top_p": top_p},
                               agent_config=Path(agent_config) if agent_config else None,
                               profile=profile, profile_budget_s=profile_budget_s)
        try:
            summary = optimize(opts, _progress_printer(err))
        except (LoopError, ValueError, RuntimeError) as e:
            _fail(str(e))
        if as_json:
            click.echo(json.dumps(summary, indent=1, default=str))
            return
        out = Console()
        _print_summary(out, summary)
        for line in _baselines_lines(summary) + _gpu_lines(summary):
            out.print(line, highlight=False)
        ch = summary["champion"]
        hl = summary.get("headline") or {}
        if hl.get("speedup_vs_campaign_start") is not None:
            links = " × ".join(f"{x:.3f}" for x in hl.get("links_since_campaign_start") or [])
            out.print(f"champion {hl['speedup_vs_campaign_start']:.3f}x over this campaign's start"
                      + (f" ({links}: each promotion's paired ratio over the champion it replaced)" if links else " (no promotion)")
                      + (f"; {hl['speedup_vs_first_champion']:.3f}x over the first champion on record, {hl['first_champion']}"
                         if hl.get("speedup_vs_first_champion") is not None else ""), highlight=False)
        out.print(f"champion of {summary['definition']}: [bold]{ch['solution']}[/bold]"
                  + (f" (PR #{ch['pr']})" if ch["pr"] else " (the starting point)")
                  + f"; {summary['evaluations_run']} evaluations run, {summary['evaluations_cached']} reused from the cache")
        out.print(f"next: kbot pr list --workspace {workspace} · kbot report --html .kbot/report --workspace {workspace}")

    @cli.command("submit")
    @click.argument("solution_json", type=click.Path(dir_okay=False, exists=True))
    @click.option("--author", help="The person submitting: 'Name <email>' (default: git config user.name / user.email).")
    @click.option("--definition", "-d", "definition", help="Definition (name or path; default: the solution's own).")
    @click.option("--approve", is_flag=True, help="Approve this head as the workspace's owner, so the promotion rules may merge it.")
    @evaluation_options
    @click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON on stdout.")
    def submit_cmd(solution_json: str, author: str | None, definition: str | None, approve: bool, device: str, workspace: str,
                   workloads: str | None, dataset_arg: str | None, budget_s: float | None, baselines: bool | None,
                   as_json: bool) -> None:
        """Submit a kernel written by a person: a branch with the person's commit, a PR naming them, the
        same evaluation (paired with the champion), review and promotion rules as an agent's attempt.
        Merging a person's code also needs a maintainer's approval of the measured head: --approve, or
        `kbot pr approve N` later."""
        from rich.console import Console

        from bot.campaign.local_loop import LoopError
        from bot.campaign.local_submit import SubmitOptions, parse_author, submit

        err = Console(stderr=True, soft_wrap=True)
        try:
            opts = SubmitOptions(solution=Path(solution_json), author=parse_author(author), definition=definition,
                                 workspace=Path(workspace), device=device, workloads=Path(workloads) if workloads else None,
                                 dataset=_dataset(dataset_arg), budget_s=budget_s, baselines=baselines, approve=approve)
            out = submit(opts, _progress_printer(err))
        except (LoopError, ValueError, RuntimeError) as e:
            _fail(str(e))
        if as_json:
            click.echo(json.dumps(out, indent=1, default=str))
            return
        click.echo(f"PR #{out['pr']} ({out['branch']}) by {out['author']}: {out['decision']} — {out['headline']}")
        click.echo(f"next: kbot pr show {out['pr']} --workspace {workspace}"
                   + ("" if out["merged_sha"] or approve else f" · kbot pr approve {out['pr']} --workspace {workspace}"))

    @cli.group("pr")
    def pr_group() -> None:
        """Pull requests of the local forge."""

    @pr_group.command("approve")
    @click.argument("number", type=int)
    @WORKSPACE_OPT
    def pr_approve(number: int, workspace: str) -> None:
        """Approve a person's PR at its head as the workspace's owner, then apply the promotion rules to
        its last evaluation (on GitHub: a maintainer's approving review, then /promote)."""
        from bot.campaign.local_loop import LoopError
        from bot.campaign.local_submit import approve
        from bot.forge.base import ForgeError

        ws = _workspace(workspace)
        try:
            click.echo(approve(ws, number))
        except (LoopError, ForgeError) as e:
            _fail(str(e))

    @pr_group.command("list")
    @WORKSPACE_OPT
    @click.option("--state", type=click.Choice(["open", "closed", "all"]), default="all", show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    def pr_list(workspace: str, state: str, as_json: bool) -> None:
        """One line per PR: number, state, decision status, branch, title."""
        ws = _workspace(workspace)
        rows = []
        for p in ws.forge.list_prs(state=state):  # type: ignore[arg-type]
            st = ws.forge.combined_status(p.head_sha).get(STATUS_CONTEXT)
            rows.append({"number": p.number, "state": "merged" if p.merged else p.state, "branch": p.head_branch,
                         "title": p.title, "status": st.state if st else None, "status_description": st.description if st else None})
        if as_json:
            click.echo(json.dumps(rows, indent=1))
            return
        from rich.console import Console
        from rich.markup import escape

        from harness.report_table import print_rows

        print_rows(Console(), ["PR", "state", "status", "branch", "summary"],
                   [[f"#{r['number']}", r["state"], str(r["status"] or "—"), escape(r["branch"]), escape(r["status_description"] or "")]
                    for r in rows], right=["PR"], wrap=["summary"])

    @pr_group.command("show")
    @click.argument("number", type=int)
    @WORKSPACE_OPT
    @click.option("--json", "as_json", is_flag=True, help="Print the PR, its status, the review's raw body and the comments as JSON.")
    def pr_show(number: int, workspace: str, as_json: bool) -> None:
        """The PR, its status, the bot's review (with the decision) and the conversation, rendered for the
        terminal (the hidden machine blocks left out; the chart drawn as text bars)."""
        from bot.forge.base import NotFoundError
        from bot.review.evidence import find_bot_review

        ws = _workspace(workspace)
        try:
            p = ws.forge.get_pr(number)
        except NotFoundError as e:
            _fail(str(e))
        st = ws.forge.combined_status(p.head_sha).get(STATUS_CONTEXT)
        review = find_bot_review(ws.forge, number)
        comments = list(ws.forge.list_comments(number))
        if as_json:
            click.echo(json.dumps({"number": p.number, "title": p.title, "state": "merged" if p.merged else p.state,
                                   "branch": p.head_branch, "head_sha": p.head_sha, "merge_commit_sha": p.merge_commit_sha,
                                   "labels": list(p.labels), "status": st.state if st else None,
                                   "status_description": st.description if st else None,
                                   "review": review.body if review else None,
                                   "comments": [{"author": c.author, "body": c.body} for c in comments]}, indent=1))
            return
        from rich.console import Console
        from rich.markdown import Markdown
        from rich.markup import escape
        from rich.rule import Rule

        out = Console(highlight=False)
        out.print(f"[bold]#{p.number} {escape(p.title)}[/bold]")
        out.print(f"state: {'merged as ' + (p.merge_commit_sha or '')[:12] if p.merged else p.state}; "
                  f"branch {escape(p.head_branch)} at {p.head_sha[:12]}; labels: {escape(', '.join(p.labels)) or '—'}")
        out.print(f"kbot/harness: {escape(st.state + ' — ' + st.description) if st else 'not reported'}")
        out.print(Rule("review"))
        out.print(Markdown(for_terminal(review.body)) if review else "(no review yet)")
        if comments:
            out.print(Rule("conversation"))
            for c in comments:
                out.print(f"[bold]{escape(c.author)}[/bold]")
                out.print(Markdown(for_terminal(c.body)))

    @cli.command("leaderboard")
    @click.argument("definition", required=False)
    @WORKSPACE_OPT
    @click.option("--json", "as_json", is_flag=True, help="Print the champion pointers (champion.json, lineage included) as JSON.")
    def leaderboard_cmd(definition: str | None, workspace: str, as_json: bool) -> None:
        """LEADERBOARD.md of a definition (all definitions with a champion if none is given)."""
        from bot.promotion.champion import read_champion, render_leaderboard
        from harness.dataset import did_you_mean

        ws = _workspace(workspace)
        with_champion = sorted({p.split("/")[1] for p in ws.forge.list_files(under="kernels") if p.endswith("/champion.json")})
        names = [definition] if definition else with_champion
        if not names:
            _fail("no definition has a champion in this workspace yet")
        docs = {}
        for name in names:
            doc = read_champion(ws.forge, name)
            if doc is None:
                _fail(f"{name} has no champion in this workspace{did_you_mean(name, with_champion)}")
            docs[name] = doc
        if as_json:
            click.echo(json.dumps(docs, indent=1, default=str))
            return
        for doc in docs.values():
            click.echo(render_leaderboard(doc))

    @cli.command("report")
    @click.option("--html", "html_dir", required=True, type=click.Path(file_okay=False), help="Folder to write the site into.")
    @WORKSPACE_OPT
    def report_cmd(html_dir: str, workspace: str) -> None:
        """A static HTML report of the workspace (no server needed: open index.html). Before the first
        campaign it is a page that says so and how to start one."""
        from bot.site.build import build_site

        folder = Path(workspace)
        if folder.exists() and not folder.is_dir():
            _fail(f"--workspace {workspace} is a file, not a kbot workspace")
        if (folder / "forge" / "repo.git").exists():
            files = build_site(_workspace(workspace), html_dir, workspace=folder)
        elif folder.is_dir() and any(folder.iterdir()):
            # a folder with something else in it: a mistyped --workspace more likely than a new user
            _fail(f"{workspace} is not a kbot workspace (it has no forge/repo.git): pass the folder `kbot optimize` used")
        else:
            files = build_site(None, html_dir, workspace=folder)
            click.echo(f"no kbot workspace at {workspace} yet: the report says there are no campaigns and how to start "
                       "one (`kbot optimize DEFINITION`)")
        click.echo(f"wrote {len(files)} page{'s' if len(files) != 1 else ''}; open {Path(html_dir).resolve() / 'index.html'}")
