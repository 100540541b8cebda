"""Research pipelines: JSON lines for any input bytes, -t records kept through every format,
provenance (OUT.json, --version), the public options, missing extras said before any work."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import fastsubs
from conftest import BIN, REPO, TEST_DATA, clone_version, demo_text, fenced_block, run_cli, spelled_version
from fastsubs import origin
from fastsubs.core import Core

# Bytes that are not UTF-8, or are but trouble naive writers: a Latin-1 word, a lone
# continuation byte, a cut 3-byte character, an encoded surrogate (CESU-8), an overlong
# '/', a code point above U+10FFFF, NUL, DEL, quotes and backslashes, U+2028.
NASTY = [b"caf\xe9", b"\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"a\x00b",
         b"\x7f", b'"quoted"', b"back\\slash", b"\\xe9", "line\u2028sep".encode(), "café".encode(), b"<unk>"]


def strict_json(line: bytes) -> dict[str, Any]:
    """One JSON line read as a strict parser reads it: UTF-8 only, no lone surrogate in
    any string (key or value), no NaN/Infinity."""
    def no_constants(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    def check(value: Any) -> None:
        if isinstance(value, str):
            value.encode("utf-8")  # UnicodeEncodeError for a lone surrogate
        elif isinstance(value, list):
            for item in value:
                check(item)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        for key, value in items:
            check(key)
            check(value)
        return dict(items)

    return json.loads(line.decode("utf-8"), object_pairs_hook=pairs, parse_constant=no_constants)  # type: ignore[no-any-return]


def tokens_of(line: bytes) -> list[bytes]:
    """The tokens fastsubs-query reads from a line: split on ASCII whitespace, <s> and </s> dropped."""
    return [token for token in line.split() if token not in (b"<s>", b"</s>")]


def random_lines(count: int, seed: int) -> list[bytes]:
    """Lines of random bytes (no newline), some made of the nasty words."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        if rng.random() < 0.5:
            lines.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).replace(b"\n", b" "))
        else:
            lines.append(b" ".join(rng.choice(NASTY + [b"the", b"cat"]) for _ in range(rng.randrange(1, 6))))
    return lines


def test_jsonl_is_strict_json_for_any_bytes_and_gives_the_input_back(tiny_index: Path) -> None:
    lines = NASTY + random_lines(150, seed=19)
    out = run_cli("fastsubs-query", tiny_index, "-n", "3", "--format", "jsonl",
                  input=b"\n".join(lines) + b"\n").stdout
    records = [strict_json(line) for line in out.split(b"\n")[:-1]]
    expected = [(number, position, word) for number, line in enumerate(lines, start=1)
                for position, word in enumerate(tokens_of(line) + [b"</s>"])]
    assert [(r["sentence"], r["position"], fastsubs.field_bytes(r, "word")) for r in records] == expected
    needed = [r for r in records if "word_bytes" in r]
    assert needed, "the input has words that are not UTF-8"
    for record in needed:  # the readable text: each undecodable byte as \xHH
        assert record["word"] == fastsubs.field_bytes(record).decode("utf-8", "backslashreplace")


def test_target_records_keep_name_and_id_in_jsonl(tiny_index: Path) -> None:
    names = [b"bank.n", b"caf\xe9.n", b"x"]
    ids = [b"bank.n.1", b"id\xff2", b"\xed\xa0\x80"]
    texts = [b"the cat sat", b"cat \xe9 the", b"sat"]
    targets = [1, 1, 1]
    records = b"".join(b"%s\t%s\t%d\t%s\n" % fields for fields in zip(names, ids, targets, texts))
    text = run_cli("fastsubs-query", tiny_index, "-t", "-n", "4", input=records).stdout.split(b"\n")
    out = run_cli("fastsubs-query", tiny_index, "-t", "-n", "4", "--format", "jsonl", input=records).stdout
    objects = [strict_json(line) for line in out.split(b"\n")[:-1]]
    assert len(objects) == 3
    for number, obj in enumerate(objects):
        assert isinstance(obj["name"], str) and isinstance(obj["id"], str)
        assert fastsubs.field_bytes(obj, "name") == names[number]
        assert fastsubs.field_bytes(obj, "id") == ids[number]
        tokens = tokens_of(texts[number]) + [b"</s>"]
        assert (obj["sentence"], obj["position"]) == (number + 1, targets[number])
        assert fastsubs.field_bytes(obj, "word") == tokens[targets[number]]
        listed = text[2 * number + 1].decode().split("\t")  # the text output: record line, substitutes line
        assert [f"{s['word']} {s['lp']:.8f}" for s in obj["substitutes"]] == listed


def test_samples_of_target_records_carry_name_and_id_and_honour_jsonl(tiny_index: Path) -> None:
    """The draws of a -t record are those of its position in the plain sentence on the same
    input line (one random stream per seed, line and position), in both formats."""
    texts = [b"the cat sat", b"cat the", b"the dog sat"]
    records = b"".join(b"r%d\tid-%d\t%d\t%s\n" % (i, i, i, t) for i, t in enumerate(texts))
    draws = ["--sample", "5", "--seed", "3", "-n", "4"]
    by_record = run_cli("fastsubs-query", tiny_index, "-t", *draws, input=records).stdout.decode().splitlines()
    plain = run_cli("fastsubs-query", tiny_index, *draws, input=b"\n".join(texts) + b"\n").stdout.decode()
    assert len(by_record) == 5 * len(texts)
    first = 0  # the first plain line of sentence i
    for i, sentence in enumerate(texts):
        lines = by_record[5 * i:5 * i + 5]
        assert [line.split("\t")[:2] for line in lines] == [[f"r{i}", f"id-{i}"]] * 5
        assert [line.split("\t", 2)[2] for line in lines] == plain.splitlines()[first + 5 * i:first + 5 * i + 5]
        first += 5 * (len(sentence.split()) + 1)
    as_json = run_cli("fastsubs-query", tiny_index, "-t", *draws, "--format", "jsonl", input=records).stdout
    objects = [strict_json(line) for line in as_json.split(b"\n")[:-1]]
    assert [(o["name"], o["id"], o["position"]) for o in objects] == [(f"r{i}", f"id-{i}", i) for i in range(3)]
    assert [o["samples"] for o in objects] == [[line.split("\t")[3] for line in by_record[5 * i:5 * i + 5]]
                                               for i in range(3)]
    plain_json = run_cli("fastsubs-query", tiny_index, *draws, "--format", "jsonl",
                         input=b"\n".join(texts) + b"\n").stdout
    samples = [strict_json(line)["samples"] for line in plain_json.split(b"\n")[:-1]]
    assert [sub for drawn in samples for sub in drawn] == [line.split("\t")[1] for line in plain.splitlines()]


# --- the public options ---------------------------------------------------------------


def test_query_options_are_public_and_checked_when_made() -> None:
    options = fastsubs.QueryOptions(n=5, exclude=[b"caf\xe9", "</s>"])
    assert options.exclude == ("caf\udce9", "</s>") and options.excluded_words == (b"caf\xe9", b"</s>")
    assert options.limits.count == 5
    for bad in ({"n": 0}, {"p": 1.5}, {"format": "csv"}, {"sample": 0}, {"seed": -1}, {"exclude": "</s>"},
                {"exclude": [3]}):
        with pytest.raises(fastsubs.ArgumentError):
            fastsubs.QueryOptions(**bad)
    assert {f.name for f in dataclasses.fields(fastsubs.QueryOptions)} == {
        "n", "p", "normalize", "targets", "skip_bad_records", "format", "no_eos", "sample", "seed", "exclude"}


@pytest.mark.parametrize("document", ["README.md", "docs/api.md", "docs/dask.md", "docs/pipelines.md",
                                      "docs/output-formats.md"])
def test_the_users_documents_import_no_internal_module(document: str) -> None:
    text = (REPO / document).read_text()
    assert "fastsubs.query." not in text and "from fastsubs.query" not in text


# --- provenance -----------------------------------------------------------------------


@pytest.mark.parametrize("program", ["fastsubs-index", "fastsubs-query", "fastsubs-bench"])
def test_every_command_says_its_version(program: str) -> None:
    result = run_cli(program, "--version")
    assert result.stdout.decode() == f"{program} {clone_version()}\n"
    assert fastsubs.__version__ == "0.3.0"



#: A console script's main() in a copy of fastsubs that knows no commit (a source tree
#: without .git, an sdist made outside a clone): its entry module, then its arguments.
WITHOUT_COMMIT = ("import sys\nimport fastsubs.origin\nfastsubs.origin.commit = lambda: None\n"
                  "from importlib import import_module\nsys.argv = sys.argv[1:]\n"
                  "import_module({entry!r}).main()\n")


def without_commit(program: str, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``program`` with ``args`` as a copy of fastsubs that knows no commit runs it."""
    entry = {"fastsubs-query": "fastsubs.query.cli", "fastsubs-index": "fastsubs.indexer.cli"}[program]
    return subprocess.run([sys.executable, "-c", WITHOUT_COMMIT.format(entry=entry), program, *map(str, args)],
                          capture_output=True, timeout=120, check=True)


def test_a_copy_that_knows_no_commit_says_its_version_alone_everywhere(tmp_path: Path) -> None:
    """Where no commit is known, every place says the version alone, and JSON says null:
    --version, an index's build record and info's lines, OUT.json (never "(commit )" or
    "commit None")."""
    version = fastsubs.__version__
    assert without_commit("fastsubs-query", "--version").stdout.decode() == f"fastsubs-query {version}\n"
    without_commit("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", tmp_path / "tiny.fsidx", "-q")
    record = json.loads(without_commit("fastsubs-index", "info", tmp_path / "tiny.fsidx", "--json").stdout)
    assert (record["build"]["fastsubs"], record["build"]["fastsubs_commit"]) == (version, None)
    said = dict(line.split(":", 1) for line in without_commit("fastsubs-index", "info", tmp_path / "tiny.fsidx")
                .stdout.decode().splitlines()[1:])
    assert f" by fastsubs {version} (Python " in said["built"] and said["read by"].strip() == f"fastsubs {version}"
    (tmp_path / "in.txt").write_bytes(b"the cat\n")
    without_commit("fastsubs-query", tmp_path / "tiny.fsidx", "-i", tmp_path / "in.txt", "-o", tmp_path / "out.txt")
    provenance = provenance_of(tmp_path / "out.txt")
    assert (provenance["fastsubs"], provenance["fastsubs_commit"]) == (version, None)


def test_a_build_names_the_commit_it_started_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit an index names is asked as its build starts: in a clone, HEAD may move
    while a long build runs (a billion-n-gram build named the commit made during it), and
    the code the build ran is the start's.  Here the clone "commits" once the model is read."""
    said: list[str] = []
    monkeypatch.setattr(origin, "commit",
                        lambda: "1" * 40 if any(line.startswith("read ") for line in said) else "0" * 40)
    fastsubs.build_index(TEST_DATA / "tiny.arpa", tmp_path / "tiny.fsidx", progress=said.append)
    assert any(line.startswith("read ") for line in said)
    with Core(str(tmp_path / "tiny.fsidx")) as core:
        assert core.meta["build"]["fastsubs_commit"] == "0" * 40


def test_query_help_names_no_input_argument() -> None:
    help_text = " ".join(run_cli("fastsubs-query", "--help").stdout.decode().split())
    assert "INPUT" not in help_text and "(stdin, or -i FILE;" in help_text


def provenance_of(out: Path) -> dict[str, Any]:
    return json.loads(Path(f"{out}.json").read_text())


def test_output_file_has_its_provenance_beside_it(tiny_index: Path, tmp_path: Path) -> None:
    model = TEST_DATA / "tiny.arpa"
    text = b"the cat sat\ncat the\n\nthe dog sat\n"
    corpus = tmp_path / "corpus.txt.gz"
    corpus.write_bytes(gzip.compress(text))
    out = tmp_path / "subs.jsonl"
    run_cli("fastsubs-query", tiny_index, "-p", "0.9", "--no-eos", "--format", "jsonl", "-i", corpus, "-o", out)
    record = provenance_of(out)
    assert spelled_version(record["fastsubs"], record["fastsubs_commit"]) == clone_version()
    assert record["index"]["model"] == {"name": model.name, "size": model.stat().st_size,
                                        "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
    assert record["index"]["path"] == str(tiny_index.resolve())
    assert record["input"] == {"path": str(corpus.resolve()), "lines": 4, "sha256": hashlib.sha256(text).hexdigest()}
    assert record["output"] == str(out.resolve())
    assert record["options"] == {**dataclasses.asdict(fastsubs.QueryOptions()), "n": None, "p": 0.9,
                                 "no_eos": True, "format": "jsonl", "exclude": []}
    assert record["arguments"] == ["-p", "0.9", "--format", "jsonl", "--no-eos"]
    # the recorded command makes the same output
    again = subprocess.run(record["command"].replace("fastsubs-query", str(BIN / "fastsubs-query"), 1)
                           .replace(str(out), str(tmp_path / "again.jsonl")), shell=True, check=True)
    assert again.returncode == 0 and (tmp_path / "again.jsonl").read_bytes() == out.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["again.jsonl", "again.jsonl.json", "corpus.txt.gz", "subs.jsonl",
                                            "subs.jsonl.json"]
    # stdout has no file to sit beside
    run_cli("fastsubs-query", tiny_index, "-n", "3", "-i", corpus)
    assert len(os.listdir(tmp_path)) == 5



def test_the_provenance_the_docs_show_is_what_their_worked_example_writes(demo_index: Path, tmp_path: Path) -> None:
    """docs/long-runs.md's OUT.json is the record that the worked example of docs/pipelines.md
    writes, run as written on the demo model in /data: every key at every level, and every
    value but the commit (any) and the workers (capped at the cores of the machine)."""
    pipelines, worked = REPO / "docs" / "pipelines.md", "## A worked example"
    data = tmp_path / "data"
    data.mkdir()
    (data / "instances.tsv").write_text(fenced_block(pipelines, worked, ""))
    (data / "model.fsidx").symlink_to(demo_index)
    subprocess.run(["bash", "-e", "-c", fenced_block(pipelines, worked, "sh")], cwd=data, check=True,
                   capture_output=True, timeout=300, env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"})
    shown = json.loads(fenced_block(REPO / "docs" / "long-runs.md", "## Provenance", "json"))

    def comparable(record: dict[str, Any]) -> Any:
        text = json.dumps({**record, "fastsubs_commit": None}).replace(str(data), "/data")
        return json.loads(re.sub(r"--workers \d+", "--workers N", text))

    assert comparable(shown) == comparable(provenance_of(data / "samples.jsonl"))
    assert shown["fastsubs_commit"] is None or re.fullmatch(r"[0-9a-f]{40}(\+changes)?", shown["fastsubs_commit"])


def test_the_recorded_command_names_the_workers_of_the_run(tiny_index: Path, tmp_path: Path) -> None:
    """--workers decides nothing in the output (``arguments`` leave it out), but it is part
    of the command that made it: OUT.json's ``command`` names it, as the run used it (capped
    at the cores), and runs as it is recorded."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the cat sat\ncat the\n" * 300)
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    run_cli("fastsubs-query", tiny_index, "-n", "3", "-i", corpus, "-o", one)
    run_cli("fastsubs-query", tiny_index, "-n", "3", "-w", "2", "-i", corpus, "-o", two)
    used = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    alone, parallel = shlex.split(provenance_of(one)["command"]), shlex.split(provenance_of(two)["command"])
    assert "--workers" not in alone
    assert parallel == alone[:-1] + [str(two)] if used == 1 else \
        parallel == alone[:4] + ["--workers", str(used)] + alone[4:-1] + [str(two)]
    assert provenance_of(two)["arguments"] == provenance_of(one)["arguments"] == ["-n", "3"]
    again = tmp_path / "again.txt"
    subprocess.run([str(BIN / "fastsubs-query"), *parallel[1:-1], str(again)], check=True)
    assert again.read_bytes() == two.read_bytes() == one.read_bytes()
    assert shlex.split(provenance_of(again)["command"])[:-1] == parallel[:-1]


def test_provenance_of_a_resumed_run_is_that_of_an_uninterrupted_one(tiny_index: Path, tmp_path: Path) -> None:
    """A bad -t record stops the run with OUT.partial; the input mended, --resume finishes it."""
    good = [b"r%d\tid%d\t0\tthe cat sat\n" % (i, i) for i in range(200)]
    bad = good[:150] + [b"a broken record\n"] + good[151:]
    corpus = tmp_path / "records.tsv"
    options = ["-t", "-n", "3", "--exclude", "sat", "--format", "jsonl"]
    corpus.write_bytes(b"".join(bad))
    out = tmp_path / "resumed.jsonl"
    stopped = run_cli("fastsubs-query", tiny_index, *options, "-i", corpus, "-o", out, check=False)
    assert stopped.returncode == 1 and not out.exists() and not Path(f"{out}.json").exists()
    corpus.write_bytes(b"".join(good))
    run_cli("fastsubs-query", tiny_index, *options, "-i", corpus, "-o", out, "--resume")
    whole = tmp_path / "whole.jsonl"
    run_cli("fastsubs-query", tiny_index, *options, "-i", corpus, "-o", whole)
    assert out.read_bytes() == whole.read_bytes()
    resumed, uninterrupted = provenance_of(out), provenance_of(whole)
    assert resumed.pop("output") == str(out) and uninterrupted.pop("output") == str(whole)
    assert resumed["command"] == uninterrupted["command"].replace(str(whole), str(out))
    resumed.pop("command"), uninterrupted.pop("command")
    assert resumed == uninterrupted
    assert resumed["input"] == {"path": str(corpus), "lines": 200, "sha256": hashlib.sha256(b"".join(good)).hexdigest()}
    assert resumed["options"]["exclude"] == ["sat"] and resumed["options"]["targets"] is True


def test_the_record_says_the_count_used_when_neither_n_nor_p_is_given(tiny_index: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the cat sat\ncat the\n")
    default, explicit = tmp_path / "default.txt", tmp_path / "explicit.txt"
    run_cli("fastsubs-query", tiny_index, "-i", corpus, "-o", default)
    run_cli("fastsubs-query", tiny_index, "-n", "100", "-i", corpus, "-o", explicit)
    assert default.read_bytes() == explicit.read_bytes()
    assert provenance_of(default)["options"] == provenance_of(explicit)["options"]
    assert provenance_of(default)["options"]["n"] == 100 and provenance_of(default)["options"]["p"] is None


def test_a_partial_output_of_an_earlier_record_version_is_refused(tiny_index: Path, tmp_path: Path) -> None:
    """A partial output whose record is of another version (version 1 kept the text of an
    open gzip member beside the file) is not continued: one line says to start over, and
    the files are left as they are."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the cat sat\n" * 100)
    out = tmp_path / "out.txt"
    run_cli("fastsubs-query", tiny_index, "-i", corpus, "-o", out)
    Path(f"{out}.partial").write_bytes(b"the\tthe -1.0\n")
    state_path = Path(f"{out}.partial.json")
    state_path.write_text(json.dumps({"format": "fastsubs-partial-output", "version": 1, "run": {},
                                      "resume": {"lines": 1, "bytes": 14, "tail_bytes": 0, "input_sha256": "0"}}))
    result = run_cli("fastsubs-query", tiny_index, "-i", corpus, "-o", out, "--resume", check=False)
    assert result.returncode == 1 and result.stderr.count(b"\n") == 1
    assert b"cannot read the record of the interrupted run" in result.stderr and b"without --resume" in result.stderr
    assert Path(f"{out}.partial").read_bytes() == b"the\tthe -1.0\n" and state_path.exists()


# --- optional extras and the demo -------------------------------------------------------


def without(modules: list[str], program: str, *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[bytes]:
    """Run a console script's main() in a Python where ``modules`` cannot be imported (as
    when their extra is not installed)."""
    entry = {"fastsubs-query": "fastsubs.query.cli", "fastsubs-bench": "fastsubs.bench.cli"}[program]
    code = (f"import sys\nfor name in {modules!r}:\n    sys.modules[name] = None\n"
            f"sys.argv = {[program, *map(str, args)]!r}\nfrom {entry} import main\nmain()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)


def test_missing_matplotlib_is_said_before_the_measurement(tmp_path: Path) -> None:
    """The index does not exist: the plot extra is checked first, so that is what is said."""
    result = without(["matplotlib", "matplotlib.pyplot"], "fastsubs-bench", "complexity",
                     tmp_path / "no.fsidx", tmp_path / "no.txt", "-o", tmp_path / "c.png")
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        "fastsubs-bench: error: fastsubs-bench complexity needs matplotlib: run in the fastsubs clone: "
        "pip install '.[plot]'"]


def test_missing_dask_is_said_before_any_work(tiny_index: Path, tmp_path: Path) -> None:
    result = without(["dask", "dask.bag", "distributed"], "fastsubs-query", tiny_index, "--dask",
                     "tcp://127.0.0.1:1", "-i", f"{tmp_path}/nothing/*.txt", "-o", tmp_path / "out")
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "fastsubs-query: error: --dask needs Dask: run in the fastsubs clone: pip install '.[dask]'")
    assert not (tmp_path / "out").exists()



#: Each call of the API that needs pyarrow, made in a Python without it (its argument: an index).
API_CALLS = {
    "index.table()": "fastsubs.open_index(sys.argv[1]).table(['the cat'], n=3)",
    "index.frame()": "fastsubs.open_index(sys.argv[1]).frame(['the cat'], n=3)",
    "fastsubs.dask.substitutes_frame()": "fastsubs.dask.substitutes_frame(db.from_sequence(['the cat']), sys.argv[1], "
                                         "fastsubs.QueryOptions(n=3))",
    "fastsubs.dask.to_parquet()": "fastsubs.dask.to_parquet(db.from_sequence(['the cat']), 'out', sys.argv[1], "
                                  "fastsubs.QueryOptions(n=3))",
}


@pytest.mark.parametrize("call", API_CALLS)
def test_a_missing_extra_of_the_api_names_the_call_and_the_extra_its_docs_name(call: str, tiny_index: Path,
                                                                              tmp_path: Path) -> None:
    """A user who called a function hears of that function, not of a flag of the command
    line, and of the extra docs/api.md names for it ('.[dataframe]'), not another."""
    script = ("import sys\nsys.modules['pyarrow'] = None\nimport dask.bag as db\nimport fastsubs\n"
              "import fastsubs.dask\ntry:\n    " + API_CALLS[call] + "\n"
              "except fastsubs.FastsubsError as error:\n    print(error)\n")
    result = subprocess.run([sys.executable, "-c", script, tiny_index], cwd=tmp_path, capture_output=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    said = result.stdout.decode()
    assert said.startswith(f"{call} needs ") and "run in the fastsubs clone: pip install '.[dataframe]'" in said, said
    assert "--format" not in said and "'.[dataframe]'" in (REPO / "docs" / "api.md").read_text()
    assert not (tmp_path / "out").exists()


def test_make_demo_installs_fastsubs_without_extras(tmp_path: Path) -> None:
    """``make -n`` on a fresh checkout: the demo's commands, and the test target's."""
    def planned(target: str) -> str:
        result = subprocess.run(["make", "-n", "-C", str(REPO), f"VENV={tmp_path}/venv", target],
                                capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.decode()

    demo = planned("demo")
    installs = [line for line in demo.splitlines() if " install " in line and "--upgrade pip" not in line]
    assert installs and all(line.rstrip().endswith("-e .") for line in installs), installs
    assert "dask" not in demo and "plot" not in demo
    assert "'.[test,dask,parquet,dataframe,plot,lint]'" in planned("test")


# --- pipes ------------------------------------------------------------------------------


def test_workers_write_answers_while_a_pipe_stays_open(demo_index: Path) -> None:
    """A slow producer: 200 lines, then the pipe stays open.  With --workers 2 the answers
    of the chunks those lines make (the input is read a block and a tail ahead: 192 lines
    give the first 32-line chunk) come out before the input goes on; then the rest, and
    the whole output is a serial run's."""
    import select

    lines = demo_text(300).splitlines(keepends=True)
    serial = run_cli("fastsubs-query", demo_index, "-n", "5", input=b"".join(lines)).stdout
    process = subprocess.Popen([str(BIN / "fastsubs-query"), str(demo_index), "-n", "5", "--workers", "2"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b"".join(lines[:200]))
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "no answer came out while the input stayed open"
        early = os.read(process.stdout.fileno(), 1 << 20)
        assert early and serial.startswith(early)
        process.stdin.write(b"".join(lines[200:]))
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait(timeout=120) == 0
    finally:
        process.kill()
        process.wait()
    assert early + rest == serial
