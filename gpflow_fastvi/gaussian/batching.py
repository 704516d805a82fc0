"""
Run a function over the data in batches of rows, without retracing and without holding more than one
batch's worth of intermediate results: sums are accumulated, per-point results concatenated.
"""

from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar

import tensorflow as tf

from ..exceptions import FAULT_MARK
from ..stream_validation import NO_BATCHES

T = TypeVar("T")


def _slices(tensors: Sequence[tf.Tensor], start: tf.Tensor, batch_size: int) -> Sequence[tf.Tensor]:
    return [t[start : start + batch_size] for t in tensors]


def _loop_sum(
    fn: Callable[..., List[tf.Tensor]], tensors: Sequence[tf.Tensor], batch_size: int
) -> List[tf.Tensor]:
    """Σ over batches of the flat list ``fn(*batch)``, in a ``tf.while_loop``."""
    N = tf.shape(tensors[0])[0]
    first = fn(*_slices(tensors, tf.constant(0), batch_size))

    def body(start: tf.Tensor, total: List[tf.Tensor]):
        part = fn(*_slices(tensors, start, batch_size))
        return start + batch_size, [t + p for t, p in zip(total, part)]

    return tf.while_loop(lambda start, _: start < N, body, (tf.constant(batch_size), first))[1]


@tf.autograph.experimental.do_not_convert  # explicit tf.while_loop inside; nothing to convert
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
    ``tf.while_loop``. The gradient is computed by a second loop over the batches that recomputes
    each one (reverse mode through a plain loop would keep every batch's intermediates, i.e. the
    whole N × M projection), so the backward pass too needs memory for one batch only.

    :param shared: tensors every batch uses whole (such as L = chol(Kmm)). Pass them here rather
        than capture them in ``fn``, so that gradients reach them.
    """
    if batch_size is None:
        return fn(*tensors, *shared)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    shared = [tf.convert_to_tensor(t) for t in shared]
    num_tensors = len(tensors)
    structure: List[Any] = []  # the nest fn returns, recorded on its first call

    def flat_fn(*args: tf.Tensor) -> List[tf.Tensor]:
        result = fn(*args)
        if not structure:
            structure.append(result)
        return tf.nest.flatten(result)

    @tf.custom_gradient
    def summed(*args: tf.Tensor):
        batched, whole = args[:num_tensors], args[num_tensors:]
        total = _loop_sum(lambda *batch: flat_fn(*batch, *whole), batched, batch_size)

        def gradient(*upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):
            variables = list(variables or ())
            N = tf.shape(batched[0])[0]

            def body(i, start, shared_grads, variable_grads, arrays):
                batch = _slices(batched, start, batch_size)
                with tf.GradientTape() as tape:
                    tape.watch(batch)
                    tape.watch(whole)
                    parts = flat_fn(*batch, *whole)
                    inner = tf.add_n([tf.reduce_sum(u * p) for u, p in zip(upstream, parts)])
                grads = tape.gradient(
                    inner,
                    (list(batch), list(whole), variables),
                    unconnected_gradients=tf.UnconnectedGradients.ZERO,
                )
                batch_grads, whole_grads, var_grads = grads
                return (
                    i + 1,
                    start + batch_size,
                    [a + g for a, g in zip(shared_grads, whole_grads)],
                    [a + g for a, g in zip(variable_grads, var_grads)],
                    [a.write(i, g) for a, g in zip(arrays, batch_grads)],
                )

            loop_vars = (
                tf.constant(0),
                tf.constant(0),
                [tf.zeros_like(t) for t in whole],
                [tf.zeros_like(v) for v in variables],
                [
                    tf.TensorArray(t.dtype, size=0, dynamic_size=True, infer_shape=False)
                    for t in batched
                ],
            )
            _, _, shared_grads, variable_grads, arrays = tf.while_loop(
                lambda i, start, *_: start < N, body, loop_vars
            )
            tensor_grads = [a.concat() for a in arrays]
            return tensor_grads + shared_grads, variable_grads

        return total, gradient

    total = summed(*tensors, *shared)
    return tf.nest.pack_sequence_as(structure[0], list(total))


@tf.autograph.experimental.do_not_convert
def map_over_batches(
    fn: Callable[..., Sequence[tf.Tensor]], tensors: Sequence[tf.Tensor], batch_size: Optional[int]
) -> Sequence[tf.Tensor]:
    """
    ``fn(*tensors)`` computed batch by batch: ``fn`` returns a tuple of per-row tensors [n_batch, ...],
    which are concatenated along the rows. With ``batch_size=None`` it is ``fn(*tensors)``.
    """
    if batch_size is None:
        return fn(*tensors)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    N = tf.shape(tensors[0])[0]
    first = fn(*_slices(tensors, tf.constant(0), batch_size))
    arrays = [
        tf.TensorArray(t.dtype, size=0, dynamic_size=True, infer_shape=False).write(0, t)
        for t in first
    ]

    def body(i: tf.Tensor, start: tf.Tensor, arrays: Sequence[tf.TensorArray]):
        part = fn(*_slices(tensors, start, batch_size))
        return i + 1, start + batch_size, [a.write(i, p) for a, p in zip(arrays, part)]

    _, _, arrays = tf.while_loop(
        lambda i, start, _: start < N, body, (tf.constant(1), tf.constant(batch_size), arrays)
    )
    return tuple(a.concat() for a in arrays)


@tf.autograph.experimental.do_not_convert
def sum_over_dataset(
    fn: Callable[..., T],
    dataset: tf.data.Dataset,
    shared: Sequence[tf.Tensor] = (),
    empty: str = NO_BATCHES,
) -> T:
    """
    Σ over the batches ``(X, Y)`` of ``dataset`` of ``fn(X, Y, *shared)``, where ``fn`` returns a
    nest of tensors that are sums over rows: :func:`sum_over_batches` for data that arrive as a
    ``tf.data.Dataset``, streamed once for the value. As there, the gradient is a second stream
    over the batches that recomputes each one and accumulates its vector–Jacobian product, so
    that memory is one batch's worth however many points the dataset holds. A dataset with no
    batches fails, marked for :func:`gpflow_fastvi.fit`, with the sentence ``empty``.
    """
    shared = [tf.convert_to_tensor(t) for t in shared]
    structure: List[Any] = []  # the nest fn returns, recorded on its first call

    def flat_fn(batch: Any, *whole: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        X, Y = batch
        result = fn(X, Y, *whole)
        if not structure:
            structure.append(result)
        return tuple(tf.nest.flatten(result))  # a tuple: tf.data would stack a list into a tensor

    @tf.custom_gradient
    def summed(*whole: tf.Tensor):
        first_or_none = iter(dataset.take(1)).get_next_as_optional()
        yielded = tf.debugging.Assert(first_or_none.has_value(), [FAULT_MARK + empty + FAULT_MARK])
        with tf.control_dependencies([yielded]):
            first = first_or_none.get_value()
        total = dataset.skip(1).reduce(
            flat_fn(first, *whole),
            lambda acc, batch: tuple(a + p for a, p in zip(acc, flat_fn(batch, *whole))),
        )

        def gradient(*upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):
            variables = list(variables or ())
            num_whole = len(whole)

            def accumulate(acc: Tuple[tf.Tensor, ...], batch: Any) -> Tuple[tf.Tensor, ...]:
                with tf.GradientTape() as tape:
                    tape.watch(whole)
                    parts = flat_fn(batch, *whole)
                    inner = tf.add_n([tf.reduce_sum(u * p) for u, p in zip(upstream, parts)])
                grads = tape.gradient(
                    inner,
                    list(whole) + variables,
                    unconnected_gradients=tf.UnconnectedGradients.ZERO,
                )
                return tuple(a + g for a, g in zip(acc, grads))

            start = tuple(tf.zeros_like(t) for t in whole) + tuple(
                tf.zeros_like(v) for v in variables
            )
            grads = dataset.reduce(start, accumulate) if start else ()
            return list(grads[:num_whole]), list(grads[num_whole:])

        return total, gradient

    total = summed(*shared)
    return tf.nest.pack_sequence_as(structure[0], list(total))
