"""Sphinx configuration for the gpflow_fastvi documentation.

Build from the repository root with ``sphinx-build -W --keep-going -b html docs docs/_build/html``
after ``pip install ".[docs]"``. The tutorials in ``notebooks/`` (seen here through the
``docs/tutorials`` link) are executed during the build, and a failing cell fails it. Set
``GPFLOW_FASTVI_QUICK=1`` for the shortened loops the test suite uses.
"""

import os
import sys
from pathlib import Path

# The API page documents, and the VIConcave tutorial imports, modules that live in the repository
# but not in the installed package (experiments/, tests/references/). Put the repository root on
# the path of this process, for autodoc, and in PYTHONPATH, which the kernels that execute the
# tutorials inherit: myst-nb starts each in the tutorial's own folder (docs/tutorials), whose
# parent is not the root.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))

# On Read the Docs (which sets READTHEDOCS) the tutorials run with the shortened loops CI uses, so
# that the build stays inside the service's time limit; a full-length build is a local one.
if os.environ.get("READTHEDOCS") == "True":
    os.environ.setdefault("GPFLOW_FASTVI_QUICK", "1")

# Imported after the path is set, so that the package documented is the checkout's.
import gpflow_fastvi  # noqa: E402

project = "gpflow_fastvi"
author = "The gpflow_fastvi authors"
copyright = "2026, the gpflow_fastvi authors"
release = gpflow_fastvi.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinxcontrib.bibtex",
]

# Markdown pages and jupytext percent notebooks, both read by MyST.
source_suffix = {".md": "myst-nb", ".pct.py": "myst-nb"}
nb_custom_formats = {".pct.py": ["jupytext.reads", {"fmt": "py:percent"}]}
exclude_patterns = ["_build", "data", "**/.ipynb_checkpoints", "tutorials/*.ipynb"]

myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# Every tutorial runs on every build; a cell that raises fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 900
nb_execution_show_tb = True
# Standard error holds TensorFlow's C++ start-up log (no GPU found, oneDNN notices), written before
# its log level is read: keep it, and every other stderr line, out of the rendered pages. A cell
# that fails still fails the build.
nb_merge_streams = False
nb_output_stderr = "remove"

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

bibtex_bibfiles = ["refs.bib"]
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"

html_theme = "furo"
html_title = f"gpflow_fastvi {release}"
