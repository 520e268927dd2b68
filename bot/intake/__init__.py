"""The intake stage: events reach the bot. ``server`` (``kbot serve``: the signed webhook receiver and the
job runner), ``queue`` (durable delivery deduplication and jobs in sqlite), ``events`` (event -> the
command dispatcher, the pending status, or the published results of a bench run), ``artifacts``
(the bench run's result artifacts downloaded in App mode). In Actions mode the workflows call the
same handlers through ``kbot bot command`` / ``kbot bot report``.
"""
