"""
A pytest plugin that runs GPflow's tests with a model of :mod:`gpflow_fastvi` in SVGP's place.

Load it with ``-p gpflow_suite.plugin`` and choose the model with ``--svgp-as NAME`` (or the
environment variable ``GPFLOW_SUITE_MODEL``); ``SVGP`` keeps GPflow's own class, the control.
Before collection the class is bound to every name GPflow's tests import SVGP by
(:data:`SVGP_NAMES`), so a test module's ``from gpflow.models import SVGP``, its subclasses of SVGP
and its ``isinstance`` checks all see the model. ``SVGP_with_posterior`` is SVGP under the name of
the class that SVGP only renames; ``SVGP_deprecated``, the older implementation that GPflow's
tests compare it with, stays GPflow's.

The plugin records which tests build the class (in the test, in a fixture, or at collection as a
parameter), so that a run of the control yields the selection, ``--svgp-suite-select``, that the
runs of the models are restricted to; and the outcome of every test, with the exception that ended
it, in the JSON file of ``--svgp-suite-report`` (one file per worker under pytest-xdist,
``REPORT.gw0``, ...). A test is *refused* when it ends in one of the
package's refusals (:data:`REFUSALS`): a check that names a case the model does not take.
"""

import functools
import json
import os
import re
from typing import Any, Dict, Generator, Iterator, List, Optional, Set

import gpflow
import pytest

# Imported before the swap, so that the package's own references to SVGP are GPflow's class.
import gpflow_fastvi.models
from gpflow_fastvi.exceptions import (
    IncompatibleLikelihoodError,
    InvalidDataError,
    UnsupportedConfigurationError,
)

MODEL_NAMES = ("SVGP", "VIJJ", "VITaylor", "PolyaGammaSVGP", "KLCorrected", "VIConcave")
"""What ``--svgp-as`` takes: GPflow's SVGP (the control) or a model of the package."""

ENV_MODEL = "GPFLOW_SUITE_MODEL"


def model_class(name: str) -> type:
    """The class ``--svgp-as name`` puts in SVGP's place."""
    if name not in MODEL_NAMES:
        raise pytest.UsageError(f"--svgp-as must be one of {', '.join(MODEL_NAMES)}; got {name!r}.")
    if name == "SVGP":
        return gpflow.models.svgp.SVGP
    return getattr(gpflow_fastvi.models, name)


REFUSALS = (IncompatibleLikelihoodError, InvalidDataError, UnsupportedConfigurationError)
"""The exceptions by which a model refuses a case on purpose, naming it and what to do."""

SUITE_COVERAGE_CHECK = re.compile(r"no tests have been registered for the following posteriors")
"""The message of GPflow's check, at the teardown of its ``posteriors`` test package, that its
whole suite exercised every kind of posterior. A selection of the suite never does (the GPR, SGPR
and VGP posteriors come from tests that build no SVGP), so the check fails at the last test of
that package each worker runs, whichever test it is: a fact about the selection, not an outcome
of that test, which keeps the outcome of its call."""


def is_suite_coverage_check(call: Any, error: Optional[BaseException]) -> bool:
    """Whether ``error`` is :data:`SUITE_COVERAGE_CHECK`'s failure at a test's teardown."""
    return (
        call.when == "teardown"
        and isinstance(error, AssertionError)
        and SUITE_COVERAGE_CHECK.search(str(error)) is not None
    )


def is_refusal(error: Optional[BaseException]) -> bool:
    """Whether ``error``, or an exception it was raised from, is one of :data:`REFUSALS`."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, REFUSALS):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


SVGP_NAMES = (
    (gpflow.models, "SVGP"),
    (gpflow.models.svgp, "SVGP"),
    (gpflow.models.svgp, "SVGP_with_posterior"),
)
"""The (module, name) pairs by which GPflow's tests reach SVGP."""


def swap_svgp(cls: type) -> List[Any]:
    """Bind ``cls`` to every name of :data:`SVGP_NAMES`; returns what was there."""
    before = [getattr(module, name) for module, name in SVGP_NAMES]
    for module, name in SVGP_NAMES:
        setattr(module, name, cls)
    return before


def restore_svgp(before: List[Any]) -> None:
    """Undo :func:`swap_svgp`."""
    for (module, name), value in zip(SVGP_NAMES, before):
        setattr(module, name, value)


class SuiteRecorder:
    """Which tests build the swapped class, and how every test ended."""

    def __init__(self, cls: type, selection: Optional[Set[str]], report: Optional[str]):
        self.cls = cls
        self.selection = selection
        self.report = report
        self.current: Optional[str] = None
        self.built: Set[str] = set()
        self.results: Dict[str, Dict[str, Any]] = {}
        self.collect_errors: Dict[str, Dict[str, Any]] = {}
        self.collected: Set[str] = set()
        self.original_init = cls.__dict__.get("__init__")
        inherited_init = cls.__init__  # type: ignore[misc]

        @functools.wraps(inherited_init)
        def recording_init(model: Any, *args: Any, **kwargs: Any) -> None:
            if self.current is not None:  # at collection, the test's parameters say it
                self.built.add(self.current)
            inherited_init(model, *args, **kwargs)

        cls.__init__ = recording_init  # type: ignore[misc]

    def unwrap(self) -> None:
        if self.original_init is None:
            del self.cls.__init__  # type: ignore[misc]
        else:
            self.cls.__init__ = self.original_init  # type: ignore[misc]

    def key(self, item: Any) -> str:
        """
        The test's id in the control run: GPflow's tests that take model classes as parameters
        name them in the id (``[SVGP]``), which then holds the model's name instead.
        """
        head, bracket, params = item.nodeid.partition("[")
        if not bracket:
            return str(item.nodeid)
        return head + bracket + re.sub(rf"\b{self.cls.__name__}\b", "SVGP", params)

    def holds_model(self, value: Any, depth: int = 0) -> bool:
        if isinstance(value, self.cls):
            return True
        if depth < 2 and isinstance(value, (tuple, list)):
            return any(self.holds_model(v, depth + 1) for v in value)
        return False

    # pytest hooks ---------------------------------------------------------------------------------

    def pytest_collection_modifyitems(self, config: pytest.Config, items: List[Any]) -> None:
        for item in items:
            self.collected.add(self.key(item))
            callspec = getattr(item, "callspec", None)
            if callspec is not None and any(self.holds_model(v) for v in callspec.params.values()):
                self.built.add(self.key(item))
        if self.selection is None:
            return
        kept = [item for item in items if self.key(item) in self.selection]
        dropped = [item for item in items if self.key(item) not in self.selection]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_exception_interact(self, node: Any, call: Any, report: Any) -> None:
        if isinstance(node, pytest.Item) or call.excinfo is None:
            return
        self.collect_errors[node.nodeid] = describe(call.excinfo.value)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any) -> Iterator[None]:
        self.current = self.key(item)
        self.results[self.current] = {"outcome": "passed"}
        yield
        self.current = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        result = self.results[self.key(item)]
        result["seconds"] = round(result.get("seconds", 0.0) + report.duration, 3)
        if call.when == "call" and any(self.holds_model(v) for v in item.funcargs.values()):
            self.built.add(self.key(item))
        if report.skipped and result["outcome"] == "passed":
            result["outcome"] = "skipped"
        if not report.failed or result["outcome"] not in ("passed", "skipped"):
            return
        error = call.excinfo.value if call.excinfo is not None else None
        if is_suite_coverage_check(call, error):
            return
        if is_refusal(error):
            result["outcome"] = "refused"
        else:
            result["outcome"] = "failed" if call.when == "call" else "error"
        result["when"] = call.when
        result.update(describe(error))

    def pytest_sessionfinish(self, session: Any) -> None:
        # Under pytest-xdist each worker writes its own part, REPORT.gwN; the controller runs none.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        if self.report is None or (
            worker is None and session.config.pluginmanager.has_plugin("dsession")
        ):
            return
        path = self.report if worker is None else f"{self.report}.{worker}"
        with open(path, "w", encoding="utf-8") as file:
            json.dump(
                {
                    "model": self.cls.__name__,
                    "gpflow": gpflow.__version__,
                    "built": sorted(self.built),
                    "collected": sorted(self.collected),
                    "results": self.results,
                    "collect_errors": self.collect_errors,
                },
                file,
                indent=1,
                sort_keys=True,
            )


def describe(error: Optional[BaseException]) -> Dict[str, Any]:
    """The exception that ended a test: its class, its first line, whether it is a refusal."""
    if error is None:
        return {"exception": None, "message": ""}
    lines = str(error).strip().splitlines()
    return {
        "exception": type(error).__name__,
        "message": lines[0][:300] if lines else "",
        "refusal": is_refusal(error),
    }


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpflow_suite", "GPflow's tests with a model in SVGP's place")
    group.addoption(
        "--svgp-as",
        default=os.environ.get(ENV_MODEL, "SVGP"),
        help=f"the class in SVGP's place: one of {', '.join(MODEL_NAMES)} "
        f"(default ${ENV_MODEL}, else SVGP)",
    )
    group.addoption(
        "--svgp-suite-select",
        default=None,
        help="a JSON report of a control run: run only the tests that built an SVGP in it",
    )
    group.addoption(
        "--svgp-suite-report", default=None, help="write each test's outcome to this JSON file"
    )


def pytest_configure(config: pytest.Config) -> None:
    cls = model_class(config.getoption("--svgp-as"))
    selection = None
    select = config.getoption("--svgp-suite-select")
    if select is not None:
        with open(select, encoding="utf-8") as file:
            selection = set(json.load(file)["built"])
    config.stash[_BEFORE] = swap_svgp(cls)
    recorder = SuiteRecorder(cls, selection, config.getoption("--svgp-suite-report"))
    config.stash[_RECORDER] = recorder
    config.pluginmanager.register(recorder, "gpflow_suite_recorder")


def pytest_report_header(config: pytest.Config) -> str:
    return f"gpflow_suite: {gpflow.models.SVGP.__module__}.{gpflow.models.SVGP.__name__} as SVGP"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _RECORDER in config.stash:
        config.stash[_RECORDER].unwrap()
    if _BEFORE in config.stash:
        restore_svgp(config.stash[_BEFORE])


_BEFORE = pytest.StashKey[List[Any]]()
_RECORDER = pytest.StashKey[SuiteRecorder]()
