"""The README and the documentation describe the release as it is; what changed between versions
belongs in CHANGELOG.md. This keeps a list of phrases that narrate history (sessions of work,
before/after, a temporal "now") and fails on any of them in the README, docs/*.md or the
tutorials' text."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "notebooks").glob("*.pct.py")),
]

HISTORY = [
    r"\bthis release\b",
    r"\b(the|an?|previous|earlier|last) release before\b",
    r"\b(an earlier|the previous|the last|the next) release\b",
    r"\bfell from\b",
    r"\brose from\b",
    r"\bmeasured before\b",
    r"\bthis stop\b",
    r"\brerun since\b",
    r"\bfirst rerun\b",
    r"\bthe runs? before (it|this|them)\b",
    r"\bthe code before\b",
    r"\bbefore (and after )?the change\b",
    r"\bsince fixed\b",
    r"\b(was|were|has been|have been) fixed\b",
    r"\bused to\b",
    r"\bnot yet\b",
    r"\byet to\b",
    r"\bthis session\b",
    r"\bin the meantime\b",
    r"\bnow\b(?! and then)",
]


def _text(page: pathlib.Path) -> str:
    text = page.read_text(encoding="utf-8")
    if page.name.endswith(".pct.py"):  # the tutorial's prose: its Markdown cells and comments
        text = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    return text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_does_not_narrate_history(page: pathlib.Path) -> None:
    found = [
        f"line {_text(page)[: m.start()].count(chr(10)) + 1}: {m.group(0)!r}"
        for pattern in HISTORY
        for m in re.finditer(pattern, _text(page), re.I)
    ]
    assert not found, f"{page.relative_to(ROOT)}: " + "; ".join(found)


@pytest.mark.parametrize(
    "sentence",
    [
        "On ijcnn1 it now converges.",
        "The table of this release.",
        "Its time fell from 1.8 s to 0.3 s.",
        "4.4× at the release before, when the search was linear.",
        "An earlier release stepped them in GPflow's coordinates.",
    ],
)
def test_the_list_catches_history(sentence: str) -> None:
    assert any(re.search(pattern, sentence, re.I) for pattern in HISTORY)


def test_the_list_leaves_plain_description_alone() -> None:
    for sentence in ["evaluate now and then", "Scipy called until it no longer raises the ELBO"]:
        assert not any(re.search(pattern, sentence, re.I) for pattern in HISTORY), sentence
