"""The bot's ``kbot`` subcommands. ``harness/cli.py`` owns the ``kbot`` command and knows nothing of the
bot: it adds every function registered in the ``kbot.commands`` entry-point group (pyproject.toml), and
these modules register theirs there.

``github_bot``: ``kbot serve`` (the GitHub App) and ``kbot bot ...`` (the Actions workflows, and local
previews of a review, a decision, a leaderboard); also runnable alone as ``python -m bot.cli.github_bot``.
``workspace``: ``kbot optimize``, ``kbot pr``, ``kbot leaderboard``, ``kbot report`` on a local workspace.
"""
