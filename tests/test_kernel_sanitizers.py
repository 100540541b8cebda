"""The C core under AddressSanitizer and UndefinedBehaviorSanitizer.

tests/c/kernel_check.c drives the open index (kernel/{index,store,cache,terms,search,
output,render,sample}.c, the vendored LMDB and Ryu) with no Python, from several threads at
once, and is compiled with ``-fsanitize=address,undefined -fno-sanitize-recover=all``
(tests/c_programs.py): any out-of-bounds read or write, use after free, leak or undefined
behaviour ends the run with a report, which fails the test.  The driver's
answers must equal the Python module's (the same C compiled into it) exactly: ids,
scores bit for bit, the fields text byte for byte as Python's ``b"%.8f"`` writes it, and
the JSON and sampled JSON lines byte for byte as the module renders them,
on kn4-small, generated models (orders 1-6, no <unk>, positive back-off weights) and
models with patterns of 256+ words (flat and two-level rank maps, sorted prefixes).
Every model is run with the module's cache sizes and with tiny ones (8 record slots, so
searches spill records and evict slots; kept budgets of 0, a few KB and 1 GiB for rank
maps and sorted prefixes), one thread and three, so the pool, the eviction paths and the
shared rank maps run under the sanitizers too.  Damaged and truncated indexes must end
the driver with the damage message and no report.

The default suite runs the model with big patterns and the damaged indexes (a few
seconds, on models built here: a generated one and the bundled demo model), with LMDB
compiled without the sanitizers (tests/c_programs.py says why); the slow suite runs the
rest (kn4-small, a hypothesis search over generated models, two-level rank maps) with LMDB
compiled under them too, which has triggered no report so far.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fastsubs
from arpa_gen import EOS, UNK, BigModelShape, GeneratedModel, arpa_models, sentences
from c_programs import build_program, no_sanitizer_report, run_program
from conftest import REPO, shared
from fastsubs import format as fmt
from fastsubs.core import Core, Render
from fastsubs.limits import Limits
from generated_models import write_model
from lmdb_layout import walk
from test_damaged_index import flip_byte, value_at

#: (record slots, kept bytes): the index's sizes (kernel/engine.h), then tiny caches.
DEFAULT_CACHE = (1 << 17, 24 << 20)
TINY_CACHES = [(8, 0), (8, 4096), (8, 1 << 30)]
CACHES = [DEFAULT_CACHE, *TINY_CACHES]
#: Threads the driver searches with: each query line takes a searcher of the index's pool.
THREADS = (1, 3)


@pytest.fixture(scope="module")
def kernel_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The driver, compiled with the sanitizers (LMDB without them)."""
    return build_program(tmp_path_factory, "kernel_check.c")


@pytest.fixture(scope="module")
def kernel_check_with_lmdb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The driver, compiled with the sanitizers, LMDB too (the slow suite's)."""
    return build_program(tmp_path_factory, "kernel_check.c", sanitize_lmdb=True)


# --------------------------------------------------------------------------- running the driver

@dataclass(frozen=True)
class Query:
    """A sentence's ids (<s> and </s> included), its limits and its excluded words."""

    ids: np.ndarray
    count: int
    mass: float | None = None
    excluded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=fmt.ID_DTYPE))

    def line(self) -> str:
        options = ([f"-p {self.mass!r}"] if self.mass is not None else []) + [f"-x {i}" for i in self.excluded]
        return " ".join([str(self.count), *options, *map(str, self.ids.tolist())])


@dataclass(frozen=True)
class Answer:
    """One position's substitutes and their text: the fields, and its JSON line and sampled
    JSON line as the driver renders them (see kernel_check.c: SHOWN, NAME, ID, DRAWS)."""

    ids: np.ndarray
    scores: np.ndarray
    fields: bytes
    json: bytes
    samples: bytes


#: What kernel_check.c renders at every position.
SHOWN, NAME, ID, DRAWS = b't\xff"', b'r"1', b"i\xfe", 3


@dataclass(frozen=True)
class Totals:
    """The driver's closing line: searches, pattern look-ups, look-ups that read the
    index, and the most bytes of rank maps and sorted prefixes kept after a search."""

    searches: int
    lookups: int
    misses: int
    kept_peak: int


def run_driver(binary: Path, index: Path, lines: list[str], cache: tuple[int, int],
               threads: int = 1) -> subprocess.CompletedProcess:
    """The driver's run over the query ``lines``."""
    return run_program(binary, index, *map(str, cache), str(threads),
                       input="".join(line + "\n" for line in lines).encode())


def driver_answers(binary: Path, index: Path, queries: list[Query], cache: tuple[int, int],
                   threads: int) -> tuple[list[Answer], Totals]:
    """Every position's answer of every query, in order, and the driver's totals."""
    result = run_driver(binary, index, [query.line() for query in queries], cache, threads)
    errors = no_sanitizer_report(result)
    assert result.returncode == 0 and not errors, errors
    lines = result.stdout.split(b"\n")
    assert lines[-1] == b"" and lines[-2].startswith(b"done "), lines[-2:]
    totals = Totals(*map(int, lines[-2].split()[1:]))
    answers = []
    for listed, text, json, samples in zip(*(lines[k:-2:4] for k in range(4))):
        tag, target, n, *pairs = listed.split(b" ")
        tagged = [line.split(b" ", 2) for line in (text, json, samples)]
        assert [tag] + [t for t, _, _ in tagged] == [b"S", b"F", b"J", b"D"]
        assert {target} == {at for _, at, _ in tagged} and len(pairs) == 2 * int(n)
        answers.append(Answer(np.array([int(i) for i in pairs[::2]], dtype=fmt.ID_DTYPE),
                              np.array([float(s) for s in pairs[1::2]]), *(rest for _, _, rest in tagged)))
    assert len(answers) == sum(len(query.ids) - 1 for query in queries)
    return answers, totals


def module_answers(index: Core, queries: list[Query]) -> list[Answer]:
    """The Python module's answers, with the fields text as Python formats it, and the JSON
    lines as the module renders them for fastsubs-query (the same C, run there without
    sanitizers: the driver's must be the same bytes)."""
    answers = []
    for number, query in enumerate(queries):
        ids, limits, excluded = query.ids.tobytes(), Limits(query.count, query.mass), query.excluded.tobytes()
        found = index.search(ids, 1, len(query.ids), limits, excluded)
        place = {"words": [SHOWN] * len(found), "line": number + 1, "name": NAME, "id": ID}
        json = index.render(ids, 1, len(query.ids), limits, excluded, Render.JSON, **place).split(b"\n")
        samples = index.render(ids, 1, len(query.ids), limits, excluded, Render.SAMPLE_JSON, draws=DRAWS,
                               seed=number, **place).split(b"\n")
        for (ids_found, scores), as_json, sampled in zip(found, json, samples):
            fields = b"\t".join(b"%s %.8f" % (index.word(int(i)), s) for i, s in zip(ids_found, scores))
            answers.append(Answer(ids_found, scores, fields, as_json, sampled))
    return answers


def assert_same(ours: list[Answer], expected: list[Answer], where: str) -> None:
    assert len(ours) == len(expected), where
    for number, (got, want) in enumerate(zip(ours, expected)):
        assert np.array_equal(got.ids, want.ids), f"{where}: answer {number}: ids differ"
        assert np.array_equal(got.scores.view(np.uint64), want.scores.view(np.uint64)), \
            f"{where}: answer {number}: scores differ"
        assert got.fields == want.fields, f"{where}: answer {number}: fields text differs"
        assert got.json == want.json and got.samples == want.samples, f"{where}: answer {number}: JSON differs"


def check_index(binary: Path, index: Path, queries: list[Query]) -> dict[tuple[int, int], Totals]:
    """The driver equals the module under every cache size, in one thread and in three; its
    one-thread totals per cache."""
    with Core(index) as opened:
        expected = module_answers(opened, queries)
    totals = {}
    for cache in CACHES:
        for threads in THREADS:
            ours, counted = driver_answers(binary, index, queries, cache, threads)
            assert_same(ours, expected, f"{index.name}, cache {cache}, {threads} threads")
            assert counted.kept_peak <= cache[1], "the kept budget was exceeded"
            totals.setdefault(cache, counted)
    return totals


def limited(ids: list[np.ndarray], vocab_size: int, whole: int) -> list[Query]:
    """Each sentence under counts 1 and 100 and under -p 0.5; the first ``whole`` also
    under count V (every word listed)."""
    return [Query(sentence, count, mass) for sentence in ids
            for count, mass in ((1, None), (100, None), (vocab_size, 0.5))] + \
        [Query(sentence, vocab_size) for sentence in ids[:whole]]


def assert_tiny_caches_evict(totals: dict[tuple[int, int], Totals]) -> None:
    """8 slots read the index again for patterns the module's cache keeps."""
    for cache in TINY_CACHES:
        assert totals[cache].lookups == totals[DEFAULT_CACHE].lookups
        assert totals[cache].misses > totals[DEFAULT_CACHE].misses, totals


# --------------------------------------------------------------------------- real and generated models

@pytest.mark.slow
@pytest.mark.timeout(600)
def test_kn4_small_under_the_sanitizers_equals_the_module(kernel_check_with_lmdb: Path, small_index: Path) -> None:
    lines = shared("heldout-dev.txt").read_text().splitlines()[:30]
    with Core(small_index) as index:
        vocab_size = index.vocab_size
        tokens = [line.encode().split() for line in lines]
        ids = [sentence_ids(index, sentence) for sentence in tokens]
        excluded = [np.frombuffer(index.excluded(tuple(sentence[:3])), fmt.ID_DTYPE) for sentence in tokens[:5]]
    queries = limited(ids, vocab_size, whole=2)
    queries += [Query(sentence, 100, None, words) for sentence, words in zip(ids, excluded)]
    totals = check_index(kernel_check_with_lmdb, small_index, queries)
    assert_tiny_caches_evict(totals)
    assert totals[(8, 1 << 30)].kept_peak > 0 and totals[(8, 0)].kept_peak == 0


def no_unk_positive_backoffs(model) -> bool:
    return UNK not in model.vocab and (model.order == 1 or any(
        beta is not None and beta > 0 for _, beta in model.ngrams.values()))


@st.composite
def model_and_sentences(draw):
    model = draw(arpa_models(max_order=6).filter(no_unk_positive_backoffs))
    return model, draw(st.lists(sentences(model), min_size=1, max_size=3))


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_sentences())
# a position that lists nothing before any did (a one-word model, an empty sentence: its </s>
# has no substitute), where the answers' array is not made yet: UBSan's memcpy(NULL, ..., 0)
@example((GeneratedModel("\\data\\\nngram 1=1\n\n\\1-grams:\n0.000000\ta\n\n\\end\\\n", 1, ["a"],
                         {("a",): (0.0, None)}), [[]]))
def test_generated_models_under_the_sanitizers_equal_the_module(kernel_check_with_lmdb: Path, case) -> None:
    """Models of orders 1-6 without <unk> (unknown words match no n-gram), with positive
    back-off weights."""
    model, sentence_list = case
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "model.arpa").write_text(model.text)
        index = Path(tmp) / "model.fsidx"
        fastsubs.build_index(Path(tmp) / "model.arpa", index)
        with Core(index) as opened:
            vocab_size = opened.vocab_size
            ids = [sentence_ids(opened, [t.encode() for t in tokens]) for tokens in sentence_list]
        check_index(kernel_check_with_lmdb, index, limited(ids, vocab_size, whole=len(ids)))


def test_a_model_with_big_patterns_under_the_sanitizers_equals_the_module(kernel_check: Path,
                                                                           tmp_path: Path) -> None:
    """1,500 words, order 4, no <unk>, positive back-off weights, hubs whose patterns
    hold 200-900 words: rank maps (flat) and sorted prefixes, kept and evicted."""
    shape = BigModelShape(seed=11, order=4, words=1500, has_unk=False, shuffled=True, distinct_alphas=8,
                          positive_backoffs=0.7, rounding=0.5, hubs=3, sentences=30)
    text, _, sentence_list = shape.build()
    (tmp_path / "model.arpa").write_text(text)
    index = tmp_path / "model.fsidx"
    fastsubs.build_index(tmp_path / "model.arpa", index)
    with Core(index) as opened:
        vocab_size = opened.vocab_size
        ids = [sentence_ids(opened, [t.encode() for t in tokens]) for tokens in sentence_list]
    totals = check_index(kernel_check, index, limited(ids, vocab_size, whole=5))
    assert_tiny_caches_evict(totals)
    assert totals[(8, 1 << 30)].kept_peak > 0 and totals[(8, 0)].kept_peak == 0


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_level_rank_maps_under_the_sanitizers_equal_the_module(kernel_check_with_lmdb: Path,
                                                                   tmp_path: Path) -> None:
    """70,000 words with contexts of 260 continuations: big patterns (256+ words) that
    hold fewer than V / 256 words get two-level rank maps (store.c, FLAT_MAP_RATIO)."""
    vocab_size, fan_out = 70_000, 260
    write_model(tmp_path / "model.arpa", vocab_size, [12 * fan_out, 12 * fan_out], seed=5, hubs=12,
                hub_fanout=fan_out)
    index = tmp_path / "model.fsidx"
    fastsubs.build_index(tmp_path / "model.arpa", index)
    continuations = Counter(tuple(line.split("\t")[1].split()[:-1]) for line in
                            (tmp_path / "model.arpa").read_text().splitlines() if line.count(" ") and "\t" in line)
    hubs = [context for context, n in continuations.items() if n >= 256 and EOS not in context]
    assert hubs and all(256 <= continuations[hub] < vocab_size // 256 for hub in hubs)
    rng = random.Random(5)
    words = sorted({word for context in continuations for word in context} - {"<s>"})
    sentence_list = [([] if hub[0] == "<s>" else [rng.choice(words)]) + [w for w in hub if w != "<s>"] +
                     rng.sample(words, 2) for hub in rng.sample(hubs, 8)]
    with Core(index) as opened:
        ids = [sentence_ids(opened, [t.encode() for t in tokens]) for tokens in sentence_list]
    totals = check_index(kernel_check_with_lmdb, index, limited(ids, vocab_size, whole=1))
    assert_tiny_caches_evict(totals)
    assert totals[(8, 1 << 30)].kept_peak > 0


# --------------------------------------------------------------------------- damaged indexes

@dataclass(frozen=True)
class Copy:
    """A copy of the bundled demo model's index to damage, the key of the pattern ``_ </s>``
    (the last position of any sentence reads it; a PATTERN record of its own: it holds
    thousands of words and a joint order) and a query that reads it."""

    path: Path
    key: bytes
    lines: list[str]

    def damage_message(self, binary: Path, cache: tuple[int, int] = DEFAULT_CACHE) -> str:
        """The driver's one line on the damaged copy (exit 1, no sanitizer report)."""
        result = run_driver(binary, self.path, self.lines, cache)
        errors = no_sanitizer_report(result)
        assert result.returncode == 1 and errors.count("\n") == 1 and errors.startswith("kernel_check: "), errors
        return errors


@pytest.fixture()
def copy(demo_index: Path, tmp_path: Path) -> Copy:
    """A copy of conftest's demo index (the bundled demo model, 20K words, order 4)."""
    path = tmp_path / "copy.fsidx"
    shutil.copytree(demo_index, path)
    with Core(path) as index:
        key = fmt.pattern_key(0, (index.eos_id,), index.id_bytes)
        line = (REPO / "examples" / "sentences.txt").read_text().splitlines()[0]
        lines = [Query(sentence_ids(index, line.encode().split()), 10).line()]
    return Copy(path, key, lines)


@pytest.mark.parametrize("cache", [DEFAULT_CACHE, (8, 0)])
def test_a_flipped_byte_in_a_pattern_record_ends_the_driver_with_the_damage(kernel_check: Path, copy: Copy,
                                                                             cache: tuple[int, int]) -> None:
    at, value = value_at(copy.path, fmt.patterns_db_name(2), copy.key)
    assert value[fmt.R_KIND] == fmt.PATTERN
    flip_byte(copy.path, at + len(value) // 2)
    message = copy.damage_message(kernel_check, cache)
    assert f"damaged index: the record of patterns2 at key {copy.key.hex()} fails its checksum" in message


def test_ids_outside_the_vocabulary_under_a_valid_checksum_end_the_driver_with_the_damage(kernel_check: Path,
                                                                                          copy: Copy) -> None:
    with Core(copy.path) as index:
        vocab_size = index.vocab_size
    env = lmdb.open(str(copy.path), max_dbs=16, map_size=2 * (copy.path / "data.mdb").stat().st_size)
    with env.begin(write=True, db=env.open_db(fmt.patterns_db_name(2))) as txn:
        record = fmt.decode_record(copy.key, txn.get(copy.key), 2, vocab_size, True)
        pattern = record["patterns"][0]
        count = pattern["count"]
        past = (1 << fmt.id_bits(vocab_size)) - 1  # the largest id its bits hold: still increasing
        assert past >= vocab_size
        pattern["ids"][-1] = past
        txn.put(copy.key, fmt.encode_record(copy.key, record, 2, vocab_size))
    env.close()
    message = copy.damage_message(kernel_check)
    assert f"damaged index: pattern {copy.key.hex()}: word id {past} (entry {count - 1}) is outside the " \
           "vocabulary" in message


def lmdb_field(copy: Copy, where: str) -> int:
    """Offset of a field of LMDB's own on the way to the pattern ``_ </s>`` of patterns2:
    ``where`` is "root: FIELD" (patterns2's root page; "node" is the node the look-up
    follows), "leaf: FIELD" (the leaf holding its node; "node" is its node), "meta: OFFSET"
    (in the newer meta, after the page header); "+1" at its end: the field's second byte."""
    layout = walk(copy.path)
    page_of = {page.pgno: page for page in layout.pages if page.kind != "meta"}
    part, name = where.split(": ")
    second = name.endswith(" +1")
    name = name.removesuffix(" +1")
    if part == "meta":
        data = (copy.path / "data.mdb").read_bytes()
        txnids = [int.from_bytes(data[p * layout.page_size + 144:p * layout.page_size + 152], "little") for p in (0, 1)]
        return (txnids[1] > txnids[0]) * layout.page_size + 16 + int(name) + second
    leaf, node = layout.leaves[("patterns2", copy.key)]
    root, followed = layout.path(leaf)[0]
    assert root == layout.roots["patterns2"]
    page = page_of[root if part == "root" else leaf]
    n = followed if part == "root" else node
    name = name.replace("node pointer", f"node pointer {n}") if "pointer" in name else \
        name.replace("node ", f"node {n} ")
    return next(f.offset for f in page.fields if f.what.endswith(name)) + second


#: LMDB's structures a look-up of ``_ </s>`` follows (mdb.c's "fastsubs:" checks), the XOR that
#: damages them and what the message says: the driver ends with the damage, and no report
#: (no read outside a page, nothing unaligned).
LMDB_DAMAGE = {"root: header lower +1": (0xFF, "the page's free-space bounds"),
               "root: node pointer +1": (0xFF, "a node pointer"), "leaf: node pointer +1": (0xFF, "a node pointer"),
               "root: node child (high bits)": (0xFF, "a page number on it is past the file's last page"),
               "leaf: header lower +1": (0xFF, "the page's free-space bounds"),
               "leaf: node flags": (0xFF, "a node's flags"), "leaf: node data size": (0xFF, ""),
               "leaf: node overflow pgno": (0xFF, ""),
               "meta: 128": (0x01, "transaction ids"),  # the txnid
               "meta: 112 +1": (0xFF, "a B-tree's root page")}  # the main database's root


@pytest.mark.parametrize("where", LMDB_DAMAGE)
def test_damage_to_lmdb_s_structures_ends_the_driver_with_the_damage(kernel_check: Path, copy: Copy,
                                                                      where: str) -> None:
    offset = lmdb_field(copy, where)
    xor = LMDB_DAMAGE[where][0]
    with open(copy.path / "data.mdb", "r+b") as data:
        data.seek(offset)
        byte = data.read(1)[0]
        data.seek(offset)
        data.write(bytes([byte ^ xor]))
    message = copy.damage_message(kernel_check)
    assert "damaged index: " in message and LMDB_DAMAGE[where][1] in message, message


@pytest.mark.parametrize("keep", [0, 4096, 0.5])
def test_a_truncated_index_ends_the_driver_with_the_damage(kernel_check: Path, copy: Copy, keep: float) -> None:
    data = copy.path / "data.mdb"
    os.truncate(data, int(data.stat().st_size * keep) if isinstance(keep, float) else keep)
    message = copy.damage_message(kernel_check)
    assert "truncated" in message or "cannot be read as LMDB" in message, message


def sentence_ids(index: Core, tokens: list[bytes]) -> np.ndarray:
    return np.frombuffer(index.sentence_ids(tokens), fmt.ID_DTYPE)
