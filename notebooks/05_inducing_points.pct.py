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
# # Choosing m and the inducing inputs, and what the bound/yardstick gap says
#
# Every model in `gpflow_fastvi` is a sparse GP: the latent function is summarised by its values
# u = f(Z) at m inducing inputs Z [m, D], and the posterior by q(u) = N(μ, Σ). One update of any
# model accumulates A W Aᵀ and A b over the N training points, with A = L⁻¹ K_mn and
# L = chol(K_mm), and factorises the m × m matrix B = I + A W Aᵀ: O(N m²) + O(m³) per update
# (`docs/maths.md`, "The shared algebra"). So m and Z decide both how good the approximation can
# be and how long every step takes.
#
# This notebook trains `fv.VIJJ` on the banana data for a range of m, places 16 inducing inputs in
# five ways (k-means and greedy selection among them), selects them again in greedy rounds, and
# reads two numbers from every fit: the model's own objective and the standard SVGP ELBO, the
# yardstick.
#
# Two ways to get k-means inducing inputs, the placement used by Izmailov & Kropotov,
# *Faster variational inducing input Gaussian process classification*:
#
# * `fv.kmeans_inducing_points(X, m, seed=0)` returns the m centres (SciPy's `kmeans2` with a
#   k-means++ start), an array you can inspect, or give to GPflow's `SVGP` as well;
# * passing the int `m` as the inducing variable, `fv.VIJJ(kernel, inducing_variable=m, data=(X, Y))`, does the same
#   inside the constructor (seeded by `kmeans_seed=`).
#
# The inducing inputs stay where they are during training unless the model is built with
# `train_inducing=True`.

# %%
import os
import time

import gpflow
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.datasets import load_banana, standardise, train_test_split
from gpflow_fastvi.sites import jj_optimal_xi, jj_sites

QUICK = os.environ.get("GPFLOW_FASTVI_QUICK") == "1"  # set by the test suite: shorter runs
M_VALUES = [4, 16, 32] if QUICK else [4, 8, 16, 32, 64, 128]
M_PLACEMENT = 16  # M_PLACEMENT and 2 * M_PLACEMENT are in M_VALUES
M_TAYLOR = [16] if QUICK else [16, 64]
TIME_BUDGET = 3.0 if QUICK else 30.0  # seconds per fit, at most
# QUICK stops after 2 iterations
FIT_OPTIONS = dict(max_iter=2 if QUICK else 1000)

X, Y = load_banana()
X_train, Y_train, X_test, Y_test = train_test_split(X, Y, test_fraction=0.2, seed=0)
X_train, X_test = standardise(X_train, X_test)
print(f"N = {len(X_train)} training points, {len(X_test)} test points, D = {X_train.shape[1]}")


def kernel():
    return gpflow.kernels.SquaredExponential(lengthscales=[1.0, 1.0])


def accuracy(model):
    return float(np.mean((model.predict_y(X_test)[0].numpy() > 0.5) == Y_test))


def nll(model):
    return -float(np.mean(model.predict_log_density((X_test, Y_test))))


def update_seconds(model, repeats=10):
    """Median wall-clock of one compiled closed-form update of q(u), after a warm-up call."""
    update = tf.function(lambda: model.update_sites(1))
    update()  # compiles
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        update()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def train(model):
    """Fit with fv.fit and collect what this notebook shows about the result."""
    trace = fv.fit(model, time_budget=TIME_BUDGET, **FIT_OPTIONS)
    return dict(
        m=model.inducing_variable.num_inducing,
        model=model,
        accuracy=accuracy(model),
        nll=nll(model),
        seconds=trace.rows[-1]["time"],
        iterations=len(trace.rows),
        stop=trace.stop_reason,
        objective=trace.rows[-1]["objective"],  # the model's own objective after the last step
        elbo=float(model.elbo()),  # the SVGP ELBO at the model's q(u)
    )


# %% [markdown]
# `fv.fit` runs one L-BFGS-B over the kernel hyperparameters θ, with closed-form steps of ξ and
# q(u) at every evaluation, and we cap every fit at the time budget printed below. Each fit
# reports why it stopped: `converged` (the relative change of the objective stayed below `tol`,
# or L-BFGS-B could not move from a fresh start), `time_budget` or `max_iter`.
#
# ## Sweeping m
#
# For each m: k-means inducing inputs, the kernel of notebook 01 (unit lengthscales and variance)
# as the starting point, one `fv.fit`. Wall-clock is the trace's `time` column: training only,
# with the compilation of the two functions `fit` builds included. How long a fit takes also
# depends on how many iterations θ needs, so we time one update on its own as well: the
# closed-form q(u) for the fitted state (`model.update_sites(1)`, compiled with `tf.function`), which
# forms A W Aᵀ and A b, O(N m²), and factorises B, O(m³).

# %%
print(f"time budget per fit: {TIME_BUDGET:.0f} s")
sweep = []
for m in M_VALUES:
    Z = fv.kmeans_inducing_points(X_train, m)
    r = train(fv.VIJJ(kernel(), inducing_variable=Z, data=(X_train, Y_train)))
    r["update"] = update_seconds(r["model"])
    sweep.append(r)
    print(
        f"m = {m:3d}: accuracy {r['accuracy']:.4f}  NLL {r['nll']:.4f}  fit {r['seconds']:5.1f} s "
        f"({r['iterations']} iterations, {r['stop']}), one update {1e3 * r['update']:.1f} ms, "
        f"kernel variance {r['model'].kernel.variance.numpy():.2f}"
    )


def log_m_axis(ax):
    ax.set(xscale="log", xlabel="m (inducing points)")
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_xticks([], minor=True)


ms = np.array([r["m"] for r in sweep])
fig, (ax_acc, ax_nll, ax_time) = plt.subplots(1, 3, figsize=(13, 3.8))
ax_acc.plot(ms, [r["accuracy"] for r in sweep], "o-")
ax_acc.set(ylabel="test accuracy", title="accuracy")
ax_nll.plot(ms, [r["nll"] for r in sweep], "o-", color="C1")
ax_nll.set(ylabel="test NLL (nats per point)", title="negative log predictive density")
ax_time.plot(ms, [r["seconds"] for r in sweep], "o-", color="C2", label="whole fit")
ax_time.plot(ms, [r["update"] for r in sweep], "s--", color="C3", label="one update of q(u)")
ax_time.set(ylabel="seconds", title="wall-clock of fv.fit", yscale="log")
ax_time.legend()
for ax in (ax_acc, ax_nll, ax_time):
    log_m_axis(ax)
fig.tight_layout()

# %% [markdown]
# Accuracy and NLL improve steeply while m is small, because a handful of inducing inputs cannot
# follow the curved class boundary, and flatten once there are enough of them. With m = 4 the
# fit settles on a small kernel variance: a nearly flat latent function. Time rises with m: each
# update costs more, and in the full run the larger models also took more iterations. At small m
# the update time hardly changes with m, as fixed overheads outweigh the O(N m²) algebra.
#
# ## Two lower bounds on log p(y), and the gap between them
#
# Each fit gives two numbers at the same state (θ, ξ, q(u)):
#
# * **the model's objective**, the collapsed Jaakkola–Jordan bound Ĵ(θ, ξ) (the trace's
#   `objective` column). Each log σ(yᵢ fᵢ) is replaced by the quadratic site
#   log σ(ξᵢ) + (yᵢ fᵢ − ξᵢ)/2 − λ(ξᵢ)(fᵢ² − ξᵢ²), which lies below it for every fᵢ and touches
#   it at fᵢ = ±ξᵢ. With q(u) at its closed-form optimum for the current θ and ξ, which `fit`
#   stores after every step, Ĵ = Σᵢ E_q[siteᵢ] − KL[q(u) ‖ p(u)];
# * **the yardstick**, `model.elbo()`: the standard SVGP ELBO at the same q(u),
#   Σᵢ E_q[log σ(yᵢ fᵢ)] − KL[q(u) ‖ p(u)], with the expectations by Gauss–Hermite quadrature.
#   It is the objective GPflow's `SVGP` maximises.
#
# The KL term is the same in both, so
#
#     ELBO − Ĵ = Σᵢ E_q[log σ(yᵢ fᵢ) − siteᵢ(fᵢ)] ≥ 0,
#
# because each site lies below log σ everywhere. Both are lower bounds on log p(y | θ), the log
# marginal likelihood at the fitted hyperparameters: Ĵ ≤ ELBO ≤ log p(y | θ). The gap is what the
# Jaakkola–Jordan sites lose, at the q(u) they produced, to the exact expected log-likelihood. Its
# term for point i is zero when q(fᵢ) has no variance (the optimal ξᵢ² = E_q[fᵢ²] then puts all
# the mass where the site touches log σ) and positive otherwise.
#
# The ELBO itself is what the inducing approximation leaves of log p(y | θ). For a fixed θ and
# *nested* inducing inputs (adding points to Z), the best ELBO cannot go down as m grows. The
# sweep re-fits θ for every m, uses k-means centres that are not nested, and evaluates the ELBO at
# the JJ optimum of q(u) rather than the ELBO's own; so how the ELBO moves with m is measured
# here, not guaranteed. Once it stops rising, more inducing points no longer buy a better model.

# %%
print("   m    JJ bound Ĵ     SVGP ELBO    gap = ELBO − Ĵ")
for r in sweep:
    gap = r["elbo"] - r["objective"]
    print(f"{r['m']:4d}  {r['objective']:11.2f}  {r['elbo']:11.2f}  {gap:10.2f}")
    assert gap >= 0.0, "the SVGP ELBO must not lie below the JJ bound at the same q(u)"
print("gap ≥ 0 for every m: checked")
for smaller, larger in zip(sweep, sweep[1:]):
    print(
        f"m = {smaller['m']:3d} → {larger['m']:3d}: the ELBO changes by "
        f"{larger['elbo'] - smaller['elbo']:8.2f} nats ({larger['stop']} at m = {larger['m']})"
    )

# %% [markdown]
# The gap is a sum over training points, and we can take it apart. For the largest m, the
# per-point slack E_q[log σ(yᵢ fᵢ)] − E_q[siteᵢ] uses the model's marginals q(fᵢ) = N(mᵢ, sᵢ²)
# (`predict_f` on the training inputs): the site's expectation is
# aᵢ + bᵢ mᵢ − wᵢ (mᵢ² + sᵢ²)/2 with the site coefficients from `gpflow_fastvi.sites.jj_sites`
# at the ξ read off the model's q(u), ξᵢ² = mᵢ² + sᵢ² (`jj_optimal_xi`: the model stores no ξ,
# only q(u); `model.local_sites` gives the same sites), and E_q[log σ] comes from the
# likelihood's own quadrature, as in `elbo()`. Their sum should equal the ELBO minus the JJ
# bound, `model.maximum_log_likelihood_objective()`: the collapsed bound of those sites, which
# is their ELBO at the stored q(u) once the fit has converged (q(u) is then optimal for them).

# %%
largest = sweep[-1]
model = largest["model"]
Fmu, Fvar = model.predict_f(X_train)
expected_log_lik = model.likelihood.variational_expectations(X_train, Fmu, Fvar, Y_train)
xi = jj_optimal_xi(Fmu, Fvar)
sites = jj_sites(tf.constant(2.0 * Y_train - 1.0), xi)  # labels in {-1, +1}
expected_site = sites.a + sites.b * Fmu - sites.w * (Fmu**2 + Fvar) / 2
slack = (expected_log_lik[:, None] - expected_site).numpy()[:, 0]
print(f"m = {largest['m']}: sum of per-point slacks {slack.sum():.4f}")
print(
    f"         ELBO − Ĵ at q(u)          {float(model.elbo() - model.maximum_log_likelihood_objective()):.4f}"
)
print(f"smallest per-point slack {slack.min():.2e}, largest {slack.max():.3f}")

# %%
jj = np.array([r["objective"] for r in sweep])
elbo = np.array([r["elbo"] for r in sweep])
fig, (ax_b, ax_g, ax_s) = plt.subplots(1, 3, figsize=(16, 4.2))
ax_b.plot(ms, elbo, "o-", label="SVGP ELBO at q(u)  (yardstick)")
ax_b.plot(ms, jj, "s--", label="JJ bound Ĵ  (model's objective)")
ax_b.fill_between(ms, jj, elbo, color="C0", alpha=0.25, label="gap ELBO − Ĵ")
zoom = ms >= M_PLACEMENT  # the small-m values lie far below: zoom in on the rest
low, high = jj[zoom].min(), elbo[zoom].max()
ax_b.set_ylim(low - 0.15 * (high - low), high + 0.1 * (high - low))
ax_b.set(
    ylabel="nats (sum over the training set)",
    title=f"two lower bounds on log p(y | θ)  (m < {M_PLACEMENT} below the axis)",
)
ax_b.legend(loc="center right")
log_m_axis(ax_b)
ax_g.bar(np.arange(len(ms)), elbo - jj, color="C0", alpha=0.6)
ax_g.set_xticks(np.arange(len(ms)), [str(m) for m in ms])
ax_g.set(xlabel="m (inducing points)", ylabel="ELBO − Ĵ (nats)", title="the gap")
ax_s.scatter(np.sqrt(Fvar.numpy()[:, 0]), slack, s=4, alpha=0.4)
ax_s.set(
    xlabel="posterior std of f at a training point, sqrt(Var q(fᵢ))",
    ylabel="E_q[log σ(yᵢfᵢ)] − E_q[siteᵢ] (nats)",
    title=f"the gap point by point (m = {largest['m']})",
)
fig.tight_layout()

# %% [markdown]
# The left panel is the picture to read when choosing m: over the full sweep both curves rise
# steeply and then level off, and the printed ELBO changes show by how much each doubling of m still raised the
# yardstick. The gap (middle) behaves differently: it is small at m = 4, where the fitted function
# is nearly flat and q(fᵢ) narrow, and it does not shrink towards zero as m grows. The right panel
# shows why: the slack of a point grows with the posterior standard deviation of fᵢ, and a
# better inducing approximation does not make q(fᵢ) a point mass. The gap is the price of the
# Jaakkola–Jordan sites, which more inducing points do not remove.

# %% [markdown]
# ## Where to put 16 inducing inputs
#
# At small m the placement matters. Five choices of Z with m = 16, each fitted from the default
# kernel:
#
# * **k-means** centres of the training inputs (`fv.kmeans_inducing_points`; the sweep's fit);
# * a **random subset** of 16 training inputs;
# * a **regular 4 × 4 grid** over the bounding box of the training inputs;
# * **greedy**: 16 training inputs chosen one at a time by `fv.greedy_inducing_points`, each the
#   one that most reduces the variance of f left unexplained by those chosen before,
#   Σᵢ (K_nn − Q_nn)ᵢᵢ (Titsias's greedy selection, at the starting kernel);
# * **k-means, then trained**: the same k-means start, with the model built with
#   `train_inducing=True`, so that L-BFGS-B moves Z together with θ to increase Ĵ.
#
# Ĵ is a lower bound on log p(y | θ) for every Z, so moving Z to raise it is a legitimate way to
# tighten it; each L-BFGS-B evaluation then also computes the gradient with respect to the m · D
# coordinates of Z.

# %%
rng = np.random.default_rng(0)
side = int(round(np.sqrt(M_PLACEMENT)))
grid_axes = [np.linspace(X_train[:, d].min(), X_train[:, d].max(), side) for d in range(2)]
Z_kmeans = fv.kmeans_inducing_points(X_train, M_PLACEMENT)
placements = {
    "k-means": (Z_kmeans, False),
    "random subset": (X_train[rng.choice(len(X_train), M_PLACEMENT, replace=False)], False),
    f"{side} × {side} grid": (np.stack(np.meshgrid(*grid_axes), -1).reshape(-1, 2), False),
    "greedy": (fv.greedy_inducing_points(X_train, kernel(), M_PLACEMENT), False),
    "k-means, then trained": (Z_kmeans, True),
}
placed = {"k-means": next(r for r in sweep if r["m"] == M_PLACEMENT)}
for name, (Z, trainable) in placements.items():
    if name not in placed:
        placed[name] = train(
            fv.VIJJ(
                kernel(), inducing_variable=Z, train_inducing=trainable, data=(X_train, Y_train)
            )
        )
    r = placed[name]
    print(
        f"{name:22s} accuracy {r['accuracy']:.4f}  NLL {r['nll']:.4f}  ELBO {r['elbo']:9.2f}  "
        f"Ĵ {r['objective']:9.2f}  {r['seconds']:5.1f} s ({r['stop']})"
    )
doubled = next(r for r in sweep if r["m"] == 2 * M_PLACEMENT)
print(
    f"for comparison, k-means with m = {doubled['m']}: accuracy {doubled['accuracy']:.4f}  "
    f"NLL {doubled['nll']:.4f}  ELBO {doubled['elbo']:9.2f}  {doubled['seconds']:5.1f} s"
)

# %%
lim = (-3.3, 3.3)
grid = np.linspace(*lim, 100)
G1, G2 = np.meshgrid(grid, grid)
X_grid = np.column_stack([G1.ravel(), G2.ravel()])
fig, axes = plt.subplots(1, 5, figsize=(21, 4.7), sharex=True, sharey=True)
for ax, (name, r) in zip(axes, placed.items()):
    p = r["model"].predict_y(X_grid)[0].numpy().reshape(G1.shape)
    ax.contourf(G1, G2, p, levels=np.linspace(0, 1, 21), extend="both", cmap="RdBu_r", alpha=0.6)
    ax.contour(G1, G2, p, levels=[0.5], colors="k")
    ax.scatter(*X_test[::4].T, c=Y_test[::4, 0], cmap="RdBu_r", s=5, edgecolors="none")
    Z_final = r["model"].inducing_variable.Z.numpy()
    if placements[name][1]:  # trained: show where Z started
        Z_start = placements[name][0]
        ax.plot(*Z_start.T, "^", mfc="none", mec="k", ms=6, label="Z at the start")
        for start, end in zip(Z_start, Z_final):
            ax.annotate("", end, start, arrowprops=dict(arrowstyle="->", lw=0.8))
    ax.plot(*Z_final.T, "k^", ms=6, label="Z")
    ax.set_title(f"{name}\naccuracy {r['accuracy']:.3f}, ELBO {r['elbo']:.1f}")
    ax.set(xlim=lim, ylim=lim, xlabel="x₁")
axes[0].set_ylabel("x₂")
axes[-1].legend(loc="lower right")
fig.tight_layout()

# %% [markdown]
# The grid puts some of its 16 points in corners with no data, where they explain nothing. The
# random subset follows the density of the inputs, but how well it covers the class boundary
# depends on the draw. K-means spreads them over the data, and so does the greedy selection,
# which picks training inputs themselves: each new one where the inputs chosen so far leave the
# most variance of f unexplained across the data. Training Z moves the k-means centres (the
# arrows); the comparison line printed above puts it next to simply doubling m with k-means.
#
# ## Greedy rounds: select again at the trained kernel
#
# The greedy selection above used the starting kernel, whose lengthscales are not the trained
# ones, and counted every training point alike. `fv.fit(model, greedy_rounds=R)` is Titsias's
# alternating scheme: R times, select the M inputs at the current kernel, with each point's term
# weighted by its site precision wᵢ at the current q(u) (the `w` of `model.local_sites`: the same wᵢ
# that weight the trace term in the model's own bound), carry q(u) over to the new inputs, and
# train. The trace marks each row with its round; the figure of each round below is its last row.

# %%
rounds_model = fv.VIJJ(
    kernel(),
    inducing_variable=fv.greedy_inducing_points(X_train, kernel(), M_PLACEMENT),
    data=(X_train, Y_train),
)
rounds_trace = fv.fit(
    rounds_model, greedy_rounds=2 if QUICK else 3, time_budget=3 * TIME_BUDGET, **FIT_OPTIONS
)
for r in np.unique(rounds_trace.column("round")):
    last = rounds_trace.rows[np.flatnonzero(rounds_trace.column("round") == r)[-1]]
    print(f"round {int(r)}: objective Ĵ {last['objective']:9.2f} after {last['time']:5.1f} s")
print(
    f"greedy rounds, m = {M_PLACEMENT}: accuracy {accuracy(rounds_model):.4f}  "
    f"NLL {nll(rounds_model):.4f}  ELBO {float(rounds_model.elbo()):9.2f}"
)

# %% [markdown]
# The later rounds start from a placement made for the trained kernel and the sites of the
# trained model. The selection shrinks one term of the bound (the weighted trace), not the bound
# itself, so a round can end lower than the one before it; `fit` keeps a round only if it ends
# higher than every round before it, and otherwise puts the model back to the best round's end and
# stops. In the full run of this notebook the second round ended 3.7 nats below the first, so the
# model above is the first round's. From the benchmark page's start (lengthscales √D rather than
# 1), `gpflow-fastvi inducing banana` measured two rounds ahead of a single greedy selection at
# M = 8 and 16, in test accuracy and NLL; from M = 32 on every placement predicts about as well as
# every other.

# %% [markdown]
# ## For comparison: VITaylor's objective is not a bound
#
# `fv.VITaylor` replaces each log σ(yᵢ fᵢ) by its second-order Taylor expansion at ξᵢ = E_q[fᵢ]
# (vi-Taylor, from the same paper). The expansion is neither above nor below log σ everywhere, so
# its collapsed objective J̃ approximates the ELBO without bounding it, or log p(y): J̃ − ELBO can
# have either sign, and the ELBO is the number to compare across models.

# %%
print("   m   VITaylor J̃    its ELBO   J̃ − ELBO  |  VIJJ: ELBO − Ĵ   VIJJ ELBO")
for m in M_TAYLOR:
    r_jj = next(r for r in sweep if r["m"] == m)
    r = train(
        fv.VITaylor(
            kernel(),
            inducing_variable=fv.kmeans_inducing_points(X_train, m),
            data=(X_train, Y_train),
        )
    )
    print(
        f"{m:4d}  {r['objective']:11.2f} {r['elbo']:11.2f} {r['objective'] - r['elbo']:9.2f}"
        f"  |  {r_jj['elbo'] - r_jj['objective']:13.2f} {r_jj['elbo']:11.2f}"
    )

# %% [markdown]
# In the full run J̃ − ELBO came out negative at m = 16 and positive at m = 64, while VIJJ's
# gap is positive by construction. Compared by the same yardstick, VITaylor's ELBO came out above
# VIJJ's at both m: that its objective is not a bound did not hold it back on this data set.

# %% [markdown]
# ## Practical advice, from this run
#
# * **Start with k-means and an int m.** `fv.VIJJ(kernel, inducing_variable=m, data=(X, Y))` is all it takes, and
#   k-means beat a random subset and a regular grid of the same size here, in ELBO, accuracy and
#   NLL.
# * **Sweep m upwards, doubling it, and watch `model.elbo()`.** The ELBO is the same yardstick
#   for every m, every placement and every model in the package (the model's own objective is
#   not: VITaylor's is not even a bound). Stop when a doubling of m no longer raises it by much;
#   every further doubling makes each update more expensive. In the full run the test NLL
#   stopped improving at the same m as the ELBO or earlier.
# * **Read ELBO − Ĵ as the price of the Jaakkola–Jordan sites, not of the inducing points.** It
#   is never negative, it comes from training points whose q(fᵢ) is uncertain, and it did not
#   shrink towards zero as m grew, so it is no guide to m.
# * **Training Z helps at a fixed m, but check the alternative.** `train_inducing=True` raised
#   the ELBO at m = 16 above every fixed placement; doubling m with k-means raised it more.
# * **When m must stay small, select greedily and in rounds.** `fit(..., greedy_rounds=2)` costs
#   a few more fits' time and places the inputs for the kernel that training finds; with enough
#   inducing inputs the placement matters little.
