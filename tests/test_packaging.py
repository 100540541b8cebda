"""The package as a user gets it: built from the tree, installed into fresh virtual
environments outside it, and run from outside it (and from the clone's root).

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
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import REPO, run_cli


def packaging(test):
    """Marked ``packaging`` (make check-package), with time to build the sdist and the wheel
    and install them from PyPI (the module's fixtures do, in the setup of the first test)."""
    return pytest.mark.packaging(pytest.mark.timeout(900)(test))


DEMO_MODEL = REPO / "models" / "demo-kn4-20k.arpa.gz"
SENTENCES = REPO / "examples" / "sentences.txt"
LICENCES = ["LICENSE", "kernel/lmdb/LICENSE", "kernel/ryu/LICENSE-Apache2"]


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


API = """
import json, sys
import fastsubs
with fastsubs.open_index(sys.argv[1]) as index:
    subs = index.sentence("Return a new sorted list .", n=5)
print(json.dumps({"file": fastsubs.__file__, "subs": [[[s.word, s.logprob] for s in p] for p in subs]}))
"""


@packaging
def test_the_api_works_in_the_clones_root_after_pip_install(installed: Path, tmp_path: Path) -> None:
    """Python started in the clone's root finds the clone's fastsubs/ first (the current
    directory leads sys.path): it hands over to the installed package."""
    run(installed / "fastsubs-index", "build", DEMO_MODEL, "-o", tmp_path / "demo.fsidx", cwd=tmp_path)
    answer = json.loads(run(installed / "python", "-c", API, tmp_path / "demo.fsidx", cwd=REPO).stdout)
    assert Path(answer["file"]).is_relative_to(installed.parent)
    expected = json.loads(run(sys.executable, "-c", API, tmp_path / "demo.fsidx", cwd=tmp_path).stdout)
    assert answer["subs"] == expected["subs"] and len(answer["subs"]) == 7


def test_the_api_works_in_the_clones_root_with_the_editable_install(tiny_index: Path, tmp_path: Path) -> None:
    """The development install: the clone's own fastsubs/ is the package (no hand-over)."""
    answer = json.loads(run(sys.executable, "-c", API, tiny_index, cwd=REPO).stdout)
    assert Path(answer["file"]) == REPO / "fastsubs" / "__init__.py"
    expected = json.loads(run(sys.executable, "-c", API, tiny_index, cwd=tmp_path).stdout)
    assert answer["subs"] == expected["subs"] and len(answer["subs"]) == 7
