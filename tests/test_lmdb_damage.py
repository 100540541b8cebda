"""No byte of an index crashes a reader: damage to LMDB's own structures (the meta
pages, page headers, node pointers and headers, B-tree records, overflow pages) is checked
before LMDB follows it (kernel/lmdb/mdb.c, "fastsubs:"), and reaches the user as one line
naming what is wrong, never a signal, a traceback or a different answer.

The structures are found by walking the B-trees in the raw file (lmdb_layout.py); each byte
is flipped in turn in a working copy and the copy opened, queried, info'd and verified
(damage_checks.py).  The default suite sweeps a generated model's index and the tiny one
through the API in a child process (a crash is seen as the child's death, and a new child
goes on) and a sample through the tools themselves; the slow suite sweeps kn4-small both
ways.  Set FASTSUBS_DAMAGE_TABLES to a folder to keep each sweep's table (a row per flip)
there.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest

import damage_checks as damage
from conftest import TEST_DATA, run_cli, shared
from damage_checks import Flip, Result, WorkingCopy
from exhaustive import ArpaModel
from fastsubs.core import Core
from generated_models import model_sentences, write_model
from lmdb_layout import PAGE_HEADER, Layout, walk
from test_forged_records import patterns_of, query_error, query_sentence


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """An index with every kind of LMDB page (branch, leaf, overflow: arrays of 600 words and
    patterns of 500 words are values too big for a page) and sentences that read its
    patterns."""
    folder = tmp_path_factory.mktemp("lmdb-damage")
    model = folder / "model.arpa"
    write_model(model, 600, [3000, 3000], seed=34, hub_fanout=500)
    index = folder / "model.fsidx"
    run_cli("fastsubs-index", "build", model, "-o", index)
    sentences = model_sentences(ArpaModel.from_file(str(model)), 12, seed=34)
    return index, "".join(" ".join(tokens) + "\n" for tokens in sentences).encode()


def report(results: list[Result], title: str, tmp_path: Path) -> None:
    """Print the sweep's summary, keep its table, and fail on any unsound outcome."""
    folder = Path(os.environ.get("FASTSUBS_DAMAGE_TABLES", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / (title.replace(" ", "-") + ".tsv")
    damage.write_table(results, table)
    print(f"\n{damage.summary(results, title)}\n(every flip: {table})")
    bad = list(damage.unsound(results))
    assert not bad, f"{len(bad)} checks ended badly, e.g.:\n" + "\n".join(bad[:20])


def test_the_walk_finds_every_kind_of_page(generated: tuple[Path, bytes]) -> None:
    """(The sweeps below are only as good as the walk.)  Every page the walk finds holds its
    own number, as LMDB writes it, and every database of the index is found."""
    index, _ = generated
    layout = walk(index)
    data = (index / "data.mdb").read_bytes()
    kinds = {(page.db, page.kind) for page in layout.pages}
    for db in ("patterns2", "patterns3"):
        assert {(db, "branch"), (db, "leaf"), (db, "overflow")} <= kinds
    assert ("arrays", "overflow") in kinds and ("meta", b"header") in layout.values
    for page in layout.pages:
        assert struct.unpack_from("<Q", data, page.pgno * layout.page_size)[0] == page.pgno


def test_every_structural_byte_is_damage_or_nothing(generated: tuple[Path, bytes], tmp_path: Path) -> None:
    """Both meta pages and every page header, node pointer and node header of two pages of
    each kind of each database (four of a page's nodes at most; a branch's child numbers, a
    value's overflow page number, the databases' records), and bytes of the header, arrays
    and metadata, flipped one byte at a time (1,516 flips), through the API in a child
    process: each check gives the undamaged index's answer or one line of error."""
    index, sentences = generated
    layout = walk(index)
    flips = damage.targeted_flips(layout, per_kind=2, seed=34, nodes=4, header_bytes=16)
    results = damage.sweep(index, flips, sentences, tmp_path, mode="api")
    report(results, "structures through the API", tmp_path)
    # (not vacuous: most flips are found, and the whole of the meta pages' txnid is)
    errors = sum(r.outcomes["verify"] == "error" for r in results)
    assert errors > len(results) // 2, damage.summary(results, "structures")
    assert all(r.outcomes["query"] == "error" for r in results if "txnid" in r.flip.what)


def test_damage_through_the_tools(generated: tuple[Path, bytes], tmp_path: Path) -> None:
    """A sample of the same flips (every 120th) through fastsubs-query, fastsubs-index info
    and fastsubs-index verify, a process each: no signal, one line of error or the
    undamaged index's output."""
    index, sentences = generated
    flips = damage.targeted_flips(walk(index), per_kind=2, seed=34, nodes=4, header_bytes=16)[::120]
    report(damage.sweep(index, flips, sentences, tmp_path, mode="cli"), "structures through the tools", tmp_path)


def test_the_tiny_index_whole(tiny_index: Path, tmp_path: Path) -> None:
    """The golden model's index is a handful of pages: every structural byte of all of them."""
    sentences = (TEST_DATA / "tiny-input.txt").read_bytes()
    layout = walk(tiny_index)
    flips = damage.structural_flips(layout) + damage.value_flips(layout, "meta", b"header", 8, seed=34)
    report(damage.sweep(tiny_index, flips, sentences, tmp_path, mode="api"), "tiny structures", tmp_path)


# ---------------------------------------------------------------- named damage

def newest_meta(layout: Layout, index: Path) -> int:
    """Offset of the newer meta (the MDB_meta after its page header)."""
    data = (index / "data.mdb").read_bytes()
    txnids = [struct.unpack_from("<Q", data, pgno * layout.page_size + PAGE_HEADER + 128)[0] for pgno in (0, 1)]
    return (txnids[1] > txnids[0]) * layout.page_size + PAGE_HEADER


def field(layout: Layout, db: str, kind: str, name: str) -> int:
    """Offset of the first field called ``name`` on the first ``kind`` page of ``db``."""
    page = next(p for p in layout.pages if p.db == db and p.kind == kind)
    return next(f.offset for f in page.fields if f.what.endswith(name))


def record_of(layout: Layout, name: str) -> int:
    """Offset of the MDB_db record of database ``name`` in the main database."""
    return next(f.offset for p in layout.pages if p.db == "main" for f in p.fields
                if f.what.endswith(f"record of {name}: pad"))


#: (where, XOR, what the message says; {} is the page the flip is on): flips that crashed
#: every reader before LMDB's structures were checked, and their kin.
NAMED: dict[str, tuple[Callable[[Layout, Path], int], int, str]] = {
    # the flags of the metadata record's node: every open and info crashed
    "a node's flags": (lambda layout, index: field(layout, "meta", "leaf", "node 1 flags"), 0xFF,
                       "meta: LMDB page {}: a node's flags are not those of a node of its database"),
    # the high byte of a page header's mp_lower
    "mp_lower": (lambda layout, index: field(layout, "patterns3", "leaf", "header lower") + 1, 0xFF,
                 "patterns3: LMDB page {}: the page's free-space bounds (lower, upper) are out of order"),
    "a node pointer": (lambda layout, index: field(layout, "patterns2", "branch", "node pointer 1") + 1, 0xFF,
                       "patterns2: LMDB page {}: a node pointer points outside the page's nodes"),
    # (a child number turned into another real page's is found by fastsubs's own checks:
    # the look-up lands on the wrong record, verify finds records out of order)
    "a branch's child": (lambda layout, index: field(layout, "patterns3", "branch", "node 1 child (low bits)") + 2,
                         0xFF, "patterns3: LMDB page {}: a page number on it is past the file's last page"),
    "an overflow page number": (lambda layout, index: field(layout, "arrays", "leaf", "node 0 overflow pgno") + 2,
                                0xFF, "arrays: LMDB page {}: a page number on it is past the file's last page"),
    "a database's root": (lambda layout, index: record_of(layout, "patterns2") + 40 + 1, 0xFF,
                          "the main database (opening patterns2): LMDB page {}: a B-tree's root page is outside"),
    "the newer meta's txnid": (lambda layout, index: newest_meta(layout, index) + 128, 0x01,
                               "LMDB's meta pages: the meta pages' transaction ids are not two consecutive commits"),
    "the main database's depth": (lambda layout, index: newest_meta(layout, index) + 72 + 6, 0x01,
                                  "LMDB's meta pages: a B-tree's depth is out of range"),
    "a leaf above its tree's depth": (lambda layout, index: newest_meta(layout, index) + 72 + 6, 0x03,
                                      "the main database (opening meta): LMDB page "),
    # the newer meta's last page number (raised by 2^16 pages): the whole file reads as truncated,
    # and the message says it may be either
    "the newer meta's last page": (lambda layout, index: newest_meta(layout, index) + 120 + 2, 0x01,
                                   "data.mdb is truncated, or the last page number of its newer meta page is "
                                   "damaged"),
    # a page header's own number (every read follows a number to a page: the page must say it is that one)
    "a page's own number": (lambda layout, index: field(layout, "patterns3", "leaf", "header pgno") + 1, 0x01,
                            "patterns3: LMDB page {}: its header holds another page number"),
}


#: The tools, with their arguments before the index's path, and their input.
TOOLS = {"query": (["fastsubs-query", "-n", "5"], True), "info": (["fastsubs-index", "info", "--json"], False),
         "verify": (["fastsubs-index", "verify"], False)}


@pytest.fixture(scope="module")
def sound_outputs(generated: tuple[Path, bytes], tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """What each tool writes for the undamaged index (under the working copies' name)."""
    index, sentences = generated
    copy = WorkingCopy(index, tmp_path_factory.mktemp("sound"))
    return {tool: run_cli(args[0], *args[1:], copy.path, input=sentences if reads else None).stdout
            for tool, (args, reads) in TOOLS.items()}


@pytest.mark.parametrize("name", NAMED)
def test_damage_is_named(generated: tuple[Path, bytes], sound_outputs: dict[str, bytes], tmp_path: Path,
                         name: str) -> None:
    """Each tool names the damage in one line: the database, the page, what is wrong (a tool
    that does not read the damaged page gives the undamaged index's output); verify, which
    reads every page, always names it."""
    index, sentences = generated
    layout = walk(index)
    where, xor, message = NAMED[name]
    offset = where(layout, index)
    expected = "damaged index: " + message.format(offset // layout.page_size)
    copy = WorkingCopy(index, tmp_path / "a")
    with copy.flipped(Flip(offset, xor, name)) as damaged:
        for tool, (args, reads) in TOOLS.items():
            result = run_cli(args[0], *args[1:], damaged, input=sentences if reads else None, check=False)
            lines = result.stderr.decode().splitlines()
            if result.returncode == 0 and tool != "verify":
                assert result.stdout == sound_outputs[tool], tool
                continue
            assert result.returncode == 1 and lines and expected in lines[0], (tool, lines)
            assert len(lines) == 1 or (tool == "verify" and "DAMAGED" in lines[-1]), lines


def test_a_value_size_and_its_overflow_count_damaged_together(generated: tuple[Path, bytes], tmp_path: Path) -> None:
    """Two bytes damaged together, which a one-byte sweep never tries: a value's size (in its
    leaf node) raised past the file, and its overflow page's count of pages raised to cover
    it.  The value's size is checked against the count, and the count against the file:
    each tool says the index is damaged in one line, and none reads past the file's end."""
    index, sentences = generated
    layout = walk(index)
    page = next(p for p in layout.pages if p.db == "patterns2" and p.kind == "leaf"
                and any(f.what.endswith("overflow pgno") for f in p.fields))
    pgno_field = next(f for f in page.fields if f.what.endswith("overflow pgno"))
    node = pgno_field.what.rsplit(" node ", 1)[1].split()[0]
    size_field = next(f for f in page.fields if f.what.endswith(f"node {node} data size"))
    copy = WorkingCopy(index, tmp_path)
    data = bytearray(copy.original)
    overflow = struct.unpack_from("<Q", data, pgno_field.offset)[0]
    pages = len(data) // layout.page_size
    struct.pack_into("<I", data, size_field.offset, 1 << 31)  # 2 GiB: far past the file
    struct.pack_into("<I", data, overflow * layout.page_size + 12, (1 << 31) // layout.page_size + 1)
    copy.data.write_bytes(bytes(data))
    expected = f"patterns2: LMDB page {overflow}: an overflow page's count of pages runs past the file"
    assert overflow < pages
    for tool, (args, reads) in TOOLS.items():
        result = run_cli(args[0], *args[1:], copy.path, input=sentences if reads else None, check=False)
        lines = result.stderr.decode().splitlines()
        if result.returncode == 0 and tool != "verify":
            continue  # (a tool that never reads that value)
        assert result.returncode == 1 and lines and expected in lines[0], (tool, result.returncode, lines)


def test_a_branch_key_lowered_into_its_left_neighbours_range(generated: tuple[Path, bytes], tmp_path: Path) -> None:
    """A branch key rewritten to just above the key before it (still in order on its page):
    the keys of the child before it now lie above it, where a look-up never goes.  verify
    checks each child's keys against both ends of its range, and says so."""
    index, _ = generated
    layout = walk(index)
    data = (index / "data.mdb").read_bytes()
    page = next(p for p in layout.pages if p.db == "patterns2" and p.kind == "branch" and len(p.nodes) >= 3)
    keys = [next(f for f in node if f.what.endswith(" key")) for node in page.nodes[1:3]]
    assert keys[0].size == keys[1].size
    lowered = bytearray(data[keys[0].offset:keys[0].offset + keys[0].size])
    lowered[-1] += 1  # (the last id byte of a key that has a successor on its page is below 0xff)
    assert bytes(lowered) < data[keys[1].offset:keys[1].offset + keys[1].size]
    copy = WorkingCopy(index, tmp_path)
    with open(copy.data, "r+b") as stream:
        stream.seek(keys[1].offset)
        stream.write(bytes(lowered))
    result = run_cli("fastsubs-index", "verify", copy.path, check=False)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1 and "DAMAGED" in lines[-1], lines
    assert "patterns2: LMDB page " in lines[0], lines
    assert "outside the range its parent branch page gives it" in lines[0], lines


def test_a_root_key_lowered_into_the_last_leaf_of_a_lower_branch(demo_index: Path, tmp_path: Path) -> None:
    """A B-tree of three levels (the demo model's patterns2: a root, branch pages, leaves).
    A key of the root lowered to the last key of the leaf before it, the last child of the
    branch page before it: still above every key of that branch page, so each page reads in
    order, and the leaves are untouched.  Only the range a branch page hands down to its
    last child (the branch's own upper bound, from the root) shows that leaf's last key
    out of place: a look-up of it now goes right, lands on the wrong record, and the query
    refuses.  verify says so too, naming the leaf (a check of two-level trees cannot tell a
    last child's inherited bound from none)."""
    layout = walk(demo_index)
    db = "patterns2"
    pages = {page.pgno: page for page in layout.pages if page.db == db}
    children = {place: child for child, place in layout.parents.items() if child in pages}
    root = pages[layout.roots[db]]
    branch = pages[children[(root.pgno, 0)]]
    leaf = pages[children[(branch.pgno, len(branch.nodes) - 1)]]
    assert (root.kind, branch.kind, leaf.kind) == ("branch", "branch", "leaf")  # three levels
    last_key = max(key for (name, key), (pgno, _) in layout.leaves.items() if name == db and pgno == leaf.pgno)
    data = bytearray((demo_index / "data.mdb").read_bytes())
    root_key = next(f for f in root.nodes[1] if f.what.endswith(" key"))
    branch_key = next(f for f in branch.nodes[-1] if f.what.endswith(" key"))
    assert root_key.size == len(last_key)
    assert data[branch_key.offset:branch_key.offset + branch_key.size] < last_key
    assert last_key < data[root_key.offset:root_key.offset + root_key.size]
    data[root_key.offset:root_key.offset + root_key.size] = last_key
    copy = WorkingCopy(demo_index, tmp_path)
    copy.data.write_bytes(bytes(data))
    with Core(demo_index) as index:
        env = lmdb.open(str(demo_index), readonly=True, lock=False, max_dbs=64)
        with env.begin() as txn:
            value = txn.get(last_key, db=env.open_db(db.encode(), txn=txn, create=False))
        env.close()
        where = list(patterns_of(last_key, value, 2, index.vocab_size, True))[-1]
        sentence = query_sentence(index, where)
    assert where.key == last_key and sentence is not None
    assert "the look-up of pattern" in query_error(copy.path, sentence)
    result = run_cli("fastsubs-index", "verify", copy.path, check=False)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1 and "DAMAGED" in lines[-1], lines
    assert f"patterns2: LMDB page {leaf.pgno}: a key on it is out of order, or outside the range its parent " \
           "branch page gives it" in lines[0], lines


# ---------------------------------------------------------------- kn4-small, whole

@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_damage_sweep_of_kn4_small(small_index: Path, tmp_path: Path) -> None:
    """The damage sweep on kn4-small: the meta pages, two pages of each kind of each
    database (three of a page's nodes at most: the first, the middle, the last), B-tree
    records, overflow page numbers, and samples of the header, arrays and metadata, through
    the API, and every fourth of those flips through the tools (two processes at a time);
    then 1,500 flips at offsets anywhere in the file, through the API.
    FASTSUBS_DAMAGE_SWEEP=full sweeps as docs/index-format.md's figures were taken, all
    through the tools (three pages of each kind, six nodes, the whole header; 3,000 offsets)."""
    sentences = b"\n".join(shared("heldout-dev.txt").read_bytes().split(b"\n")[:20]) + b"\n"
    full = os.environ.get("FASTSUBS_DAMAGE_SWEEP") == "full"
    flips = damage.targeted_flips(walk(small_index), per_kind=3 if full else 2, seed=34, nodes=6 if full else 3,
                                  header_bytes=None if full else 16)
    if not full:
        report(damage.sweep(small_index, flips, sentences, tmp_path, mode="api", jobs=2),
               "kn4-small structures through the API", tmp_path)
    report(damage.sweep(small_index, flips if full else flips[::4], sentences, tmp_path, mode="cli", jobs=2),
           "kn4-small structures through the tools", tmp_path)
    anywhere = damage.random_flips(small_index, 3000 if full else 1500, seed=34)
    report(damage.sweep(small_index, anywhere, sentences, tmp_path, mode="cli" if full else "api", jobs=2),
           "kn4-small anywhere", tmp_path)
