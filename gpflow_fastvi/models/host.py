"""
What the parts a model holds read of it: its data passes
(:class:`~gpflow_fastvi.models.passes.DataPasses`), its frame of q(u)
(:class:`~gpflow_fastvi.models.q_frame.QFrame`) and the shared natural step
(:mod:`~gpflow_fastvi.models.natural_step`). Each names the model's side of its seam as a
protocol, so that a part states what it uses and does not import the model class that holds it:
:class:`~gpflow_fastvi.models.site_model.SiteModel` imports the parts, and no part imports it.
The models hold TensorFlow's modules, which have no types, so a type checker takes any model for
any protocol: the tests check every model against them at run time.
"""

from typing import Any, Protocol, Sequence, runtime_checkable

import gpflow
import tensorflow as tf

from ..gaussian import WhitenedQ


@runtime_checkable
class PartsHost(Protocol):
    """
    The model as its passes and its frame of q(u) see it: SVGP's kernel, likelihood, inducing
    variable, mean function, ``num_data``, q(u) and variables, and the two readings a site model
    adds (:class:`~gpflow_fastvi.models.site_model.SiteModel` has them all).
    """

    kernel: gpflow.kernels.Kernel
    likelihood: gpflow.likelihoods.Likelihood
    inducing_variable: gpflow.inducing_variables.InducingVariables
    mean_function: gpflow.mean_functions.MeanFunction
    num_data: Any
    q_mu: gpflow.Parameter
    q_sqrt: gpflow.Parameter
    trainable_variables: Sequence[tf.Variable]

    @property
    def _target_columns(self) -> int:
        """The columns of the targets Y, as the data are checked."""
        ...

    def _whitened(self, q_mu: tf.Tensor, q_sqrt: tf.Tensor, L: tf.Tensor) -> WhitenedQ:
        """q(u) as stored, in the whitened frame of the factor ``L`` of Kmm."""
        ...
