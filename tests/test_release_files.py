"""The files a released library carries: the citation file names the software and the five source
papers as docs/refs.bib spells them, the version is written in one place, the hosted-docs
configuration builds docs/conf.py with the docs extra, and CI's wheel check rejects a wheel that
carries more than the package."""

import importlib.util
import pathlib
import re
import sys
import zipfile

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with pip's vendored copy of tomli
    from pip._vendor import tomli as tomllib

ROOT = pathlib.Path(__file__).parents[1]
SOURCE_PAPERS = [
    "izmailov2017faster",
    "king2006fast",
    "titsias2009variational",
    "khan2012fast",
    "wenzel2017scalable",
]


def _squash(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())


def _bib_titles() -> dict:
    bib = (ROOT / "docs" / "refs.bib").read_text(encoding="utf-8")
    entries = re.findall(r"@\w+\{(\w+),(.*?)\n\}", bib, re.S)
    titles = {}
    for key, body in entries:
        title = re.search(r"title\s*=\s*\{(.*)\},?\n", body)
        assert title, key
        titles[key] = _squash(title.group(1))
    return titles


def test_citation_file_names_the_software_and_the_five_source_papers() -> None:
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0"
    assert citation["type"] == "software" and "gpflow_fastvi" in citation["title"]
    assert citation["license"] == "Apache-2.0"
    titles = _bib_titles()
    cited = [_squash(reference["title"]) for reference in citation["references"]]
    assert cited == [titles[key] for key in SOURCE_PAPERS]
    for reference in citation["references"]:
        assert reference["authors"] and isinstance(reference["year"], int), reference["title"]


def test_the_version_is_written_in_one_place() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "gpflow_fastvi/_version.py"
    assert "version" not in yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    version = re.search(r'__version__ = "(.+)"', (ROOT / "gpflow_fastvi/_version.py").read_text())
    assert version and re.fullmatch(r"\d+\.\d+\.\d+", version.group(1))


def test_read_the_docs_builds_the_sphinx_site_with_the_docs_extra() -> None:
    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    major, minor = map(int, config["build"]["tools"]["python"].split("."))
    assert (major, minor) >= (3, 10)
    assert config["sphinx"]["configuration"] == "docs/conf.py"
    assert (ROOT / config["sphinx"]["configuration"]).exists()
    install = config["python"]["install"]
    assert {"method": "pip", "path": ".", "extra_requirements": ["docs"]} in install


def test_the_changelog_keeps_an_unreleased_section() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "keepachangelog.com" in changelog and "\n## [Unreleased]\n" in changelog


def _check_wheel():
    spec = importlib.util.spec_from_file_location("check_wheel", ROOT / ".ci" / "check_wheel.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wheel(path: pathlib.Path, names: list) -> str:
    with zipfile.ZipFile(path, "w") as wheel:
        for name in names:
            wheel.writestr(name, "")
    return str(path)


PACKAGE = [
    "gpflow_fastvi/__init__.py",
    "gpflow_fastvi/py.typed",
    "gpflow_fastvi/cli.py",
    "gpflow_fastvi/datasets/data/banana_data.csv",
    "gpflow_fastvi-0.1.0.dist-info/METADATA",
]


def test_ci_wheel_check_accepts_the_package_alone(tmp_path: pathlib.Path) -> None:
    assert _check_wheel().main(_wheel(tmp_path / "ok.whl", PACKAGE)) == 0


@pytest.mark.parametrize(
    "extra", ["tests/test_cli.py", "experiments/swap.py", "gpflow_suite/run.py", "conftest.py"]
)
def test_ci_wheel_check_rejects_anything_beside_the_package(
    tmp_path: pathlib.Path, extra: str
) -> None:
    assert _check_wheel().main(_wheel(tmp_path / "bad.whl", PACKAGE + [extra])) == 1


def test_ci_wheel_check_rejects_a_wheel_without_its_type_marker(tmp_path: pathlib.Path) -> None:
    names = [n for n in PACKAGE if not n.endswith("py.typed")]
    assert _check_wheel().main(_wheel(tmp_path / "untyped.whl", names)) == 1


def test_the_license_file_is_the_apache_license_the_metadata_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}
