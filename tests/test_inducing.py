"""Greedy inducing inputs (Titsias's selection): the trace term it shrinks, against direct algebra."""

import warnings

import gpflow
import numpy as np
import pytest
import tensorflow as tf
from scipy.linalg import lapack

import gpflow_fastvi as fv
from gpflow_fastvi.inducing import greedy_inducing_points, kmeans_inducing_points


def weighted_trace(X, Z, kernel, w=None):
    """Σᵢ wᵢ (Knn − Qnn)ᵢᵢ computed directly from Z (Cholesky of Kmm, no incremental update)."""
    w = np.ones(len(X)) if w is None else w
    Kmm = kernel(Z).numpy() + gpflow.config.default_jitter() * np.eye(len(Z))  # as the models
    V = np.linalg.solve(np.linalg.cholesky(Kmm), kernel(Z, X).numpy())
    return float(w @ (kernel(X, full_cov=False).numpy() - np.sum(V**2, axis=0)))


def row_indices(X, Z):
    return [int(np.flatnonzero(np.all(X == z, axis=1))[0]) for z in Z]


@pytest.fixture
def inputs(rng):
    return rng.uniform(-3, 3, size=(40, 2))


@pytest.fixture
def kernel():
    return gpflow.kernels.SquaredExponential(variance=1.3, lengthscales=0.9)


@pytest.mark.parametrize("criterion", ["trace", "variance"])
def test_chooses_rows_of_X_and_the_trace_falls_as_M_grows(inputs, kernel, criterion):
    Z = greedy_inducing_points(inputs, kernel, 12, criterion=criterion)
    assert Z.shape == (12, 2) and len(set(row_indices(inputs, Z))) == 12
    traces = [weighted_trace(inputs, Z[:m], kernel) for m in range(1, 13)]
    assert np.all(np.diff(traces) < 0)
    # Selection is nested: the first m of M are the choice for m.
    np.testing.assert_array_equal(
        greedy_inducing_points(inputs, kernel, 5, criterion=criterion), Z[:5]
    )


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.slow
def test_each_step_adds_the_row_that_most_reduces_the_trace(inputs, kernel, rng, weighted):
    """Brute force: at every step, the weighted trace with each remaining row added, computed directly."""
    w = rng.uniform(0.1, 2.0, size=len(inputs)) if weighted else None
    chosen = row_indices(inputs, greedy_inducing_points(inputs, kernel, 8, weights=w))
    for m, j in enumerate(chosen):
        traces = {
            i: weighted_trace(inputs, inputs[chosen[:m] + [i]], kernel, w)
            for i in range(len(inputs))
            if i not in chosen[:m]
        }
        assert traces[j] <= min(traces.values()) + 1e-9 * abs(traces[j])


@pytest.mark.parametrize("weighted", [False, True])
def test_full_working_set_equals_the_largest_working_set(inputs, kernel, rng, weighted):
    """The kept-up-to-date scores (full set) and the direct ones (working set) are the same maths."""
    w = rng.uniform(0.1, 2.0, size=len(inputs)) if weighted else None
    full = greedy_inducing_points(inputs, kernel, 10, weights=w)
    drawn = greedy_inducing_points(inputs, kernel, 10, weights=w, working_set_size=len(inputs))
    np.testing.assert_array_equal(full, drawn)


def test_a_working_set_draws_among_the_remaining_rows(inputs, kernel):
    """Drawn working sets: seeded, and the pick is the best of its draw (one row: the draw itself)."""
    a = greedy_inducing_points(inputs, kernel, 6, working_set_size=5, seed=1)
    np.testing.assert_array_equal(
        a, greedy_inducing_points(inputs, kernel, 6, working_set_size=5, seed=1)
    )
    assert not np.array_equal(
        a, greedy_inducing_points(inputs, kernel, 6, working_set_size=5, seed=2)
    )
    draws = np.random.default_rng(4).choice(40, 1, replace=False)
    first = greedy_inducing_points(inputs, kernel, 1, working_set_size=1, seed=4)
    np.testing.assert_array_equal(first, inputs[draws])


def test_variance_criterion_is_pivoted_cholesky(inputs, kernel):
    """With unit weights and every row a candidate: LAPACK's pivoted Cholesky (dpstrf) pivots."""
    Knn = kernel(inputs).numpy()
    _, pivots, _, info = lapack.dpstrf(Knn, lower=1, tol=-1.0)
    Z = greedy_inducing_points(inputs, kernel, 15, criterion="variance")
    assert row_indices(inputs, Z) == list(pivots[:15] - 1)


def test_zero_weights_keep_the_choice_where_the_weight_is(inputs, kernel):
    w = (inputs[:, 0] > 0).astype(float)
    for criterion in ("trace", "variance"):
        Z = greedy_inducing_points(inputs, kernel, 3, weights=w, criterion=criterion)
        assert np.all(Z[:, 0] > -1.0)  # within reach of the weighted half (lengthscale 0.9)


@pytest.mark.slow
def test_at_most_kmeans_trace_on_banana(banana_split):
    """The trace criterion against k-means's centres at equal M (banana, N = 4240)."""
    X = banana_split[0]
    kernel = gpflow.kernels.SquaredExponential(lengthscales=1.0)
    for M in (32, 64):
        greedy = weighted_trace(
            X, greedy_inducing_points(X, kernel, M, working_set_size=100), kernel
        )
        kmeans = weighted_trace(X, kmeans_inducing_points(X, M), kernel)
        assert greedy <= kmeans


def test_works_with_our_models_and_gpflow_models(binary_data):
    X, Y = binary_data
    kernel = gpflow.kernels.SquaredExponential()
    Z = fv.greedy_inducing_points(X, kernel, 10)
    logit = gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)
    model = fv.VIJJ(kernel, logit, Z, num_data=len(X), train_inducing=False)
    fv.fit(model, (X, Y), max_iter=5)
    np.testing.assert_array_equal(model.inducing_variable.Z.numpy(), Z)  # kept, not moved
    sgpr = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), Z)
    svgp = gpflow.models.SVGP(kernel, gpflow.likelihoods.Bernoulli(), Z, num_data=len(X))
    assert np.isfinite(sgpr.elbo().numpy()) and np.isfinite(svgp.elbo((X, Y)).numpy())


def test_refuses_bad_input_clearly(inputs, kernel):
    with pytest.raises(fv.InvalidDataError, match="between 1 and the number of data points"):
        greedy_inducing_points(inputs, kernel, 41)
    with pytest.raises(fv.InvalidDataError, match="weights must have shape"):
        greedy_inducing_points(inputs, kernel, 3, weights=np.ones(5))
    with pytest.raises(fv.InvalidDataError, match="non-negative"):
        greedy_inducing_points(inputs, kernel, 3, weights=-np.ones(40))
    with pytest.raises(ValueError, match="criterion"):
        greedy_inducing_points(inputs, kernel, 3, criterion="entropy")
    with pytest.raises(TypeError, match="single-output GPflow kernel"):
        greedy_inducing_points(inputs, "rbf", 3)
    before = inputs.copy()
    greedy_inducing_points(inputs, kernel, 3)
    np.testing.assert_array_equal(inputs, before)


def test_vijj_site_precisions_are_the_jaakkola_jordan_curvature(binary_data):
    """w = 2λ(ξ) = tanh(ξ/2)/(2ξ) with ξ² = E[f²] under the current q(f), by a direct formula."""
    X, Y = binary_data
    model = fv.VIJJ(
        gpflow.kernels.SquaredExponential(),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        X[::6].copy(),
        num_data=len(X),
    )
    fv.fit(model, (X, Y), max_iter=3)
    mean, var = (t.numpy()[:, 0] for t in model.predict_f(X))
    xi = np.sqrt(mean**2 + var)
    np.testing.assert_allclose(
        model._site_precisions((X, Y)), np.tanh(xi / 2) / (2 * xi), rtol=1e-8
    )


@pytest.fixture
def regression_data(rng):
    X = rng.uniform(-4, 4, size=(200, 1))
    return X, np.sin(2 * X) + 0.3 * rng.standard_normal(X.shape)


@pytest.mark.slow
def test_titsias_scheme_reaches_sgprs_joint_optimum(regression_data):
    """θ by L-BFGS-B then σ² in closed form, repeated: SGPR's bound never falls and ends where
    GPflow's Scipy, optimising θ and σ² together, ends."""
    X, Y = regression_data
    Z = X[:12].copy()
    ours = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), Z)
    scipy = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), Z)
    trace = fv.fit(ours, tol=1e-10)
    gpflow.optimizers.Scipy().minimize(scipy.training_loss, scipy.trainable_variables)
    assert trace.method == "titsias" and trace.converged
    assert np.all(np.diff(trace.column("objective")) >= -1e-8)
    np.testing.assert_allclose(ours.elbo().numpy(), scipy.elbo().numpy(), rtol=1e-6)
    np.testing.assert_allclose(
        ours.likelihood.variance.numpy(), scipy.likelihood.variance.numpy(), rtol=1e-3
    )


@pytest.mark.slow
def test_titsias_scheme_with_greedy_rounds_and_a_fixed_noise(regression_data):
    X, Y = regression_data
    first_rows = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), X[:8].copy())
    greedy = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), X[:8].copy())
    gpflow.set_trainable(first_rows.inducing_variable, False)  # the selection keeps Z as chosen
    fv.fit(first_rows)
    trace = fv.fit(greedy, greedy_rounds=3)
    rounds = trace.column("round")
    assert rounds[0] == 1 and set(rounds) <= {1.0, 2.0, 3.0} and np.all(np.diff(rounds) >= 0)
    # The model is at the end of the best round: a round that ended lower was undone.
    ends = [trace.column("objective")[rounds == r][-1] for r in np.unique(rounds)]
    np.testing.assert_allclose(greedy.elbo().numpy(), max(ends), rtol=1e-9)
    assert all(np.any(np.all(X == z, axis=1)) for z in greedy.inducing_variable.Z.numpy())
    assert greedy.elbo().numpy() > first_rows.elbo().numpy()
    fixed = gpflow.models.SGPR(
        (X, Y), gpflow.kernels.SquaredExponential(), X[:8].copy(), noise_variance=0.2
    )
    gpflow.set_trainable(fixed.likelihood.variance, False)
    fv.fit(fixed, greedy_rounds=1)
    assert fixed.likelihood.variance.numpy() == pytest.approx(0.2)


def test_fit_refuses_what_the_schemes_cannot_do(regression_data, binary_data):
    X, Y = regression_data
    sgpr = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), X[:5].copy())
    with pytest.raises(ValueError, match="without data"):
        fv.fit(sgpr, (X, Y))
    with pytest.raises(TypeError, match="takes none"):
        fv.fit(sgpr, n_upd=2)
    student = gpflow.models.SGPR((X, Y), gpflow.kernels.SquaredExponential(), X[:5].copy())
    student.likelihood = gpflow.likelihoods.StudentT()
    with pytest.raises(TypeError, match="one scalar variance"):
        fv.fit(student)
    with pytest.raises(TypeError, match="SGPR"):
        fv.fit(gpflow.models.GPR((X, Y), gpflow.kernels.SquaredExponential()))
    Xb, Yb = binary_data
    model = fv.VIJJ(
        gpflow.kernels.SquaredExponential(),
        gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
        Xb[:5].copy(),
        num_data=len(Xb),
    )
    with pytest.raises(ValueError, match="greedy_rounds or validation"):
        fv.fit(model, (Xb, Yb), greedy_rounds=1, validation=(Xb, Yb))
    dataset = tf.data.Dataset.from_tensor_slices((Xb, Yb)).batch(10)
    with pytest.raises(TypeError, match="in memory"):
        fv.fit(model, dataset, greedy_rounds=1)


def test_more_inputs_than_the_kernel_can_tell_apart_still_gives_m_rows(inputs, kernel):
    """Repeated rows: every distinct row comes first; then repeats, with Kmm + jitter still
    factorisable (the jitter is on the pivots, as on the models' Kmm)."""
    repeated = np.repeat(inputs[:3], 5, axis=0)
    Z = greedy_inducing_points(repeated, kernel, 5)
    assert len({tuple(z) for z in Z[:3]}) == 3 and Z.shape == (5, 2)
    Kmm = kernel(Z).numpy() + gpflow.config.default_jitter() * np.eye(5)
    np.linalg.cholesky(Kmm)


def test_kmeans_on_fewer_distinct_rows_than_centres_is_quiet_and_places_rows():
    """Binary features have few distinct rows: k-means++ runs out of new points, which SciPy
    warns of as a division by zero; the centres are rows of X all the same, and nothing is said."""
    X = np.random.default_rng(0).integers(0, 2, (200, 3)).astype(float)  # 8 distinct rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Z = kmeans_inducing_points(X, 20, seed=0)
    assert Z.shape == (20, 3) and np.all(np.isfinite(Z))
    assert set(map(tuple, Z)) <= set(map(tuple, X))
