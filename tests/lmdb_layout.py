"""Where LMDB keeps its own structures in a data.mdb, found by walking its B-trees in the raw
file: the meta pages, every page's header, node pointers and node headers, the sub-database
records, overflow pages, and where each value lies.  The damage tests flip these bytes.

The layout is kernel/lmdb/mdb.c's (0.9) as a 64-bit little-endian build writes it.  No LMDB
code reads the file here: a walk that trusted LMDB would see only what LMDB sees, and a
damaged copy is never walked (the walk is of the sound index; the flips come after).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

#: MDB_page's header: mp_pgno (u64), mp_pad (u16), mp_flags (u16), then mp_lower and mp_upper
#: (u16 each: where the node pointers end and the nodes begin), or mp_pages (u32) on an
#: overflow page; the node pointers (u16 offsets in the page) follow it.
PAGE_HEADER = 16
PAGE_FIELDS = (("pgno", 0, 8), ("pad", 8, 2), ("flags", 10, 2), ("lower", 12, 2), ("upper", 14, 2))
OVERFLOW_FIELDS = (("pgno", 0, 8), ("pad", 8, 2), ("flags", 10, 2), ("pages", 12, 4))
P_BRANCH, P_LEAF, P_OVERFLOW, P_META = 0x01, 0x02, 0x04, 0x08

#: MDB_node's header: the data size (a leaf's) or the child's page number (a branch's, whose
#: mn_flags holds bits 32-47 of it), the flags, the key size; the key and the data follow.
NODE_HEADER = 8
F_BIGDATA, F_SUBDATA, F_DUPDATA = 0x01, 0x02, 0x04

#: MDB_db: a B-tree's record (in a meta page, or the data of an F_SUBDATA node of the main
#: database); md_pad of the meta's free-space database is the page size.
DB_FIELDS = (("pad", 0, 4), ("flags", 4, 2), ("depth", 6, 2), ("branch_pages", 8, 8), ("leaf_pages", 16, 8),
             ("overflow_pages", 24, 8), ("entries", 32, 8), ("root", 40, 8))
DB_BYTES = 48
DB_RECORD = struct.Struct("<IHHQQQQQ")
#: MDB_meta, after the meta page's header.
META_FIELDS = (("magic", 0, 4), ("version", 4, 4), ("address", 8, 8), ("mapsize", 16, 8),
               *((f"free db {name}", 24 + at, size) for name, at, size in DB_FIELDS),
               *((f"main db {name}", 72 + at, size) for name, at, size in DB_FIELDS),
               ("last_pg", 120, 8), ("txnid", 128, 8))
META_BYTES = 136
#: The fields that hold page numbers (flipped with small XORs too: a page number off by one
#: or by 128 is still inside the file, and still a page).
PAGE_NUMBERS = {"root", "last_pg", "child", "overflow pgno", "pgno"}


@dataclass(frozen=True)
class Field:
    """Bytes ``offset ... offset + size`` of data.mdb, and what they are."""

    offset: int
    size: int
    what: str
    page_number: bool = False


@dataclass
class Page:
    """A page of a B-tree (or a meta page, or an overflow page's first page): the fields of
    its header (a meta page's: of the meta too), and of each node: its pointer, its header,
    and what LMDB reads of its data (an overflow page's number, a named database's record)."""

    pgno: int
    kind: str            # meta, branch, leaf, overflow
    db: str              # main, meta, arrays, patterns2, ...; "" for the meta pages
    header: list[Field] = field(default_factory=list)
    nodes: list[list[Field]] = field(default_factory=list)

    @property
    def fields(self) -> list[Field]:
        return self.header + [f for node in self.nodes for f in node]


@dataclass
class Layout:
    """What the walk found: the page size, the pages and where each value lies."""

    page_size: int
    pages: list[Page]
    #: (database, key) -> (offset of the value in data.mdb, its size)
    values: dict[tuple[str, bytes], tuple[int, int]]
    #: (database, key) -> (the leaf page holding its node, the node's index on it)
    leaves: dict[tuple[str, bytes], tuple[int, int]]
    #: database -> its root page
    roots: dict[str, int]
    #: page -> (its parent branch page, the parent's node that names it)
    parents: dict[int, tuple[int, int]]

    def path(self, pgno: int) -> list[tuple[int, int]]:
        """(branch page, node) from the root down to page ``pgno``."""
        steps = []
        while pgno in self.parents:
            pgno, node = self.parents[pgno]
            steps.append((pgno, node))
        return steps[::-1]

    def of_kind(self, kind: str) -> list[Page]:
        return [page for page in self.pages if page.kind == kind]


def _fields(base: int, layout: tuple[tuple[str, int, int], ...], prefix: str) -> list[Field]:
    return [Field(base + at, size, f"{prefix}{name}", name.split()[-1] in PAGE_NUMBERS)
            for name, at, size in layout]


def walk(index: Path) -> Layout:
    """Every page of every B-tree of the newest meta, from the file ``index``/data.mdb."""
    data = (index / "data.mdb").read_bytes()
    page_size = struct.unpack_from("<I", data, PAGE_HEADER + 24)[0]
    pages: list[Page] = []
    values: dict[tuple[str, bytes], tuple[int, int]] = {}
    leaves: dict[tuple[str, bytes], tuple[int, int]] = {}
    roots: dict[str, int] = {}
    parents: dict[int, tuple[int, int]] = {}
    metas = []
    for pgno in (0, 1):
        base = pgno * page_size
        page = Page(pgno, "meta", "", _fields(base, PAGE_FIELDS[:3], f"meta page {pgno}: header ")
                    + _fields(base + PAGE_HEADER, META_FIELDS, f"meta page {pgno}: "))
        pages.append(page)
        txnid = struct.unpack_from("<Q", data, base + PAGE_HEADER + 128)[0]
        metas.append((txnid, pgno))
    newest = max(metas)[1] * page_size + PAGE_HEADER
    main_root = DB_RECORD.unpack_from(data, newest + 72)[7]

    def tree(db: str, root: int) -> None:
        roots[db] = root
        stack = [root]
        while stack:
            pgno = stack.pop()
            base = pgno * page_size
            flags, lower = struct.unpack_from("<HH", data, base + 10)
            kind = "branch" if flags & P_BRANCH else "leaf"
            where = f"{db} {kind} page {pgno}: "
            page = Page(pgno, kind, db, _fields(base, PAGE_FIELDS, where + "header "))
            pages.append(page)
            for i in range((lower - PAGE_HEADER) // 2):
                pointer = base + PAGE_HEADER + 2 * i
                node = base + struct.unpack_from("<H", data, pointer)[0]
                lo_hi, node_flags, key_size = struct.unpack_from("<IHH", data, node)
                key = data[node + NODE_HEADER:node + NODE_HEADER + key_size]
                fields = [Field(pointer, 2, f"{where}node pointer {i}")]
                page.nodes.append(fields)
                if kind == "branch":
                    fields += [Field(node, 4, f"{where}node {i} child (low bits)", True),
                               Field(node + 4, 2, f"{where}node {i} child (high bits)", True),
                               Field(node + 6, 2, f"{where}node {i} key size")]
                    if i:  # (a branch's first key is never read: a search skips it)
                        fields.append(Field(node + NODE_HEADER, key_size, f"{where}node {i} key"))
                    child = lo_hi | node_flags << 32
                    parents[child] = (pgno, i)
                    stack.append(child)
                    continue
                fields += [Field(node, 4, f"{where}node {i} data size"),
                           Field(node + 4, 2, f"{where}node {i} flags"),
                           Field(node + 6, 2, f"{where}node {i} key size")]
                value = node + NODE_HEADER + key_size
                leaves[(db, key)] = (pgno, i)
                if node_flags & F_BIGDATA:
                    overflow = struct.unpack_from("<Q", data, value)[0]
                    fields.append(Field(value, 8, f"{where}node {i} overflow pgno", True))
                    pages.append(Page(overflow, "overflow", db, _fields(
                        overflow * page_size, OVERFLOW_FIELDS, f"{db} overflow page {overflow}: header ")))
                    values[(db, key)] = (overflow * page_size + PAGE_HEADER, lo_hi)
                else:
                    values[(db, key)] = (value, lo_hi)
                if node_flags & F_SUBDATA:  # a named database's record, then its tree
                    name = key.decode()
                    fields += _fields(value, DB_FIELDS, f"{where}record of {name}: ")
                    sub_root = DB_RECORD.unpack_from(data, value)[7]
                    if sub_root != 0xFFFFFFFFFFFFFFFF:
                        tree(name, sub_root)

    tree("main", main_root)
    return Layout(page_size, pages, values, leaves, roots, parents)
