"""The tutorials in notebooks/ run from top to bottom (with shortened loops)."""

import pathlib
import runpy

import matplotlib
import matplotlib.pyplot
import pytest

# Each tutorial trains on real data for tens of seconds: part of the slow tier as well.
pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.pct.py"))


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.setenv("GPFLOW_FASTVI_QUICK", "1")
    # A tutorial may import a test reference (tests.references), as in the documentation build,
    # which puts the repository root on the path too (docs/conf.py).
    monkeypatch.syspath_prepend(str(ROOT))
    runpy.run_path(str(path), run_name="__main__")  # raises if any cell fails
    figures = matplotlib.pyplot.get_fignums()
    matplotlib.pyplot.close("all")
    assert figures, f"{path.name} drew no figure"
