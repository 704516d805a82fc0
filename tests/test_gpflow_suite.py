"""
The harness that runs GPflow's own SVGP tests with a model in SVGP's place
(:mod:`gpflow_suite.plugin`): its swap reaches every name and is undone, the package keeps
GPflow's class where it means GPflow's class, and a refusal is told from a failure.
"""

import gpflow
import numpy as np
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_suite.plugin import (
    SVGP_NAMES,
    is_refusal,
    is_suite_coverage_check,
    restore_svgp,
    swap_svgp,
)

ORIGINAL_SVGP = gpflow.models.SVGP


def test_the_swap_binds_every_name_of_svgp_and_is_undone():
    before = swap_svgp(fv.VIConcave)
    try:
        assert all(getattr(module, name) is fv.VIConcave for module, name in SVGP_NAMES)
    finally:
        restore_svgp(before)
    assert gpflow.models.SVGP is ORIGINAL_SVGP
    assert gpflow.models.svgp.SVGP is ORIGINAL_SVGP
    assert gpflow.models.svgp.SVGP_with_posterior is ORIGINAL_SVGP.__base__


def test_polya_gamma_yardstick_stays_gpflows_elbo_while_svgp_is_swapped(binary_data):
    X, Y = binary_data
    model = fv.PolyaGammaSVGP(
        gpflow.kernels.SquaredExponential(),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        X[::6].copy(),
        num_data=len(X),
    )
    model.update_sites(data=binary_data)
    yardstick = model.elbo(binary_data)
    before = swap_svgp(fv.PolyaGammaSVGP)
    try:
        swapped = model.elbo(binary_data)
    finally:
        restore_svgp(before)
    np.testing.assert_allclose(swapped, yardstick, rtol=1e-12)
    assert yardstick > model.maximum_log_likelihood_objective(
        binary_data
    )  # SVGP's quadrature ELBO, above the PG bound


def test_a_refusal_is_one_of_the_packages_checks_or_raised_from_one():
    refusal = fv.IncompatibleLikelihoodError("VIJJ needs the logit link")
    assert is_refusal(refusal)
    assert not is_refusal(ValueError("an assertion of GPflow's test"))
    try:
        try:
            raise refusal
        except fv.IncompatibleLikelihoodError as error:
            raise RuntimeError("in user code") from error
    except RuntimeError as wrapped:
        assert is_refusal(wrapped)


def test_only_gpflows_coverage_check_at_a_teardown_leaves_a_tests_outcome():
    """GPflow's check that its whole suite registered every kind of posterior fails at the
    teardown of whichever test a worker runs last in that package; that, and nothing else,
    leaves the test's own outcome standing."""

    class Call:
        def __init__(self, when):
            self.when = when

    coverage = AssertionError(
        "For key 'test_posterior_bo_integration__predict_f' no tests have been registered for "
        "the following posteriors: {<class 'gpflow.posteriors.VGPPosterior'>}."
    )
    assert is_suite_coverage_check(Call("teardown"), coverage)
    assert not is_suite_coverage_check(Call("call"), coverage)
    assert not is_suite_coverage_check(Call("teardown"), AssertionError("arrays differ"))
    assert not is_suite_coverage_check(Call("teardown"), ValueError(str(coverage)))
