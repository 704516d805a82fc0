"""
Training graphs traced once per signature and shared by every model of that signature.

A fit compiles its training step: a ``tf.function`` around the model's loss. Traced around one
model's objects, that graph would capture the model's variables, and the next model of the same
shapes (the next fold of a cross-validation, the next point of a grid, a user's loop over seeds)
would trace a graph of its own, about a second each time. Here the graph takes every variable it
reads as an argument: TensorFlow traces a function of variables once per shape and dtype, and
calls the same graph on other variables of those shapes. What cannot be an argument is baked in
when the graph is traced: Python numbers (``num_data``, ``whiten``, the number of quadrature
points), the likelihood's link, the priors' and transforms' constants, GPflow's jitter. The
*signature* of a model is a digest of all of these, found by walking its modules (:func:`walk`);
two callers of one signature share a graph, and a model that differs in any of them traces its
own.

A new trace is made, then, by

- the first fit of a signature in the process;
- data of a new shape: the first shape is traced as given, and from the second on TensorFlow
  traces one graph for any number of points (``reduce_retracing``), which then serves every
  later number. A model with ``num_data`` set bakes that number in, so there each number of
  training points traces once; ``GPClassifier`` leaves it out (but for ``PolyaGammaSVGP``), so
  that a five-fold cross-validation and its refit trace twice. A step made with
  ``rows_unknown`` traces once for batches of any size;
- any change of what the signature covers: a kernel, likelihood, prior or transform of another
  kind or another constant, another number of inducing inputs or latent functions, another dtype,
  other options of the fit (``n_upd``), or another GPflow jitter.

A graph that captured a tensor not handed to it (a variable left out of the walk, or data held on
the model rather than passed) would compute the next caller's step with the first caller's state.
The captures of each new trace are therefore checked, and a signature whose graph captured such a
tensor is traced per caller from then on. :func:`trace_count` counts every trace, shared or not.
"""

import contextlib
import enum
import functools
import hashlib
import threading
import types
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Sequence, Set, Tuple

import gpflow
import numpy as np
import tensorflow as tf

SMALL = 4096
"""A tensor of at most this many elements enters the signature by its value; a larger one (data a
model holds) by its shape and dtype, and a graph that captures it is not shared."""

_WALKED_PACKAGES = ("gpflow", "gpflow_fastvi", "tensorflow_probability", "check_shapes")
"""Plain objects of these packages are walked through their attributes; any other object makes
its signature unique to it (it is compared by identity), so that nothing unknown is shared."""

_SKIPPED_ATTRIBUTES = {"_name_scope", "_scope_name"}
"""Attributes that name an instance (TensorFlow's name scopes) and do not enter a graph's maths."""

_TRACES = [0]  # every trace of a compiled step, shared or per caller
_SHARING = [True]  # whether steps made now may share graphs (:func:`unshared`)


def trace_count() -> int:
    """How many times the training steps of the package have been traced in this process."""
    return _TRACES[0]


@contextlib.contextmanager
def unshared() -> Iterator[None]:
    """
    Within this context, the training steps made trace graphs of their own, as if no other model
    had been trained in the process: the reference the shared graphs are tested against, and a
    way to rule them out when a fit behaves unexpectedly.
    """
    previous = _SHARING[0]
    _SHARING[0] = False
    try:
        yield
    finally:
        _SHARING[0] = previous


class Walked:
    """
    What a graph reads of its roots (:func:`walk`): the variables it takes as arguments, the large
    tensors that must not be captured, and the digest of everything else.
    """

    def __init__(self) -> None:
        self.variables: List[tf.Variable] = []
        self.large: List[tf.Tensor] = []
        self._parts: List[Tuple[Any, ...]] = []
        self._seen: Dict[int, str] = {}

    @property
    def digest(self) -> str:
        """The signature: a digest of everything walked but the variables' values."""
        return hashlib.sha1(repr(self._parts).encode()).hexdigest()

    def visit(self, value: Any, path: str) -> None:
        seen = self._seen.get(id(value))
        if seen is not None and not _is_scalar(value):
            self._parts.append((path, "same as", seen))
            return
        if isinstance(value, tf.Variable):
            self._seen[id(value)] = path
            self.variables.append(value)
            # Its kind too: a graph traced on plain variables is not called on a strategy's.
            self._parts.append(
                (
                    path,
                    "variable",
                    type(value).__name__,
                    tuple(value.shape),
                    value.dtype.name,
                    value.trainable,
                )
            )
        elif isinstance(value, (tf.Tensor, np.ndarray, np.generic)):
            self._seen[id(value)] = path
            self._visit_array(value, path)
        elif _is_scalar(value):
            self._parts.append((path, repr(value)))
        elif isinstance(value, types.FunctionType) and _walked_module(value.__module__):
            # A closure of ours bakes in what it closed over (a constant step size, say).
            self._seen[id(value)] = path
            self._parts.append((path, value.__module__, value.__qualname__))
            self.visit(value.__defaults__, f"{path}.__defaults__")
            for i, cell in enumerate(value.__closure__ or ()):
                try:
                    contents = cell.cell_contents
                except ValueError:  # a cell not yet bound
                    contents = None
                self.visit(contents, f"{path}.__closure__[{i}]")
        elif isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
            self._parts.append((path, value.__module__, value.__qualname__))
        elif isinstance(value, (list, tuple)):
            self._parts.append((path, type(value).__name__, len(value)))
            for i, item in enumerate(value):
                self.visit(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            self._parts.append((path, "dict", len(value)))
            for key in sorted(value, key=repr):
                self.visit(value[key], f"{path}[{key!r}]")
        else:
            self._seen[id(value)] = path
            self._visit_object(value, path)

    def _visit_array(self, value: Any, path: str) -> None:
        array = value.numpy() if isinstance(value, tf.Tensor) else np.asarray(value)
        if array.size <= SMALL:
            digest = hashlib.sha1(np.ascontiguousarray(array).tobytes()).hexdigest()
            self._parts.append((path, "array", array.shape, array.dtype.str, digest))
        else:
            self._parts.append((path, "large array", array.shape, array.dtype.str))
            if isinstance(value, tf.Tensor):
                self.large.append(value)

    def _visit_object(self, value: Any, path: str) -> None:
        kind = type(value)
        if isinstance(value, types.MethodType):
            self._parts.append((path, "method", value.__func__.__qualname__))
            self.visit(value.__self__, f"{path}.__self__")
            return
        if not _walked_module(kind.__module__):
            self._parts.append((path, kind.__module__, kind.__qualname__, id(value)))
            return
        self._parts.append((path, kind.__module__, kind.__qualname__))
        ignored = set(getattr(kind, "_TF_MODULE_IGNORED_PROPERTIES", ())) | _SKIPPED_ATTRIBUTES
        attributes = dict(getattr(value, "__dict__", {}))
        for slot in getattr(kind, "__slots__", ()):
            if hasattr(value, slot):
                attributes[slot] = getattr(value, slot)
        for name in sorted(attributes):
            if name not in ignored and not name.startswith("_self_"):
                self.visit(attributes[name], f"{path}.{name}")


def _walked_module(module: Optional[str]) -> bool:
    return (module or "").split(".")[0] in _WALKED_PACKAGES


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(
        value, (bool, int, float, complex, str, bytes, slice, enum.Enum, tf.DType, tf.TensorShape)
    )


def walk(roots: Sequence[Any], key: Hashable = ()) -> Walked:
    """
    Walk ``roots`` (a model, and any state of the run's own) through their modules and the plain
    objects of GPflow and this package, for the variables a graph over them takes as arguments and
    the signature of everything it bakes in; ``key`` (the caller's options) and GPflow's numerical
    settings enter the signature too.
    """
    walked = Walked()
    config = gpflow.config
    walked.visit(
        (
            key,
            config.default_float().__name__,
            config.default_int().__name__,
            config.default_jitter(),
            config.default_positive_minimum(),
            config.default_positive_bijector(),
        ),
        "settings",
    )
    for i, root in enumerate(roots):
        walked.visit(root, f"root{i}")
    return walked


class _SharedGraph:
    """One ``tf.function`` for every caller of a name and signature; a call that traces runs its
    caller's body."""

    def __init__(self, name: str):
        self.name = name
        self.per_caller: Set[str] = set()
        """Signatures whose graph captured a tensor of its caller: traced per caller."""
        # The body of the call under way, per thread: a trace runs in the thread that called.
        self._calling = threading.local()
        self._relaxed: Set[Tuple[Any, ...]] = set()  # signatures and specs traced for any rows
        # The graph of each signature and input shapes once it is known, called directly: looking
        # it up through the tf.function again canonicalises every variable argument, which costs
        # as much as a small step's own computation (:meth:`_direct`).
        self._graphs: Dict[Tuple[Any, ...], Any] = {}
        # Our maths uses TensorFlow control flow explicitly: AutoGraph would only slow tracing.
        # TensorFlow counts a function's retraces under the code object it wraps, which every
        # instance's method shares; a partial has none, so each instance's count is its own.
        self._function = tf.function(
            functools.partial(self._traced), autograph=False, reduce_retracing=True
        )

    def _traced(
        self, signature: str, variables: Sequence[tf.Variable], inputs: Sequence[Any]
    ) -> Any:
        del signature, variables  # the body reads them through its caller's objects
        _TRACES[0] += 1
        return self._calling.body(*inputs)

    # A user's own tf.function around a step (AutoGraph on) must not convert this dispatch.
    @tf.autograph.experimental.do_not_convert
    def __call__(
        self,
        body: Callable[..., Any],
        signature: str,
        walked: Optional[Walked],
        inputs: Sequence[Any],
        rows_unknown: bool = False,
    ) -> Any:
        traces = _TRACES[0]
        variables = () if walked is None else tuple(walked.variables)
        arguments = (signature, variables, tuple(inputs))
        direct = self._direct(signature, inputs, rows_unknown)
        if direct is not None and direct in self._graphs:
            return self._graphs[direct](*arguments)
        self._calling.body = body
        try:
            if rows_unknown:
                # Trace once for any number of rows: a call of known rows dispatches to it.
                specs = tuple(tf.TensorSpec([None, *x.shape[1:]], x.dtype) for x in inputs)
                key = (signature, tuple((tuple(s.shape), s.dtype) for s in specs))
                if key not in self._relaxed:
                    self._function.get_concrete_function(signature, variables, specs)
                    self._relaxed.add(key)
            result = self._function(*arguments)
        finally:
            self._calling.body = None
        traced = walked is not None and _TRACES[0] != traces
        if not traced and direct is None:
            return result  # nothing to check or keep: no second lookup
        graph = self._function.get_concrete_function(*arguments)
        if traced and walked is not None and _captures_state(graph, walked):
            self.per_caller.add(signature)
        elif direct is not None:
            self._graphs[direct] = graph
        return result

    @staticmethod
    def _direct(
        signature: str, inputs: Sequence[Any], rows_unknown: bool
    ) -> Optional[Tuple[Any, ...]]:
        """
        The key under which a call's graph is kept for direct calls: the signature (which fixes
        the variables' kinds, shapes and dtypes) and the shapes and dtypes of the inputs, their first
        dimension left out with ``rows_unknown``. ``None`` (no direct call) inside another
        function's trace, or for inputs that are not all tensors (or ``None``).
        """
        if not tf.executing_eagerly():
            return None
        flat = tf.nest.flatten(inputs)
        if not all(x is None or isinstance(x, tf.Tensor) for x in flat):
            return None
        start = 1 if rows_unknown else 0
        return (
            signature,
            tuple(None if x is None else (tuple(x.shape)[start:], x.dtype) for x in flat),
        )


_SHARED: Dict[Tuple[str, Optional[str]], _SharedGraph] = {}


def _captures_state(function: Any, walked: Walked) -> bool:
    """Whether a traced graph captured a variable, or a large tensor of its roots."""
    large = {id(t) for t in walked.large}
    return any(t.dtype == tf.resource or id(t) in large for t in function.captured_inputs)


class CompiledStep:
    """
    ``body(*inputs)`` as a compiled function, sharing its graph with every other step of the same
    name and signature (module docstring). The body reads its state through ``roots`` (the model,
    and the run's own variables), whose variables each call hands to the graph; ``inputs`` are
    tensors (the data, a point of the search). ``shared=False`` (data streamed, or a strategy's
    replicas) keeps the graph to this step, as does any step made under :func:`unshared`. With
    ``rows_unknown`` the inputs' first dimension is left unknown when the graph is traced: one
    graph for batches of any size, each a mini-batch to the model.
    """

    def __init__(
        self,
        name: str,
        body: Callable[..., Any],
        roots: Sequence[Any],
        *,
        key: Hashable = (),
        shared: bool = True,
        rows_unknown: bool = False,
    ):
        self.body = body
        self.rows_unknown = rows_unknown
        shared = shared and _SHARING[0]
        self._walked = walk(roots, (name, key)) if shared else None
        self._signature = None if self._walked is None else self._walked.digest
        # One function per name and signature: each traces only for new shapes of its inputs, so
        # that TensorFlow's warning on frequent retracing, meant for a function retraced by
        # mistake, does not fire for a process that trains models of many signatures.
        self._graph: Optional[_SharedGraph] = None
        if shared:
            key = (name, self._signature)
            if key not in _SHARED:
                _SHARED[key] = _SharedGraph(name)
            self._graph = _SHARED[key]
        self._own: Optional[_SharedGraph] = None

    @property
    def shared(self) -> bool:
        """Whether calls go through the graph shared by this step's signature."""
        return (
            self._graph is not None
            and self._walked is not None
            and self._signature not in self._graph.per_caller
        )

    @tf.autograph.experimental.do_not_convert
    def __call__(self, *inputs: Any) -> Any:
        if self.shared:
            assert self._graph is not None and self._signature is not None
            return self._graph(self.body, self._signature, self._walked, inputs, self.rows_unknown)
        if self._own is None:
            self._own = _SharedGraph("own")  # captures this step's state: no other caller
        return self._own(self.body, "own", None, inputs, self.rows_unknown)
