"""The promotion stage: does an evaluated candidate replace the champion, and if so, merge it safely.

``decision`` (the pure rules and their thresholds, skills/promotion.yaml: evidence + policy + facts ->
promote / reject / rebenchmark), ``candidate_gate`` (only the bot's own, unmodified branches are
merged), ``execute`` (sha-guarded merge, champion pointer, losers closed; resuming an interrupted one),
``champion`` (the pointer document and the generated LEADERBOARD.md).
"""
