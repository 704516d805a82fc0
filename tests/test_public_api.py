"""The package's public names: the lazy loader, ``__all__`` and the ``TYPE_CHECKING`` imports that
type checkers read list the same names, and mypy sees the classes themselves, not ``Any``."""

import ast
import pathlib
import subprocess
import sys

import pytest

import gpflow_fastvi

ROOT = pathlib.Path(__file__).parents[1]
INIT = ROOT / "gpflow_fastvi" / "__init__.py"


def _type_checking_names() -> set:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    guarded = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    ]
    assert len(guarded) == 1, "gpflow_fastvi/__init__.py lost its `if TYPE_CHECKING:` block"
    return {
        alias.asname or alias.name
        for node in ast.walk(guarded[0])
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_all_the_lazy_loader_and_the_type_checking_imports_name_the_same() -> None:
    lazy = set(gpflow_fastvi._PUBLIC)
    assert set(gpflow_fastvi.__all__) == lazy | {"__version__"}
    assert _type_checking_names() == lazy


def test_each_type_checking_import_comes_from_the_module_the_loader_uses() -> None:
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module != "_version":
            for alias in node.names:
                assert gpflow_fastvi._PUBLIC[alias.name] == f".{node.module}", alias.name


@pytest.mark.slow
def test_mypy_reveals_the_public_classes(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        "import gpflow_fastvi as fv\n"
        "reveal_type(fv.VIJJ)\n"
        "reveal_type(fv.VIConcave)\n"
        "reveal_type(fv.fit)\n"
        "reveal_type(fv.kmeans_inducing_points)\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    revealed = [line for line in result.stdout.splitlines() if "Revealed type" in line]
    assert len(revealed) == 4, result.stdout + result.stderr
    assert "-> gpflow_fastvi.models.vi_jj.VIJJ" in revealed[0]
    assert "-> gpflow_fastvi.models.vi_concave.VIConcave" in revealed[1]
    assert "-> gpflow_fastvi.training.run.Trace" in revealed[2]
    assert all('"Any"' not in line for line in revealed), revealed
