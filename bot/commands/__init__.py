"""The command stage: a comment becomes commands, each checked against the policy and run.

``parser`` (comment body -> invocations, strictly), ``spec`` (the command table: every module here
that defines ``SPEC``), ``bot_policy`` (skills/bot-policy.yaml: permissions, rate limits, /optimize
bounds, the kill switch), ``auth`` (who may run a command, asked from the API; rate limits),
``dispatch`` (the acknowledge / authorize / run / reply protocol), ``context`` and ``services`` (what a
handler gets, and the effects it may have). One file per command: ``help``, ``status``, ``optimize``,
``evaluate``, ``profile``, ``promote``, ``stop``.
"""
