"""The output layouts Python shares with the C core are the core's: the render kinds
(kernel/render_layout.h ``RENDER_*``, :class:`fastsubs.core.Render`), the packed columns of
``--format parquet`` (``COLUMN_*``, fastsubs/pipeline/parquet.py's ``COLUMNS``) and the fields of a
position's row (``PlaceRow``, fastsubs/pipeline/parquet.py's ``PLACE_ROW``), as the core exports them
(``fastsubs._kernel.RENDER``).  A change to one side alone fails here, before any output is
read back wrong."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import fastsubs
from fastsubs._kernel import RENDER
from fastsubs.core import Core, Render
from fastsubs.limits import Limits
from fastsubs.pipeline import parquet


def test_the_render_kinds_are_the_core_s() -> None:
    assert {kind.name: kind.value for kind in Render} == RENDER["kinds"]


def test_the_parquet_columns_are_the_core_s_in_its_order() -> None:
    """Names, order and item types, and the framing's lengths, as render_layout.h lists them."""
    assert [(name, dtype.kind, dtype.itemsize) for name, dtype in parquet.COLUMNS] == list(RENDER["columns"])
    assert parquet.COLUMN_LENGTH == np.dtype(RENDER["column_length"])


def render_layout_list(macro: str) -> list[tuple[str, ...]]:
    """The entries of an X-macro list of kernel/render_layout.h, read from its text."""
    text = re.sub(r"/\*.*?\*/", "", (Path(__file__).resolve().parent.parent / "kernel" / "render_layout.h").read_text(),
                  flags=re.DOTALL)
    body = re.search(rf"#define {macro}\(X\)((?:.*\\\n)*.*)", text).group(1)
    return [tuple(part.strip() for part in entry.split(",")) for entry in re.findall(r"X\(([^)]*)\)", body)]


def test_the_exported_layouts_are_render_layout_h_s_lists() -> None:
    """The export holds the lists as render_layout.h writes them: each kind in its order, each
    column with its item type's kind ('V' the place row, which is as long as its fields)."""
    assert list(RENDER["kinds"]) == [name for (name,) in render_layout_list("RENDER_KINDS")]
    assert list(RENDER["kinds"].values()) == list(range(len(RENDER["kinds"])))
    written = render_layout_list("RENDER_COLUMN_LIST")
    assert [(name.lower(), kind.strip("'")) for name, _, kind in written] == [
        (name, kind) for name, kind, _ in RENDER["columns"]]
    sizes = {"double": 8, "uint32_t": 4, "uint8_t": 1, "PlaceRow": RENDER["place_row_bytes"]}
    assert [sizes[item] for _, item, _ in written] == [size for _, _, size in RENDER["columns"]]
    assert RENDER["place_row_bytes"] == sum(size for _, _, size in RENDER["place_row"])


def test_a_place_row_is_the_core_s_struct() -> None:
    assert parquet.PLACE_ROW.itemsize == RENDER["place_row_bytes"]
    assert [(name, parquet.PLACE_ROW.fields[name][1], parquet.PLACE_ROW.fields[name][0].itemsize)
            for name in parquet.PLACE_ROW.names] == list(RENDER["place_row"])


def test_the_packed_columns_read_back_as_the_api_s_answers(demo_index: Path) -> None:
    """A chunk rendered as columns, read with fastsubs/pipeline/parquet.py's item types, holds what the
    API gives for the same sentences: each position's line and place, its substitutes' ids and
    scores, their p / sum p, its draws among them and its word."""
    sentences = [b"the cat sat on the mat", b"a house"]
    with Core(demo_index) as index, fastsubs.open_index(demo_index) as api:
        rendered = index.render_chunk(sentences, 7, Limits.from_options(5, None), index.excluded([]), Render.COLUMNS,
                                      normalize=True, draws=3, seed=1)
        columns = parquet._unpacked(rendered.data)
        places = columns["places"]
        expected = [(line, position, word, api.sentence(sentence.decode(), n=5)[position])
                    for line, sentence in enumerate(sentences, 7)
                    for position, word in enumerate(sentence.split() + [b"</s>"])]
        listed = np.concatenate([[0], np.cumsum(places["listed"])])
        words = np.concatenate([[0], np.cumsum(places["word_len"])])
        drawn = np.concatenate([[0], np.cumsum(places["drawn"])])
        assert len(places) == len(expected)
        for row, (line, position, word, substitutes) in enumerate(expected):
            assert (places["line"][row], places["position"][row]) == (line, position)
            ids = columns["substitutes"][listed[row]:listed[row + 1]]
            assert [index.word(int(i)).decode() for i in ids] == [s.word for s in substitutes]
            assert columns["scores"][listed[row]:listed[row + 1]].tolist() == [s.logprob for s in substitutes]
            probabilities = columns["probabilities"][listed[row]:listed[row + 1]]
            assert probabilities.tolist() == [s.probability for s in substitutes]
            assert places["drawn"][row] == 3 and set(columns["draws"][drawn[row]:drawn[row + 1]]) <= set(ids)
            if word != b"</s>":
                assert columns["words"][words[row]:words[row + 1]].tobytes() == word
        assert len(columns["names"]) == len(columns["record_ids"]) == 0 and not places["not_utf8"].any()
