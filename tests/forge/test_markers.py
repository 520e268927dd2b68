"""Hidden metadata blocks and sticky markers survive hostile bodies."""

from __future__ import annotations

import pytest

from bot.forge.markers import (
    MAX_META_CHARS,
    REVIEW_MARKER,
    MarkerError,
    decode_meta,
    encode_meta,
    has_marker,
    sticky_marker,
    strip_meta,
    with_marker,
    with_meta,
)

META = {"definition": "gemm_n4096", "parent": "n3", "agent": "offline", "model": None, "prompt_sha": "ab12",
        "campaign": "c1"}


def test_round_trip_and_escaping():
    evil = dict(META, note="--> <script>&amp; <!-- kbot:meta {} -->")
    block = encode_meta(evil)
    assert block.startswith("<!-- kbot:meta {") and block.endswith(" -->")
    inner = block[len("<!-- kbot:meta "):-len(" -->")]
    assert "-->" not in inner and "<" not in inner and ">" not in inner
    assert decode_meta(f"Some text\n\n{block}\n") == evil


def test_block_inside_code_fences_inline_code_quotes_and_indent_is_ignored():
    real = encode_meta(META)
    forged = encode_meta(dict(META, parent="n999"))
    for hostile in (f"```\n{forged}\n```", f"~~~~md\n{forged}\n~~~~", f"`{forged}`", f"    {forged}",
                    f"> {forged}", f"text {forged}"):
        assert decode_meta(f"{real}\n\n{hostile}\n") == META, hostile
    # An unclosed fence hides everything after it.
    assert decode_meta(f"{real}\n```python\n{forged}\n") == META
    # A longer closing fence closes; a shorter one does not.
    assert decode_meta(f"````\n{forged}\n```\nstill code\n````\n{real}") == META


def test_last_valid_block_wins_and_broken_ones_are_skipped():
    first, second = encode_meta({"n": 1}), encode_meta({"n": 2})
    body = f"{first}\n{second}\n<!-- kbot:meta {{not json}} -->\n<!-- kbot:meta [1,2] -->\n"
    assert decode_meta(body) == {"n": 2}
    assert decode_meta("no block here") is None
    assert decode_meta(None) is None


def test_hmac_binds_block_to_key_and_context():
    key = b"secret"
    signed = encode_meta(META, key=key, context="kbot/gemm/n4")
    assert decode_meta(signed, key=key, context="kbot/gemm/n4") == META
    assert decode_meta(signed, key=key, context="kbot/gemm/n5") is None       # pasted from another PR
    assert decode_meta(signed, key=b"other", context="kbot/gemm/n4") is None
    assert decode_meta(encode_meta(META), key=key) is None                     # typed by a person, unsigned
    tampered = signed.replace('"n3"', '"n1"')
    assert decode_meta(tampered, key=key, context="kbot/gemm/n4") is None
    # A later forged block does not displace the valid signed one.
    assert decode_meta(signed + "\n" + encode_meta({"x": 1}), key=key, context="kbot/gemm/n4") == META


def test_size_limits():
    with pytest.raises(MarkerError):
        encode_meta({"blob": "x" * MAX_META_CHARS})
    huge = "<!-- kbot:meta {\"a\": \"" + "x" * MAX_META_CHARS + "\"} -->"
    assert decode_meta(huge) is None
    # Blocks far beyond the scanned prefix of a giant body are not read.
    assert decode_meta("x\n" * 200_000 + encode_meta(META)) is None


def test_encode_rejects_non_json():
    with pytest.raises(MarkerError):
        encode_meta({"x": object()})
    with pytest.raises(MarkerError):
        encode_meta({"x": float("nan")})
    with pytest.raises(MarkerError):
        encode_meta(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_with_meta_replaces_live_block_only():
    body = f"Intro\n\n{encode_meta({'n': 1})}\n\n```\n{encode_meta({'quoted': True})}\n```"
    updated = with_meta(body, {"n": 2})
    assert decode_meta(updated) == {"n": 2}
    assert updated.count("kbot:meta") == 2          # the quoted copy stays as text
    assert "quoted" in strip_meta(updated)


def test_sticky_markers():
    assert REVIEW_MARKER == "<!-- kbot:review -->"
    assert has_marker(f"{REVIEW_MARKER}\n## Report", REVIEW_MARKER)
    assert not has_marker(f"```\n{REVIEW_MARKER}\n```", REVIEW_MARKER)
    assert not has_marker(f"quote: {REVIEW_MARKER}", REVIEW_MARKER)
    assert with_marker("x", REVIEW_MARKER).startswith(REVIEW_MARKER)
    assert with_marker(with_marker("x", REVIEW_MARKER), REVIEW_MARKER).count(REVIEW_MARKER) == 1
    for bad in ("meta", "Review", "a b", "x-->", ""):
        with pytest.raises(MarkerError):
            sticky_marker(bad)


def test_pr_meta_only_from_the_bot(monkeypatch):
    from types import SimpleNamespace

    from bot.forge.trusted_meta import read_meta

    monkeypatch.delenv("KBOT_META_KEY", raising=False)
    body = encode_meta(META)

    def pr_meta(body, author, bot_login):  # the PR-level reader: author check, then the block
        forge = SimpleNamespace(info=SimpleNamespace(bot_login=bot_login))
        return read_meta(SimpleNamespace(body=body, author=author, head_branch="kbot/d/n"), forge)

    assert pr_meta(body, "kbot[bot]", "kbot[bot]") == META
    assert pr_meta(body, "mallory", "kbot[bot]") is None
