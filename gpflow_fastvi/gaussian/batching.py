"""
Run a function over the data in batches of rows, without retracing and without holding more than one
batch's worth of intermediate results: sums are accumulated, per-point results concatenated.
"""

from typing import Any, Callable, List, Optional, Sequence, Tuple, TypeVar, Union

import tensorflow as tf

T = TypeVar("T")


def _slices(tensors: Sequence[tf.Tensor], start: tf.Tensor, batch_size: int) -> Sequence[tf.Tensor]:
    return [t[start : start + batch_size] for t in tensors]


def _loop_sum(
    fn: Callable[..., List[tf.Tensor]], tensors: Sequence[tf.Tensor], batch_size: int
) -> List[tf.Tensor]:
    """Σ over batches of the flat list ``fn(*batch)``, in a ``tf.while_loop``."""
    N = tf.shape(tensors[0])[0]
    first = fn(*_slices(tensors, tf.constant(0), batch_size))

    def body(start: tf.Tensor, total: List[tf.Tensor]):  # type: ignore[no-untyped-def]
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
    structure = []  # the nest fn returns, recorded on its first call

    def flat_fn(*args: tf.Tensor) -> List[tf.Tensor]:
        result = fn(*args)
        if not structure:
            structure.append(result)
        return tf.nest.flatten(result)

    @tf.custom_gradient
    def summed(*args: tf.Tensor):  # type: ignore[no-untyped-def]
        batched, whole = args[:num_tensors], args[num_tensors:]
        total = _loop_sum(lambda *batch: flat_fn(*batch, *whole), batched, batch_size)

        def gradient(*upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):  # type: ignore[no-untyped-def]
            variables = list(variables or ())
            N = tf.shape(batched[0])[0]

            def body(i, start, shared_grads, variable_grads, arrays):  # type: ignore[no-untyped-def]
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

    def body(i: tf.Tensor, start: tf.Tensor, arrays: Sequence[tf.TensorArray]):  # type: ignore[no-untyped-def]
        part = fn(*_slices(tensors, start, batch_size))
        return i + 1, start + batch_size, [a.write(i, p) for a, p in zip(arrays, part)]

    _, _, arrays = tf.while_loop(
        lambda i, start, _: start < N, body, (tf.constant(1), tf.constant(batch_size), arrays)
    )
    return tuple(a.concat() for a in arrays)


@tf.autograph.experimental.do_not_convert
def sum_over_dataset(
    fn: Callable[..., T], dataset: tf.data.Dataset, shared: Sequence[tf.Tensor] = ()
) -> T:
    """
    Σ over the batches ``(X, Y)`` of ``dataset`` of ``fn(X, Y, *shared)``, where ``fn`` returns a
    nest of tensors that are sums over rows: :func:`sum_over_batches` for data that arrive as a
    ``tf.data.Dataset``, streamed once for the value. As there, the gradient is a second stream
    over the batches that recomputes each one and accumulates its vector–Jacobian product, so
    that memory is one batch's worth however many points the dataset holds.
    """
    shared = [tf.convert_to_tensor(t) for t in shared]
    structure = []  # the nest fn returns, recorded on its first call

    def flat_fn(batch: Any, *whole: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        X, Y = batch
        result = fn(X, Y, *whole)
        if not structure:
            structure.append(result)
        return tuple(tf.nest.flatten(result))  # a tuple: tf.data would stack a list into a tensor

    @tf.custom_gradient
    def summed(*whole: tf.Tensor):  # type: ignore[no-untyped-def]
        first = dataset.take(1).get_single_element()
        total = dataset.skip(1).reduce(
            flat_fn(first, *whole),
            lambda acc, batch: tuple(a + p for a, p in zip(acc, flat_fn(batch, *whole))),
        )

        def gradient(*upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):  # type: ignore[no-untyped-def]
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


def _replica_block(tensors: Sequence[tf.Tensor], num_replicas: int) -> List[tf.Tensor]:
    """The rows of ``tensors`` that the replica this runs in sums: its contiguous block (the
    blocks differ in size by at most one row)."""
    replica = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.int64)
    N = tf.shape(tensors[0], out_type=tf.int64)[0]
    start = replica * N // num_replicas
    stop = (replica + 1) * N // num_replicas
    return [t[start:stop] for t in tensors]


def _replica_shard(dataset: tf.data.Dataset, num_replicas: int) -> tf.data.Dataset:
    """The batches of ``dataset`` that the replica this runs in sums: every ``num_replicas``-th,
    from its own."""
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    return dataset.shard(num_replicas, tf.cast(replica, tf.int64))


def _distributed_owner(variable: tf.Variable, candidates: Sequence[tf.Variable]) -> tf.Variable:
    """The variable among ``candidates`` that ``variable`` is, or is one component of (a
    ``tf.distribute`` variable read outside a replica reads its first component)."""
    for candidate in candidates:
        if candidate is variable or any(c is variable for c in getattr(candidate, "values", ())):
            return candidate
    return variable


@tf.autograph.experimental.do_not_convert
def sum_over_replicas(
    fn: Callable[..., T],
    data: Union[Sequence[tf.Tensor], tf.data.Dataset],
    strategy: tf.distribute.Strategy,
    shared: Sequence[tf.Tensor] = (),
    variables: Sequence[tf.Variable] = (),
    batch_size: Optional[int] = None,
) -> T:
    """
    Σ over the data of ``fn(X, Y, *shared)`` (a nest of sums over rows), with every replica of
    ``strategy`` summing its own share (:func:`sum_over_batches` in batches of ``batch_size``
    over its block of the arrays ``data`` = (X, Y), or :func:`sum_over_dataset` over its shard of
    the dataset ``data``) and one all-reduce of the partial sums.

    The gradient follows the same split: each replica recomputes its share's vector–Jacobian
    product, and the products are all-reduced once. Gradients reach ``shared`` and
    ``variables``, the variables ``fn`` reads (a model's ``trainable_variables``); a replica
    reads its own copy of a variable created in ``strategy.scope()``, and the summed gradient
    is the gradient of that variable outside the replicas.

    Called outside the replicas (not inside ``strategy.run``), as a training step or a pass of
    :func:`gpflow_fastvi.fit` is.
    """
    shared = [tf.convert_to_tensor(t) for t in shared]
    candidates = list(variables)
    num_replicas = strategy.num_replicas_in_sync
    structure = []  # the nest fn returns, recorded on its first call
    # Arrays go to the replicas as arguments: captured by a replica's function instead, an eager
    # tensor ends up among the inputs of the gradient of a tf.cond around the sum.
    rows = () if isinstance(data, tf.data.Dataset) else tuple(tf.convert_to_tensor(t) for t in data)

    def local_sum(*args: tf.Tensor) -> Tuple[List[tf.Tensor], Any]:
        tensors, whole = args[: len(rows)], args[len(rows) :]
        if rows:
            result = sum_over_batches(fn, _replica_block(tensors, num_replicas), batch_size, whole)
        else:
            result = sum_over_dataset(fn, _replica_shard(data, num_replicas), whole)
        if not structure:
            structure.append(result)
        return tf.nest.flatten(result), None

    @tf.custom_gradient
    def summed(*whole: tf.Tensor):  # type: ignore[no-untyped-def]
        # Read the variables here, outside the replicas, so that the gradient function is handed
        # them: reads inside the replicas are of per-replica copies no outer tape knows.
        for variable in candidates:
            tf.convert_to_tensor(variable)
        total, _ = _all_reduced_sum(strategy, local_sum, (*rows, *whole))

        def gradient(*upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):  # type: ignore[no-untyped-def]
            owners = [_distributed_owner(v, candidates) for v in variables or ()]
            if not whole and not owners:
                return [], []

            def local_vjp(*args: tf.Tensor) -> Tuple[List[tf.Tensor], Any]:
                upstream, tensors = args[: len(total)], args[len(total) : len(total) + len(rows)]
                whole = args[len(total) + len(rows) :]
                with tf.GradientTape(watch_accessed_variables=False) as tape:
                    tape.watch(whole)
                    tape.watch(owners)  # in a replica: its own copies
                    parts, _ = local_sum(*tensors, *whole)
                    inner = tf.add_n([tf.reduce_sum(u * p) for u, p in zip(upstream, parts)])
                grads = tape.gradient(
                    inner, list(whole) + owners, unconnected_gradients=tf.UnconnectedGradients.ZERO
                )
                return grads, None

            grads, _ = _all_reduced_sum(strategy, local_vjp, (*upstream, *rows, *whole))
            return grads[: len(whole)], grads[len(whole) :]

        return total, gradient

    total = summed(*shared)
    return tf.nest.pack_sequence_as(structure[0], list(total))


@tf.autograph.experimental.do_not_convert
def sum_and_gradient_over_replicas(
    fn: Callable[..., Tuple[tf.Tensor, Any]],
    tensors: Sequence[tf.Tensor],
    strategy: tf.distribute.Strategy,
    shared: Sequence[tf.Tensor] = (),
    variables: Sequence[tf.Variable] = (),
) -> Tuple[tf.Tensor, Any]:
    """
    Σ over the replicas of ``strategy`` of the scalar ``value`` of ``(value, aux) = fn(*block,
    *shared)``, each replica on its block of rows of ``tensors`` (as in
    :func:`sum_over_replicas`), with its gradient taken in the same pass: each replica
    differentiates its value while it still holds its rows' intermediates, and the values and
    gradients are all-reduced together, once. The sum is differentiable in ``shared`` and
    ``variables`` (its gradient is the upstream one times the all-reduced gradient).

    ``fn`` may all-reduce inside its replica (``tf.distribute.get_replica_context().all_reduce``)
    for what must be summed before its value can be formed (the statistics of an SVI step's
    target); ``aux`` is then the same on every replica and is returned from the first, with no
    gradient.

    For a sum that is always differentiated, such as an SVI step's ELBO estimate, this saves the
    second pass with which :func:`sum_over_replicas` recomputes its gradient; it holds all of a
    replica's rows at once (a mini-batch's share).
    """
    tensors = tuple(tf.convert_to_tensor(t) for t in tensors)
    shared = [tf.convert_to_tensor(t) for t in shared]
    candidates = list(variables)
    num_replicas = strategy.num_replicas_in_sync
    auxiliary: List[Any] = []  # fn's aux, set by the forward pass

    def local(*args: tf.Tensor) -> Tuple[List[tf.Tensor], Any]:
        block = _replica_block(args[: len(tensors)], num_replicas)
        whole = args[len(tensors) :]
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(whole)
            tape.watch(candidates)  # in a replica: its own copies
            value, aux = fn(*block, *whole)
        grads = tape.gradient(
            value, list(whole) + candidates, unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
        return [value, *grads], aux

    @tf.custom_gradient
    def summed(*whole: tf.Tensor):  # type: ignore[no-untyped-def]
        for variable in candidates:  # read outside the replicas: see sum_over_replicas
            tf.convert_to_tensor(variable)
        (value, *grads), aux = _all_reduced_sum(strategy, local, (*tensors, *whole))
        auxiliary.append(aux)
        whole_grads = grads[: len(whole)]
        by_owner = {id(v): g for v, g in zip(candidates, grads[len(whole) :])}

        def gradient(upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):  # type: ignore[no-untyped-def]
            owners = [_distributed_owner(v, candidates) for v in variables]
            return (
                [upstream * g for g in whole_grads],
                [
                    upstream * by_owner[id(o)] if id(o) in by_owner else tf.zeros_like(v)
                    for v, o in zip(variables, owners)
                ],
            )

        return value, gradient

    value = summed(*shared)
    return value, auxiliary[0]


def _all_reduced_sum(
    strategy: tf.distribute.Strategy,
    local: Callable[..., Tuple[List[tf.Tensor], Any]],
    args: Sequence[tf.Tensor],
) -> Tuple[List[tf.Tensor], Any]:
    """
    Σ over the replicas of the tensors (of fixed shapes) of ``(parts, aux) = local(*args)``, by one
    all-reduce of one vector: each replica flattens its parts into one, and the sum is cut back
    into them. ``aux``, a nest every replica computes alike (or ``None``), comes from this
    worker's first replica.
    """
    shapes: List[tf.TensorShape] = []

    def packed(*args: tf.Tensor) -> Any:
        parts, aux = local(*args)
        shapes[:] = [p.shape for p in parts]
        if not all(shape.is_fully_defined() for shape in shapes):
            raise ValueError(
                "A sum over replicas needs results of fixed shapes; got shapes "
                f"{[shape.as_list() for shape in shapes]}."
            )
        vector = tf.concat([tf.reshape(p, [-1]) for p in parts], axis=0)
        return vector if aux is None else (vector, aux)

    result = strategy.run(packed, args=tuple(args))  # the replicas' vectors, or (them, aux)
    vectors, aux = result if isinstance(result, tuple) else (result, None)
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, vectors, axis=None)
    pieces = tf.split(total, [shape.num_elements() for shape in shapes])
    first = tf.nest.map_structure(lambda t: strategy.experimental_local_results(t)[0], aux)
    return [tf.reshape(piece, shape) for piece, shape in zip(pieces, shapes)], first
