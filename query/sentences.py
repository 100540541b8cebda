"""From input lines to tokens.

Input is handled as bytes end to end, so every word is echoed exactly as it was
written (invalid UTF-8 included) and no decoding cost is paid per token.  Tokens become
word ids in the engine (:meth:`fastsubs.query.engine.Engine.sentence_ids` gives them as an array).
"""

from __future__ import annotations

SENTENCE_MARKERS = (b"<s>", b"</s>")


def tokenize(line: bytes) -> list[bytes]:
    """Split on ASCII whitespace and drop ``<s>``/``</s>`` tokens, as the original tool does."""
    return [token for token in line.split() if token not in SENTENCE_MARKERS]
