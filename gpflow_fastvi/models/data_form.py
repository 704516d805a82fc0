"""
The data-holding form of the closed-form models, beside SVGP's signature: the metaclass that
accepts the data first, as :class:`gpflow.models.SGPR` does (:class:`DataFirstForm`), where the
inducing inputs come from when the data are given, and the data of a call
(:meth:`DataHoldingForm.training_data`: the data given, checked, or the data the model holds).
"""

import abc
from typing import Any, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from ..exceptions import InvalidDataError
from ..inducing import InducingSpec, make_inducing_variable
from ..stream_validation import ZERO_ONE, checked_stream, static_cardinality
from ..validation import describe_container
from .closed_form import ClosedFormSteps
from .protocol import Data


def looks_like_data(value: Any) -> bool:
    """Whether ``value`` is a call's data (X, Y) rather than a kernel or a batch iterator."""
    return isinstance(value, (tuple, list)) and len(value) == 2


class DataFirstForm(abc.ABCMeta):
    """
    The metaclass that accepts a model's SGPR-like, data-first call as well as SVGP's:
    ``VIJJ((X, Y), kernel, Z)`` is ``VIJJ(kernel, Z=..., data=(X, Y))`` with the positional
    arguments after the data named by the class's ``data_first_positional``. Every keyword means
    the same in both forms; nothing else is translated.
    """

    data_first_positional: Tuple[str, ...]
    """Set by each model class: the names of its positional arguments after the data."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not (args and looks_like_data(args[0])):
            return super().__call__(*args, **kwargs)
        names = cls.data_first_positional
        rest = args[1:]
        if len(rest) > len(names):
            raise TypeError(
                f"{cls.__name__}(data, {', '.join(names)}, *, ...) takes {len(names) + 1} "
                f"positional arguments in its data-first form; got {len(args)}."
            )
        for name, value in zip(names, rest):
            if name in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}.")
            kwargs[name] = value
        if "data" in kwargs:
            raise TypeError(f"{cls.__name__}() got the data both first and as data=.")
        return super().__call__(data=args[0], **kwargs)


class DataHoldingForm(ClosedFormSteps):
    """The data of a call to a closed-form model: given per call, or held by the model."""

    data: Optional[Tuple[tf.Tensor, tf.Tensor]]
    """The data the model holds (the data-first form), or ``None`` (SVGP's signature)."""

    def resolve_inducing_variable(
        self, inducing_variable: Optional[InducingSpec], X: Optional[np.ndarray], seed: int
    ) -> gpflow.inducing_variables.InducingVariables:
        """
        The inducing variable of a constructor's ``inducing_variable``: as given (an inducing
        variable or an array Z); with the data X, also an int M for M k-means centres of X
        (seeded by ``seed``) or ``None`` for Z = X, the full GP.
        """
        name = type(self).__name__
        if X is None:
            if inducing_variable is None or (
                isinstance(inducing_variable, (int, np.integer))
                and not isinstance(inducing_variable, bool)
            ):
                raise ValueError(
                    f"{name}(kernel, likelihood, inducing_variable, ...) needs the inducing inputs "
                    "as a GPflow inducing variable or an array Z [M, D]; an int M (k-means "
                    f"centres) or None (Z = X) needs the data: {name}((X, Y), kernel, ...)."
                )
            return make_inducing_variable(inducing_variable)
        if inducing_variable is None:  # the full GP: u = f(X)
            return gpflow.inducing_variables.InducingPoints(X.copy())
        return make_inducing_variable(inducing_variable, X, seed=seed)

    def training_data(self, data: Any = None) -> Data:
        """
        The data a call works on: ``data`` = ``(X, Y)`` as tensors, checked and its targets
        converted to the likelihood's convention as at construction (symbolic tensors, inside a
        compiled function, are taken as they are); a ``tf.data.Dataset`` of ``(X [b, D], Y [b, 1])``
        batches, whose element structure is checked and which every pass streams once; or the
        data the model holds when ``data`` is ``None``.
        """
        name = type(self).__name__
        if data is None:
            if self.data is None:
                raise ValueError(
                    f"This {name} was built without data: pass it to the call, e.g. "
                    f"training_loss((X, Y)) or fit(model, (X, Y)), or build the model with it, "
                    f"{name}((X, Y), kernel, ...)."
                )
            return self.data
        if isinstance(data, tf.data.Dataset):
            return self.checked_pass_stream(data)
        if not looks_like_data(data):
            error = InvalidDataError if isinstance(data, (tuple, list)) else TypeError
            raise error(
                "data must be a tuple (X, Y) with X [N, D] and Y [N, 1], or a tf.data.Dataset of "
                f"such batches; got {describe_container(data)}."
            )
        return self.checked_training_data(data)

    def checked_pass_stream(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """
        A dataset that every pass of this model reads to its end, checked as it streams
        (:func:`~gpflow_fastvi.stream_validation.checked_stream`: finite values, Bernoulli
        labels in {0, 1}, the batch named; an endless stream of unknown length cut after
        ``num_data`` rows). One that repeats without end is refused here: a pass over it would
        never end.
        """
        if static_cardinality(dataset) == tf.data.INFINITE_CARDINALITY:
            raise InvalidDataError(
                f"The dataset repeats without end, and every pass of {type(self).__name__} reads "
                "all the data: pass a finite dataset (without .repeat(), or with "
                ".take(number_of_batches)). For mini-batch training of an endless stream use "
                "PolyaGammaSVGP, or NaturalGradientSVI in a loop of your own."
            )
        binary = isinstance(self.likelihood, gpflow.likelihoods.Bernoulli)
        num_data = None if self.num_data is None else int(self.num_data)
        return checked_stream(dataset, ZERO_ONE if binary else (), num_data)

    def is_mini_batch_call(self, data: Data) -> bool:
        """Whether a call's data are a mini-batch (:meth:`is_mini_batch`); a dataset is all the
        data, streamed."""
        return not isinstance(data, tf.data.Dataset) and self.is_mini_batch(data[0])
