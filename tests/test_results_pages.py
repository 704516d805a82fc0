"""The results tables of the docs and the README are rendered from the result files in docs/data/
(``python -m gpflow_fastvi.benchmarks.pages``): each marked block equals its rendering, every
table on the results page is such a block, every result file is shown somewhere, and the table
records state the command and date of their run."""

import json
import pathlib
import re

import pytest

from gpflow_fastvi.benchmarks import pages

ROOT = pathlib.Path(__file__).parents[1]
RENDERED = [ROOT / "README.md", ROOT / "docs" / "benchmarks.md"]
DATA = ROOT / "docs" / "data"


def _tables_outside_blocks(text: str) -> list:
    outside = pages.BLOCK.sub("", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    return re.findall(r"^\|.*\|\n\|[-:| ]+\|$", outside, re.M)


@pytest.mark.parametrize("page", RENDERED, ids=lambda p: p.name)
def test_each_results_block_is_its_files_rendering(page: pathlib.Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert pages.blocks(text), f"{page.name} has no results block"
    stale = [
        match["source"]
        for match in pages.blocks(text)
        if pages.rewrite(match.group(0), str(page.parent)) != match.group(0)
    ]
    assert not stale, (
        f"{page.name}: blocks differ from {stale}; "
        f"run python -m gpflow_fastvi.benchmarks.pages {page.relative_to(ROOT)}"
    )


def test_every_table_on_the_results_page_is_rendered_from_a_file() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert not _tables_outside_blocks(text)


def test_the_check_finds_a_table_typed_by_hand() -> None:
    assert _tables_outside_blocks("text\n\n| a | b |\n|---|---:|\n| 1 | 2 |\n")


def test_every_result_file_is_shown_on_a_page() -> None:
    shown = set()
    for page in RENDERED:
        for match in pages.blocks(page.read_text(encoding="utf-8")):
            shown |= {(page.parent / name).resolve() for name in match["source"].split("+")}
    assert {path.resolve() for path in DATA.glob("*.json")} <= shown


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_a_table_record_states_its_command_and_date(path: pathlib.Path) -> None:
    content = json.loads(path.read_text(encoding="utf-8"))
    if content.get("format") != pages.TABLE_FORMAT:
        pytest.skip("written by a gpflow-fastvi command, with its settings")
    assert re.match(r"(python -m experiments\.|gpflow-fastvi )", content["command"])
    assert re.match(r"\d{4}-\d{2}-\d{2}", content["date"])
    assert content["rows"] and all(len(r) == len(content["columns"]) for r in content["rows"])


def test_a_changed_figure_makes_its_block_stale(tmp_path: pathlib.Path) -> None:
    record = {
        "format": "table",
        "command": "python -m experiments.swap banana",
        "date": "2026-01-01",
        "columns": ["model", "seconds"],
        "rows": [["VIJJ", "1.0"]],
    }
    (tmp_path / "r.json").write_text(json.dumps(record))
    page = "<!-- results: r.json -->\n<!-- results end -->\n"
    rendered = pages.rewrite(page, str(tmp_path))
    assert "| VIJJ | 1.0 |" in rendered and "`python -m experiments.swap banana`" in rendered
    assert pages.rewrite(rendered, str(tmp_path)) == rendered
    assert pages.rewrite(rendered.replace("1.0", "0.5"), str(tmp_path)) == rendered


def test_write_printed_table_round_trips_a_printed_table(tmp_path: pathlib.Path) -> None:
    header = "| model | seconds | NLL |"
    rows = ["| VIJJ | 1.5 | 0.1251 |", "| VITaylor | 2.0 | — |"]
    path = str(tmp_path / "r.json")
    pages.write_printed_table(
        path, "experiments.user_script", ["classification", "--seed", "11"], header, rows
    )
    written = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    assert written["command"] == "python -m experiments.user_script classification --seed 11"
    assert written["rows"] == [["VIJJ", "1.5", "0.1251"], ["VITaylor", "2.0", "—"]]
    markdown = pages.table_record_markdown(written)
    assert "| VITaylor | 2.0 | — |" in markdown and written["date"] in markdown


def test_check_mode_reports_a_stale_page_and_changes_nothing(tmp_path: pathlib.Path) -> None:
    record = {"format": "table", "command": "gpflow-fastvi compare", "date": "2026-01-01"}
    record |= {"columns": ["a"], "rows": [["1"]]}
    (tmp_path / "r.json").write_text(json.dumps(record))
    page = tmp_path / "page.md"
    page.write_text("<!-- results: r.json -->\n| a |\n<!-- results end -->\n")
    before = page.read_text()
    assert pages.main([str(page), "--check"]) == 1 and page.read_text() == before
    assert pages.main([str(page)]) == 0 and pages.main([str(page), "--check"]) == 0
