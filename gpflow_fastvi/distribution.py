"""
Several devices or machines through :mod:`tf.distribute`.

Everything a model needs from the data is a sum over points (the site statistics, the expected
sites, their gradients), so a strategy's replicas each sum their own share of a pass and the
partial sums are all-reduced once (:func:`~gpflow_fastvi.gaussian.batching.sum_over_replicas`); the rest
(Kmm, its factor, q(u), the optimiser) is M × M work done once, outside the replicas.

A model built inside ``strategy.scope()`` keeps that strategy
(:attr:`~gpflow_fastvi.models.protocol.SiteModel.distribute_strategy`): :func:`~gpflow_fastvi.fit`,
``training_loss`` and the other calls that pass over the data then share every pass among its
replicas, whether or not they are made inside the scope. Inside ``strategy.run`` (a replica's own
step, as a Keras custom loop writes it) a call sums only the data it is given.

The training code differentiates and steps outside the replicas, where TensorFlow treats a
variable created in a scope as the set of its replicas' copies: the helpers here watch, sum and
update those copies, and give GPflow's ``set_trainable`` flags to them.
"""

import contextlib
from typing import Any, ContextManager, Iterable, List, Optional, Sequence, Union

import gpflow
import tensorflow as tf


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
