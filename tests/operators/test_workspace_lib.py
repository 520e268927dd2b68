"""scripts/gpu/workspace_lib.sh: a packed workspace is unpacked into WS; where WS already exists (a warm device
keeps what an earlier call left) it is used only if its forge is the tarball's, never mixed with another."""

from __future__ import annotations

import subprocess

from opkit import REPO

LIB = REPO / "scripts" / "gpu" / "workspace_lib.sh"


def workspace(root, forge_text="main at abc\n"):
    (root / "forge" / "repo.git").mkdir(parents=True)
    (root / "forge" / "forge.json").write_text(forge_text)
    (root / "forge" / "repo.git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "campaigns").mkdir()
    (root / "campaigns" / "state").write_text("as packed")
    return root


def pack(ws, out):
    """What pack_workspace writes (members named ./forge/...)."""
    r = subprocess.run(["bash", "-c", f'source "{LIB}"; WS="{ws}"; OUT="{out}"; pack_workspace'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out / "workspace.tar.gz"


def unpack(ws, tar):
    return subprocess.run(["bash", "-c", f'source "{LIB}"; WS="{ws}"; WORKSPACE_TAR="{tar}"; unpack_workspace; echo unpacked'],
                          capture_output=True, text=True)


def test_unpacks_into_a_new_workspace(tmp_path):
    tar = pack(workspace(tmp_path / "a"), tmp_path)
    r = unpack(tmp_path / "b", tar)
    assert r.returncode == 0 and "unpacked" in r.stdout, r.stderr
    assert (tmp_path / "b" / "forge" / "forge.json").read_text() == "main at abc\n"


def test_reuses_the_workspace_a_warm_machine_kept(tmp_path):
    ws = workspace(tmp_path / "ws")
    tar = pack(ws, tmp_path)  # this call's packed result, handed to the next call on the same machine
    (ws / "campaigns" / "state").write_text("changed by the earlier call after packing")  # outside the forge
    r = unpack(ws, tar)
    assert r.returncode == 0 and "unpacked" in r.stdout and "using it" in r.stderr, r.stderr
    assert (ws / "campaigns" / "state").read_text() == "changed by the earlier call after packing"  # not re-extracted


def test_refuses_to_mix_with_another_forge(tmp_path):
    tar = pack(workspace(tmp_path / "a"), tmp_path)
    ws = workspace(tmp_path / "ws", forge_text="main at def\n")
    r = unpack(ws, tar)
    assert r.returncode == 2 and "refusing to mix" in r.stderr and "unpacked" not in r.stdout, (r.returncode, r.stderr)
    assert (ws / "forge" / "forge.json").read_text() == "main at def\n"  # nothing overwritten


def test_refuses_when_the_tarball_has_no_forge(tmp_path):
    (tmp_path / "empty").mkdir()
    subprocess.run(["tar", "-C", str(tmp_path / "empty"), "-czf", str(tmp_path / "x.tar.gz"), "."], check=True)
    r = unpack(workspace(tmp_path / "ws"), tmp_path / "x.tar.gz")
    assert r.returncode == 2 and "refusing to mix" in r.stderr, r.stderr
