"""The documentation's own links: every relative link in README and docs/ names a file that exists
(and a heading that exists, for ``page.md#anchor``), every tutorial is listed in both, and the
README sections that getting_started.md repeats are the same text in both."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.pct.py"))

# [text](target) and ![alt](target), outside code spans; targets without a scheme are relative.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """The anchor GitHub (and MyST's heading anchors) give a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: pathlib.Path) -> set:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"^#+\s+(.*)$", text, re.M)}


def _relative_links(page: pathlib.Path) -> list:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def test_the_slug_rule_matches_githubs_on_a_known_heading() -> None:
    heading = "KLCorrected: the KL-corrected bound against the standard bound"
    assert _slug(heading) == "klcorrected-the-kl-corrected-bound-against-the-standard-bound"
    assert _slug("Beyond the logit: `VITaylor`") == "beyond-the-logit-vitaylor"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: pathlib.Path) -> None:
    broken = []
    for target in _relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize("section", ["swap", "models"])
def test_getting_started_repeats_the_readme_section(section: str) -> None:
    """getting_started.md holds a copy of README's marked sections, not a MyST include, so that
    it reads on GitHub too; the copy must stay the same text."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = f"<!-- {section}-start -->\n", f"<!-- {section}-end -->"
    assert start in readme and end in readme, f"README lost its {section} markers"
    text = readme.split(start, 1)[1].split(end, 1)[0]
    page = (ROOT / "docs" / "getting_started.md").read_text(encoding="utf-8")
    assert text in page, f"docs/getting_started.md no longer repeats README's {section} section"


def test_every_tutorial_is_in_the_docs_toctree_and_the_readme() -> None:
    toctree = (ROOT / "docs" / "tutorials.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert NOTEBOOKS, "no tutorials found"
    for notebook in NOTEBOOKS:
        stem = notebook.name[: -len(".pct.py")]
        assert (
            f"tutorials/{stem}\n" in toctree
        ), f"{notebook.name} is missing from docs/tutorials.md"
        assert f"(notebooks/{notebook.name})" in readme, f"{notebook.name} is missing from README"
