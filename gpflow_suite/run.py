"""
Fetch GPflow's tests and run those that build an SVGP with each model in SVGP's place.

    python -m gpflow_suite.run                       # the control, then every model; the table
    python -m gpflow_suite.run VIConcave --details   # one model, and its failures grouped
    python -m gpflow_suite.run --check-floors        # fail below the counts in floors.json

GPflow's tests come from the source distribution of the installed GPflow (``pip download
gpflow==VERSION --no-binary :all: --no-deps``), unpacked once into ``--workdir``; nothing of them
is kept in this repository. The control run, GPflow's own SVGP, records which tests build an SVGP
(the selection) and checks that they pass; each model then runs the selection alone under
:mod:`gpflow_suite.plugin`.
"""

import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

REPOSITORY = Path(__file__).resolve().parent.parent
FLOORS = Path(__file__).resolve().parent / "floors.json"
MODELS = ("VIJJ", "VITaylor", "PolyaGammaSVGP", "KLCorrected", "VIConcave")
CONTROL = "SVGP"
COLUMNS = ("passed", "failed", "refused", "errors")


def default_workdir() -> Path:
    """``$GPFLOW_SUITE_DIR``, else a folder in the user's cache: the fetched tests and the reports."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(os.environ.get("GPFLOW_SUITE_DIR") or Path(cache) / "gpflow-fastvi-suite")


def fetch_tests(workdir: Path, gpflow_version: str) -> Path:
    """
    GPflow's ``tests/`` folder of ``gpflow_version``, from its source distribution, unpacked
    under ``workdir`` (once) beside an empty ``pytest.ini`` that makes the unpacked folder the
    rootdir, and a ``tests/__init__.py`` that lets pytest import the test modules as the package
    ``tests`` they import from (the distribution leaves it out).
    """
    root = workdir / f"gpflow-{gpflow_version}"
    if (root / "pytest.ini").exists():
        return root
    workdir.mkdir(parents=True, exist_ok=True)
    archive = workdir / f"gpflow-{gpflow_version}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"gpflow=={gpflow_version}"]
            + ["--no-binary", ":all:", "--no-deps", "--quiet", "-d", str(workdir)],
            check=True,
        )
    prefix = f"gpflow-{gpflow_version}/tests/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        if not members:
            raise SystemExit(f"{archive.name} holds no tests/ folder.")
        if hasattr(tarfile, "data_filter"):  # Python's safe extraction, where it has it
            tar.extractall(workdir, members=members, filter="data")
        else:
            tar.extractall(workdir, members=members)
    (root / "tests" / "__init__.py").touch()
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return root


def candidate_files(root: Path) -> List[str]:
    """The test modules that name SVGP: the only ones that can build it."""
    return sorted(
        str(path.relative_to(root))
        for path in (root / "tests").rglob("test_*.py")
        if "SVGP" in path.read_text(encoding="utf-8")
    )


def run_pytest(
    root: Path, model: str, files: Sequence[str], report: Path, select: Optional[Path], extra: str
) -> float:
    """One pytest run of ``files`` with ``model`` in SVGP's place; returns its wall time."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-p", "gpflow_suite.plugin", "--svgp-as", model]
    command += ["--svgp-suite-report", str(report), "-q", "-p", "no:cacheprovider"]
    command += ["--continue-on-collection-errors"]  # a module that builds at import
    if select is not None:
        command += ["--svgp-suite-select", str(select)]
    command += extra.split() + list(files)
    log = report.with_suffix(".log")
    for part in report_parts(report):
        part.unlink()
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        subprocess.run(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if not report_parts(report):
        tail = log.read_text(encoding="utf-8").splitlines()[-30:]
        raise SystemExit(
            f"pytest with {model} wrote no report; the end of {log}:\n" + "\n".join(tail)
        )
    return seconds


def report_parts(report: Path) -> List[Path]:
    """The files of a run's report: ``report`` itself, or one part per pytest-xdist worker."""
    return sorted(report.parent.glob(report.name + "*"))


def read_report(report: Path) -> Dict[str, Any]:
    """A run's report, its workers' parts merged."""
    merged: Dict[str, Any] = {"built": [], "collected": [], "results": {}, "collect_errors": {}}
    for part in report_parts(report):
        found = json.loads(part.read_text(encoding="utf-8"))
        for key in ("built", "collected"):
            merged[key] = sorted(set(merged[key]) | set(found[key]))
        for key in ("results", "collect_errors"):
            merged[key].update(found[key])
    return merged


def outcomes(report: Dict[str, Any], selection: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """
    Each selected test's outcome in a run: ``passed``, ``failed``, ``refused`` (ended by one of
    the package's refusals, in the test or when its module was imported), or ``errors`` (an
    error outside the test's body, a module that did not import, a test that was not
    collected). A selected test that a model's run skips counts as failed: the control ran it.
    """
    results = report["results"]
    collect_errors = report["collect_errors"]
    found: Dict[str, Dict[str, Any]] = {}
    for nodeid in selection:
        result = results.get(nodeid)
        if result is None:
            module = nodeid.split("::")[0]
            error = collect_errors.get(module, {"exception": None, "message": "not collected"})
            outcome = "refused" if error.get("refusal") else "errors"
            found[nodeid] = {"outcome": outcome, "when": "collect", **error}
            continue
        outcome = {"error": "errors", "skipped": "failed"}.get(result["outcome"], result["outcome"])
        found[nodeid] = {**result, "outcome": outcome}
    return found


def cause(result: Dict[str, Any]) -> str:
    """A failure's exception and message with numbers and shapes blanked, to group like causes."""
    message = re.sub(r"[-+]?\d[\d.e+-]*", "#", result.get("message") or "")
    return f"{result.get('exception')}: {message[:160]}"


def table(rows: Sequence[Tuple[str, int, Mapping[str, int], float]]) -> str:
    head = "| model | selected | passed | failed | refused | errors | wall time (s) |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for model, selected, counts, seconds in rows:
        cells = [str(counts[c]) for c in COLUMNS]
        wall = "-" if math.isnan(seconds) else f"{seconds:.0f}"  # a control reused, not run
        lines.append(f"| {model} | {selected} | " + " | ".join(cells) + f" | {wall} |")
    return "\n".join(lines)


def write_floors(measured: Dict[str, Dict[str, int]], gpflow_version: str, selected: int) -> None:
    """Record the measured counts in :data:`FLOORS`, keeping those of models not run."""
    recorded = json.loads(FLOORS.read_text(encoding="utf-8")) if FLOORS.exists() else {}
    floors: Dict[str, Any] = {"gpflow": gpflow_version, "selected": selected}
    for key, counts in measured.items():
        floors[key] = {**recorded.get(key, {}), **counts}
    FLOORS.write_text(json.dumps(floors, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def below_floors(measured: Dict[str, Dict[str, int]], gpflow_version: str) -> List[str]:
    """
    What falls short of :data:`FLOORS`: a model that passes fewer tests than recorded, or that
    fails more without a refusal (a refusal that became an unclear error counts there).
    """
    recorded = json.loads(FLOORS.read_text(encoding="utf-8"))
    problems = []
    if recorded["gpflow"] != gpflow_version:
        print(f"\nThe floors were measured with GPflow {recorded['gpflow']}.")
    for model, count in measured["passed"].items():
        floor = recorded["passed"].get(model, 0)
        if count < floor:
            problems.append(f"{model} passes {count} of the tests, below its floor of {floor}.")
        failures = measured["unrefused_failures"][model]
        ceiling = recorded["unrefused_failures"].get(model, 0)
        if failures > ceiling:
            problems.append(
                f"{model} fails {failures} of the tests without a refusal, more than the "
                f"{ceiling} recorded."
            )
    return problems


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=list(MODELS), help="default: all five")
    parser.add_argument("--workdir", type=Path, default=default_workdir())
    parser.add_argument(
        "--details", action="store_true", help="list each model's failures by cause"
    )
    parser.add_argument(
        "--check-floors",
        action="store_true",
        help=f"exit 1 if a model passes fewer tests, or fails more without a refusal, than "
        f"recorded in {FLOORS.name}",
    )
    parser.add_argument(
        "--write-floors", action="store_true", help=f"record the pass counts in {FLOORS.name}"
    )
    parser.add_argument(
        "--reuse-control",
        action="store_true",
        help="take the selection from the last control run in --workdir instead of running it",
    )
    parser.add_argument("--pytest-args", default="", help="more pytest arguments, e.g. '-n 2'")
    args = parser.parse_args(argv)
    for model in args.models:
        if model not in MODELS:
            parser.error(f"models are {', '.join(MODELS)}; got {model!r}")

    gpflow_version = version("gpflow")
    root = fetch_tests(args.workdir, gpflow_version)
    files = candidate_files(root)
    control = args.workdir / f"{CONTROL}.json"
    if args.reuse_control and report_parts(control):
        seconds = float("nan")
    else:
        seconds = run_pytest(root, CONTROL, files, control, None, args.pytest_args)
    control_report = read_report(control)
    selection = control_report["built"]
    selected = args.workdir / "selection.json"
    selected.write_text(json.dumps({"built": selection}, indent=1), encoding="utf-8")
    rows: List[Tuple[str, int, Mapping[str, int], float]] = []
    problems = []
    counts = collections.Counter(r["outcome"] for r in outcomes(control_report, selection).values())
    rows.append((f"{CONTROL} (control)", len(selection), counts, seconds))
    if counts["passed"] != len(selection):
        problems.append(f"GPflow's own SVGP fails {len(selection) - counts['passed']} of them.")

    measured: Dict[str, Dict[str, int]] = {"passed": {}, "unrefused_failures": {}}
    details: Dict[str, Dict[str, Any]] = {}
    for model in args.models:
        report = args.workdir / f"{model}.json"
        seconds = run_pytest(root, model, files, report, selected, args.pytest_args)
        found = outcomes(read_report(report), selection)
        counts = collections.Counter(r["outcome"] for r in found.values())
        rows.append((model, len(selection), counts, seconds))
        measured["passed"][model] = counts["passed"]
        measured["unrefused_failures"][model] = counts["failed"] + counts["errors"]
        details[model] = found

    print(f"GPflow {gpflow_version}: its tests that build an SVGP, with each model in its place\n")
    print(table(rows))
    if args.details:
        for model, found in details.items():
            groups = collections.Counter(
                (r["outcome"], cause(r)) for r in found.values() if r["outcome"] != "passed"
            )
            print(f"\n{model}:")
            for (outcome, text), n in groups.most_common():
                print(f"  {n:4d}  {outcome:8s} {text}")
    if args.write_floors:
        write_floors(measured, gpflow_version, len(selection))
    if args.check_floors:
        problems += below_floors(measured, gpflow_version)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
