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
# # KL-corrected EM: King & Lawrence's Figure 2
#
# King & Lawrence, *Fast variational inference for Gaussian process models through KL-correction*
# (ECML 2006), train a GP classifier by **probabilistic point assimilation** (PPA). The GP prior is
# on a latent function f̄, and the likelihood sees fₙ = f̄ₙ + εₙ with εₙ ~ N(0, β⁻¹). The posterior
# is approximated by q(f̄) ∏ₙ q(fₙ), and EM alternates two closed-form updates (the E-step) with a
# few quasi-Newton steps on the kernel hyperparameters θ (the M-step):
#
# - **q(fₙ)** ∝ p(yₙ | fₙ) N(fₙ | ⟨f̄ₙ⟩, β⁻¹), a one-dimensional tilted distribution whose
#   moments are closed form for the probit link;
# - **q(f̄)** is GP *regression* on the pseudo-targets ⟨fₙ⟩ with noise variance β⁻¹. In this
#   package's language that is a Gaussian site a + b f̄ − w f̄²/2 per point with b = β⟨fₙ⟩ and
#   w = β, handed to the same Gaussian algebra as every other model.
#
# The paper's point is the M-step. The **standard variational bound** ℒ(θ) is evaluated at the
# stored q(f̄), so when θ moves, q(f̄) stays where the last E-step put it and holds θ back. The
# **KL-corrected bound** ℒ′(θ) re-optimises q(f̄) for every θ: it is the GP marginal likelihood
# log N(⟨f⟩ | 0, K + β⁻¹I) of the pseudo-targets plus terms free of θ. It lies above ℒ by
# KL[q(f̄) ‖ p(f̄ | ⟨f⟩)], is still a lower bound on log p(y), and equals ℒ right after an E-step,
# so the two runs can be compared iteration by iteration. `fv.KLCorrected(..., bound=...)`
# implements both (`docs/maths.md` has the derivation; `gpflow-fastvi kl-correction` reruns the
# paper's whole comparison).
#
# This notebook redraws the paper's Figure 2 on banana realisation 1: the bound against the EM
# iteration for the two choices, from the same start, and the learnt decision boundary. The
# models store q(f̄) unwhitened (`whiten=False`; SVGP's default, `True`, stores it whitened by
# chol(K)), so that the standard bound's M-step holds q(f̄) itself fixed, as in the paper.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

import gpflow_fastvi as fv
from gpflow_fastvi.benchmarks.kl_correction import make_kernel
from gpflow_fastvi.datasets import load_banana, load_banana_split1, train_test_split

QUICK = os.environ.get("GPFLOW_FASTVI_QUICK") == "1"  # set by the test suite: shorter runs
MAX_ITER = 3 if QUICK else 5000  # EM iterations; the paper's standard run needed 4102
TIME_BUDGET = None if QUICK else 60.0  # seconds of training per run
TOL = 1e-6  # stop when the bound changes by less than TOL · |bound| between EM iterations
MAXFUN = 20  # L-BFGS-B evaluations of the bound per M-step

X, Y, X_test, Y_test = load_banana_split1()
print(f"banana realisation 1: {len(X)} training points, {len(X_test)} test points")


def accuracy(model, X_test=X_test, Y_test=Y_test):
    return float(np.mean((model.predict_y(X_test)[0].numpy() > 0.5) == Y_test))


def nll(model, X_test=X_test, Y_test=Y_test):
    return -float(np.mean(model.predict_log_density((X_test, Y_test))))


# %% [markdown]
# ## Two EM runs from the same start
#
# Both models are the paper's: the full GP (no inducing points: q(f̄) is over f̄(X), and every
# E-step costs O(N³)), GPflow's probit `Bernoulli()` likelihood, β = 1, and the kernel RBF + bias
# + white of `gpflow_fastvi.benchmarks.kl_correction.make_kernel` (lengthscale √D, variances 1, 1
# and 0.1). They differ only in `bound=`; both take the paper's E-step, `e_step="coordinate"`
# (the package's default is a Newton E-step with the same fixed point: the sparse variant below
# uses it). `fv.fit` runs the paper's Algorithm 1 and records one row per EM iteration, taken
# after the E-step, where ℒ and ℒ′ coincide. Each run stops when the bound changes by less than
# `TOL` relative to its size, or when its time budget is spent.

# %%
runs = {}
for bound in ("kl_corrected", "standard"):
    model = fv.KLCorrected(
        make_kernel(X.shape[1]), bound=bound, e_step="coordinate", whiten=False, data=(X, Y)
    )
    trace = fv.fit(
        model, method="em", max_iter=MAX_ITER, tol=TOL, time_budget=TIME_BUDGET, maxfun=MAXFUN
    )
    runs[bound] = (model, trace)

print(
    f"{'bound':>12} | iterations | seconds | s/iteration | stopped by  | final bound | "
    "test acc | test NLL"
)
for bound, (model, trace) in runs.items():
    seconds = trace.rows[-1]["time"]
    print(
        f"{bound:>12} | {len(trace.rows):10d} | {seconds:7.1f} | {seconds / len(trace.rows):11.2f} | "
        f"{trace.stop_reason:<11} | {trace.rows[-1]['objective']:11.4f} | "
        f"{accuracy(model):8.4f} | {nll(model):8.4f}"
    )

# %% [markdown]
# The table compares the runs at their ends. Two ways to compare them along the way: the bound
# after the same number of EM iterations, and how soon the KL-corrected run reached the value at
# which the standard run stopped. While the standard run has not converged, the second gives lower
# bounds on the savings.

# %%
(_, klc), (_, std) = runs["kl_corrected"], runs["standard"]
klc_bound, std_bound = klc.column("objective"), std.column("objective")
print("EM iteration | KL-corrected | standard | difference")
for k in (1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000):
    if k <= min(len(klc_bound), len(std_bound)):
        print(
            f"{k:12d} | {klc_bound[k - 1]:12.3f} | {std_bound[k - 1]:8.3f} | "
            f"{klc_bound[k - 1] - std_bound[k - 1]:10.3f}"
        )

end = std.rows[-1]
passed = np.flatnonzero(klc_bound >= end["objective"])
print(
    f"\nThe standard run ended at {end['objective']:.3f} after {end['iteration']} iterations "
    f"({end['time']:.1f} s, {std.stop_reason})."
)
if len(passed):
    row = klc.rows[passed[0]]
    print(
        f"The KL-corrected run reached that value after {row['iteration']} iterations "
        f"({row['time']:.1f} s): {end['iteration'] / row['iteration']:.1f}× fewer iterations, "
        f"{end['time'] / row['time']:.1f}× less time."
    )
else:
    print("The KL-corrected run did not reach that value.")

# %% [markdown]
# ## Figure 2(a): the bound against the EM iteration
#
# As in the paper, the x-axis is logarithmic; the right panel shows the same runs against
# training time (the first iteration includes TensorFlow's compilation of the bound and the
# E-step). A cross marks a run that met the tolerance.

# %%
fig, (ax_iter, ax_time) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
for (bound, (_, trace)), style in zip(runs.items(), ("-", "--")):
    objective = trace.column("objective")
    label = (
        f"{bound.replace('_', '-')}: {len(trace.rows)} iterations, "
        f"{trace.rows[-1]['time']:.0f} s ({trace.stop_reason})"
    )
    for ax, x in ((ax_iter, trace.column("iteration")), (ax_time, trace.column("time"))):
        ax.plot(x, objective, style, color="k", label=label)
        if trace.converged:
            ax.plot(x[-1], objective[-1], "x", color="k", markersize=10)
ax_iter.set(xscale="log", xlabel="EM iteration", ylabel="bound on log p(y)")
ax_time.set(xlabel="training time [seconds]")
ax_iter.set_title("banana realisation 1: bound against EM iteration")
ax_time.set_title("the same runs against wall-clock time")
ax_iter.legend(loc="lower right")
fig.tight_layout()

# %% [markdown]
# ## Figure 2(b): the decision boundaries
#
# The predictive probability p(y* = 1 | x*) of each model on the banana plane, with the
# training points. The solid line is p = 0.5, the dashed lines p = 0.25 and 0.75, as in the
# paper's Figure 2(b).

# %%
grid = np.linspace(-3.2, 3.2, 121)
G1, G2 = np.meshgrid(grid, grid)
X_grid = np.column_stack([G1.ravel(), G2.ravel()])
fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
for ax, (bound, (model, _)) in zip(axes, runs.items()):
    p = model.predict_y(X_grid)[0].numpy().reshape(G1.shape)
    ax.contourf(G1, G2, p, levels=np.linspace(0, 1, 21), cmap="RdBu_r", alpha=0.6)
    ax.contour(G1, G2, p, levels=[0.5], colors="k", linestyles="-")
    ax.contour(G1, G2, p, levels=[0.25, 0.75], colors="k", linestyles="--", linewidths=0.8)
    for label, colour in ((1, "darkred"), (0, "navy")):
        ax.scatter(
            *X[Y[:, 0] == label].T,
            color=colour,
            s=14,
            edgecolors="white",
            linewidths=0.5,
            label=f"training points, y = {label}",
        )
    ax.set(
        xlabel="x₁", title=f"{bound.replace('_', '-')} bound: test accuracy {accuracy(model):.3f}"
    )
axes[0].set_ylabel("x₂")
axes[0].legend(loc="lower left", framealpha=0.9)
fig.tight_layout()

# %% [markdown]
# ## β and the predictive
#
# β is fixed at 1 by default (`train_beta=False`), as in the paper's code. For the probit link
# p(yₙ | f̄ₙ) = Φ(yₙ f̄ₙ / √(1 + β⁻¹)), so β and the kernel variance are not identifiable: trained
# together, they drift along that ridge (β → 0, variance → ∞) for thousands of EM iterations.
# What β does change is the predictive. The likelihood sees f = f̄ + ε, so while `predict_f` returns
# the posterior of f̄ (as an SVGP at the same q(f̄) would), `predict_y` and `predict_log_density`
# integrate over f, whose variance is larger by β⁻¹: that is the model's predictive, and what the
# tables above report. The cell below shows how much of the test NLL the noise accounts for, by predicting from
# f̄ alone for comparison (a diagnostic, not a different model). In our runs the f̄-only NLL was
# lower: the fixed β⁻¹ = 1 flattens the predictive probabilities.

# %%
model = runs["kl_corrected"][0]
beta = float(model.beta.numpy())
mean, var = model.predict_f(X_test)  # the posterior of f̄; f = f̄ + ε adds 1/β to its variance
log_density_f_bar = model.likelihood.predict_log_density(X_test, mean, var, Y_test)
print(f"β = {beta:g}, so the likelihood sees {1.0 / beta:g} more variance than f̄'s")
print(f"test NLL with the noise ε (the model's predictive): {nll(model):.4f}")
print(
    f"test NLL from f̄ alone (ε dropped):                {-float(np.mean(log_density_f_bar)):.4f}"
)

# %% [markdown]
# ## The sparse variant
#
# With `inducing_variable=` (here 50 k-means centres), q(f̄) is through u = f̄(Z) as in GPflow's
# `SVGP`, each EM iteration costs O(N M²), and the KL-corrected bound becomes Titsias' collapsed
# bound on the pseudo-targets. That makes the whole bundled banana set (80 % for training)
# cheap; the features are used as distributed, as above. This model takes the default Newton
# E-step, which reaches the paper's E-step fixed point in a few steps instead of hundreds.

# %%
X_all, Y_all = load_banana()
X_big, Y_big, X_big_test, Y_big_test = train_test_split(X_all, Y_all, test_fraction=0.2, seed=0)
sparse = fv.KLCorrected(
    make_kernel(X_big.shape[1]),
    inducing_variable=fv.kmeans_inducing_points(X_big, 50),
    data=(X_big, Y_big),
)
start = time.perf_counter()
sparse_trace = fv.fit(
    sparse, method="em", max_iter=2 if QUICK else 200, tol=TOL, time_budget=None if QUICK else 15.0
)
print(
    f"sparse KLCorrected, N = {len(X_big)}, M = 50: {len(sparse_trace.rows)} EM iterations "
    f"in {time.perf_counter() - start:.1f} s ({sparse_trace.stop_reason}), test accuracy "
    f"{accuracy(sparse, X_big_test, Y_big_test):.4f}, NLL {nll(sparse, X_big_test, Y_big_test):.4f}"
)

# %% [markdown]
# ## What the figure shows
#
# Both runs start from the same kernel and use the same E-step; only the M-step's objective
# differs. From the first iteration on, the KL-corrected curve lies above the standard one and
# climbs faster, both per EM iteration and per second: each M-step under ℒ′ moves θ further,
# because q(f̄) follows θ, whereas under ℒ the stale q(f̄) penalises every move away from the
# previous θ by KL[q(f̄) ‖ p(f̄ | ⟨f⟩)]. The two decision boundaries, and the two test
# accuracies, are close nonetheless: the bound decides how fast EM gets there more than what
# classifier it ends with.
#
# A time budget of a minute per run does not let the standard run converge. King & Lawrence report
# that the two runs end at the same likelihood, the KL-corrected one after 120 EM iterations and
# the standard one after 4102. `gpflow-fastvi kl-correction` repeats the experiment without the
# budget (its figure and table are in `docs/benchmarks.md`); set `TIME_BUDGET = None` above to
# run it here, which takes many minutes for the standard bound.
