"""The C kernel's files form layers whose calls and includes all run downward, with no circle,
and each function a file gives the others is named after that file.

Read from the files themselves (kernel/*.c, kernel/*.h): a file depends on each header it
``#include``s, and on each .c file whose functions it names (a call, or a method table's
entry); a header's prototypes name what its own .c defines, so only the bodies of its
inline functions count, and those may call its own .c.  A circle (module.c calling
module_search.c, which called back into module.c; searcher.h, a header with no .c,
calling lists.c, which included it) makes two files one: neither can be read, tested or
changed without the other.  LAYERS is the
order docs/development.md draws ("The kernel's layers"): a file may depend on its own
layer and those below, never on one above, and a new file must be given its place.

The names (the same section): a function that a .c file defines for other files (not
``static``) starts with the file's name up to its first "_", then "_" (lists.c's
lists_read_terms; module_search.c's module_engine_search: the glue's files share
"module_"), so that a call says which file to read.
"""

import re
from pathlib import Path

import pytest

import layers
from layers import find_circle

KERNEL = Path(__file__).resolve().parent.parent / "kernel"

# Lowest first: each layer may use itself and what is below it.
LAYERS = [
    ("vendored", ["lmdb/lmdb.h", "ryu/ryu.h"]),
    ("format", ["format.h", "common.h", "common.c"]),
    ("codec", ["codec.h", "codec.c"]),
    ("disk", ["store.h", "store_parts.h", "store.c", "records.c", "verify.c"]),
    ("cache", ["cache.h", "cache.c"]),
    ("terms", ["terms.h", "terms.c"]),
    ("search types", ["search.h", "searcher.h"]),
    ("search parts", ["lists.h", "lists.c", "joint.h", "joint.c", "score.h", "score.c"]),
    ("search", ["search.c"]),
    ("engine", ["engine.h", "engine.c"]),
    ("render layout", ["render_layout.h"]),
    ("render", ["sample.h", "sample.c", "render.h", "render.c"]),
    ("chunk", ["chunk.h", "chunk.c"]),
    ("glue base", ["module_base.h", "module_base.c"]),
    ("glue", ["module_format.h", "module_format.c", "module_codec.h", "module_codec.c", "module_search.h",
              "module_search.c"]),
    ("module", ["module.c"]),
]
LAYER_OF = {name: rank for rank, (_, files) in enumerate(LAYERS) for name in files}

#: Names the rule cannot give: the module's entry point, which Python looks up by its name.
FIXED_NAMES = {"module.c": {"PyInit__kernel"}}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# A function defined at the top level: its return type from column 0, its name, its
# parameters, its body.
DEFINITION = re.compile(r"^([A-Za-z_][\w \t*]*?)\b(\w+)\s*\([^;{}]*\)\s*\{", re.MULTILINE)


def without_comments(text: str) -> str:
    """``text`` with its comments and string and character literals blanked (names in them are no uses),
    its ``#include`` lines kept whole."""
    pattern = re.compile(r'^[ \t]*#[ \t]*include[^\n]*|/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                         re.DOTALL | re.MULTILINE)

    def blank(match: re.Match) -> str:
        found = match.group(0)
        if found.lstrip().startswith("#"):
            return found
        return "\n" * found.count("\n") if found[0] == "/" else '""'

    return pattern.sub(blank, text)


def function_bodies(code: str) -> str:
    """The bodies of a header's inline functions (its prototypes and struct fields name no use)."""
    bodies, depth, start = [], 0, 0
    for i, char in enumerate(code):
        if char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and code[:start].rstrip().endswith(")"):
                bodies.append(code[start:i + 1])
    return "\n".join(bodies)


def kernel_files(root: Path) -> dict[str, str]:
    """Each of the kernel's own files (not the vendored ones) by its name, its code without comments."""
    return {path.name: without_comments(path.read_text()) for path in sorted(root.glob("*.[ch]"))}


def given(code: str) -> list[str]:
    """The functions a .c file's code defines for other files (those not ``static``)."""
    return [match.group(2) for match in DEFINITION.finditer(code) if "static" not in match.group(1).split()]


def dependencies(files: dict[str, str]) -> dict[str, set[str]]:
    """What each file depends on: the headers it includes and the .c files whose functions it names."""
    defined_in = {}
    for name, code in files.items():
        if name.endswith(".c"):
            for function in given(code):
                defined_in[function] = name
    graph = {}
    for name, code in files.items():
        uses = set(INCLUDE.findall(code))
        named = code if name.endswith(".c") else function_bodies(code)
        uses |= {defined_in[word] for word in set(re.findall(r"\b\w+\b", named)) if word in defined_in}
        uses -= {name, name[:-2] + ".c"}  # a header's inline functions may call its own .c
        graph[name] = uses
    return graph


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every dependency of a file on a file of a higher layer, as "file (layer) -> file (layer)"."""
    return layers.upward(graph, LAYERS, LAYER_OF.get)


def prefix(name: str) -> str:
    """What the names of the functions that the .c file ``name`` gives others start with."""
    return name.removesuffix(".c").split("_")[0] + "_"


def misnamed(files: dict[str, str]) -> list[str]:
    """Every function a .c file gives others whose name does not start with its file's prefix, as "file: name",
    but for FIXED_NAMES."""
    return [f"{name}: {function}" for name, code in sorted(files.items()) if name.endswith(".c")
            for function in given(code)
            if not function.startswith(prefix(name))
            and function not in FIXED_NAMES.get(name, set())]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return dependencies(kernel_files(KERNEL))


def test_every_file_has_a_layer(graph):
    unplaced = sorted({name for name in graph} - set(LAYER_OF))
    assert not unplaced, f"kernel files missing from LAYERS: {unplaced}"
    missing = sorted(name for name in LAYER_OF if not (KERNEL / name).is_file())
    assert not missing, f"LAYERS names files kernel/ does not hold: {missing}"
    included = {used for uses in graph.values() for used in uses if used.endswith(".h")}
    unknown = sorted(included - set(LAYER_OF))
    assert not unknown, f"included headers that are no kernel file: {unknown}"


def test_no_circle(graph):
    circle = find_circle(graph)
    assert circle is None, "the kernel's files depend on each other in a circle: " + " -> ".join(circle)


def test_dependencies_run_downward(graph):
    assert upward(graph) == []


def test_the_reading_finds_what_it_checks(tmp_path, graph):
    """The reader sees the dependencies the files have: calls, includes and inline bodies.

    Read on copies of the kernel's files with one back-edge added each way the checks must
    see it, so that a reading that finds nothing cannot pass them."""
    assert "store.h" in graph["cache.h"] and "cache.c" in graph["terms.c"]  # an include, a call
    assert "lists.c" in graph["search.c"] and "records.c" not in graph["store.h"]  # a call; a prototype is none
    for name, code in kernel_files(KERNEL).items():
        (tmp_path / name).write_text(code)
    planted = [("store.h", '#include "engine.h"\n', upward),                                   # an include upward
               ("cache.c", "void f(void) { engine_close(0); }\n", upward),                       # a call upward
               ("terms.h", "static inline void g(void) { score_batch(0, 0, 0, 0, 0, 0, 0, 0); }\n", upward),
               ("store.c", "void h(void) { records_pattern_key(0, 0, 0, 0, 0); }\n", find_circle)]  # a circle
    for file, line, check in planted:
        original = (tmp_path / file).read_text()
        (tmp_path / file).write_text(original + line)
        assert check(dependencies(kernel_files(tmp_path))), f"{file}: {line.strip()} went unseen"
        (tmp_path / file).write_text(original)


def test_the_documented_layers_are_these():
    """docs/development.md draws the same layers in the same order."""
    assert layers.documented_layers("The kernel's layers") == [name for name, _ in LAYERS]



def test_every_function_a_file_gives_is_named_after_it() -> None:
    assert misnamed(kernel_files(KERNEL)) == []


def test_the_name_check_finds_a_misnamed_function() -> None:
    """On the kernel's files with functions added to score.c: one named after another file is found, and so is
    a name the allow-list excuses in another file only; one named after its own file, or static, is not."""
    files = kernel_files(KERNEL)
    files["score.c"] += ("int lists_helper(void) { return 0; }\n"
                         "int score_helper(void) { return 0; }\n"
                         "static int helper(void) { return 0; }\n"
                         "void common_fail(void) {}\n")
    assert misnamed(files) == ["score.c: lists_helper", "score.c: common_fail"]
    assert prefix("module_search.c") == prefix("module.c") == "module_" and prefix("joint.c") == "joint_"
