"""The OS reads ahead around the pages a search touches, for an index that fits in memory.

kernel/store.c asks for reads page by page (LMDB's MDB_NORDAHEAD: madvise MADV_RANDOM on
the map) only for an index larger than half the machine's memory, which its page cache
cannot hold; a smaller one keeps the OS's read-ahead, which takes a cold first pass over
kn4-64k in 3.5 s where reading page by page takes 5.7 s (docs/performance.md).  A test
machine's indexes are all small: what can be seen here is that they keep it, in the
map's flags (``rr``: random reads advised) that Linux shows in /proc/PID/smaps.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux's /proc/PID/smaps")

#: A process that opens an index and prints the flags of its data.mdb's mapping.
FLAGS_OF_THE_MAP = """
import sys
import fastsubs
with fastsubs.open_index(sys.argv[1]) as index:
    index.sentence("the cat sat")
    mapping = None
    for line in open("/proc/self/smaps"):
        if not line[0].isupper():
            mapping = line.rstrip().endswith("/data.mdb")
        elif mapping and line.startswith("VmFlags:"):
            print(line.split(":", 1)[1].strip())
"""


def test_an_index_smaller_than_half_the_memory_is_read_ahead(demo_index: Path) -> None:
    flags = subprocess.run([sys.executable, "-c", FLAGS_OF_THE_MAP, str(demo_index)], check=True,
                           capture_output=True, text=True).stdout.split()
    assert "rd" in flags, "no mapping of data.mdb was found"
    assert "rr" not in flags
