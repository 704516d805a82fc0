"""
The batches :func:`~gpflow_fastvi.training.svi.svi_plan` steps on, from arrays (shuffled in NumPy)
or from a ``tf.data`` stream, whose rows in a pass are checked against ``num_data``, the number
of training points that scales every mini-batch's ELBO: before the stream is read where
TensorFlow knows them, else as its first pass is read.
"""

from typing import Any, Iterator, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from ..exceptions import InvalidDataError
from ..models import SiteModel
from ..stream_validation import (
    NO_BATCHES,
    ZERO_ONE_OR_SIGNS,
    check_rows_per_pass,
    checked_stream,
    row_count_mismatch,
    static_cardinality,
)
from ..validation import check_data, check_input_columns, targets_for_likelihood

DEFAULT_BATCH_SIZE = 1000
"""
:func:`~gpflow_fastvi.training.svi.svi_plan`'s mini-batch size for arrays when none is given (all
the points when there are fewer). At m = 100 a step on ten times the points of SVGP's usual 100
costs about twice the time, for less noisy targets for q(u) and gradients for θ
(:ref:`defaults-batch-size`).
"""


def batches_from_arrays(
    model: SiteModel, data: Tuple[Any, Any], batch_size: int, seed: int
) -> Tuple[Iterator[Tuple[tf.Tensor, tf.Tensor]], np.ndarray, bool]:
    """An endless iterator of batches, the inputs X (checked), and whether each batch is all of
    them."""
    X, Y = check_data(data, model._target_columns)
    Y = targets_for_likelihood(model.likelihood, Y)
    check_input_columns(X, model.inducing_variable, "the inputs X")
    N = X.shape[0]
    full_batch = batch_size >= N
    num_data = model.num_data
    if num_data is not None and int(num_data) != N:
        raise InvalidDataError(
            f"model.num_data is {int(num_data)} but the training data have {N} rows; the mini-batch "
            "ELBO would be scaled wrongly."
        )
    if num_data is None and not full_batch:
        raise ValueError(
            f"Mini-batches of {batch_size} need model.num_data to scale the ELBO: construct the "
            f"model with num_data={N}, or pass batch_size={N} for full-batch steps (without "
            f"batch_size, fit takes mini-batches of {DEFAULT_BATCH_SIZE} beyond that many points)."
        )
    if full_batch:
        tensors = (tf.constant(X), tf.constant(Y))

        def repeat() -> Iterator[Tuple[tf.Tensor, tf.Tensor]]:
            while True:
                yield tensors

        return repeat(), X, True

    def shuffled() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        # Arrays in memory: a NumPy permutation per pass and fancy indexing cost microseconds per
        # batch, where a shuffling tf.data pipeline costs milliseconds, as much as the step itself.
        rng = np.random.default_rng(seed)
        size = batch_size
        while True:
            order = rng.permutation(N)
            for start in range(0, N - size + 1, size):  # every batch full, as drop_remainder
                index = order[start : start + size]
                yield X[index], Y[index]

    return shuffled(), X, False


def batches_from_dataset(
    model: SiteModel, dataset: tf.data.Dataset, batch_size: Optional[int]
) -> Tuple[Iterator[Any], Optional[int]]:
    """
    An endless iterator of the stream's batches, and the number of them in a pass where it is
    known. The rows of a pass must be ``num_data``, which scales every batch's ELBO: checked
    before anything is read where TensorFlow knows them, else counted in the first pass
    (:func:`epochs`). Single points are batched by ``batch_size``; a last batch of fewer rows
    is counted but not stepped on, so that every step has a batch of that size.
    """
    if model.num_data is None:
        raise ValueError(
            "Training from a tf.data.Dataset needs model.num_data (the number of training points) "
            "to scale the mini-batch ELBO."
        )
    spec = dataset.element_spec
    if not isinstance(spec, (tuple, list)) or len(spec) != 2:
        raise InvalidDataError("The dataset must yield pairs (X, Y).")
    rank = spec[0].shape.rank
    if rank not in (1, 2):
        raise InvalidDataError(f"The dataset must yield X of rank 1 or 2; got rank {rank}.")
    if rank == 1 and batch_size is None:
        raise ValueError("The dataset yields single points: give batch_size to batch them.")
    if rank == 2 and batch_size is not None:
        raise ValueError("The dataset is already batched; leave batch_size out.")
    num_data = int(model.num_data)
    check_rows_per_pass(dataset, num_data)
    whole_batch = points = None
    if batch_size is not None:  # single points
        whole_batch = int(batch_size)
        points = static_cardinality(dataset)
        dataset = dataset.batch(whole_batch)
    binary = isinstance(model.likelihood, gpflow.likelihoods.Bernoulli)
    dataset = checked_stream(
        dataset, ZERO_ONE_OR_SIGNS if binary else (), columns=model._target_columns
    )
    cardinality = static_cardinality(dataset)
    per_epoch = cardinality if cardinality is not None and cardinality > 0 else None
    if whole_batch is not None and per_epoch is not None:
        per_epoch = points // whole_batch if points else None
    stream = epochs(dataset.prefetch(tf.data.AUTOTUNE), num_data, whole_batch)
    return stream, per_epoch


def epochs(
    dataset: tf.data.Dataset, num_data: int, whole_batch: Optional[int] = None
) -> Iterator[Tuple[tf.Tensor, tf.Tensor]]:
    """
    The batches of ``dataset`` over and over, with its rows counted: a stream that ends with no
    batches, or whose first pass yields another number of rows than ``num_data`` (which scales
    every mini-batch's ELBO), raises an :class:`InvalidDataError` when it ends, before the last
    batch of that pass is yielded, so that a run of one pass is checked too. With
    ``whole_batch``, batches of fewer rows are counted but not yielded. An endless stream is
    never counted.
    """
    first = True
    while True:
        rows = 0
        held = None  # one batch behind the stream: the last of a pass waits for the count
        for X, Y in dataset:
            size = int(X.shape[0])
            rows += size
            if whole_batch is not None and size < whole_batch:
                continue
            if held is not None:
                yield held
            held = (X, Y)
        if rows == 0:
            raise InvalidDataError(NO_BATCHES)
        if first and rows != num_data:
            raise InvalidDataError(row_count_mismatch(rows, num_data))
        if held is None:
            raise InvalidDataError(
                f"batch_size={whole_batch} is more than the {rows} points the dataset yields in a "
                "pass: give a batch_size of at most that many."
            )
        first = False
        yield held
