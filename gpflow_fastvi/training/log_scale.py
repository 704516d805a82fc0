"""
The log scale the optimisers of hyperparameters search in: z = log s for each positive parameter
s = softplus(x) that GPflow keeps on its softplus transform (its default for kernel variances,
lengthscales and likelihood variances, with or without a lower bound), the unconstrained value x
for every other entry.

On GPflow's unconstrained value a kernel variance s = softplus(x) ≈ x once s is above a few, so
a step of a given size in x changes s by a fixed amount however large s is:

- the ELBO's curvature in x falls as 1/s² while s grows, and L-BFGS-B's quasi-Newton model is
  always behind: on banana (VIConcave) a variance that ends at 47 from a start of 1 grew about 1.3
  times per L-BFGS-B iterate, and the run took 24 iterates (13 to within 0.1 % of the converged
  ELBO); in z = log s it takes 17 (8);
- Adam's steps are about its learning rate in each coordinate, so in x a variance moves by about
  that much per step, whatever its size: on scikit-learn's ``make_hastie_10_2`` (9,600 points, 10
  features) PolyaGammaSVGP's mini-batch SVI ended by its plateau test with a kernel variance of
  15 and lengthscales of 3.8 (test NLL 0.112), where the full-batch models had gone to a variance
  of 10¹² and lengthscales of 270 (0.009); in z each step changes s by about the same *factor*.

Only the search changes: the model's variables, their transforms and the optimum are GPflow's.

z = log softplus(x) and its inverse x = log(expm1(exp z)) are computed in stable forms: below
z = −30, where softplus(x) = eˣ to double precision, z = x; z is capped at 700, where exp z is
still finite in float64.
"""

from typing import Any, Callable, NamedTuple, Sequence, Set

import gpflow
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

LINEAR_BELOW = -30.0
"""Below this, z = x (softplus(x) = eˣ to double precision)."""

LARGEST_LOG = 700.0
"""The largest z the inverse takes: exp(700) is finite in float64."""


def is_softplus(transform: Any) -> bool:
    """Whether ``transform`` is tfp's plain Softplus, alone or after a Shift (a lower bound)."""

    def plain(b: Any) -> bool:
        return type(b) is tfp.bijectors.Softplus and b.hinge_softness is None

    if isinstance(transform, tfp.bijectors.Chain):
        *shifts, last = transform.bijectors
        return plain(last) and all(type(b) is tfp.bijectors.Shift for b in shifts)
    return plain(transform)


def on_softplus(parameters: Sequence[gpflow.Parameter]) -> Set[int]:
    """The ids of the unconstrained variables of ``parameters`` that are searched in log scale."""
    return {id(p.unconstrained_variable) for p in parameters if is_softplus(p.transform)}


class Ops(NamedTuple):
    """
    The elementwise operations the functions below are written in, so that one form of them runs
    in TensorFlow's graph (:data:`TF_OPS`, the SVI step) and in NumPy (:data:`NUMPY_OPS`, for
    SciPy's L-BFGS-B, where a call into TensorFlow per evaluation would cost more than the
    arithmetic: :ref:`defaults-log-scale`).
    """

    where: Callable[..., Any]
    maximum: Callable[..., Any]
    minimum: Callable[..., Any]
    log: Callable[..., Any]
    exp: Callable[..., Any]
    expm1: Callable[..., Any]
    softplus: Callable[..., Any]
    ones_like: Callable[..., Any]


TF_OPS = Ops(
    tf.where,
    tf.maximum,
    tf.minimum,
    tf.math.log,
    tf.exp,
    tf.math.expm1,
    tf.math.softplus,
    tf.ones_like,
)
NUMPY_OPS = Ops(
    np.where,
    np.maximum,
    np.minimum,
    np.log,
    np.exp,
    np.expm1,
    lambda x: np.logaddexp(0.0, x),
    np.ones_like,
)


def log_softplus(x: Any, ops: Ops = TF_OPS) -> Any:
    """z = log softplus(x), elementwise; z = x below :data:`LINEAR_BELOW`."""
    return ops.where(x < LINEAR_BELOW, x, ops.log(ops.softplus(ops.maximum(x, LINEAR_BELOW))))


def softplus_of_log(z: Any, ops: Ops = TF_OPS) -> Any:
    """x with log softplus(x) = z, the inverse of :func:`log_softplus`."""
    capped = ops.minimum(z, LARGEST_LOG)
    s = ops.exp(ops.maximum(capped, LINEAR_BELOW))
    # log(expm1(s)) = s + log(1 − e⁻ˢ): finite for every s > 0.
    return ops.where(capped < LINEAR_BELOW, capped, s + ops.log(-ops.expm1(-s)))


def dx_dz(x: Any, ops: Ops = TF_OPS) -> Any:
    """dx/dz = softplus(x) / sigmoid(x) at x, the factor from a gradient in x to one in z; 1 below
    :data:`LINEAR_BELOW`."""
    safe = ops.maximum(x, LINEAR_BELOW)
    return ops.where(
        x < LINEAR_BELOW, ops.ones_like(x), ops.exp(log_softplus(safe, ops) + ops.softplus(-safe))
    )


class LogScale:
    """
    The coordinates L-BFGS-B searches in (module docstring), on the flat vector of the variables
    laid out as ``gpflow.optimizers.Scipy.pack_tensors`` lays it out: NumPy in and out, for SciPy.
    """

    LINEAR_BELOW = LINEAR_BELOW
    LARGEST_LOG = LARGEST_LOG

    def __init__(self, parameters: Sequence[gpflow.Parameter], variables: Sequence[tf.Variable]):
        logged = on_softplus(parameters)
        self.mask = np.concatenate(
            [np.full(int(np.prod(v.shape)), id(v) in logged) for v in variables]
            or [np.zeros(0, dtype=bool)]
        )

    def _on_mask(self, function: Any, values: np.ndarray) -> np.ndarray:
        out = np.array(values, dtype=np.float64)
        if self.mask.any():
            out[self.mask] = function(out[self.mask], NUMPY_OPS)
        return out

    def to_search(self, x: np.ndarray) -> np.ndarray:
        """z from the variables' values x."""
        return self._on_mask(log_softplus, x)

    def from_search(self, z: np.ndarray) -> np.ndarray:
        """The variables' values x at z."""
        return self._on_mask(softplus_of_log, z)

    def gradient(self, x: np.ndarray, gradient_x: np.ndarray) -> np.ndarray:
        """The gradient in z, from the one in x at x (:func:`dx_dz`)."""
        factor = self._on_mask(dx_dz, x)
        factor[~self.mask] = 1.0
        return np.array(gradient_x, dtype=np.float64) * factor
