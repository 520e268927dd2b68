"""Forge adapters: the code-host interface (``base``), GitHub over PyGithub (``github``), and the
hidden machine-readable blocks the bot writes into PR bodies and comments (``markers``)."""

from bot.forge.base import (  # noqa: F401  (re-exported for callers)
    BranchMovedError,
    BranchTouchedByHumansError,
    CheckRun,
    CombinedStatus,
    Comment,
    CommitInfo,
    CommitStatus,
    ConflictError,
    FileChange,
    Forge,
    ForgeError,
    ForgeInfo,
    ForgePermissionError,
    HeadMovedError,
    MergeResult,
    NotFoundError,
    NotMergeableError,
    Permission,
    PullRequest,
    RateLimitedError,
    Review,
    UnsupportedError,
)
