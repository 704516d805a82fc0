"""
Several devices or machines through :mod:`tf.distribute`.

Everything a model needs from the data is a sum over points (the site statistics, the expected
sites, their gradients), so a strategy's replicas each sum their own share of a pass and the
partial sums are all-reduced once (:func:`sum_over_replicas`); the rest
(Kmm, its factor, q(u), the optimiser) is M × M work done once, outside the replicas.

A model built inside ``strategy.scope()`` keeps that strategy
(:attr:`~gpflow_fastvi.models.passes.DataPasses.distribute_strategy`): :func:`~gpflow_fastvi.fit`,
``training_loss`` and the other calls that pass over the data then share every pass among its
replicas, whether or not they are made inside the scope. Inside ``strategy.run`` (a replica's own
step, as a Keras custom loop writes it) a call sums only the data it is given.

The training code differentiates and steps outside the replicas, where TensorFlow treats a
variable created in a scope as the set of its replicas' copies: the helpers here watch, sum and
update those copies, and give GPflow's ``set_trainable`` flags to them.
"""

import contextlib
from typing import (
    Any,
    Callable,
    ContextManager,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
)

import gpflow
import tensorflow as tf

from .gaussian.batching import sum_over_batches, sum_over_dataset

T = TypeVar("T")


EMPTY_SHARD = (
    "A replica's share of the dataset held no batches: give the stream at least one batch per "
    "replica."
)
"""What a pass under a strategy says when one replica's share of a stream is empty."""


def strategy_in_scope() -> Optional[tf.distribute.Strategy]:
    """The strategy of the enclosing ``strategy.scope()``, or ``None`` outside every scope."""
    return tf.distribute.get_strategy() if tf.distribute.has_strategy() else None


def in_replica() -> bool:
    """Whether this runs inside ``strategy.run``: in one replica of a strategy, whose share of
    the data the caller has already cut."""
    return tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context()


def check_strategy(strategy: Any) -> Optional[tf.distribute.Strategy]:
    """``strategy`` if it is a :class:`tf.distribute.Strategy` or ``None``, else a ``TypeError``."""
    if strategy is not None and not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(
            "strategy must be a tf.distribute.Strategy (such as tf.distribute.MirroredStrategy()) "
            f"or None; got {type(strategy).__name__}."
        )
    return strategy


def set_trainable(module: Union[tf.Module, Iterable[tf.Module]], flag: bool) -> None:
    """
    :func:`gpflow.set_trainable` that also reaches variables created under a strategy.

    GPflow sets a flag on each variable object; a variable created in ``strategy.scope()`` is a
    wrapper of one variable per replica whose ``trainable`` is read from the replicas' variables,
    so that flag alone changes nothing. This sets both. (:func:`~gpflow_fastvi.fit` applies the
    flags that :func:`gpflow.set_trainable` left on such wrappers before it trains:
    :func:`apply_trainable_flags`.)
    """
    gpflow.set_trainable(module, flag)
    apply_trainable_flags(module)


def apply_trainable_flags(module: Union[tf.Module, Iterable[tf.Module]]) -> None:
    """Give each replica's copy of a distributed variable the ``trainable`` flag that
    :func:`gpflow.set_trainable` set on its wrapper, where the two differ."""
    modules = [module] if isinstance(module, tf.Module) else list(module)
    for mod in modules:
        for variable in mod.variables:
            flag = vars(variable).get("_trainable")
            if is_distributed(variable) and isinstance(flag, bool) and variable.trainable != flag:
                for component in variable.values:
                    component._trainable = flag


class StrategyRef:
    """
    A model's reference to the strategy it was built in. Copies of the model
    (:func:`gpflow.utilities.deepcopy`) share it: a strategy stands for devices, not for state of
    the model.
    """

    __slots__ = ("strategy",)

    def __init__(self, strategy: Optional[tf.distribute.Strategy]):
        self.strategy = strategy

    def __deepcopy__(self, memo: Any) -> "StrategyRef":
        return self


def _copies(variable: tf.Variable) -> List[tf.Variable]:
    """The replicas' copies of a variable created in a strategy's scope; else the variable."""
    return list(variable.values) if is_distributed(variable) else [variable]


def watch_outside_replicas(tape: tf.GradientTape, variables: Sequence[tf.Variable]) -> None:
    """
    ``tape.watch(variables)`` outside the replicas. Inside a strategy's scope TensorFlow refuses
    to watch a variable created there as a whole; its replicas' copies are watched instead (a
    read outside the replicas reads one of them), which :func:`gradients_outside_replicas` sums.
    """
    for variable in variables:
        tape.watch(_copies(variable))


def gradients_outside_replicas(
    tape: tf.GradientTape, target: tf.Tensor, variables: Sequence[tf.Variable]
) -> List[tf.Tensor]:
    """
    The gradient of ``target`` with respect to each of ``variables`` (watched by
    :func:`watch_outside_replicas`), zero where unconnected: for a variable created in a
    strategy's scope, the sum of the gradients with respect to its replicas' copies.
    """
    copies = [_copies(v) for v in variables]
    flat = [c for group in copies for c in group]
    grads = tape.gradient(target, flat, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    result, start = [], 0
    for group in copies:
        result.append(tf.add_n(grads[start : start + len(group)]))
        start += len(group)
    return result


def apply_gradients_outside_replicas(
    optimizer: Any, gradients: Sequence[tf.Tensor], variables: Sequence[tf.Variable]
) -> None:
    """
    ``optimizer.apply_gradients`` (a ``gpflow.keras.tf_keras`` optimiser) of gradients computed
    outside the replicas. Inside a strategy's scope Keras applies updates to variables created
    there only from the replicas: each replica then applies the same, already complete gradients
    to its own copy, without summing them across replicas, which keeps the copies equal.
    """
    if tf.distribute.has_strategy() and any(is_distributed(v) for v in variables):
        tf.distribute.get_strategy().run(
            lambda *g: optimizer.apply_gradients(
                zip(g, variables), skip_gradients_aggregation=True
            ),
            args=tuple(gradients),
        )
    else:
        optimizer.apply_gradients(zip(gradients, variables))


def is_distributed(variable: tf.Variable) -> bool:
    """Whether ``variable`` was created in a strategy's scope (one copy per replica)."""
    return isinstance(variable, tf.distribute.DistributedValues)


def scope_of(variables: Sequence[tf.Variable]) -> ContextManager[Any]:
    """The scope of the strategy the first distributed one of ``variables`` was created in (where
    Keras wants their optimiser made), or a context that does nothing."""
    for variable in variables:
        if is_distributed(variable):
            return variable.distribute_strategy.scope()
    return contextlib.nullcontext()


# --------------------------------------------------------------------------------------------------
# Sums over the data shared among the replicas.


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
    structure: List[Any] = []  # the nest fn returns, recorded on its first call
    # Arrays go to the replicas as arguments: captured by a replica's function instead, an eager
    # tensor ends up among the inputs of the gradient of a tf.cond around the sum.
    rows = () if isinstance(data, tf.data.Dataset) else tuple(tf.convert_to_tensor(t) for t in data)

    def local_sum(*args: tf.Tensor) -> Tuple[List[tf.Tensor], Any]:
        tensors, whole = args[: len(rows)], args[len(rows) :]
        if rows:
            result = sum_over_batches(fn, _replica_block(tensors, num_replicas), batch_size, whole)
        else:
            shard = _replica_shard(data, num_replicas)
            result = sum_over_dataset(fn, shard, whole, empty=EMPTY_SHARD)
        if not structure:
            structure.append(result)
        return tf.nest.flatten(result), None

    @tf.custom_gradient
    def summed(*whole: tf.Tensor):
        # Read the variables here, outside the replicas, so that the gradient function is handed
        # them: reads inside the replicas are of per-replica copies no outer tape knows.
        for variable in candidates:
            tf.convert_to_tensor(variable)
        total, _ = _all_reduced_sum(strategy, local_sum, (*rows, *whole))

        def gradient(*upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):
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
    def summed(*whole: tf.Tensor):
        for variable in candidates:  # read outside the replicas: see sum_over_replicas
            tf.convert_to_tensor(variable)
        (value, *grads), aux = _all_reduced_sum(strategy, local, (*tensors, *whole))
        auxiliary.append(aux)
        whole_grads = grads[: len(whole)]
        by_owner = {id(v): g for v, g in zip(candidates, grads[len(whole) :])}

        def gradient(upstream: tf.Tensor, variables: Sequence[tf.Variable] = ()):
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
