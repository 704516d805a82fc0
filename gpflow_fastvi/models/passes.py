"""
:class:`DataPasses`: how a model meets its data, one part of every model (``model._passes``): the
data of a call (given and checked, or held by the model), the factor L = chol(Kmm) and the
projection A = L⁻¹Kmn, the scale of a mini-batch, and the one sum over the data, on one device, in
batches, streamed, or shared among the replicas of a ``tf.distribute`` strategy
(:mod:`gpflow_fastvi.distribution`).
"""

import contextlib
import weakref
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from ..distribution import StrategyRef, in_replica, strategy_in_scope, sum_over_replicas
from ..exceptions import InvalidDataError
from ..gaussian import (
    Projection,
    is_factorisable,
    kmm_cholesky,
    sum_over_batches,
    sum_over_dataset,
    whitened_projection,
)
from ..likelihoods import MULTI_CLASS_LIKELIHOODS, checked_class_labels
from ..model_checks import looks_like_data
from ..stream_validation import (
    ZERO_ONE,
    LabelSets,
    checked_stream,
    in_graph_check,
    static_cardinality,
)
from ..types import CheckedData, Data
from ..validation import (
    check_data,
    check_input_columns,
    describe_container,
    is_symbolic,
    targets_for_likelihood,
)
from .host import PartsHost

_CHECKED_STREAMS: "weakref.WeakKeyDictionary[tf.data.Dataset, weakref.ref]" = (
    weakref.WeakKeyDictionary()
)

"""The checked streams :meth:`DataPasses._checked_pass_stream` made, and the passes they are for
(weakly, both ways): kept beside the models, not in them, so that a model
deep-copies and pickles as SVGP does."""


class DataPasses:
    """
    The passes of one model over its data. A plain object, not a :class:`tf.Module`: it holds no
    variables, only the model it serves and the ``tf.distribute`` strategy its passes are shared
    by, so checkpoints and ``print_summary`` see exactly SVGP's variables.
    """

    def __init__(self, model: PartsHost):
        self.model = model
        """The model whose kernel, inducing variable, likelihood and ``num_data`` the passes use."""
        self.built_in_strategy = StrategyRef(strategy_in_scope())
        """The strategy whose scope the model was built in, if any."""
        self.strategy_for_now = StrategyRef(None)
        """The strategy of an enclosing :meth:`distributed_by`, if any."""
        self.batches_of_an_iterator = False
        """Whether the call being traced is on a batch of an iterator of mini-batches
        (:meth:`iterator_batches`)."""

    # ----------------------------------------------------------------------------------------------
    # The data of a call: given and checked as the constructors check them, or held by the model.

    def training_data(self, data: Any = None) -> Data:
        """
        The data a call works on: ``data`` = ``(X, Y)`` as tensors, checked and its targets
        converted to the likelihood's convention as at construction (symbolic tensors, inside a
        compiled function, are taken as they are); a ``tf.data.Dataset`` of ``(X [b, D], Y [b, 1])``
        batches, whose element structure is checked and which every pass streams once; or the
        data the model holds when ``data`` is ``None``. Data checked already
        (:class:`~gpflow_fastvi.types.CheckedData`, or a stream this method made) are returned as
        they are: data are checked once, where they enter, and passed down checked.
        """
        name = type(self.model).__name__
        if isinstance(data, CheckedData) or self._made_stream(data):
            return data
        if data is None:
            held = getattr(self.model, "data", None)
            if held is None:
                raise ValueError(
                    f"This {name} was built without data: pass it to the call, e.g. "
                    f"training_loss((X, Y)) or fit(model, (X, Y)), or build the model with it, "
                    f"{name}(kernel, likelihood, Z, data=(X, Y))."
                )
            return CheckedData(*held)
        if isinstance(data, tf.data.Dataset):
            return self._checked_pass_stream(data)
        if not looks_like_data(data):
            error = InvalidDataError if isinstance(data, (tuple, list)) else TypeError
            raise error(
                "data must be a tuple (X, Y) with X [N, D] and Y [N, 1], or a tf.data.Dataset of "
                f"such batches; got {describe_container(data)}."
            )
        return self.checked_training_data(data)

    def _checked_pass_stream(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """
        A dataset that every pass of this model reads to its end, checked as it streams
        (:func:`~gpflow_fastvi.stream_validation.checked_stream`: finite values, Bernoulli
        labels in {0, 1}, classes in {0, …, C − 1}, the batch named; an endless stream of unknown length cut after
        ``num_data`` rows). One that repeats without end is refused here: a pass over it would
        never end.
        """
        model = self.model
        if static_cardinality(dataset) == tf.data.INFINITE_CARDINALITY:
            raise InvalidDataError(
                f"The dataset repeats without end, and every pass of {type(model).__name__} reads "
                "all the data: pass a finite dataset (without .repeat(), or with "
                ".take(number_of_batches)). For mini-batch training of an endless stream use "
                "PolyaGammaSVGP, or NaturalGradientSVI in a loop of your own."
            )
        likelihood = model.likelihood
        if isinstance(likelihood, gpflow.likelihoods.Bernoulli):
            labels: LabelSets = ZERO_ONE
        elif isinstance(likelihood, MULTI_CLASS_LIKELIHOODS):
            labels = (tuple(float(c) for c in range(likelihood.num_classes)),)
        else:
            labels = ()
        num_data = None if model.num_data is None else int(model.num_data)
        checked = checked_stream(dataset, labels, num_data, model._target_columns)
        _CHECKED_STREAMS[checked] = weakref.ref(self)
        return checked

    def _made_stream(self, data: Any) -> bool:
        """Whether ``data`` is a stream that :meth:`_checked_pass_stream` made for these passes."""
        if not isinstance(data, tf.data.Dataset):
            return False
        passes = _CHECKED_STREAMS.get(data)
        return passes is not None and passes() is self

    def checked_data(self, data: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        ``data`` = (X, Y) as tensors: finite, X with the inducing inputs' columns, the targets
        checked and converted to the likelihood's convention (:mod:`gpflow_fastvi.validation`).
        Symbolic tensors (inside a compiled function) are taken as they are.
        """
        X, Y = data
        if is_symbolic(X) or is_symbolic(Y):
            # Inside a compiled function: the labels of C classes are checked in the graph here,
            # once per call, not in the loops over batches and steps that read them.
            likelihood = self.model.likelihood
            Y = tf.convert_to_tensor(Y)
            if isinstance(likelihood, MULTI_CLASS_LIKELIHOODS):
                Y = checked_class_labels(Y, likelihood.num_classes, type(likelihood).__name__)
            return tf.convert_to_tensor(X), Y
        X, Y = check_data((X, Y), self.model._target_columns)
        Y = targets_for_likelihood(self.model.likelihood, Y)
        check_input_columns(X, self.model.inducing_variable, "the inputs X")
        return tf.constant(X), tf.constant(Y)

    def checked_training_data(self, data: Any) -> CheckedData:
        """
        Training data ``data`` = (X, Y), checked as :meth:`checked_data` checks them and with at
        most ``num_data`` rows, the number of training points (fewer rows are a mini-batch). Test
        points, which may be more, are checked by :meth:`checked_data` alone. Data checked
        already are returned as they are.
        """
        if isinstance(data, CheckedData):
            return data
        X, Y = self.checked_data(data)
        num_data = self.model.num_data
        rows = X.shape[0]
        if num_data is not None and rows is not None and rows > num_data:
            raise InvalidDataError(
                f"The data have {rows} rows, more than num_data={num_data}, the number of "
                "training points (a call with fewer rows is a mini-batch of them): build the "
                f"model with num_data={rows}, or leave num_data out."
            )
        return CheckedData(X, Y)

    def is_mini_batch(self, data: Data) -> bool:
        """
        Whether a call's data are a mini-batch: fewer rows than ``num_data``, or a number of rows
        known only when it runs (a compiled step over an iterator's batches). A dataset is all
        the data, streamed.
        """
        if self.model.num_data is None or isinstance(data, tf.data.Dataset):
            return False
        rows = data[0].shape[0]
        return rows is None or rows < self.model.num_data

    def by_rows(
        self, data: Data, mini_batch: Callable[[], tf.Tensor], all_data: Callable[[], tf.Tensor]
    ) -> tf.Tensor:
        """
        ``mini_batch()`` for a call on a mini-batch (:meth:`is_mini_batch`), else ``all_data()``.
        Where the rows are known only when the call runs (a loss compiled for any number of
        rows, as GPflow's dynamic-shape recipe compiles it), the two are chosen then, by the
        rows against ``num_data``: all the data given to such a loss are all the data, and take
        the full-data steps, not a mini-batch's short natural-gradient step (which left
        Scipy converging 0.2 nats a point below SVGP's ELBO).
        """
        if not self.is_mini_batch(data):
            return all_data()
        if data[0].shape[0] is not None or self.batches_of_an_iterator:
            return mini_batch()
        # Both are traced, and TensorFlow may log once that its type inference of the branches'
        # intermediates failed (tensorflow/tensorflow#57052); the loss is computed all the same.
        rows = tf.shape(data[0])[0]
        return tf.cond(rows < self.model.num_data, mini_batch, all_data)

    @contextlib.contextmanager
    def iterator_batches(self) -> Iterator[None]:
        """
        Within this context a call whose rows are known only when it runs is on a mini-batch
        (:meth:`by_rows`): a closure over an iterator of mini-batches traces its loss here, so
        that its graph holds the mini-batch step alone.
        """
        previous = self.batches_of_an_iterator
        self.batches_of_an_iterator = True
        try:
            yield
        finally:
            self.batches_of_an_iterator = previous

    def data_scale(self, X: Any) -> tf.Tensor:
        """
        num_data / (rows of X): how much a batch's sum over points counts; 1 without ``num_data``,
        and for a ``tf.data.Dataset``, which is all the data (its rows are counted against
        ``num_data`` in the pass, :meth:`sum_over_data`).
        """
        dtype = gpflow.config.default_float()
        num_data = self.model.num_data
        if num_data is None or isinstance(X, tf.data.Dataset):
            return tf.constant(1.0, dtype=dtype)
        return tf.cast(num_data, dtype) / tf.cast(tf.shape(X)[0], dtype)

    # ----------------------------------------------------------------------------------------------
    # The factor of Kmm and the projection, the same for training and prediction.

    def Kmm_cholesky(self) -> tf.Tensor:
        """L = chol(Kmm + jitter), with jitter that escalates if needed."""
        return kmm_cholesky(self.model.kernel, self.model.inducing_variable)

    def _Kmm_is_factorisable(self) -> tf.Tensor:
        """Whether :meth:`Kmm_cholesky` succeeds at the current hyperparameters (a boolean tensor)."""
        model = self.model
        return is_factorisable(gpflow.covariances.Kuu(model.inducing_variable, model.kernel))

    def projection(self, X: tf.Tensor, L: tf.Tensor) -> Projection:
        """A = L⁻¹ Kmn and diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ of the points X (:func:`whitened_projection`)."""
        return whitened_projection(self.model.kernel, self.model.inducing_variable, X, L)

    # ----------------------------------------------------------------------------------------------
    # A loss where a step can be taken, +inf where it cannot.

    def loss_or_inf(self, ok: tf.Tensor, loss: Callable[[], tf.Tensor]) -> tf.Tensor:
        """
        ``loss()`` where the boolean tensor ``ok`` holds, else +inf with a zero gradient, without
        evaluating it (nothing it would store is stored): what a full-data ``training_loss``
        returns at a trial point where its step cannot be taken, so that L-BFGS-B backtracks.
        Not NaN, which :class:`gpflow.models.SVGP`'s loss is there: SciPy's L-BFGS-B may accept
        a NaN trial point and, its gradient being zero, report convergence at it.

        When a strategy's replicas share the passes (:meth:`pass_strategy`), ``loss()`` is
        evaluated as it is, and fails where it cannot be taken: TensorFlow cannot differentiate
        a ``tf.cond`` around them (the gradient of the branch captures the replicas' variables
        from outside the function). :func:`~gpflow_fastvi.fit` takes such a failure at a trial
        point as an infinite loss too.
        """
        if self.pass_strategy() is not None:
            return loss()
        inf = tf.constant(np.inf, dtype=gpflow.config.default_float())
        return tf.cond(ok, loss, lambda: inf)

    def where_factorisable(self, loss: Callable[[], tf.Tensor]) -> tf.Tensor:
        """
        ``loss()`` where Kmm can be factorised; else +inf with nothing stored
        (:meth:`loss_or_inf`). A line search's extreme trial point (a lengthscale of 10⁻¹⁵) then
        makes L-BFGS-B shorten its step, and an Adam step there has a zero gradient.
        """
        return self.loss_or_inf(self._Kmm_is_factorisable(), loss)

    # ----------------------------------------------------------------------------------------------
    # Sums over the data, on one device or many.

    def sum_over_data(
        self,
        fn: Callable[..., Any],
        data: Data,
        shared: Sequence[tf.Tensor] = (),
        batch_size: Optional[int] = None,
    ) -> Any:
        """
        Σ of ``fn(*rows, *shared)``, a nest of sums over rows, over the data: arrays whose rows go
        together (in batches of ``batch_size``, or at once), or a stream of (X, Y) batches; with
        each replica of :meth:`pass_strategy` summing its own share and one all-reduce. Gradients
        reach ``shared`` and the trainable variables either way. The rows of a stream are counted
        in the same pass and checked against ``num_data`` (:meth:`_sum_over_counted_stream`).
        """
        if isinstance(data, tf.data.Dataset) and self.model.num_data is not None:
            return self._sum_over_counted_stream(fn, data, shared)
        return self._sum_on_devices(fn, data, shared, batch_size)

    def _sum_on_devices(
        self,
        fn: Callable[..., Any],
        data: Data,
        shared: Sequence[tf.Tensor] = (),
        batch_size: Optional[int] = None,
    ) -> Any:
        """:meth:`sum_over_data` without the row count: on the devices of :meth:`pass_strategy`."""
        strategy = self.pass_strategy()
        if strategy is not None:
            return sum_over_replicas(
                fn, data, strategy, shared, self.model.trainable_variables, batch_size
            )
        if isinstance(data, tf.data.Dataset):
            return sum_over_dataset(fn, data, shared)
        return sum_over_batches(fn, data, batch_size, shared)

    def _sum_over_counted_stream(
        self, fn: Callable[..., Any], dataset: tf.data.Dataset, shared: Sequence[tf.Tensor]
    ) -> Any:
        """
        :meth:`sum_over_data` of a stream, with its rows counted in the same pass and checked
        against ``num_data``: a stream that yields another number of rows than the model was
        built for fails with a sentence that says both
        (:func:`~gpflow_fastvi.stream_validation.in_graph_check`). The count is a sum in the default
        float, exact up to 2²⁴ rows in float32.
        """
        dtype = gpflow.config.default_float()

        def counted(X: tf.Tensor, Y: tf.Tensor, *rest: tf.Tensor) -> Any:
            return fn(X, Y, *rest), tf.cast(tf.shape(X)[0], dtype)

        total, rows = self._sum_on_devices(counted, dataset, shared)
        num_data = tf.cast(self.model.num_data, dtype)
        check = in_graph_check(
            tf.abs(rows - num_data) < 0.5,
            "The dataset yielded",
            tf.cast(rows, tf.int64),
            "rows in a pass, where num_data is",
            tf.cast(num_data, tf.int64),
            "(build the model with the number of rows the dataset yields).",
        )
        with tf.control_dependencies([check]):
            return tf.nest.map_structure(tf.identity, total)

    def sum_over_projected_rows(
        self,
        per_rows: Callable[..., Any],
        X: Any,
        Y: Optional[tf.Tensor],
        L: tf.Tensor,
        shared: Sequence[tf.Tensor] = (),
        projection: Optional[Projection] = None,
    ) -> Any:
        """
        :meth:`sum_over_data` of ``per_rows(X, Y, projection, *shared)`` over the rows of (X, Y),
        each set of rows projected by L = chol(Kmm) where it is summed; on one device the
        ``projection`` of all the rows may be given instead, when the caller has it already.
        X may also be a ``tf.data.Dataset`` of (X, Y) batches, with Y ``None``: all the data,
        streamed once (a full-data step of :class:`~gpflow_fastvi.PolyaGammaSVGP`).
        """
        if projection is not None and self.pass_strategy() is None:
            return per_rows(X, Y, projection, *shared)

        def projected(X: tf.Tensor, Y: tf.Tensor, L: tf.Tensor, *shared: tf.Tensor) -> Any:
            return per_rows(X, Y, self.projection(X, L), *shared)

        data = X if isinstance(X, tf.data.Dataset) else (X, Y)
        return self.sum_over_data(projected, data, (L, *shared))

    # ----------------------------------------------------------------------------------------------
    # Several devices: tf.distribute.

    @property
    def distribute_strategy(self) -> Optional[tf.distribute.Strategy]:
        """
        The :mod:`tf.distribute` strategy whose replicas share this model's passes over the data:
        that of the enclosing ``strategy.scope()``, else the one the model was built in, else
        ``None`` (one device). See :mod:`gpflow_fastvi.distribution`.
        """
        in_scope = strategy_in_scope()
        if in_scope is not None:
            return in_scope
        for ref in (self.strategy_for_now, self.built_in_strategy):
            if ref.strategy is not None:
                return ref.strategy
        return None

    @contextlib.contextmanager
    def distributed_by(self, strategy: Optional[tf.distribute.Strategy]) -> Iterator[None]:
        """
        Within this context the model's passes are shared among the replicas of ``strategy``
        (:func:`gpflow_fastvi.fit`'s ``strategy=``); ``None`` changes nothing. A model built in
        the scope of another strategy, whose replicas hold its variables, refuses.
        """
        built_in = self.built_in_strategy.strategy
        if strategy is not None and built_in is not None and built_in is not strategy:
            raise ValueError(
                f"This {type(self.model).__name__} was built in the scope of another tf.distribute "
                "strategy, whose replicas hold its variables: use that one, or build the model "
                "in this strategy's scope."
            )
        previous = self.strategy_for_now
        if strategy is not None:
            self.strategy_for_now = StrategyRef(strategy)
        try:
            yield
        finally:
            self.strategy_for_now = previous

    def pass_strategy(self) -> Optional[tf.distribute.Strategy]:
        """
        The strategy whose replicas share a pass over the data made now: :attr:`distribute_strategy`
        when the call is made outside the replicas, ``None`` inside ``strategy.run`` (a replica's
        own step sums the data it was given).
        """
        if in_replica():
            return None
        return self.distribute_strategy
