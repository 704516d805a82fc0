# ---
# jupyter:
#   jupytext:
#     formats: ipynb,pct.py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # VITaylor beyond the logit: probit and Poisson counts
#
# Izmailov & Kropotov, *Faster variational inducing input Gaussian process classification*,
# derive two quadratic approximations of log p(yᵢ | fᵢ) that make the optimal q(u) closed form:
# the Jaakkola–Jordan bound (vi-JJ, `fv.VIJJ`, logit link only) and a second-order Taylor
# expansion at ξᵢ (vi-Taylor, `fv.VITaylor`). With gᵢ and hᵢ the first and second derivatives
# of log p(yᵢ | f) at f = ξᵢ, the Taylor site is
#
#     log p(yᵢ | fᵢ) ≈ aᵢ + bᵢ fᵢ − wᵢ fᵢ²/2,    wᵢ = max(−hᵢ, 0),  bᵢ = gᵢ + wᵢ ξᵢ,
#
# and ξᵢ is set to E_q[fᵢ], the current posterior mean. Nothing in this recipe is specific to
# the logistic function: `gpflow_fastvi` obtains gᵢ and hᵢ by automatic differentiation of
# `likelihood.log_prob` (`gpflow_fastvi/sites/taylor.py`), so any GPflow `ScalarLikelihood`
# whose log-density is concave in f can be plugged in, as the paper's conclusion anticipates.
# The curvature wᵢ must be non-negative for the Gaussian algebra; where the log-density bends
# upwards, wᵢ is clipped at 0 (the *safeguard*, section 2 below).
#
# One caveat runs through the notebook: vi-Taylor's objective J̃(θ; ξ) is an *approximation* of
# the ELBO, not a bound on log p(Y). It can lie above or below the ELBO, so never compare it with
# another model's bound. Every model here has `model.elbo()`, the standard SVGP ELBO
# Σᵢ E_q[log p(yᵢ | fᵢ)] − KL[q(u) ‖ p(u)] at the model's q(u) (exact expectations by GPflow's
# quadrature), and that is the number we compare with `svgp.elbo(data)`.

# %%
import os
import time

import gpflow
import matplotlib.pyplot as plt
import numpy as np
import scipy.special
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.datasets import load_banana, standardise, train_test_split
from gpflow_fastvi.sites import log_density_derivatives, taylor_sites

QUICK = os.environ.get("GPFLOW_FASTVI_QUICK") == "1"  # set by the test suite: shorter runs
MAX_ITER = 3 if QUICK else 1000  # outer iterations of fv.fit (1000 is its default cap)
SCIPY_MAXITER = 10 if QUICK else 2000  # L-BFGS-B iterations for GPflow's SVGP on banana
POISSON_SCIPY_MAXITER = 100 if QUICK else 2000  # ... and on the counts (cheaper, 1-D)

# %% [markdown]
# ## 1. Probit classification on banana
#
# GPflow's `Bernoulli()` uses the probit link p(y = 1 | f) = Φ(f) by default, which `VIJJ`
# cannot handle (its bound is for the logistic sigmoid). `VITaylor` takes it as a keyword
# argument. The data, split, standardisation and k-means inducing inputs Z are those of
# notebook 01; Z stays fixed in both models.

# %%
X, Y = load_banana()
X_train, Y_train, X_test, Y_test = train_test_split(X, Y, test_fraction=0.2, seed=0)
X_train, X_test = standardise(X_train, X_test)
Z = fv.kmeans_inducing_points(X_train, 50)


def accuracy(model):
    return float(np.mean((model.predict_y(X_test)[0].numpy() > 0.5) == Y_test))


def nll(model):
    return -float(np.mean(model.predict_log_density((X_test, Y_test))))


def kernel():
    return gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0])


def fit_svgp_with_scipy(svgp, data, maxiter):
    """GPflow's usual recipe: Z fixed, q(u) and θ by L-BFGS. Returns the wall-clock seconds."""
    gpflow.set_trainable(svgp.inducing_variable, False)
    start = time.perf_counter()
    result = gpflow.optimizers.Scipy().minimize(
        svgp.training_loss_closure(data), svgp.trainable_variables, options={"maxiter": maxiter}
    )
    seconds = time.perf_counter() - start
    print(f"SVGP + Scipy: {result.nit} L-BFGS iterations in {seconds:.1f} s ({result.message})")
    return seconds


# %% [markdown]
# GPflow's SVGP with the probit likelihood, q(u) and the hyperparameters θ optimised jointly by
# L-BFGS (`gpflow.optimizers.Scipy`):

# %%
svgp = gpflow.models.SVGP(kernel(), gpflow.likelihoods.Bernoulli(), Z.copy(), num_data=len(X_train))
svgp_seconds = fit_svgp_with_scipy(svgp, (X_train, Y_train), SCIPY_MAXITER)

# %% [markdown]
# The same model with `VITaylor`. The data go into the constructor (as in GPflow's `SGPR`) and
# `fv.fit` runs one L-BFGS-B over θ for the whole fit; every evaluation first takes two
# closed-form steps of ξ and q(u) from the last accepted iterate. L-BFGS therefore sees
# only the kernel's hyperparameters, where SVGP's L-BFGS also has to move the M + M(M + 1)/2
# entries of q_mu and q_sqrt:

# %%
probit = fv.VITaylor(
    kernel(),
    inducing_variable=Z.copy(),
    likelihood=gpflow.likelihoods.Bernoulli(),
    data=(X_train, Y_train),
)
start = time.perf_counter()
probit_trace = fv.fit(probit, max_iter=MAX_ITER)
probit_seconds = time.perf_counter() - start
print("variables L-BFGS optimises:", end=" ")
print(f"SVGP {sum(int(tf.size(v)) for v in svgp.trainable_variables)}, ", end="")
print(f"VITaylor {sum(int(tf.size(v)) for v in probit.trainable_variables)}")
print(
    f"VITaylor: {len(probit_trace.rows)} outer iterations in {probit_seconds:.1f} s "
    f"({probit_trace.stop_reason})"
)

# %% [markdown]
# Changing the link back to the logit is one argument, `invlink=tf.sigmoid` (also `VITaylor`'s
# default likelihood when none is given):

# %%
logit = fv.VITaylor(
    kernel(),
    inducing_variable=Z.copy(),
    likelihood=gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
    data=(X_train, Y_train),
)
start = time.perf_counter()
logit_trace = fv.fit(logit, max_iter=MAX_ITER)
logit_seconds = time.perf_counter() - start

# %%
print(f"{'model':<22}{'accuracy':>9}{'test NLL':>10}{'SVGP ELBO':>11}", end="")
print(f"{'own objective':>15}{'seconds':>9}")
rows = [
    ("SVGP + Scipy, probit", svgp, float(svgp.elbo((X_train, Y_train))), np.nan, svgp_seconds),
    ("VITaylor, probit", probit, float(probit.elbo()), probit_trace.rows[-1]["objective"],
     probit_seconds),
    ("VITaylor, logit", logit, float(logit.elbo()), logit_trace.rows[-1]["objective"],
     logit_seconds),
]  # fmt: skip
for name, model, elbo, objective, seconds in rows:
    print(
        f"{name:<22}{accuracy(model):>9.4f}{nll(model):>10.4f}{elbo:>11.2f}{objective:>15.2f}"
        f"{seconds:>9.1f}"
    )

# %% [markdown]
# Read the table column by column. Accuracy and test NLL measure the predictions. "SVGP ELBO" is
# the same yardstick for all three rows. Once L-BFGS has converged, SVGP's ELBO is expected to be
# the higher of the two probit values: SVGP maximises that ELBO directly, while VITaylor maximises
# the Taylor approximation J̃, so its q(u) and θ are optimal for a slightly different objective.
# (With `GPFLOW_FASTVI_QUICK=1` SVGP stops after a few L-BFGS iterations and is still far from
# its optimum.) "Own objective" is J̃ at the end of training; it stays near the ELBO because each
# ξᵢ sits at the centre of q(fᵢ), where the expansion is most accurate. It is still not a bound, and
# it says nothing about which model fits the data better. The probit and logit rows use different
# likelihoods, so their ELBOs approximate the evidence of two different models.
#
# The decision boundaries (the contour p(y = 1 | x) = 0.5) and the inducing inputs (triangles):

# %%
grid = np.linspace(-2.5, 2.5, 120)
G1, G2 = np.meshgrid(grid, grid)
X_grid = np.column_stack([G1.ravel(), G2.ravel()])
fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), sharey=True, layout="constrained")
for ax, (name, model, *_) in zip(axes, rows):
    p = model.predict_y(X_grid)[0].numpy().reshape(G1.shape)
    filled = ax.contourf(G1, G2, p, levels=np.linspace(0, 1, 21), cmap="RdBu_r", alpha=0.6)
    ax.contour(G1, G2, p, levels=[0.5], colors="k")
    ax.scatter(*X_test[::4].T, c=Y_test[::4, 0], cmap="RdBu_r", s=6, edgecolors="none")
    ax.plot(*model.inducing_variable.Z.numpy().T, "k^", ms=5)
    ax.set(title=f"{name}: accuracy {accuracy(model):.3f}", xlabel="x₁ (standardised)")
    ax.set(xlim=(grid[0], grid[-1]), ylim=(grid[0], grid[-1]))
axes[0].set_ylabel("x₂ (standardised)")
fig.colorbar(filled, ax=axes, label="p(y = 1 | x)", shrink=0.9)

# %% [markdown]
# ## 2. What the curvature safeguard does
#
# GPflow's probit link is not exactly Φ: `gpflow.likelihoods.utils.inv_probit` returns
# Φ(f)(1 − 2·10⁻³) + 10⁻³, so that probabilities never reach 0 or 1. Far on the wrong side
# (y = 1, f very negative) log p(y | f) therefore levels off at log 10⁻³ instead of falling like
# −f²/2. A function that falls and then levels off must bend upwards somewhere: there the second
# derivative h is positive, the log-density is not concave, and −h would be a *negative*
# site precision, which the collapsed algebra (B = I + A W Aᵀ, a Cholesky factor) cannot accept.
# `taylor_sites` sets w = max(−h, 0): such a site keeps its slope g and drops its curvature.
#
# `gpflow_fastvi.sites.log_density_derivatives` computes log p, g and h by nested
# `tf.GradientTape`s. We draw −h for y = 1 (y = 0 is its mirror image f ↦ −f), and the w that
# `taylor_sites` actually uses, for GPflow's probit and for the logit.

# %%
f = tf.constant(np.linspace(-8.0, 8.0, 801)[:, None])
ones = tf.ones_like(f)
curves = {}
for name, likelihood in (
    ("probit (GPflow)", gpflow.likelihoods.Bernoulli()),
    ("logit", gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)),
):

    def log_density(F, likelihood=likelihood):
        return likelihood.log_prob(tf.zeros_like(F), F, tf.ones_like(F))  # y = 1 at every f

    log_p, g, h = log_density_derivatives(log_density, f)
    sites = taylor_sites(log_density, f)
    curves[name] = (log_p.numpy()[:, 0], -h.numpy()[:, 0], sites.w.numpy()[:, 0])

f_np = f.numpy()[:, 0]
log_p_probit, minus_h_probit, w_probit = curves["probit (GPflow)"]
negative = minus_h_probit < 0
crossing = f_np[negative].max()
print(
    f"probit: -h < 0 (w clipped to 0) for f < {crossing:.2f} when y = 1, "
    f"for f > {-crossing:.2f} when y = 0"
)
print(
    f"most negative -h on [-8, 8]: {minus_h_probit.min():.3f} "
    f"at f = {f_np[minus_h_probit.argmin()]:.2f}"
)

# %%
fig, (ax_logp, ax_w) = plt.subplots(1, 2, figsize=(12, 4.2))
exact_log_phi = scipy.special.log_ndtr(f_np)
ax_logp.plot(f_np, log_p_probit, label="GPflow probit: log[Φ(f)(1 − 2·10⁻³) + 10⁻³]")
ax_logp.plot(f_np, exact_log_phi, "--", label="exact log Φ(f)")
ax_logp.plot(f_np, curves["logit"][0], ":", label="logit: log σ(f)")
ax_logp.axhline(np.log(1e-3), color="grey", lw=0.8)
ax_logp.set(xlabel="f", ylabel="log p(y = 1 | f)", ylim=(-12, 0.5), title="log-likelihood, y = 1")
ax_logp.legend(loc="lower right")

ax_w.plot(f_np, minus_h_probit, color="C0", lw=1, alpha=0.6, label="probit: −h (raw)")
ax_w.plot(f_np, w_probit, color="C0", lw=2.5, ls="--", label="probit: w = max(−h, 0), used")
ax_w.plot(f_np, curves["logit"][2], color="C2", label="logit: w = −h (always > 0)")
ax_w.axvspan(f_np[0], crossing, color="C3", alpha=0.12, label="probit: −h < 0, clipped")
ax_w.axhline(0.0, color="grey", lw=0.8)
ax_w.set(xlabel="f (expansion point ξ)", ylabel="site curvature", title="w(ξ) = −∂²log p / ∂f²")
ax_w.legend(loc="lower right")
fig.tight_layout()

# %% [markdown]
# On the left, GPflow's probit follows log Φ until p(y | f) approaches 10⁻³, then levels off. On
# the right, −h turns negative where the curve starts to bend towards that floor (the f printed
# above, a few units below 0), dips sharply, and returns to 0 on the plateau; the safeguard
# replaces the whole negative stretch by w = 0. The logit's curvature σ(f)(1 − σ(f)) is positive
# everywhere and needs no safeguard. With the exact Φ the probit would be log-concave too: the
# clipping only deals with GPflow's floor.
#
# Does it matter in practice? Only for training points whose expansion point ξᵢ = E_q[fᵢ] lies
# deep on the wrong side of the boundary, i.e. confidently misclassified points. We count them
# for the trained probit model, at its final ξ:

# %%
X_t, Y_t = probit.data
_, _, h_trained = log_density_derivatives(
    lambda F: probit.likelihood.log_prob(X_t, F, Y_t), probit.predict_f(X_t)[0]  # ξ = E_q[f]
)
clipped = int(np.sum(h_trained.numpy() > 0))
print(f"training points with a clipped site (h > 0 at ξ): {clipped} of {probit.num_data}")

# %% [markdown]
# ## 3. Poisson counts
#
# A count regression in one dimension, with a known truth. X is uniform on [0, 10], the latent
# function is f(x) = 1 + sin(1.5 x) + 0.1 x and the counts are Poisson with rate λ(x) = exp f(x)
# (its range is printed below), N = 1000 points from a seeded NumPy generator. GPflow's
# `Poisson()` likelihood uses the same exponential link; log p(y | f) = y f − eᶠ − log y! has
# h = −eᶠ < 0, so it is log-concave everywhere and the safeguard never acts. We take M = 20 evenly
# spaced inducing inputs, fixed in both models.


# %%
def true_f(x):
    return 1.0 + np.sin(1.5 * x) + 0.1 * x


rng = np.random.default_rng(1)
N = 1000
X_counts = np.sort(rng.uniform(0.0, 10.0, size=(N, 1)), axis=0)
counts = rng.poisson(np.exp(true_f(X_counts))).astype(float)  # SVGP needs float targets
Z_counts = np.linspace(0.0, 10.0, 20)[:, None]
X_plot = np.linspace(0.0, 10.0, 400)[:, None]
true_rate = np.exp(true_f(X_plot))
print(f"N = {N} counts from {counts.min():.0f} to {counts.max():.0f}; ", end="")
print(f"true rate from {true_rate.min():.2f} to {true_rate.max():.2f}")

svgp_poisson = gpflow.models.SVGP(
    gpflow.kernels.SquaredExponential(), gpflow.likelihoods.Poisson(), Z_counts.copy(), num_data=N
)
svgp_poisson_seconds = fit_svgp_with_scipy(svgp_poisson, (X_counts, counts), POISSON_SCIPY_MAXITER)


def poisson_model(mean_function=None):
    return fv.VITaylor(
        gpflow.kernels.SquaredExponential(),
        inducing_variable=Z_counts.copy(),
        likelihood=gpflow.likelihoods.Poisson(),
        mean_function=mean_function,
        data=(X_counts, counts),
    )


def fit_with_history(model):
    """fv.fit, with the SVGP ELBO and the largest ξᵢ recorded before training and after each row."""

    def record(m):
        xi, _ = m.predict_f(m.data[0])  # the expansion points ξ = E_q[f], read off q(u)
        return {"elbo": float(m.elbo()), "max_xi": float(np.max(xi.numpy()))}

    start = dict(iteration=0, time=0.0, **record(model))
    trace = fv.fit(model, callback=record)  # cheap in 1-D: run to convergence even when QUICK
    return trace, [start] + trace.rows


poisson = poisson_model()
poisson_trace, poisson_history = fit_with_history(poisson)
poisson_seconds = poisson_trace.rows[-1]["time"]  # fit's clock: the callback's time left out
print(
    f"VITaylor: {len(poisson_trace.rows)} outer iterations in {poisson_seconds:.1f} s "
    f"({poisson_trace.stop_reason})"
)

# %% [markdown]
# For the predicted rate we use `predict_y`, whose mean is E_q[eᶠ] = exp(μ + σ²/2) under
# q(f*) = N(μ, σ²), and for the band the 5 % and 95 % quantiles of the rate, exp(μ ∓ 1.645 σ)
# (the exponential maps quantiles of f to quantiles of eᶠ). The band is the uncertainty about the
# rate, not about the counts. The RMSE is measured against the true rate on a grid of 400 points.

# %%
print(f"{'model':<15}{'SVGP ELBO':>11}{'rate RMSE':>11}{'seconds':>9}")
poisson_rows = [
    ("SVGP + Scipy", svgp_poisson, float(svgp_poisson.elbo((X_counts, counts))),
     svgp_poisson_seconds),
    ("VITaylor", poisson, float(poisson.elbo()), poisson_seconds),
]  # fmt: skip
for name, model, elbo, seconds in poisson_rows:
    rate = model.predict_y(X_plot)[0].numpy()[:, 0]
    rmse = float(np.sqrt(np.mean((rate - true_rate[:, 0]) ** 2)))
    print(f"{name:<15}{elbo:>11.2f}{rmse:>11.4f}{seconds:>9.1f}")
print(f"VITaylor's own objective J̃: {poisson_trace.rows[-1]['objective']:.2f}")

# %%
fig, ax = plt.subplots(figsize=(11, 4.5))
ax.scatter(X_counts[:, 0], counts[:, 0], s=4, color="grey", alpha=0.4, label="counts y")
ax.plot(X_plot[:, 0], true_rate[:, 0], "k", lw=2, label="true rate exp f(x)")
for (name, model, *_), color, style in zip(poisson_rows, ("C0", "C1"), ("-", "--")):
    mu, var = model.predict_f(X_plot)
    mu, sd = mu.numpy()[:, 0], np.sqrt(var.numpy()[:, 0])
    rate = model.predict_y(X_plot)[0].numpy()[:, 0]
    ax.plot(X_plot[:, 0], rate, color=color, ls=style, label=f"{name}: E[exp f]")
    ax.fill_between(
        X_plot[:, 0], np.exp(mu - 1.645 * sd), np.exp(mu + 1.645 * sd), color=color, alpha=0.2,
        label=f"{name}: 90 % band of the rate",
    )  # fmt: skip
ax.plot(Z_counts[:, 0], np.zeros(len(Z_counts)), "k^", ms=5, label="inducing inputs Z")
ax.set(xlabel="x", ylabel="count / rate", title=f"Poisson regression, N = {N}, M = {len(Z_counts)}")
ax.set_ylim(-1, 1.3 * counts.max())
ax.legend(ncol=2, fontsize=8, loc="upper left")
fig.tight_layout()

# %% [markdown]
# Both fits follow the true rate closely. When SVGP's L-BFGS has converged (a full run), the two
# ELBOs and rate errors are close; any gap has the same origin as for the probit (VITaylor
# optimises the Taylor approximation, SVGP the ELBO itself).
#
# ### The first iterations: an overshoot from ξ = 0
#
# vi-Taylor starts by expanding at the prior mean, here ξ = 0, where the Poisson site has
# curvature w = e⁰ = 1 and slope y − 1. For counts in the tens that quadratic is a poor stand-in
# for y f − eᶠ, and the first closed-form update of q(u) lands far above the data: a Newton step
# from a distant start. From above, each further update lowers the largest ξᵢ by little more than
# one unit, because the Newton step on y f − eᶠ is 1 − y e^(−ξ) when ξ is large; with three
# updates per outer iteration, the right-hand panel below drops by about three per row. Meanwhile
# the ELBO is orders of magnitude below its final value. The run still converges, but the
# overshoot costs iterations.
#
# A natural GPflow remedy is a constant mean function at the log of the average count,
# `gpflow.mean_functions.Constant(np.log(counts.mean()))`: the expansion then starts at ξ = log ȳ,
# where the quadratic is already a fair approximation. This adds one trainable hyperparameter
# (the constant) and hence is a slightly different model, so its ELBO is comparable but not
# identical to the zero-mean one.

# %%
shifted = poisson_model(gpflow.mean_functions.Constant(np.log(counts.mean())))
shifted_trace, shifted_history = fit_with_history(shifted)
print(
    f"VITaylor, constant mean: {len(shifted_trace.rows)} outer iterations in "
    f"{shifted_trace.rows[-1]['time']:.1f} s, SVGP ELBO {float(shifted.elbo()):.2f}"
)

fig, (ax_elbo, ax_xi) = plt.subplots(1, 2, figsize=(11, 4))
for history, label in ((poisson_history, "zero mean"), (shifted_history, "constant mean log ȳ")):
    iterations = [row["iteration"] for row in history]
    ax_elbo.plot(iterations, [-row["elbo"] for row in history], "o-", label=label)
    ax_xi.plot(iterations, [row["max_xi"] for row in history], "o-", label=label)
ax_elbo.set(
    yscale="log", xlabel="outer iteration of fv.fit (0 = before training)", ylabel="−ELBO",
    title="negative SVGP ELBO at VITaylor's q(u)",
)  # fmt: skip
ax_xi.axhline(true_f(X_plot).max(), color="k", lw=0.8, ls=":", label="max of the true f")
ax_xi.set(
    xlabel="outer iteration of fv.fit (0 = before training)", ylabel="max ξᵢ",
    title="largest expansion point ξᵢ = E_q[fᵢ]",
)  # fmt: skip
for ax in (ax_elbo, ax_xi):
    ax.legend()
fig.tight_layout()

# %% [markdown]
# **Targets are checked at construction.** A Bernoulli likelihood takes labels {0, 1} or {−1, +1}
# (stored as {0, 1}); a Poisson likelihood takes non-negative integers, given as floats or ints.
# Anything else raises `fv.InvalidDataError` (a `ValueError`) before any training starts. GPflow's
# own Poisson density, y f − eᶠ − log Γ(y + 1), accepts any real y without complaint, so without
# this check a data-preparation slip would train silently:

# %%
for bad_name, bad_counts in (("negative", counts - 3.0), ("non-integer", counts + 0.5)):
    try:
        fv.VITaylor(
            gpflow.kernels.SquaredExponential(),
            inducing_variable=Z_counts.copy(),
            likelihood=gpflow.likelihoods.Poisson(),
            data=(X_counts, bad_counts),
        )
    except fv.InvalidDataError as error:
        print(f"{bad_name} counts: {type(error).__name__}: {error}")

# %% [markdown]
# ## When to use which
#
# - **Logit classification**: `VIJJ` optimises a true lower bound on log p(Y), so its objective
#   can be reported and compared as it is; `VITaylor` with the logit is an alternative that
#   reaches a similar fit (see the results page, `docs/benchmarks.md`, for timings on larger sets).
# - **Any other likelihood with one latent function**, such as probit, Poisson or a Gaussian
#   with unknown variance: `VITaylor`, provided log p(y | f) is concave in f where the ξᵢ lie.
#   For the Gaussian likelihood the expansion is exact and `VITaylor` reproduces `SGPR`.
# - **Likelihoods that are far from log-concave** (Student-t with outliers, for instance): the
#   safeguard keeps the algebra valid, but a clipped site carries no curvature, so the more
#   points are clipped, the less the sites resemble the likelihood. Check `model.elbo()` against
#   GPflow's `SVGP`, which maximises the quadrature ELBO directly and needs no concavity.
# - **Whatever the model, compare `model.elbo()`** (the SVGP ELBO at its q(u)) with
#   `svgp.elbo(data)`, never VITaylor's own objective.
