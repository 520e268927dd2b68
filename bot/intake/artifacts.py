"""A bench run's results in App mode (``kbot serve``): the ``kbot-results-*`` artifacts of the run,
downloaded with the App's token and unpacked strictly (plain files, names from a small alphabet, bounded
counts and sizes). In Actions mode the report workflow downloads them; either way what lands in the
results folder is read strictly as data by ``bot.review.results``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from bot.names import RESULTS_ARTIFACT_PREFIX

MAX_ARTIFACT_BYTES = 64 << 20       # compressed, per artifact
MAX_UNPACKED_BYTES = 128 << 20      # all members of all artifacts
MAX_MEMBERS = 256
_MEMBER = re.compile(r"^(?:[A-Za-z0-9_.-]+/){0,6}[A-Za-z0-9_.-]+$")


class ArtifactError(ValueError):
    """An artifact that is too large, malformed, or tries to escape its folder."""


def safe_extract_zip(data: bytes, dest: Path, *, budget: list[int] | None = None) -> list[str]:
    """Unpack a zip of results into ``dest``: plain files only, names from a small alphabet (no ``..``,
    no absolute paths, no links), bounded member count and unpacked size (zip bombs), sizes checked
    while reading rather than trusted from the directory."""
    import io
    import stat
    import zipfile

    budget = budget if budget is not None else [MAX_UNPACKED_BYTES]
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise ArtifactError(f"not a zip archive: {e}") from None
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArtifactError(f"more than {MAX_MEMBERS} members")
    written: list[str] = []
    for info in infos:
        if info.is_dir():
            continue
        name = info.filename
        if not _MEMBER.match(name) or any(part in ("", ".", "..") for part in name.split("/")):
            raise ArtifactError(f"refused member name {name[:80]!r}")
        ftype = stat.S_IFMT(info.external_attr >> 16)  # 0 when the archiver recorded no type
        if ftype and ftype != stat.S_IFREG:
            raise ArtifactError(f"{name}: not a regular file")
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as out:
            while chunk := src.read(1 << 16):
                budget[0] -= len(chunk)
                if budget[0] < 0:
                    raise ArtifactError("artifacts unpack to more than the size limit")
                out.write(chunk)
        written.append(name)
    return written


def github_results_fetcher(forge: Any, run: Mapping[str, Any], dest: Path) -> bool:
    """Download the ``kbot-results-*`` artifacts of a bench run (GitHubForge with App auth) into ``dest``."""
    run_id = run.get("id")
    if not isinstance(run_id, int):
        return False
    wr = forge.gh.get_repo(forge.full_name).get_workflow_run(run_id)
    budget = [MAX_UNPACKED_BYTES]
    found = False
    for art in wr.get_artifacts():
        if not art.name.startswith(RESULTS_ARTIFACT_PREFIX) or art.expired:
            continue
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", art.name) or art.size_in_bytes > MAX_ARTIFACT_BYTES:
            raise ArtifactError(f"refused artifact {art.name[:100]!r} ({art.size_in_bytes} bytes)")
        _, _, chunks = forge.gh.requester.getStream(art.archive_download_url, chunk_size=1 << 16)
        data = bytearray()
        for chunk in chunks:
            data += chunk
            if len(data) > MAX_ARTIFACT_BYTES:
                raise ArtifactError(f"artifact {art.name} is larger than announced")
        safe_extract_zip(bytes(data), dest / art.name, budget=budget)
        found = True
    return found
