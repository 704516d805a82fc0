"""
:class:`DataPasses`: how every model meets its data — the checks at a call's boundary, the factor
L = chol(Kmm) and the projection A = L⁻¹Kmn, the scale of a mini-batch, and the one sum over the
data, on one device, in batches, streamed, or shared among the replicas of a ``tf.distribute``
strategy (:mod:`gpflow_fastvi.distribution`).
"""

import contextlib
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple

import gpflow
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
from ..stream_validation import in_graph_check
from ..validation import check_data, check_input_columns, is_symbolic, targets_for_likelihood
from .protocol import Data, SiteModel


class DataPasses(SiteModel):
    """The part of :class:`~gpflow_fastvi.models.protocol.SiteModel` that passes over data."""

    _built_in_strategy = StrategyRef(None)  # set by a constructor called in a scope
    _strategy_for_now = StrategyRef(None)  # set by distributed_by

    # ----------------------------------------------------------------------------------------------
    # The data boundary of a call: concrete data checked as the constructors check it.

    def checked_data(self, data: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        ``data`` = (X, Y) as tensors: finite, X with the inducing inputs' columns, the targets
        checked and converted to the likelihood's convention (:mod:`gpflow_fastvi.validation`).
        Symbolic tensors (inside a compiled function) are taken as they are.
        """
        X, Y = data
        if is_symbolic(X) or is_symbolic(Y):
            return tf.convert_to_tensor(X), tf.convert_to_tensor(Y)
        X, Y = check_data((X, Y))
        Y = targets_for_likelihood(self.likelihood, Y)
        check_input_columns(X, self.inducing_variable, "the inputs X")
        return tf.constant(X), tf.constant(Y)

    def checked_training_data(self, data: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """
        Training data ``data`` = (X, Y), checked as :meth:`checked_data` checks them and with at
        most ``num_data`` rows, the number of training points (fewer rows are a mini-batch). Test
        points, which may be more, are checked by :meth:`checked_data` alone.
        """
        X, Y = self.checked_data(data)
        num_data = self.num_data
        rows = X.shape[0]
        if num_data is not None and rows is not None and rows > num_data:
            raise InvalidDataError(
                f"The data have {rows} rows, more than num_data={num_data}, the number of "
                "training points (a call with fewer rows is a mini-batch of them): build the "
                f"model with num_data={rows}, or leave num_data out."
            )
        return X, Y

    def is_mini_batch(self, X: tf.Tensor) -> bool:
        """
        Whether the inputs X of a call are a mini-batch: fewer rows than ``num_data``, or a
        number of rows known only when it runs (a compiled step over an iterator's batches).
        """
        if self.num_data is None:
            return False
        rows = X.shape[0]
        return rows is None or rows < self.num_data

    def data_scale(self, X: Any) -> tf.Tensor:
        """
        num_data / (rows of X): how much a batch's sum over points counts; 1 without ``num_data``,
        and for a ``tf.data.Dataset``, which is all the data (its rows are counted against
        ``num_data`` in the pass, :meth:`sum_over_data`).
        """
        dtype = gpflow.config.default_float()
        if self.num_data is None or isinstance(X, tf.data.Dataset):
            return tf.constant(1.0, dtype=dtype)
        return tf.cast(self.num_data, dtype) / tf.cast(tf.shape(X)[0], dtype)

    # ----------------------------------------------------------------------------------------------
    # The factor of Kmm and the projection, the same for training and prediction.

    def Kmm_cholesky(self) -> tf.Tensor:
        """L = chol(Kmm + jitter), with jitter that escalates if needed."""
        return kmm_cholesky(self.kernel, self.inducing_variable)

    def Kmm_is_factorisable(self) -> tf.Tensor:
        """Whether :meth:`Kmm_cholesky` succeeds at the current hyperparameters (a boolean tensor)."""
        return is_factorisable(gpflow.covariances.Kuu(self.inducing_variable, self.kernel))

    def projection(self, X: tf.Tensor, L: tf.Tensor) -> Projection:
        """A = L⁻¹ Kmn and diag K̃ = Knn,ᵢᵢ − Qnn,ᵢᵢ of the points X (:func:`whitened_projection`)."""
        return whitened_projection(self.kernel, self.inducing_variable, X, L)

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
        if isinstance(data, tf.data.Dataset) and self.num_data is not None:
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
                fn, data, strategy, shared, self.trainable_variables, batch_size
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
        num_data = tf.cast(self.num_data, dtype)
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
        for ref in (self._strategy_for_now, self._built_in_strategy):
            if ref.strategy is not None:
                return ref.strategy
        return None

    def remember_built_in_strategy(self) -> None:
        """Record the strategy whose scope the model is being built in, if any
        (:attr:`distribute_strategy`); each constructor calls it once."""
        self._built_in_strategy = StrategyRef(strategy_in_scope())

    @contextlib.contextmanager
    def distributed_by(self, strategy: Optional[tf.distribute.Strategy]) -> Iterator[None]:
        """
        Within this context the model's passes are shared among the replicas of ``strategy``
        (:func:`gpflow_fastvi.fit`'s ``strategy=``); ``None`` changes nothing. A model built in
        the scope of another strategy, whose replicas hold its variables, refuses.
        """
        built_in = self._built_in_strategy.strategy
        if strategy is not None and built_in is not None and built_in is not strategy:
            raise ValueError(
                f"This {type(self).__name__} was built in the scope of another tf.distribute "
                "strategy, whose replicas hold its variables: use that one, or build the model "
                "in this strategy's scope."
            )
        previous = self._strategy_for_now
        if strategy is not None:
            self._strategy_for_now = StrategyRef(strategy)
        try:
            yield
        finally:
            self._strategy_for_now = previous

    def pass_strategy(self) -> Optional[tf.distribute.Strategy]:
        """
        The strategy whose replicas share a pass over the data made now: :attr:`distribute_strategy`
        when the call is made outside the replicas, ``None`` inside ``strategy.run`` (a replica's
        own step sums the data it was given).
        """
        if in_replica():
            return None
        return self.distribute_strategy
