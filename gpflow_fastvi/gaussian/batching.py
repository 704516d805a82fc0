"""
Run a function over the data in batches of rows, without retracing and without holding more than one
batch's worth of intermediate results: sums are accumulated, per-point results concatenated.
"""
from typing import Callable, Optional, Sequence, TypeVar

import tensorflow as tf

T = TypeVar("T")


def _slices(tensors: Sequence[tf.Tensor], start: tf.Tensor, batch_size: int) -> Sequence[tf.Tensor]:
    return [t[start : start + batch_size] for t in tensors]


def sum_over_batches(
    fn: Callable[..., T],
    tensors: Sequence[tf.Tensor],
    batch_size: Optional[int],
    shared: Sequence[tf.Tensor] = (),
) -> T:
    """
    Σ over batches of ``fn(*batch, *shared)``, where ``fn`` returns a nest of tensors that are sums
    over rows.

    With ``batch_size=None`` this is just ``fn(*tensors, *shared)``. Otherwise the rows of every
    tensor in ``tensors`` are cut into consecutive batches and the results added up in a
    ``tf.while_loop``; each batch is recomputed in the backward pass (``tf.recompute_grad``), so
    gradients too need memory for one batch only.

    :param shared: tensors every batch uses whole (such as L = chol(Kmm)). They must be passed here,
        not captured by ``fn``: gradients reach a recomputed function only through its arguments
        and the variables it reads.
    """
    if batch_size is None:
        return fn(*tensors, *shared)
    N = tf.shape(tensors[0])[0]
    batch_fn = tf.recompute_grad(lambda *args: tf.nest.flatten(fn(*args)))
    first = fn(*_slices(tensors, tf.constant(0), batch_size), *shared)  # fixes structure, dtypes

    def body(start: tf.Tensor, total: Sequence[tf.Tensor]):  # type: ignore[no-untyped-def]
        part = batch_fn(*_slices(tensors, start, batch_size), *shared)
        return start + batch_size, [t + p for t, p in zip(total, part)]

    _, total = tf.while_loop(
        lambda start, _: start < N, body, (tf.constant(batch_size), tf.nest.flatten(first))
    )
    return tf.nest.pack_sequence_as(first, total)


def map_over_batches(
    fn: Callable[..., Sequence[tf.Tensor]], tensors: Sequence[tf.Tensor], batch_size: Optional[int]
) -> Sequence[tf.Tensor]:
    """
    ``fn(*tensors)`` computed batch by batch: ``fn`` returns a tuple of per-row tensors [n_batch, ...],
    which are concatenated along the rows. With ``batch_size=None`` it is ``fn(*tensors)``.
    """
    if batch_size is None:
        return fn(*tensors)
    N = tf.shape(tensors[0])[0]
    first = fn(*_slices(tensors, tf.constant(0), batch_size))
    arrays = [
        tf.TensorArray(t.dtype, size=0, dynamic_size=True, infer_shape=False).write(0, t)
        for t in first
    ]

    def body(i: tf.Tensor, start: tf.Tensor, arrays: Sequence[tf.TensorArray]):  # type: ignore[no-untyped-def]
        part = fn(*_slices(tensors, start, batch_size))
        return i + 1, start + batch_size, [a.write(i, p) for a, p in zip(arrays, part)]

    _, _, arrays = tf.while_loop(
        lambda i, start, _: start < N, body, (tf.constant(1), tf.constant(batch_size), arrays)
    )
    return tuple(a.concat() for a in arrays)
