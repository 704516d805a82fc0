"""
The results tables of the documentation, rendered from the result files the benchmark commands
write, so that no figure on a results page is typed by hand.

A page marks each generated block with the result files it is made from, relative to the page::

    <!-- results: data/bench_cpu.json#german -->
    ...the rendering, rewritten by this module...
    <!-- results end -->

Several files are joined by ``+`` (their data sets merged); ``#NAME`` picks one data set of a
``bench`` results file. The kind of rendering follows the file's contents:

- a ``gpflow-fastvi bench`` results file: the data set's table of ``gpflow-fastvi plot``
  (:func:`~gpflow_fastvi.benchmarks.report.dataset_table`);
- a ``gpflow-fastvi kl-correction`` results file: the comparison with King & Lawrence's Table 1
  (:func:`~gpflow_fastvi.benchmarks.kl_correction.markdown_table`);
- a ``gpflow-fastvi scaling`` results file: its table
  (:func:`~gpflow_fastvi.benchmarks.scaling.markdown_table`);
- a table record (``"format": "table"``), which the research scripts of ``experiments/`` write
  with ``--record``: its columns and rows as they are, and the command and date of the run.

``python -m gpflow_fastvi.benchmarks.pages docs/*.md`` rewrites the blocks; with ``--check`` it
rewrites nothing and fails if a page differs from its files (the test suite runs that check).
"""

import argparse
import datetime
import json
import os
import re
import shlex
import sys
from typing import Any, Dict, List, Optional, Sequence

BLOCK = re.compile(
    r"(?P<open><!-- results: (?P<source>[^#\s]+)(?:#(?P<selector>\S+))? -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- results end -->)",
    re.S,
)
"""A generated block: its opening marker (the files and the selector), its body, its end."""

TABLE_FORMAT = "table"
"""The ``format`` of a table record."""


def load_sources(page_dir: str, source: str) -> List[Dict[str, Any]]:
    """The JSON files named by ``source`` (joined by ``+``), relative to the page's folder."""
    contents = []
    for name in source.split("+"):
        with open(os.path.join(page_dir, name), encoding="utf-8") as file:
            contents.append(json.load(file))
    return contents


def table_record_markdown(record: Dict[str, Any]) -> str:
    """A table record as Markdown: the table, then the command that made it and its date."""
    columns: List[str] = record["columns"]
    align = record.get("align") or ["l"] + ["r"] * (len(columns) - 1)
    if len(align) != len(columns):
        raise ValueError(f"a table record has {len(columns)} columns but {len(align)} alignments")
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "".join("---:|" if a == "r" else "---|" for a in align),
    ]
    for row in record["rows"]:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(columns)} columns")
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    lines.append("")
    lines.append(f"`{record['command']}`, run on {record['date']}.")
    if record.get("notes"):
        lines.append(record["notes"])
    return "\n".join(lines) + "\n"


def write_table_record(
    path: str,
    command: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    align: Optional[Sequence[str]] = None,
    notes: Optional[str] = None,
) -> Dict[str, Any]:
    """
    Write a table record to ``path`` and return it: the ``command`` that measured the rows, the
    date (today, UTC), the machine, and the table as its cells (strings, formatted as printed).

    :param align: ``"l"`` or ``"r"`` per column; by default the first left, the others right.
    :param notes: a sentence shown under the table, for what the columns cannot say.
    """
    from .runs import machine_description

    record: Dict[str, Any] = {
        "format": TABLE_FORMAT,
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "machine": machine_description(),
        "columns": list(columns),
        "rows": [[str(cell) for cell in row] for row in rows],
    }
    if align is not None:
        record["align"] = list(align)
    if notes:
        record["notes"] = notes
    table_record_markdown(record)  # the checks of the columns, before anything is written
    with open(path, "w", encoding="utf-8") as file:
        json.dump(record, file, indent=1, ensure_ascii=False)
        file.write("\n")
    return record


def command_line(module: str, argv: Optional[Sequence[str]]) -> str:
    """The command a script ran as, ``python -m MODULE ARGS``, for its record."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", "-m", module, *(shlex.quote(a) for a in arguments)])


def markdown_cells(line: str) -> List[str]:
    """The cells of one row of a Markdown table as printed, ``| a | b |`` -> ``["a", "b"]``."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def write_printed_table(
    path: str,
    module: str,
    argv: Optional[Sequence[str]],
    header: str,
    lines: Sequence[str],
    *,
    notes: Optional[str] = None,
) -> Dict[str, Any]:
    """
    :func:`write_table_record` of a Markdown table as a research script printed it (``header``
    and the row ``lines``), measured by ``python -m module`` with ``argv``: what each script's
    ``--record FILE`` writes.
    """
    return write_table_record(
        path,
        command_line(module, argv),
        markdown_cells(header),
        [markdown_cells(line) for line in lines],
        notes=notes,
    )


def render(contents: List[Dict[str, Any]], selector: Optional[str]) -> str:
    """The Markdown of one block, from its files' contents and the selector."""
    first = contents[0]
    if first.get("format") == TABLE_FORMAT:
        if len(contents) != 1 or selector is not None:
            raise ValueError("a table record is rendered alone, without a selector")
        return table_record_markdown(first)
    if "runs" in first:
        from .report import collect, dataset_table

        if selector is None:
            raise ValueError("a bench results block names its data set: FILE#NAME")
        collected = collect({"runs": [run for c in contents for run in c["runs"]]})
        if selector not in collected:
            raise ValueError(f"no data set {selector!r} in the bench results")
        return dataset_table(selector, collected[selector]) + "\n"
    if "datasets" in first:
        from .kl_correction import markdown_table as kl_table

        merged: Dict[str, Any] = {"datasets": {}}
        for content in contents:
            merged["datasets"].update(content["datasets"])
        return kl_table(merged)
    if "matmul_flops_per_second" in first:
        from .scaling import markdown_table as scaling_table

        return scaling_table(first)
    raise ValueError("not a results file this module can render")


def rewrite(text: str, page_dir: str) -> str:
    """``text`` with every generated block rendered again from its files."""

    def block(match: "re.Match[str]") -> str:
        contents = load_sources(page_dir, match["source"])
        body = render(contents, match["selector"]).rstrip("\n")
        return match["open"] + body + "\n\n" + match["close"]

    return BLOCK.sub(block, text)


def blocks(text: str) -> List["re.Match[str]"]:
    """The generated blocks of a page, in order."""
    return list(BLOCK.finditer(text))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Rewrite the generated blocks of the pages given, or with ``--check`` report stale ones."""
    parser = argparse.ArgumentParser(
        prog="python -m gpflow_fastvi.benchmarks.pages",
        description="Render the results tables of documentation pages from their result files.",
    )
    parser.add_argument("pages", nargs="+", help="Markdown pages with <!-- results: ... --> blocks")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a page is out of date"
    )
    args = parser.parse_args(argv)
    stale = []
    for page in args.pages:
        with open(page, encoding="utf-8") as file:
            text = file.read()
        new = rewrite(text, os.path.dirname(os.path.abspath(page)))
        if new != text:
            stale.append(page)
            if not args.check:
                with open(page, "w", encoding="utf-8") as file:
                    file.write(new)
    verb = "out of date" if args.check else "rewritten"
    for page in stale:
        print(f"{page}: {verb}")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
