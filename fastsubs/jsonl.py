"""How input text that is not UTF-8 is written in JSON, and read back: one rule, both ways.

fastsubs takes its input as bytes, and a corpus may hold bytes that are not UTF-8 (a
stray Latin-1 word, a cut multi-byte character).  JSON text must be UTF-8 and its
strings must not hold lone surrogates, so such bytes cannot go into a string as they
are.  The rule, for every text field of a ``--format jsonl`` object (``word``, and
``name`` and ``id`` of a ``-t`` record):

* bytes that are UTF-8 are the field's string, as they are;
* otherwise the field's string is the text with each byte that cannot be decoded
  written as the four characters ``\\xHH`` (Python's ``backslashreplace``: readable,
  but not by itself invertible, since the input could hold that text), and a second
  field ``<field>_bytes`` holds the exact bytes in base64.

So ``"_bytes" in`` a field's name says the field needed the rule, and
:func:`field_bytes` gives back the exact input bytes of any text field.  Substitutes are
vocabulary words, which an index only holds as UTF-8 (the indexer refuses others), so
they never need the rule.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

#: Appended to a field's name for the exact bytes of a value that is not UTF-8.
BYTES_SUFFIX = "_bytes"


def text_fields(name: str, value: bytes) -> dict[str, str]:
    """The JSON field ``name`` for ``value``: ``{name: text}``, plus ``{name_bytes: base64}``
    when ``value`` is not UTF-8."""
    try:
        return {name: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {name: value.decode("utf-8", "backslashreplace"),
                name + BYTES_SUFFIX: base64.b64encode(value).decode("ascii")}


def field_bytes(record: Mapping[str, Any], name: str = "word") -> bytes:
    r"""The exact input bytes of text field ``name`` of a parsed JSON object (the inverse of
    the rule above).

    >>> fastsubs.field_bytes({"word": "caf\\xe9", "word_bytes": "Y2Fm6Q=="})
    b'caf\xe9'
    >>> fastsubs.field_bytes({"word": "café"})
    b'caf\xc3\xa9'
    """
    encoded = record.get(name + BYTES_SUFFIX)
    if encoded is not None:
        return base64.b64decode(encoded, validate=True)
    return str(record[name]).encode("utf-8")
