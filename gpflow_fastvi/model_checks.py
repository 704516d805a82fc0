"""
What a model accepts at construction: its likelihood (a logit Bernoulli, a log-concave scalar
likelihood, or one of C classes), the number of latent functions, and the options of
:class:`gpflow.models.SVGP` it takes or refuses. Each check raises
:class:`~gpflow_fastvi.exceptions.IncompatibleLikelihoodError` or
:class:`~gpflow_fastvi.exceptions.UnsupportedConfigurationError` naming the case and what to use
instead. The data a model is given are checked by :mod:`gpflow_fastvi.validation`.
"""

import warnings
from typing import Any, Optional, Tuple

import gpflow
import numpy as np
import tensorflow as tf

from .exceptions import IncompatibleLikelihoodError, UnsupportedConfigurationError
from .inducing import InducingSpec, make_inducing_variable
from .likelihoods import MULTI_CLASS_HINT, MULTI_CLASS_LIKELIHOODS


def is_logit_bernoulli(likelihood: gpflow.likelihoods.Likelihood) -> bool:
    """Whether ``likelihood`` is a Bernoulli whose inverse link is the logistic sigmoid (checked numerically)."""
    if not isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        return False
    t = tf.constant(np.linspace(-30.0, 30.0, 61), dtype=gpflow.config.default_float())
    return bool(
        np.allclose(likelihood.invlink(t).numpy(), tf.sigmoid(t).numpy(), rtol=1e-10, atol=0)
    )


INDEPENDENT_OUTPUT_KERNELS: Tuple[type, ...] = (
    gpflow.kernels.SharedIndependent,
    gpflow.kernels.SeparateIndependent,
)
"""GPflow's multi-output kernels whose outputs are independent GPs, one per latent function."""

INDEPENDENT_OUTPUT_INDUCING: Tuple[type, ...] = (
    gpflow.inducing_variables.SharedIndependentInducingVariables,
    gpflow.inducing_variables.SeparateIndependentInducingVariables,
)
"""GPflow's multi-output inducing variables with inducing values of each output, u_l = f_l(Z_l)."""


def _output_count(part: Any) -> Optional[int]:
    """How many latent functions a multi-output kernel or inducing variable fixes (``None``:
    any): its outputs, or the latent functions a LinearCoregionalization mixes."""
    if isinstance(part, gpflow.kernels.SharedIndependent):
        return int(part.output_dim)
    if isinstance(
        part, (gpflow.kernels.SeparateIndependent, gpflow.kernels.LinearCoregionalization)
    ):
        return len(part.kernels)
    if isinstance(part, gpflow.inducing_variables.SeparateIndependentInducingVariables):
        return len(part.inducing_variable_list)
    return None


def check_svgp_options(
    model: str,
    kernel: gpflow.kernels.Kernel,
    inducing_variable: Any,
    latent: int,
    mixed: bool = False,
) -> None:
    """
    Raise :class:`UnsupportedConfigurationError` for the priors of :class:`gpflow.models.SVGP`
    that the models cannot take. They take latent functions that are independent GPs: a
    single-output kernel with inducing points (one kernel and one Z shared by the ``latent``
    functions, as in SVGP(num_latent_gps=C)), or GPflow's multi-output spelling of independent
    outputs, a :class:`~gpflow.kernels.SharedIndependent` or
    :class:`~gpflow.kernels.SeparateIndependent` kernel with
    :class:`~gpflow.inducing_variables.SharedIndependentInducingVariables` or
    :class:`~gpflow.inducing_variables.SeparateIndependentInducingVariables` (a kernel or a Z of
    each output's own, as many inducing inputs each), one output per latent function. Outputs
    mixed by a matrix (:class:`~gpflow.kernels.LinearCoregionalization`) are taken where
    ``mixed`` says the model's sites can be read through W, with the same inducing variables;
    they and GPflow's fallback of one q(u) over every output's inducing values are refused
    otherwise, with their reasons.
    """
    multi_kernel = isinstance(kernel, gpflow.kernels.MultioutputKernel)
    multi_inducing = isinstance(
        inducing_variable, gpflow.inducing_variables.MultioutputInducingVariables
    )
    if not multi_kernel and not multi_inducing:
        return
    linear = isinstance(kernel, gpflow.kernels.LinearCoregionalization)
    if linear and not mixed:
        raise UnsupportedConfigurationError(
            f"{model} takes latent functions that are independent GPs; LinearCoregionalization "
            "mixes them into the outputs by a matrix W, so each output's likelihood term couples "
            f"every latent function, and {model}'s closed-form step needs one site per latent "
            "function. Use VIConcave or VITaylor, whose sites are read through W onto each "
            "latent function, gpflow.models.SVGP, or SeparateIndependent kernels (one per "
            "output)."
        )
    if not multi_kernel:
        raise UnsupportedConfigurationError(
            f"{model} got the multi-output inducing variable {type(inducing_variable).__name__} "
            f"with the single-output kernel {type(kernel).__name__}: wrap the kernel in "
            "SharedIndependent (or give a kernel per output in SeparateIndependent), or give "
            "plain inducing points."
        )
    if not isinstance(kernel, INDEPENDENT_OUTPUT_KERNELS) and not linear:
        raise UnsupportedConfigurationError(
            f"{model} takes GPflow's multi-output kernels SharedIndependent and "
            f"SeparateIndependent{' and LinearCoregionalization' if mixed else ''}; got "
            f"{type(kernel).__name__}. Use gpflow.models.SVGP for it."
        )
    if not isinstance(inducing_variable, INDEPENDENT_OUTPUT_INDUCING):
        raise UnsupportedConfigurationError(
            f"{model} takes independent outputs as GPflow spells them, a SharedIndependent or "
            "SeparateIndependent kernel with SharedIndependentInducingVariables or "
            "SeparateIndependentInducingVariables (or a single-output kernel with inducing "
            f"points); got {type(kernel).__name__} with {type(inducing_variable).__name__}, for "
            "which GPflow falls back to one q(u) over the inducing values of every output "
            "together. Wrap the inducing points in SharedIndependentInducingVariables, or use "
            "gpflow.models.SVGP."
        )
    for part in (kernel, inducing_variable):
        count = _output_count(part)
        if count is not None and count != latent:
            raise UnsupportedConfigurationError(
                f"{model}'s {type(part).__name__} has {count} outputs, one per latent function; "
                f"the model has {latent} latent functions (num_latent_gps, or the likelihood's "
                "classes)."
            )
    if isinstance(
        inducing_variable, gpflow.inducing_variables.SeparateIndependentInducingVariables
    ):
        sizes = {int(part.num_inducing) for part in inducing_variable.inducing_variable_list}
        if len(sizes) > 1:
            raise UnsupportedConfigurationError(
                f"{model} takes as many inducing inputs for every output; "
                f"SeparateIndependentInducingVariables holds {sorted(sizes)}."
            )


def svgp_num_latent_gps(num_latent_gps: int, q_sqrt: Any, q_diag: bool) -> int:
    """
    The number of latent GPs as :class:`gpflow.models.SVGP` takes it: from ``q_sqrt`` when one is
    given (its leading axis L of [L, M, M], or for ``q_diag=True`` its columns L of [M, L]),
    else ``num_latent_gps``.
    """
    if q_sqrt is None:
        return num_latent_gps
    shape = np.shape(q_sqrt)
    layout, axis = ("[M, L]", 1) if q_diag else ("[L, M, M]", 0)
    if len(shape) != len(layout.split(",")):
        raise ValueError(
            f"q_sqrt must have shape {layout} (L latent GPs, M inducing points; "
            f"q_diag={q_diag}); got shape {list(shape)}."
        )
    return int(shape[axis])


def svgp_initial_q(
    q_mu: Any, q_sqrt: Any, M: int, L: int, q_diag: bool
) -> Tuple[np.ndarray, np.ndarray]:
    """
    q(u)'s starting point as :class:`gpflow.models.SVGP` takes it: ``q_mu`` [M, L] (zeros when
    ``None``) and ``q_sqrt`` [L, M, M] (identities when ``None``), or for ``q_diag=True`` the
    standard deviations [M, L] (ones when ``None``, positive otherwise), copied in GPflow's
    default float and checked for their shapes and finite values. As in SVGP, the triangular
    transform of a full ``q_sqrt`` keeps its lower triangle.
    """
    dtype = gpflow.config.default_float()
    sqrt_shape, sqrt_default = (
        ((M, L), np.ones((M, L))) if q_diag else ((L, M, M), np.tile(np.eye(M), (L, 1, 1)))
    )
    initial = {
        "q_mu": (q_mu, (M, L), np.zeros((M, L))),
        "q_sqrt": (q_sqrt, sqrt_shape, sqrt_default),
    }
    arrays = []
    for name, (value, shape, default) in initial.items():
        array: np.ndarray = np.array(default if value is None else value, dtype=dtype)
        if array.shape != shape:
            raise ValueError(
                f"{name} must have shape {list(shape)} (M = {M} inducing points, L = {L} latent "
                f"GPs; q_diag={q_diag}); got shape {list(array.shape)}."
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite values.")
        arrays.append(array)
    if q_diag and not np.all(arrays[1] > 0):
        raise ValueError(
            "q_sqrt with q_diag=True holds the standard deviations of q(u), which must be "
            "positive, as GPflow's positive transform of it requires."
        )
    return arrays[0], arrays[1]


def check_latent_functions(
    model: str,
    likelihood: gpflow.likelihoods.Likelihood,
    num_latent_gps: int,
    latent: int,
) -> None:
    """
    Raise :class:`IncompatibleLikelihoodError` unless ``num_latent_gps`` is ``latent``, the number
    of latent functions ``model`` has with ``likelihood``: one per class for C classes, else
    ``num_latent_gps`` itself (L independent outputs).
    """
    if num_latent_gps != latent:
        raise IncompatibleLikelihoodError(
            f"{model} with {type(likelihood).__name__}({latent}) needs one latent GP per class, "
            f"num_latent_gps={latent}, as GPflow's SVGP does; got num_latent_gps={num_latent_gps}."
        )


def check_logit_bernoulli(
    likelihood: Optional[gpflow.likelihoods.Likelihood], needed_by: str
) -> gpflow.likelihoods.Likelihood:
    """``likelihood`` if it is a logit Bernoulli; else :class:`IncompatibleLikelihoodError`."""
    if likelihood is not None and is_logit_bernoulli(likelihood):
        return likelihood
    needed = (
        f"{needed_by} needs gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid) (binary "
        f"classification, the logit link); got {type(likelihood).__name__}"
    )
    if isinstance(likelihood, gpflow.likelihoods.Bernoulli):
        link = likelihood.invlink
        raise IncompatibleLikelihoodError(
            f"{needed} with invlink={getattr(link, '__name__', link)}. GPflow's default "
            "Bernoulli() is the probit link: use Bernoulli(invlink=tf.sigmoid), or VITaylor, "
            "KLCorrected or VIConcave, which take the probit link."
        )
    if not isinstance(likelihood, gpflow.likelihoods.ScalarLikelihood):
        raise IncompatibleLikelihoodError(
            f"{needed}. {MULTI_CLASS_HINT} Multi-output likelihoods are not supported."
        )
    raise IncompatibleLikelihoodError(
        f"{needed}. For another scalar likelihood use VITaylor, KLCorrected or VIConcave "
        "(VIConcave: log-concave ones)."
    )


def check_scalar_likelihood(likelihood: gpflow.likelihoods.Likelihood, model: str) -> None:
    """
    Raise :class:`IncompatibleLikelihoodError` unless ``likelihood`` factorises over points with
    targets Y [N, 1]: GPflow's ``SwitchedLikelihood``, a scalar likelihood too, reads the index of
    each point's likelihood from a second column of Y.
    """
    if isinstance(likelihood, gpflow.likelihoods.SwitchedLikelihood):
        raise IncompatibleLikelihoodError(
            f"{model} takes targets Y [N, 1] and one likelihood for every point; "
            "SwitchedLikelihood reads each point's likelihood from a second column of Y. Fit one "
            "model per group of points, or use gpflow.models.SVGP."
        )
    if not isinstance(likelihood, gpflow.likelihoods.ScalarLikelihood):
        multi_class = (
            f" {MULTI_CLASS_HINT}" if isinstance(likelihood, MULTI_CLASS_LIKELIHOODS) else ""
        )
        raise IncompatibleLikelihoodError(
            f"{model} needs a likelihood that factorises over data points with one latent function "
            f"(a gpflow.likelihoods.ScalarLikelihood, such as Bernoulli, Poisson or Gaussian); got "
            f"{type(likelihood).__name__}.{multi_class}"
        )


LOG_CONCAVE_LIKELIHOODS: Tuple[type, ...] = (
    gpflow.likelihoods.Gaussian,
    gpflow.likelihoods.Bernoulli,
    gpflow.likelihoods.Poisson,
    gpflow.likelihoods.Exponential,
    gpflow.likelihoods.Gamma,
    gpflow.likelihoods.Ordinal,
)
"""GPflow's likelihoods whose log-density is concave in f with their default links."""

NOT_LOG_CONCAVE_LIKELIHOODS: Tuple[type, ...] = (
    gpflow.likelihoods.StudentT,
    gpflow.likelihoods.Beta,
)
"""GPflow's likelihoods whose log-density is not concave in f: a Gaussian site cannot stand in."""


def check_log_concave(likelihood: gpflow.likelihoods.Likelihood, model: str) -> None:
    """
    Refuse a likelihood known not to be log-concave in f (Student-t, Beta) with an
    :class:`IncompatibleLikelihoodError`; warn for one this package does not know, whose
    concavity it cannot check. A site rule that needs curvature w ≥ 0 would otherwise clip it at
    points where log p bends upwards (outliers under Student-t) and could settle far from any
    sensible posterior without a word.
    """
    if isinstance(likelihood, NOT_LOG_CONCAVE_LIKELIHOODS):
        student = isinstance(likelihood, gpflow.likelihoods.StudentT)
        raise IncompatibleLikelihoodError(
            f"{model} needs a likelihood whose log-density is concave in f; "
            f"{type(likelihood).__name__}'s is not (it bends upwards away from the data, where "
            "the sites' curvature would have to be negative). Use "
            f"{'VIConcave (whose steps test the ELBO) or ' if student else ''}"
            "gpflow.models.SVGP for it, or a log-concave likelihood such as Gaussian, Bernoulli, "
            "Poisson, Exponential or Gamma."
        )
    if not isinstance(likelihood, LOG_CONCAVE_LIKELIHOODS):
        warnings.warn(
            f"{model} cannot check that {type(likelihood).__name__} is log-concave in f; it "
            "assumes so. Where log p(y | f) is not concave the sites' curvature is clipped at 0 "
            "and the result may be poor: compare with gpflow.models.SVGP.",
            UserWarning,
            stacklevel=3,
        )


def looks_like_data(value: Any) -> bool:
    """Whether ``value`` is a call's data (X, Y) rather than a kernel or a batch iterator."""
    return isinstance(value, (tuple, list)) and len(value) == 2


def data_first_arguments(
    name: str, kernel: Any, likelihood: Any, inducing_variable: Any, data: Any
) -> Tuple[Any, Any, Any, Any]:
    """
    A constructor's ``(kernel, likelihood, inducing_variable, data)`` as SVGP's signature names
    them. The deprecated data-first spelling, ``Model((X, Y), kernel, ...)``, puts the data where
    the kernel goes and the arguments after it in the next two places; they are taken by what
    they are (the GPflow kernel, the GPflow likelihood, the inducing inputs), with a
    :class:`DeprecationWarning` naming the spelling to use, ``data=(X, Y)``.
    """
    if not looks_like_data(kernel):
        return kernel, likelihood, inducing_variable, data
    if data is not None:
        raise TypeError(f"{name}() got the data both first and as data=.")
    warnings.warn(
        f"{name}((X, Y), kernel, ...) is deprecated: pass the data by name, "
        f"{name}(kernel, likelihood, inducing_variable, data=(X, Y)).",
        DeprecationWarning,
        stacklevel=3,
    )
    data, rest = kernel, [v for v in (likelihood, inducing_variable) if v is not None]
    kernels = [v for v in rest if isinstance(v, gpflow.kernels.Kernel)]
    likelihoods = [v for v in rest if isinstance(v, gpflow.likelihoods.Likelihood)]
    others = [
        v for v in rest if not isinstance(v, (gpflow.kernels.Kernel, gpflow.likelihoods.Likelihood))
    ]
    if len(kernels) != 1 or len(likelihoods) > 1 or len(others) > 1:
        raise TypeError(
            f"{name}(data, ...) takes a GPflow kernel after the data, and at most a likelihood "
            f"and the inducing inputs: use {name}(kernel, likelihood, inducing_variable, "
            "data=(X, Y))."
        )
    return (
        kernels[0],
        likelihoods[0] if likelihoods else None,
        others[0] if others else None,
        data,
    )


def resolve_inducing_variable(
    name: str, inducing_variable: Optional[InducingSpec], X: Optional[np.ndarray], seed: int
) -> gpflow.inducing_variables.InducingVariables:
    """
    The inducing variable of a constructor's ``inducing_variable``: as given (an inducing
    variable or an array Z); with the data X, also an int M for M k-means centres of X (seeded by
    ``seed``) or ``None`` for Z = X, the full GP.
    """
    if X is None:
        if inducing_variable is None or (
            isinstance(inducing_variable, (int, np.integer))
            and not isinstance(inducing_variable, bool)
        ):
            raise ValueError(
                f"{name}(kernel, likelihood, inducing_variable, ...) needs the inducing inputs "
                "as a GPflow inducing variable or an array Z [M, D]; an int M (k-means "
                f"centres) or None (Z = X) needs the data: {name}(kernel, likelihood, M, "
                "data=(X, Y))."
            )
        return make_inducing_variable(inducing_variable)
    if inducing_variable is None:  # the full GP: u = f(X)
        return gpflow.inducing_variables.InducingPoints(X.copy())
    return make_inducing_variable(inducing_variable, X, seed=seed)
