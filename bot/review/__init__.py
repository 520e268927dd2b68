"""The review stage: bench results read strictly as data, the sticky PR review rendered from them, and
the evidence block the later stages read back from that review.

``markdown`` (escaping and the template environment), ``evidence`` (the compact evidence codec),
``sticky_review`` (the review body and the commit-status line), ``results`` (reading a results
folder), ``publish`` (review + status + promotion for one bench run).
"""
