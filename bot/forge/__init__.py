"""Code hosts: the Forge protocol (``base``), GitHub over PyGithub (``github``), a local bare git
repository with a JSON store (``local``), the hidden machine-readable blocks the bot writes into PR
bodies and comments (``markers``), and the signed PR meta block it trusts (``trusted_meta``)."""

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
