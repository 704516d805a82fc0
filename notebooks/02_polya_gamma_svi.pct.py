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
# # Pólya-Gamma SVI on ijcnn1: mini-batches, natural gradients, no learning rate for q(u)
#
# GPflow's `SVGP` is the usual choice when the data are too many for a full-batch fit: it is
# trained on mini-batches by Adam, which moves the variational parameters of q(u) = N(m, S) and
# the kernel hyperparameters together, at one learning rate. For the logit likelihood
# p(y | f) = σ(y f), with y ∈ {−1, +1}, there is another way to set q(u). Wenzel, Galy-Fajou,
# Donner, Kloft & Opper, *Scalable logit Gaussian process classification* (published in full as
# *Efficient Gaussian process classification using Pólya-Gamma data augmentation*), write the
# logistic function as an integral over a Pólya-Gamma variable ω ~ PG(1, 0) in which f enters
# through a Gaussian factor:
#
# σ(y f) = ½ ∫ exp(y f / 2 − f² ω / 2) PG(ω | 1, 0) dω.
#
# Given ω, the likelihood is Gaussian in f, so the augmented model is *conditionally conjugate*.
# With q(u, ω) = q(u) ∏ᵢ PG(ωᵢ | 1, cᵢ) the ELBO is in closed form, and on a mini-batch S of s out
# of n = N points both updates are in closed form too:
#
# - **local**: cᵢ = √(E_q[fᵢ²]) = √(μᵢ² + σᵢ²) for each point of the batch, with μᵢ, σᵢ² the mean
#   and variance of q(fᵢ) under the current q(u);
# - **global**: a natural-gradient step of size ρₜ on the natural parameters η of q(u),
#   η ← (1 − ρₜ) η + ρₜ η̂_S, where η̂_S is the optimum of q(u) for the batch's Gaussian sites
#   (bᵢ = yᵢ/2, wᵢ = E[ωᵢ] = tanh(cᵢ/2)/(2cᵢ)) scaled up by n/s, with the prior N(0, Kmm).
#
# Neither step has a learning rate to tune: ρₜ follows a fixed schedule (below). Adam is
# left with the kernel hyperparameters only. `gpflow_fastvi.PolyaGammaSVGP` is this model: an
# `SVGP` subclass with the same constructor, inducing inputs Z, `q_mu`, `q_sqrt` and predictions,
# trained by `fv.fit` or, in your own loop, by `fv.NaturalGradientSVI`. It takes GPflow's labels
# in {0, 1} (or {−1, +1}) and the logit link, `Bernoulli(invlink=tf.sigmoid)`.
#
# This notebook trains it on ijcnn1 (22 features, about 10 % positives) and races it against two
# GPflow baselines for the same wall-clock budget: SVGP + Adam, and SVGP with GPflow's
# `NaturalGradient` optimiser on q(u) plus Adam on the hyperparameters.

# %%
import os
import time

import gpflow
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

import gpflow_fastvi as fv
from gpflow_fastvi.datasets import load_ijcnn1, standardise, train_test_split

QUICK = os.environ.get("GPFLOW_FASTVI_QUICK") == "1"  # set by the test suite: shorter runs
NUM_TRAIN = 5_000 if QUICK else None  # QUICK: a subsample of the training part
NUM_INDUCING = 30 if QUICK else 100  # M
BATCH_SIZE = 100  # s, the same for every method
TIME_BUDGET = 3.0 if QUICK else 45.0  # training seconds per method
EVAL_EVERY = 20 if QUICK else 100  # mini-batch steps between two evaluations on the test set
ADAM_LR = 0.01  # Adam's learning rate, for every method

X, Y = load_ijcnn1()
X_train, Y_train, X_test, Y_test = train_test_split(X, Y, test_fraction=0.2, seed=0)
if NUM_TRAIN is not None:
    print(f"QUICK mode: training on the first {NUM_TRAIN:,} of {len(X_train):,} training points")
    X_train, Y_train = X_train[:NUM_TRAIN], Y_train[:NUM_TRAIN]
X_train, X_test = standardise(X_train, X_test)
N, D = X_train.shape
print(f"N = {N:,} training points, {len(X_test):,} test points, D = {D}")
print(f"positives: {Y_train.mean():.1%} of the training part")

# %% [markdown]
# ## The shared set-up
#
# Every method starts from the same point: a squared-exponential kernel with one lengthscale per
# feature (ARD), all at √D, variance 1 (on standardised data two points are about √(2D) apart, so
# lengthscales of 1 would make Kmm nearly diagonal); the same M inducing inputs Z, placed by
# k-means on the training inputs and kept fixed; the logit link `Bernoulli(invlink=tf.sigmoid)`;
# mini-batches of the same size; Adam at the same learning rate for the hyperparameters.
#
# Since only 10 % of the labels are positive, the constant predictor "always 0" is already 90 %
# accurate: the test NLL tells the methods apart better than the accuracy does early on.

# %%
Z = fv.kmeans_inducing_points(X_train, NUM_INDUCING)
majority_accuracy = float(np.mean(Y_test == 0))
print(f"M = {NUM_INDUCING} inducing inputs")
print(f"predicting 0 everywhere gives test accuracy {majority_accuracy:.4f}")


def make_kernel():
    return gpflow.kernels.SquaredExponential(variance=1.0, lengthscales=np.full(D, np.sqrt(D)))


def make_likelihood():
    return gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid)


X_test_tensor, Y_test_tensor = tf.constant(X_test), tf.constant(Y_test)


def make_evaluator(model):
    """A function returning the model's test accuracy and mean test NLL (compiled once)."""

    @tf.function
    def predict():
        p, _ = model.predict_y(X_test_tensor)
        return p, model.predict_log_density((X_test_tensor, Y_test_tensor))

    def evaluate(_model=None):  # fv.fit calls it with the model, our own loops without
        p, log_density = predict()
        return {
            "accuracy": float(np.mean((p.numpy() > 0.5) == Y_test)),
            "nll": -float(np.mean(log_density.numpy())),
        }

    return evaluate


# %% [markdown]
# ## One step at a time: `fv.NaturalGradientSVI` in your own loop
#
# `fv.NaturalGradientSVI(model)` is one SVI step, compiled once, to call on each mini-batch of a
# training loop you already have, here over a `tf.data` pipeline. Each `svi.step(batch)` sets the
# batch's cᵢ, moves q(u) by ρₜ towards the batch's optimum (ρₜ from the Robbins–Monro schedule,
# see the end of this notebook), then takes one Adam step on the kernel hyperparameters at the
# new q(u). It returns the batch's ELBO estimate, scaled by n/s: one batch's worth of evidence,
# so it jumps around from step to step; the test scores are the steadier signal.
#
# A few hundred steps from a fresh model show the idea. (They also pay TensorFlow's one-off
# start-up costs, so that the race below does not charge them to whichever method runs first.)

# %%
own = fv.PolyaGammaSVGP(make_kernel(), make_likelihood(), Z.copy(), num_data=N)
gpflow.set_trainable(own.inducing_variable, False)
dataset = (
    tf.data.Dataset.from_tensor_slices((X_train, Y_train))
    .shuffle(N, seed=0, reshuffle_each_iteration=True)
    .batch(BATCH_SIZE)  # the step is compiled once, whatever the batch's size
    .repeat()
)
svi = fv.NaturalGradientSVI(own, learning_rate=ADAM_LR)  # step_size: Robbins–Monro by default
evaluate_own = make_evaluator(own)
OWN_STEPS = 20 if QUICK else 400
for step, batch in enumerate(dataset.take(OWN_STEPS), start=1):
    elbo_estimate = svi.step(batch)
    if step % (OWN_STEPS // 4) == 0:
        scores = evaluate_own()
        print(
            f"step {step:4d}: ρ = {float(svi.rho(step - 1)):.3f}, "
            f"ELBO estimate {float(elbo_estimate):9.1f}, "
            f"test accuracy {scores['accuracy']:.4f}, test NLL {scores['nll']:.4f}"
        )

# %% [markdown]
# ## The race, part 1: PolyaGammaSVGP trained by `fv.fit`
#
# From here on, each method gets the same budget of training seconds. `fv.fit` with
# `batch_size` runs the same SVI step as above on mini-batches drawn from the arrays (a new
# random permutation of the training points on every pass), with a progress bar.
#
# One row of the trace is `steps_per_iteration` mini-batch steps; after each row the callback
# evaluates the model on the test set, and `fit` leaves that time out of the trace's `time`
# column (graph compilation is included). With a `time_budget` and no `max_iter`, the budget
# alone ends the run, and the progress bar counts training seconds against it. With mini-batches
# `fit` has no convergence test: the mini-batch ELBO estimates it would compare are noisy.

# %%
polya_gamma = fv.PolyaGammaSVGP(make_kernel(), make_likelihood(), Z.copy(), num_data=N)
gpflow.set_trainable(polya_gamma.inducing_variable, False)
pg_trace = fv.fit(
    polya_gamma,
    (X_train, Y_train),
    batch_size=BATCH_SIZE,
    steps_per_iteration=EVAL_EVERY,
    learning_rate=ADAM_LR,
    time_budget=TIME_BUDGET,
    progress=True,
    callback=make_evaluator(polya_gamma),
)
last = pg_trace.rows[-1]
print(
    f"PolyaGammaSVGP: {last['iteration'] * EVAL_EVERY} steps in {last['time']:.1f} s "
    f"({pg_trace.stop_reason}); test accuracy {last['accuracy']:.4f}, test NLL {last['nll']:.4f}"
)

# %% [markdown]
# The trained model is an SVGP in every other respect (`predict_y`, `print_summary`, ...).
# Its `elbo(data)` is the closed-form Pólya-Gamma bound (what `fit` reports as `objective`,
# averaged over a row's mini-batches); GPflow's own quadrature ELBO at the same q(u) lies above
# it, as the bound is a lower bound on the expected log-likelihood.

# %%
subset = (X_train[:2000], Y_train[:2000])
print(
    f"Pólya-Gamma ELBO on 2,000 training points, scaled to N: {float(polya_gamma.elbo(subset)):.1f}"
)
print(
    f"GPflow's SVGP ELBO at the same q(u):                    "
    f"{float(gpflow.models.SVGP.elbo(polya_gamma, subset)):.1f}"
)

# %% [markdown]
# ## The race, part 2: GPflow's SVGP, with Adam or with natural gradients
#
# Both are plain GPflow. The same Z is fixed, and the mini-batches come from the same kind of
# stream as `fit` draws (a fresh random permutation of the training points on every pass).
#
# - **SVGP + Adam**: one Adam step (learning rate 0.01) on everything trainable, q(u) included.
# - **SVGP + NatGrad + Adam**: as in GPflow's natural-gradient tutorial, `q_mu` and `q_sqrt` are
#   made non-trainable, `gpflow.optimizers.NaturalGradient(gamma=0.1)` steps on them, then Adam
#   steps on the hyperparameters, both on the same batch. Unlike the Pólya-Gamma step, GPflow's
#   natural gradient is taken by automatic differentiation of the quadrature ELBO, and its step
#   size γ is a constant that has to be chosen.
#
# The loop below times the training steps only: the clock is paused while the model is
# evaluated, as `fit` does for its callback. If a step fails (GPflow raises on NaN parameters or
# on a failed Cholesky factorisation), the loop stops and records why.


# %%
def minibatches(seed=0):
    """An endless stream of mini-batches: a new random permutation of the data on every pass."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(N)
        for start in range(0, N - BATCH_SIZE + 1, BATCH_SIZE):
            index = order[start : start + BATCH_SIZE]
            yield tf.constant(X_train[index]), tf.constant(Y_train[index])


def failure_reason(error):
    """The line of a TensorFlow error message that says what went wrong."""
    lines = [line.strip() for line in error.message.splitlines() if line.strip()]
    return next((line for line in lines if "NaN" in line or "Cholesky" in line), lines[0])


def train_for_budget(step_function, evaluate):
    """Run step_function on mini-batches for TIME_BUDGET training seconds; evaluate now and then."""
    rows, failure = [], None
    batches = minibatches()
    start, paused, steps = time.perf_counter(), 0.0, 0
    while True:
        try:
            step_function(next(batches))
        except tf.errors.InvalidArgumentError as error:
            elapsed = time.perf_counter() - start - paused
            failure = f"step {steps + 1} ({elapsed:.1f} s): {failure_reason(error)}"
            break
        steps += 1
        if steps % EVAL_EVERY == 0:
            elapsed = time.perf_counter() - start - paused
            began = time.perf_counter()
            rows.append({"step": steps, "time": elapsed, **evaluate()})
            paused += time.perf_counter() - began
            if not np.isfinite(rows[-1]["nll"]):
                failure = f"step {steps} ({elapsed:.1f} s): the test NLL is {rows[-1]['nll']}"
                break
            if elapsed >= TIME_BUDGET:
                break
    return rows, failure


def make_svgp():
    model = gpflow.models.SVGP(make_kernel(), make_likelihood(), Z.copy(), num_data=N)
    gpflow.set_trainable(model.inducing_variable, False)
    return model


# SVGP + Adam
svgp_adam = make_svgp()
adam = gpflow.keras.tf_keras.optimizers.Adam(ADAM_LR)


@tf.function
def adam_step(batch):
    adam.minimize(lambda: svgp_adam.training_loss(batch), svgp_adam.trainable_variables)


adam_rows, adam_failure = train_for_budget(adam_step, make_evaluator(svgp_adam))

# SVGP + NatGrad + Adam
svgp_natgrad = make_svgp()
gpflow.set_trainable(svgp_natgrad.q_mu, False)
gpflow.set_trainable(svgp_natgrad.q_sqrt, False)
natgrad = gpflow.optimizers.NaturalGradient(gamma=0.1)
natgrad_adam = gpflow.keras.tf_keras.optimizers.Adam(ADAM_LR)


@tf.function
def natgrad_step(batch):
    def loss():
        return svgp_natgrad.training_loss(batch)

    natgrad.minimize(loss, [(svgp_natgrad.q_mu, svgp_natgrad.q_sqrt)])
    natgrad_adam.minimize(loss, svgp_natgrad.trainable_variables)


natgrad_rows, natgrad_failure = train_for_budget(natgrad_step, make_evaluator(svgp_natgrad))
for name, failure in (("SVGP + Adam", adam_failure), ("SVGP + NatGrad + Adam", natgrad_failure)):
    print(f"{name}: {'ran to the budget' if failure is None else 'FAILED at ' + failure}")

# %% [markdown]
# ## Test accuracy and test NLL against wall-clock time
#
# Each curve starts at its method's first evaluation, after the first `EVAL_EVERY` steps; its
# time includes the compilation of the method's training step (the table below gives it as
# "1st eval"). Evaluation time is left out of every clock.

# %%
results = {
    "PolyaGammaSVGP (fit)": {
        "steps": pg_trace.column("iteration") * EVAL_EVERY,
        "time": pg_trace.column("time"),
        "accuracy": pg_trace.column("accuracy"),
        "nll": pg_trace.column("nll"),
        "failure": None,
    },
}
for name, rows, failure in (
    ("SVGP + Adam", adam_rows, adam_failure),
    ("SVGP + NatGrad + Adam", natgrad_rows, natgrad_failure),
):
    results[name] = {
        key: np.array([row[key] for row in rows], dtype=float)
        for key in ("step", "time", "accuracy", "nll")
    }
    results[name]["steps"] = results[name].pop("step")
    results[name]["failure"] = failure

fig, (ax_acc, ax_nll) = plt.subplots(1, 2, figsize=(12, 4.5))
for (name, result), style in zip(results.items(), ("-", ":", "-.")):
    for ax, key in ((ax_acc, "accuracy"), (ax_nll, "nll")):
        (line,) = ax.plot(result["time"], result[key], style, marker="o", ms=2, label=name)
        if result["failure"] is not None and len(result["time"]):
            finite = np.isfinite(result[key])
            ax.plot(
                result["time"][finite][-1],
                result[key][finite][-1],
                "x",
                ms=10,
                color=line.get_color(),
                label=f"{name}: failed here",
            )
ax_acc.axhline(majority_accuracy, color="grey", lw=0.8, ls="--", label="always predict 0")
ax_acc.set(xlabel="training wall-clock [seconds]", ylabel="test accuracy", title="Test accuracy")
ax_acc.set_ylim(bottom=majority_accuracy - 0.005)
ax_nll.set(
    xlabel="training wall-clock [seconds]",
    ylabel="mean test NLL",
    title="Test negative log predictive density",
)
for ax in (ax_acc, ax_nll):
    ax.set_xlim(0, None)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
fig.tight_layout()

# %% [markdown]
# The table gives each method's last evaluation, its speed in steps per second after the first
# evaluation (so without compilation), and the first time its test scores came within half an
# accuracy point and 0.01 nats of the best final values among the methods that ran to the budget.

# %%
finals = {}
for name, result in results.items():
    finite = np.flatnonzero(np.isfinite(result["nll"]))
    if len(finite):
        finals[name] = finite[-1]  # the last evaluation with a finite NLL
completed = [name for name in finals if results[name]["failure"] is None]
target_accuracy = max(results[name]["accuracy"][finals[name]] for name in completed) - 0.005
target_nll = min(results[name]["nll"][finals[name]] for name in completed) + 0.01
print(f"target: test accuracy >= {target_accuracy:.4f} and test NLL <= {target_nll:.4f}\n")
print(
    f"{'method':<24}{'steps':>7}{'seconds':>9}{'1st eval':>10}{'steps/s':>9}"
    f"{'accuracy':>10}{'NLL':>8}{'target at':>11}  status"
)
for name, result in results.items():
    if name not in finals:
        print(f"{name:<24} no finite evaluation; {result['failure']}")
        continue
    i = finals[name]
    steps, seconds = result["steps"], result["time"]
    rate = f"{(steps[i] - steps[0]) / (seconds[i] - seconds[0]):.0f}" if i > 0 else "-"
    hits = np.flatnonzero((result["accuracy"] >= target_accuracy) & (result["nll"] <= target_nll))
    reached = f"{seconds[hits[0]]:.1f} s" if len(hits) else "never"
    status = "ran to the budget" if result["failure"] is None else "FAILED (see above)"
    print(
        f"{name:<24}{steps[i]:>7.0f}{seconds[i]:>9.1f}{seconds[0]:>8.1f} s{rate:>9}"
        f"{result['accuracy'][i]:>10.4f}{result['nll'][i]:>8.4f}{reached:>11}  {status}"
    )

# %% [markdown]
# What we saw in our full runs (the numbers are those printed above; your timings will differ
# with the machine and its load). The quick run that the test suite makes (a 5,000-point
# subsample, M = 30, 3 seconds per method) ends long before Adam could catch up, and the
# baselines spend much of it compiling: only the first observation below can show there.
#
# - **PolyaGammaSVGP is ahead early.** Its first natural-gradient steps put q(u) close to the
#   optimum for the current kernel (ρ₀ = 1 lands on the first batch's optimum), so its test NLL
#   is low from its first evaluation on and it reaches the target (last column) first. Adam
#   starts q(u) at the prior and moves its M + M(M+1)/2 parameters a little at a time, so its NLL
#   starts high and comes down over many steps.
# - **PolyaGammaSVGP stays ahead to the end.** In our full run it ended at 0.9685 / 0.0735
#   against SVGP + Adam's 0.9655 / 0.0837, and reached the target at 10.9 s where Adam needed
#   40.3 s. Its Adam steps the kernel's variance and lengthscales in log scale (a step changes
#   them by about the same factor, whatever their size), so they keep moving after q(u) has
#   settled; stepped in GPflow's own coordinates instead, they stall, and Adam's curves cross the
#   Pólya-Gamma ones. What holds it back is that Adam fits the hyperparameters to the Pólya-Gamma bound,
#   which is looser than SVGP's ELBO (printed above).
# - **An Adam step is the cheapest.** SVGP + Adam takes the most steps per second; a Pólya-Gamma
#   step does more M × M work (it turns q(u) into natural parameters and back, then takes the
#   gradient for Adam), about as much as GPflow's natural-gradient step. The Pólya-Gamma step wins
#   early by how far it moves q(u), not by its price. Compilation ("1st eval") is included in
#   every clock; GPflow's natural-gradient step is the slowest to compile.
# - **GPflow's NatGrad(γ = 0.1) + Adam is fragile here.** Its test NLL jumps about from one
#   evaluation to the next, and in the full run it failed: after a couple of thousand
#   steps the natural-gradient step produced NaN in q(u) and GPflow refused to assign it (the
#   printed line above says at which step). Its rows up to the failure are kept in the table and
#   the figure, where × marks its last evaluation. We kept γ = 0.1 and did not tune it.
#
# ## The step size ρₜ and the batch size
#
# With mini-batches of s points from arrays, `fit` uses the constant ρ = min(1, s / 3000)
# (`gpflow_fastvi.training.svi.mini_batch_step_size`): q(u) averages the batches' targets over
# about 3,000 points and keeps up with the hyperparameters, which Adam moves at every step. `fit`'s own default
# batch is 1000 points (ρ = 1/3); this tutorial gives every method batches of 100 (ρ = 1/30).
# `NaturalGradientSVI`, which does not know the batch size, defaults to the Robbins–Monro schedule
# ρₜ = (t + τ)^(−κ) with τ = 1 and κ = 0.6 (`fv.RobbinsMonro()`, printed below). The first step
# (ρ₀ = 1) jumps to the first batch's optimum; later steps average over more and more batches.
# Because Σ ρₜ = ∞ and Σ ρₜ² < ∞, stochastic natural-gradient ascent converges for fixed
# hyperparameters. The price is that late steps are small, so q(u) follows the moving
# hyperparameters only slowly: on ijcnn1 with batches of 1000 it did not reach the benchmark's
# target in 30 s, where the constant ρ = 0.3 took 15.8 s. `step_size=` takes a constant in (0, 1]
# or your own schedule `t -> rho_t` in both.
# With the full batch (`batch_size=len(X)`, and the default for at most 1000 points) there is
# no noise and the default is ρ = 1: each step sets every cᵢ and then q(u) to their exact optima
# in turn, the coordinate ascent that `fv.VIJJ` runs (the Pólya-Gamma ELBO is the Jaakkola–Jordan bound with ξ = c). The batch size s sets the
# noise in η̂_S, which is one batch's evidence multiplied by n/s: a larger s makes each step more
# reliable, at a cost of O(s M²) per step for the projection and the site statistics, while the
# O(M³) factorisations cost the same whatever s is, so very small batches spend most of each step
# on them.

# %%
schedule = fv.RobbinsMonro()
print(
    f"{schedule}:",
    ", ".join(f"ρ_{t} = {float(schedule(t)):.3f}" for t in (0, 1, 10, 100, 1000, 10_000)),
)
