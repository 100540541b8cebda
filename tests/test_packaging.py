"""The package as a user gets it: built from the tree, installed into fresh virtual
environments outside it, and run from outside it, from the folder that holds a clone
named ``fastsubs`` and from the clone's root (docs/development.md, "Layout").

Two installs: ``pip install CLONE`` (a wheel built from the tree, as a user's ``pip install
.``), and the wheel that ``python -m build`` builds from the sdist it makes (so the sdist
must carry everything a build needs: the C sources, the bundled LMDB, the licences).  Each
must index the bundled demo model and answer as the tree's own tools do.

Those tests are marked ``packaging`` (``make check-package``, run by CI): they compile the
kernel twice and install the run-time dependencies from PyPI into two fresh environments
(~2 minutes).  The editable install that ``make`` makes is checked in the default suite.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, clone_version, run_cli
from package_layout import modules, package_folders, setuptools_table


def packaging(test):
    """Marked ``packaging`` (make check-package), with time to build the sdist and the wheel
    and install them from PyPI (the module's fixtures do, in the setup of the first test)."""
    return pytest.mark.packaging(pytest.mark.timeout(900)(test))


DEMO_MODEL = REPO / "models" / "demo-kn4-20k.arpa.gz"
SENTENCES = REPO / "examples" / "sentences.txt"
LICENCES = ["LICENSE", "kernel/lmdb/LICENSE", "kernel/ryu/LICENSE-Apache2"]
#: Names an install must not make importable: the clone's folders and files beside fastsubs/
#: (docs/development.md, "Layout").
NOT_TOP_LEVEL = ["indexer", "query", "bench", "tests", "setup", "kernel"]


def run(*command: str | Path, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, timeout=timeout)
    assert result.returncode == 0, f"{command} failed ({result.returncode}):\n{result.stderr.decode()[-4000:]}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist built from the tree, and the wheel built from that sdist (``python -m build``)."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, REPO, cwd=out)
    return out


def only(folder: Path, pattern: str) -> Path:
    [found] = folder.glob(pattern)
    return found


def fresh_venv(where: Path) -> Path:
    """A new virtual environment at ``where``, without the tree on its path; its bin/."""
    run(sys.executable, "-m", "venv", where, cwd=where.parent)
    return where / "bin"


@pytest.fixture(scope="module", params=["pip install CLONE", "the wheel built from the sdist"])
def installed(request: pytest.FixtureRequest, dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ of a fresh environment that holds fastsubs, installed one of the two ways."""
    bin_dir = fresh_venv(tmp_path_factory.mktemp("install") / "venv")
    source = REPO if request.param == "pip install CLONE" else only(dist, "*.whl")
    run(bin_dir / "pip", "install", "--quiet", source, cwd=bin_dir)
    return bin_dir


@packaging
def test_the_sdist_carries_the_licences_and_every_c_source(dist: Path) -> None:
    with tarfile.open(only(dist, "*.tar.gz")) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "*.c", "*.h"], capture_output=True,
                             check=True).stdout.decode().split()
    kernel = [name for name in tracked if not name.startswith("tests/")]
    assert kernel and set(kernel) <= names, sorted(set(kernel) - names)
    assert {*LICENCES, "CITATION.cff", "pyproject.toml", "setup.py"} <= names


@packaging
def test_the_wheel_says_its_licence_and_carries_the_licences(dist: Path) -> None:
    with zipfile.ZipFile(only(dist, "*.whl")) as wheel:
        names = wheel.namelist()
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        headers = email.parser.Parser().parsestr(wheel.read(metadata).decode())
    assert headers["License-Expression"] == "Apache-2.0"
    info = metadata.rsplit("/", 1)[0]
    assert all(f"{info}/licenses/{licence}" in names for licence in LICENCES)


@packaging
def test_an_installed_copy_says_the_commit_it_was_built_from(installed: Path, tmp_path: Path) -> None:
    """setup.py records the clone's commit in what it builds (the sdist too, for the wheel
    built from it): an installed copy, far from any clone, still says it."""
    said = run(installed / "fastsubs-query", "--version", cwd=tmp_path).stdout.decode()
    assert said == f"fastsubs-query {clone_version()}\n"


@packaging
def test_the_installed_tools_index_the_demo_model_and_answer_as_the_tree_does(installed: Path,
                                                                              tmp_path: Path) -> None:
    """Outside the tree, the README's commands: build beside the model, then query."""
    shutil.copy(DEMO_MODEL, tmp_path)
    run(installed / "fastsubs-index", "build", DEMO_MODEL.name, cwd=tmp_path)
    index = tmp_path / DEMO_MODEL.name.replace(".arpa.gz", ".fsidx")
    answer = run(installed / "fastsubs-query", index.name, "-n", "5", "-i", SENTENCES, cwd=tmp_path).stdout

    ours = run_cli("fastsubs-index", "build", DEMO_MODEL, "-o", tmp_path / "tree.fsidx")
    assert ours.returncode == 0
    assert answer == run_cli("fastsubs-query", tmp_path / "tree.fsidx", "-n", "5", "-i", SENTENCES).stdout
    where = run(installed / "python", "-c", "import fastsubs; print(fastsubs.__file__)", cwd=tmp_path).stdout
    assert Path(where.decode().strip()).is_relative_to(installed.parent)


def top_level_names(python: str | Path, cwd: Path) -> list[str]:
    """The names of NOT_TOP_LEVEL that ``python``, started in ``cwd``, can import."""
    script = "import importlib.util, sys; print(*[n for n in sys.argv[1:] if importlib.util.find_spec(n)])"
    return run(python, "-c", script, *NOT_TOP_LEVEL, cwd=cwd).stdout.decode().split()


@packaging
def test_an_install_adds_fastsubs_alone(installed: Path, tmp_path: Path) -> None:
    assert top_level_names(installed / "python", tmp_path) == []


def test_the_editable_install_adds_fastsubs_alone(tmp_path: Path) -> None:
    """indexer/, query/ and bench/ are fastsubs.indexer, ... and nothing else (setuptools'
    finder of mapped packages, not the clone's root on sys.path)."""
    assert top_level_names(sys.executable, tmp_path) == []


def test_pyproject_lists_every_package() -> None:
    """A wheel holds the packages pyproject.toml names (a subpackage added to a folder must
    be named there too)."""
    packages = [name for name, path in modules().items() if path.name == "__init__.py"]
    assert sorted(setuptools_table()["packages"]) == sorted(packages)


def test_the_clone_holds_no_links() -> None:
    """Every module has one name: the package's subpackages are mapped (pyproject.toml's
    package-dir), not linked into fastsubs/.  Read from the tree itself, so that a source
    tree without .git (``git archive``, a release tarball) is checked too; the virtual
    environments that make sets up are left out (their links are Python's)."""
    links = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [name for name in subfolders if not name.startswith((".venv", ".git"))]
        links += [path for path in (Path(folder) / name for name in subfolders + files) if path.is_symlink()]
    assert links == []


API = """
import json, sys
import fastsubs
with fastsubs.open_index(sys.argv[1]) as index:
    subs = index.sentence("Return a new sorted list .", n=5)
print(json.dumps({"file": fastsubs.__file__, "subs": [[[s.word, s.logprob] for s in p] for p in subs]}))
"""

#: How Python is given the API script: ``python -c SCRIPT``, and ``python -`` reading it from
#: stdin (what a REPL does); both put the current directory first on sys.path.
ENTRIES = ["-c", "-"]


def api(python: str | Path, index: Path, cwd: Path, entry: str) -> dict[str, Any]:
    """The API script's answer (the file fastsubs was imported from, the substitutes)."""
    if entry == "-c":
        return json.loads(run(python, "-c", API, index, cwd=cwd).stdout)
    result = subprocess.run([str(python), "-", str(index)], input=API.encode(), cwd=cwd, capture_output=True,
                            timeout=600)
    assert result.returncode == 0, f"python - failed ({result.returncode}):\n{result.stderr.decode()[-4000:]}"
    return json.loads(result.stdout)


def parent_of_a_clone(tmp_path: Path) -> Path:
    """A folder holding the clone under the name ``fastsubs`` (a link to it), as where a
    user ran ``git clone``: in it, ``fastsubs`` is the clone's root, a folder without
    ``__init__.py`` that Python takes as a namespace package unless it finds a package."""
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "fastsubs").symlink_to(REPO)
    return parent


def source_tree_without_kernel(tmp_path: Path) -> Path:
    """The clone's root as a fresh clone has it: the package's folders, pyproject.toml
    beside them, and no compiled kernel."""
    root = tmp_path / "fresh" / "fastsubs"
    for folder in package_folders().values():
        shutil.copytree(folder, root / folder.relative_to(REPO), ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root)
    return root


def says_what_to_do_in_the_source_tree(python: str | Path, tmp_path: Path, entry: str) -> None:
    """``import fastsubs`` in a clone's root without a built kernel fails at once, its last
    line saying what to do (Python, not the install, puts the clone's ``fastsubs/`` first:
    no install can be imported there instead)."""
    root = source_tree_without_kernel(tmp_path)
    # PYTHONSAFEPATH (tests/mutations.py sets it) would leave the current directory off sys.path
    env = {name: value for name, value in os.environ.items() if name != "PYTHONSAFEPATH"}
    command = [str(python), "-c", "import fastsubs"] if entry == "-c" else [str(python), "-"]
    result = subprocess.run(command, input=b"import fastsubs\n", cwd=root, env=env, capture_output=True,
                            timeout=60)
    assert result.returncode == 1, f"import fastsubs gave {result.returncode}: {result.stderr.decode()}"
    assert result.stderr.decode().strip().splitlines()[-1] == (
        f"ImportError: {root} is fastsubs's source tree, without its compiled kernel: start Python outside it "
        "to import an installed fastsubs, or build the kernel here (make demo)")


@packaging
@pytest.mark.parametrize("entry", ENTRIES)
def test_the_installed_package_is_imported_from_the_parent_of_a_clone(installed: Path, tmp_path: Path,
                                                                      entry: str) -> None:
    run(installed / "fastsubs-index", "build", DEMO_MODEL, "-o", tmp_path / "demo.fsidx", cwd=tmp_path)
    answer = api(installed / "python", tmp_path / "demo.fsidx", parent_of_a_clone(tmp_path), entry)
    assert Path(answer["file"]).is_relative_to(installed.parent)
    expected = api(sys.executable, tmp_path / "demo.fsidx", tmp_path, "-c")
    assert answer["subs"] == expected["subs"] and len(answer["subs"]) == 7


@packaging
@pytest.mark.parametrize("entry", ENTRIES)
def test_python_in_a_clones_root_after_pip_install_says_what_to_do(installed: Path, tmp_path: Path,
                                                                   entry: str) -> None:
    says_what_to_do_in_the_source_tree(installed / "python", tmp_path, entry)


@packaging
def test_the_installed_tools_work_in_a_clones_root(installed: Path, tmp_path: Path) -> None:
    """A console script's sys.path starts with its own folder, not the current directory."""
    root = source_tree_without_kernel(tmp_path)
    run(installed / "fastsubs-index", "build", DEMO_MODEL, "-o", tmp_path / "demo.fsidx", cwd=root)
    answer = run(installed / "fastsubs-query", tmp_path / "demo.fsidx", "-n", "5", "-i", SENTENCES, cwd=root)
    assert answer.stdout == run_cli("fastsubs-query", tmp_path / "demo.fsidx", "-n", "5", "-i", SENTENCES).stdout


@pytest.mark.parametrize("where", ["root", "parent"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_the_editable_install_is_imported_from_the_clones_root_and_its_parent(tiny_index: Path, tmp_path: Path,
                                                                              where: str, entry: str) -> None:
    """The development install (make): Python started in the clone's root or in the folder
    that holds it imports the package it imports anywhere else (in the root, the clone's
    own ``fastsubs/``, whole: the same files)."""
    cwd = REPO if where == "root" else parent_of_a_clone(tmp_path)
    answer = api(sys.executable, tiny_index, cwd, entry)
    expected = api(sys.executable, tiny_index, tmp_path, "-c")
    assert Path(answer["file"]).resolve() == Path(expected["file"]).resolve()
    assert answer["subs"] == expected["subs"] and len(answer["subs"]) == 7


@pytest.mark.parametrize("entry", ENTRIES)
def test_python_in_a_clones_root_without_its_kernel_says_what_to_do(tmp_path: Path, entry: str) -> None:
    says_what_to_do_in_the_source_tree(sys.executable, tmp_path, entry)
