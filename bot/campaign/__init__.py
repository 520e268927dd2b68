"""The campaign stage: candidates proposed by the controller and an agent, one branch + one PR each.

``request`` (what a campaign is asked, and how it refuses), ``attempts`` (one attempt = one branch,
one commit, one PR, through any forge), ``local_loop`` (the embedded default: a local workspace whose
evaluator opens the PR, runs the harness and publishes at once), ``harness_evaluator`` (that
evaluator's harness runs, cached), ``github_campaign`` (on GitHub: the tree read back from the PRs,
one round of PRs per request, the next round when the last result of a round is in).
"""
