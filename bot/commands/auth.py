"""Who may command the bot, and how often (the rules themselves are in ``bot.commands.bot_policy``).

Security model (see docs/bot.md):

* rights come from the API: the user's repository permission (``forge.permission``) or membership of a
  team named in the policy (``forge.is_team_member``). The webhook payload's ``author_association``
  is never read: it is a display hint, not an authorization (and a stale or forged payload could say
  OWNER);
* bot accounts are ignored (``type == "Bot"``, a login ending in ``[bot]``, the forge's own login,
  and the policy's ``ignore_logins``), so two bots cannot loop and the bot never obeys itself;
* any error while asking the API denies (fail closed);
* per-user sliding-window rate limits are persisted in sqlite so a restart does not reset them: uses of
  commands, and the bot's own writes in answer to an account (``take_writes``), so that comments cannot
  make the bot write without bound (an account below the policy's ``answer_min_permission`` gets none).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from bot.commands.bot_policy import BotPolicy
from bot.forge.base import Forge, ForgeError, Permission

WRITES_PER_ANSWER = 3  # what answering one comment costs: the "eyes" reaction, the final reaction, one reply


def write_budget(policy: BotPolicy, role: Permission) -> int:
    """Writes the bot may make answering an account of ``role`` per window: the policy's ``max_writes``,
    or, from ``write`` up, enough to answer every comment its ``max_commands`` allow."""
    rl = policy.rate_limit
    if not role.at_least(rl.answer_min_permission):
        return 0
    if role.at_least(Permission.WRITE):
        return max(rl.max_writes, WRITES_PER_ANSWER * rl.max_commands)
    return rl.max_writes


@dataclass(frozen=True)
class AuthDecision:
    allowed: bool
    reason: str = ""


def is_bot_account(user: Mapping[str, Any] | None, bot_login: str = "", ignore: tuple[str, ...] = ()) -> bool:
    """True for automation accounts and the bot itself. A missing or malformed user counts as a bot."""
    if not isinstance(user, Mapping):
        return True
    login = user.get("login")
    if not isinstance(login, str) or not login:
        return True
    low = login.lower()
    if user.get("type") == "Bot" or low.endswith("[bot]"):
        return True
    if bot_login and low in {bot_login.lower(), bot_login.lower().removesuffix("[bot]")}:
        return True
    return low in {x.lower() for x in ignore}


def role_of(forge: Forge, login: str) -> Permission | None:
    """``login``'s repository permission from the API; None when it cannot be asked."""
    try:
        have = forge.permission(login)
    except ForgeError:
        return None
    if not isinstance(have, Permission):
        try:
            have = Permission(str(have))
        except ValueError:
            have = Permission.NONE
    return have


def authorize(forge: Forge, policy: BotPolicy, login: str, command: str, role: Permission | None = None) -> AuthDecision:
    """May ``login`` run ``command``? Asks the API (unless ``role`` was just asked); never trusts the payload."""
    rule = policy.rule(command)
    needed = Permission(rule.permission)
    if needed is Permission.NONE:
        return AuthDecision(True, "open to everyone")
    have = role if role is not None else role_of(forge, login)
    if have is None:
        return AuthDecision(False, "could not check permissions")
    if have.at_least(needed):
        return AuthDecision(True, f"repository permission {have.value}")
    for team in rule.teams:
        org, _, slug = team.partition("/")
        try:
            if forge.is_team_member(org, slug, login):
                return AuthDecision(True, f"member of {team}")
        except ForgeError:
            continue
    teams = f" or membership of {', '.join(rule.teams)}" if rule.teams else ""
    return AuthDecision(False, f"/{command} needs repository permission `{needed.value}`{teams}")


class RateLimiter:
    """Sliding-window counters per (user, command), persisted in sqlite.

    ``check`` and ``record`` are one transaction so two workers cannot both take the last slot.
    """

    def __init__(self, db_path: str | Path):
        self.db_path = str(db_path)
        self._lock = threading.Lock()
        with closing(self._connect()) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS rate_events (login TEXT NOT NULL, command TEXT NOT NULL, ts REAL NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS rate_events_login_ts ON rate_events(login, ts)")
            db.execute("CREATE TABLE IF NOT EXISTS write_events (login TEXT NOT NULL, n INTEGER NOT NULL, ts REAL NOT NULL)")
            db.execute("CREATE INDEX IF NOT EXISTS write_events_login_ts ON write_events(login, ts)")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    @contextmanager
    def _immediate(self):
        """One write transaction (``BEGIN IMMEDIATE``, so two workers cannot both take the last slot):
        committed when the block ends, unless it rolled back itself; rolled back when it raises."""
        with self._lock, closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                if db.in_transaction:
                    db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def take(self, login: str, command: str, policy: BotPolicy, now: float | None = None) -> AuthDecision:
        """Count one use of ``command`` by ``login`` if the window allows it."""
        now = time.time() if now is None else now
        rl = policy.rate_limit
        since = now - rl.window_seconds
        key = login.lower()
        with self._immediate() as db:
            db.execute("DELETE FROM rate_events WHERE ts < ?", (now - 7 * 86400,))
            total, oldest = db.execute(
                "SELECT COUNT(*), MIN(ts) FROM rate_events WHERE login = ? AND ts > ?", (key, since)
            ).fetchone()
            if total >= rl.max_commands:
                db.execute("ROLLBACK")
                return AuthDecision(False, _limit_msg(rl.max_commands, "commands", rl.window_seconds, oldest, now))
            per = rl.per_command.get(command)
            if per is not None:
                n, oldest_c = db.execute(
                    "SELECT COUNT(*), MIN(ts) FROM rate_events WHERE login = ? AND command = ? AND ts > ?",
                    (key, command, since),
                ).fetchone()
                if n >= per:
                    db.execute("ROLLBACK")
                    return AuthDecision(False, _limit_msg(per, f"/{command}", rl.window_seconds, oldest_c, now))
            db.execute("INSERT INTO rate_events VALUES (?, ?, ?)", (key, command, now))
        return AuthDecision(True)

    def take_writes(self, login: str, n: int, budget: int, window_seconds: int, now: float | None = None) -> bool:
        """Reserve ``n`` bot writes answering ``login`` if the sliding window's ``budget`` allows them."""
        now = time.time() if now is None else now
        with self._immediate() as db:
            db.execute("DELETE FROM write_events WHERE ts < ?", (now - 7 * 86400,))
            (used,) = db.execute("SELECT COALESCE(SUM(n), 0) FROM write_events WHERE login = ? AND ts > ?",
                                 (login.lower(), now - window_seconds)).fetchone()
            if used + n > budget:
                db.execute("ROLLBACK")
                return False
            db.execute("INSERT INTO write_events VALUES (?, ?, ?)", (login.lower(), n, now))
        return True


def _limit_msg(n: int, what: str, window: int, oldest: float | None, now: float) -> str:
    wait = max(1, int((oldest or now) + window - now)) if oldest else window
    return f"rate limit: at most {n} {what} per {window} s; try again in {wait} s"
