"""The vendored LMDB (kernel/lmdb/) is upstream's base plus its recorded patches, nothing else.

kernel/lmdb/UPSTREAM names the upstream commit the files come from, the git blob id of each
of the base's files, and the patches made since, in order (upstream's fixes, then fastsubs'
checks).  Undoing the patches, last first, on a copy of the vendored files must give back
the base's files exactly: then base + patches == the files here, so an update of LMDB can
replay the patches onto a new base (docs/development.md, "Updating the vendored LMDB").  A
change to mdb.c or lmdb.h outside a patch, a patch that no longer matches the file, or a
file not recorded fails.  Offline: the base is known by its blob ids, which
``git ls-tree <base> libraries/liblmdb/`` in an LMDB clone shows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

LMDB = Path(__file__).resolve().parents[1] / "kernel" / "lmdb"


@dataclass(frozen=True)
class Upstream:
    """What kernel/lmdb/UPSTREAM records: the base's files by blob id, the patches in order."""

    base: str
    blobs: dict[str, str]
    patches: list[Path]


def read_upstream(folder: Path) -> Upstream:
    base, blobs, patches = "", {}, []
    for number, line in enumerate((folder / "UPSTREAM").read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#") or words[0] == "repository":
            continue
        if words[0] == "base" and len(words) == 2:
            base = words[1]
        elif words[0] == "file" and len(words) == 3:
            blobs[words[1]] = words[2]
        elif words[0] == "patch" and len(words) == 2:
            patches.append(folder / words[1])
        else:
            raise ValueError(f"{folder / 'UPSTREAM'}:{number}: expected 'base COMMIT', 'file NAME BLOB' "
                             f"or 'patch PATH', got {line!r}")
    return Upstream(base, blobs, patches)


def blob_id(path: Path) -> str:
    """The file's git blob id (what ``git hash-object`` prints)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def unpatched(folder: Path, upstream: Upstream, work: Path) -> dict[str, str]:
    """The blob id of each recorded file of ``folder`` once the patches are undone in ``work``."""
    for name in upstream.blobs:
        shutil.copyfile(folder / name, work / name)
    # git apply works as a plain patch(1) outside a repository; the ceiling keeps it from
    # finding one above ``work``.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(work.parent)}
    for patch in reversed(upstream.patches):
        undone = subprocess.run(["git", "apply", "--reverse", str(patch)], cwd=work, env=env,
                                capture_output=True, text=True)
        if undone.returncode:
            raise AssertionError(f"{patch.name} does not undo on the vendored files "
                                 f"(changed outside the patch?): {undone.stderr.strip()}")
    return {name: blob_id(work / name) for name in upstream.blobs}


def test_the_record_names_a_base_and_every_file() -> None:
    upstream = read_upstream(LMDB)
    assert len(upstream.base) == 40
    files = {p.name for p in LMDB.iterdir() if p.is_file() and p.name != "UPSTREAM"}
    assert files == set(upstream.blobs), "a file of kernel/lmdb/ is not in UPSTREAM, or the other way round"
    assert upstream.patches[-1].name == "fastsubs.patch"
    assert all(patch.is_file() for patch in upstream.patches)


def test_the_vendored_files_are_the_base_and_the_patches(tmp_path: Path) -> None:
    upstream = read_upstream(LMDB)
    assert unpatched(LMDB, upstream, tmp_path) == upstream.blobs


def test_a_change_outside_the_patches_is_found(tmp_path: Path) -> None:
    """An edit the patches do not hold leaves a file that is not the base's."""
    upstream = read_upstream(LMDB)
    edited = tmp_path / "edited"
    shutil.copytree(LMDB, edited)
    source = (edited / "mdb.c").read_text()
    (edited / "mdb.c").write_text(source.replace("#define MDB_MAGIC\t 0xBEEFC0DE", "#define MDB_MAGIC\t 0xBEEFC0DF", 1))
    work = tmp_path / "work"
    work.mkdir()
    found = unpatched(edited, upstream, work)
    assert found["mdb.c"] != upstream.blobs["mdb.c"]
    assert found["lmdb.h"] == upstream.blobs["lmdb.h"]


def test_a_change_inside_a_patch_is_found(tmp_path: Path) -> None:
    """An edit to a patched line that the patch does not hold stops the undoing, naming the patch."""
    upstream = read_upstream(LMDB)
    edited = tmp_path / "edited"
    shutil.copytree(LMDB, edited)
    source = (edited / "mdb.c").read_text()
    assert source.count("txn->mt_damage = NULL;\t/* fastsubs */") == 1
    (edited / "mdb.c").write_text(source.replace("txn->mt_damage = NULL;\t/* fastsubs */", "txn->mt_damage = 0;"))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(AssertionError, match="fastsubs.patch does not undo"):
        unpatched(edited, upstream, work)


def test_a_planted_bug_in_the_checks_is_made_in_their_patch_too(tmp_path: Path) -> None:
    """tests/mutations.py plants a bug in the vendored LMDB's checks as a change of them is
    made: in mdb.c and in fastsubs.patch, written anew from the files (docs/development.md,
    step 5).  From the files unchanged, that gives back the committed patch byte for byte;
    from an mdb.c with a line of the checks changed, a patch that holds the changed line and
    still undoes to the base, so that the check above passes and the other tests alone say
    whether they see the bug (an edit of mdb.c alone fails here, whatever it does)."""
    import mutations

    assert {m.file for m in mutations.MUTATIONS if m.patch is not None} == {mutations.LMDB}
    upstream = read_upstream(LMDB)
    folder = tmp_path / "kernel" / "lmdb"
    shutil.copytree(LMDB, folder)
    patch = tmp_path / mutations.LMDB_PATCH
    committed = patch.read_text()
    mutations.write_patch(folder, patch, mutations.undo_patch(folder, patch))
    assert patch.read_text() == committed
    # (a line no entry of the table changes: the test holds while the runner plants any of them)
    planted = mutations.Mutation("damage-kept", mutations.LMDB, "", "txn->mt_damage = NULL;\t/* fastsubs */",
                                 "txn->mt_damage = 0;\t/* fastsubs */", mutations.LMDB_PATCH)
    mutations.apply(tmp_path, planted, (folder / "mdb.c").read_text())
    assert "+\ttxn->mt_damage = 0;\t/* fastsubs */" in patch.read_text().split("\n")
    work = tmp_path / "work"
    work.mkdir()
    assert unpatched(folder, read_upstream(folder), work) == upstream.blobs
