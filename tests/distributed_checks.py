"""
The tf.distribute checks of ``test_distribution.py``, run in a process of their own: TensorFlow's
devices (two logical CPUs here) and a multi-worker cluster (TF_CONFIG) must be set up before
TensorFlow first runs, which a pytest process has done long before.

``python distributed_checks.py two-devices`` prints one JSON object of measurements;
``python distributed_checks.py worker INDEX PORT0 PORT1`` runs worker INDEX of a two-worker
cluster on 127.0.0.1 and prints the fit it took part in; ``python distributed_checks.py one-worker``
prints the same fit without a strategy.
"""

import contextlib
import json
import os
import sys
import tempfile

import numpy as np

N = 301
M = 12


def binary_data(seed=0, N=N):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(N, 2))
    f = np.sin(2.0 * X[:, :1]) + 0.5 * X[:, 1:2]
    Y = (rng.uniform(size=(N, 1)) < 1.0 / (1.0 + np.exp(-3.0 * f))).astype(np.float64)
    return X, Y


def build(name, **kwargs):
    import gpflow
    import tensorflow as tf

    import gpflow_fastvi as fv

    X, _ = binary_data()
    link = {} if name == "KLCorrected" else {"invlink": tf.sigmoid}
    likelihood = gpflow.likelihoods.Bernoulli(**link)
    kernel = gpflow.kernels.SquaredExponential(lengthscales=[0.8, 1.2])
    return getattr(fv, name)(kernel, likelihood, X[:: N // M][:M].copy(), num_data=N, **kwargs)


def build_classes(name):
    """``name`` with a likelihood of three classes (one latent GP per class)."""
    import gpflow

    import gpflow_fastvi as fv
    from gpflow_fastvi.likelihoods import LogisticSoftmax

    X, _ = binary_data()
    likelihood = gpflow.likelihoods.Softmax(3) if name == "VITaylor" else LogisticSoftmax(3)
    kernel = gpflow.kernels.SquaredExponential(lengthscales=[0.8, 1.2])
    Z = X[:: N // M][:M].copy()
    return getattr(fv, name)(kernel, likelihood, Z, num_latent_gps=3, num_data=N)


def relative(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def values(model):
    return [np.array(v.numpy()) for v in model.trainable_variables] + [
        model.q_mu.numpy(),
        model.q_sqrt.numpy(),
    ]


def differences(a, b):
    return max(relative(x, y) for x, y in zip(values(a), values(b)))


def loss_and_gradients(model, data):
    import tensorflow as tf

    from gpflow_fastvi.distribution import gradients_outside_replicas, watch_outside_replicas

    @tf.function(autograph=False)
    def evaluate():
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            watch_outside_replicas(tape, model.trainable_variables)
            loss = model.training_loss(data)
        return loss, gradients_outside_replicas(tape, loss, model.trainable_variables)

    loss, grads = evaluate()
    return [loss.numpy()] + [g.numpy() for g in grads]


def two_devices():
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import gpflow

    import gpflow_fastvi as fv
    from gpflow_fastvi.distribution import sum_over_replicas

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    X, Y = binary_data()
    data = (tf.constant(X), tf.constant(Y))
    out = {"replicas": strategy.num_replicas_in_sync}

    # Each replica's rows, counted in the replica that summed them.
    def rows_per_replica(X, Y):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        rows = tf.cast(tf.shape(X)[0], tf.float64)
        return rows * tf.one_hot(replica, 2, dtype=tf.float64)

    out["rows_per_replica"] = {
        "arrays": sum_over_replicas(rows_per_replica, data, strategy).numpy().tolist(),
        "arrays_in_batches": sum_over_replicas(rows_per_replica, data, strategy, batch_size=40)
        .numpy()
        .tolist(),
        "dataset": sum_over_replicas(
            rows_per_replica, tf.data.Dataset.from_tensor_slices(data).batch(50), strategy
        )
        .numpy()
        .tolist(),
    }

    # The rows each replica's site rule saw in a model's pass, recorded as it ran.
    seen = []

    class Spy(fv.VIJJ):
        def _optimal_site_parameters(self, X, Y, Fmu, Fvar):
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            record = tf.py_function(
                lambda r, n: seen.append((int(r), int(n))) or 0,
                [replica, tf.shape(X)[0]],
                tf.int32,
            )
            with tf.control_dependencies([record]):
                return [tf.identity(p) for p in super()._optimal_site_parameters(X, Y, Fmu, Fvar)]

    with strategy.scope():
        spy = Spy(
            gpflow.kernels.SquaredExponential(lengthscales=[0.8, 1.2]),
            gpflow.likelihoods.Bernoulli(invlink=tf.sigmoid),
            X[:M].copy(),
            num_data=N,
        )
    spy.update_sites(1, data=data)
    out["site_rule_rows"] = sorted(seen)

    # Every model: one full-data loss with its gradient, closed-form steps, and a short fit, built
    # in the strategy's scope against the same model on one device.
    out["models"] = {}
    for name in ("VIJJ", "VITaylor", "KLCorrected", "PolyaGammaSVGP", "VIConcave"):
        one = build(name)
        with strategy.scope():
            shared = build(name)
        kinds = {
            "distributed_variables": all(
                isinstance(v, tf.distribute.DistributedValues) for v in shared.trainable_variables
            )
        }
        kinds["loss_and_gradient"] = max(
            relative(a, b)
            for a, b in zip(loss_and_gradients(shared, data), loss_and_gradients(one, data))
        )
        # A mini-batch loss: the natural-gradient step, each replica projecting its rows once.
        batch = (data[0][:101], data[1][:101])
        kinds["mini_batch_loss_and_gradient"] = max(
            relative(a, b)
            for a, b in zip(loss_and_gradients(shared, batch), loss_and_gradients(one, batch))
        )
        kinds["mini_batch_step"] = differences(shared, one)
        kinds["update_sites"] = relative(
            shared.update_sites(2, data=data), one.update_sites(2, data=data)
        )
        kinds["elbo"] = relative(shared.elbo(data), one.elbo(data))
        fv.fit(shared, data, max_iter=3)
        fv.fit(one, data, max_iter=3)
        kinds["fit"] = differences(shared, one)
        # Built and trained by fit inside the scope, as a user of tf.distribute writes it.
        with strategy.scope():
            inside = build(name)
            fv.fit(inside, data, max_iter=3)
        alone = build(name)
        fv.fit(alone, data, max_iter=3)
        kinds["fit_in_scope"] = differences(inside, alone)
        out["models"][name] = kinds

    # Three classes, labelled by the first input: per-class statistics all-reduced as a tuple.
    classes = (data[0], tf.constant(np.floor(3.0 * (X[:, :1] + 2.0) / 4.0).clip(0.0, 2.0)))
    out["multiclass"] = {}
    for name in ("VITaylor", "PolyaGammaSVGP"):
        one = build_classes(name)
        with strategy.scope():
            shared = build_classes(name)
        kinds = {
            "loss_and_gradient": max(
                relative(a, b)
                for a, b in zip(
                    loss_and_gradients(shared, classes), loss_and_gradients(one, classes)
                )
            )
        }
        batch = (classes[0][:101], classes[1][:101])
        kinds["mini_batch_loss_and_gradient"] = max(
            relative(a, b)
            for a, b in zip(loss_and_gradients(shared, batch), loss_and_gradients(one, batch))
        )
        kinds["update_sites"] = relative(
            shared.update_sites(2, data=classes), one.update_sites(2, data=classes)
        )
        fv.fit(shared, classes, max_iter=3)
        fv.fit(one, classes, max_iter=3)
        kinds["fit"] = differences(shared, one)
        out["multiclass"][name] = kinds

    # q(u) stored unwhitened: the step's gradient then also runs through chol(Kmm) in q(u).
    one = build("PolyaGammaSVGP", whiten=False)
    with strategy.scope():
        shared = build("PolyaGammaSVGP", whiten=False)
    batch = (data[0][:101], data[1][:101])
    out["unwhitened_mini_batch_loss_and_gradient"] = max(
        relative(a, b)
        for a, b in zip(loss_and_gradients(shared, batch), loss_and_gradients(one, batch))
    )

    # Each replica's rows in batches of the model's batch_size (a custom gradient in a replica).
    one = build("VITaylor", batch_size=40)
    with strategy.scope():
        batched = build("VITaylor", batch_size=40)
    fv.fit(one, data, max_iter=3)
    fv.fit(batched, data, max_iter=3)
    out["batched_fit"] = differences(batched, one)

    # A stream of batches, shared among the replicas, against the arrays on one device.
    one = build("VIJJ")
    with strategy.scope():
        streamed = build("VIJJ")
    fv.fit(one, data, max_iter=3)
    fv.fit(streamed, tf.data.Dataset.from_tensor_slices(data).batch(64), max_iter=3)
    out["streamed_fit"] = differences(streamed, one)

    # fit(strategy=...) for a model built outside every scope: its variables stay where they are.
    one, outside = build("VIJJ"), build("VIJJ")
    fv.fit(one, data, max_iter=3)
    fv.fit(outside, data, max_iter=3, strategy=strategy)
    out["fit_with_strategy_argument"] = differences(outside, one)
    out["no_strategy_after_fit"] = outside._passes.distribute_strategy is None
    other = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    try:
        fv.fit(shared, data, max_iter=1, strategy=other)
        out["other_strategy_error"] = None
    except ValueError as error:
        out["other_strategy_error"] = str(error)

    # GPflow's own loops on a model built in the scope, called outside it (a Keras optimiser
    # made and built inside it), against the same loops on one device.
    for loop in ("Scipy", "Adam"):
        models = {}
        for where in ("one", "shared"):
            with strategy.scope() if where == "shared" else contextlib.nullcontext():
                model = build("VIJJ")
                adam = gpflow.keras.tf_keras.optimizers.Adam(0.05)
                adam.build(model.trainable_variables)  # its slots, beside the variables
            closure = model.training_loss_closure(data)
            if loop == "Scipy":
                gpflow.optimizers.Scipy().minimize(
                    closure, model.trainable_variables, options={"maxiter": 5}
                )
            else:
                for _ in range(5):
                    adam.minimize(closure, model.trainable_variables)
            models[where] = model
        out[f"gpflow_{loop.lower()}"] = differences(models["shared"], models["one"])

    # GPflow's set_trainable on a variable created in the scope: fit honours it.
    with strategy.scope():
        fixed = build("VIJJ")
    gpflow.set_trainable(fixed.kernel.lengthscales, False)
    before = fixed.kernel.lengthscales.numpy().copy()
    fv.fit(fixed, data, max_iter=3)
    out["set_trainable_honoured"] = bool(np.array_equal(fixed.kernel.lengthscales.numpy(), before))
    out["variance_moved"] = float(fixed.kernel.variance.numpy()) != 1.0

    # A checkpoint written under the strategy restores into the model built without one.
    with strategy.scope():
        trained = build("KLCorrected")
    fv.fit(trained, data, max_iter=3)
    with tempfile.TemporaryDirectory() as folder:
        path = tf.train.Checkpoint(model=trained).write(os.path.join(folder, "ckpt"))
        restored = build("KLCorrected")
        tf.train.Checkpoint(model=restored).read(path).assert_consumed()
    Xnew = np.linspace(-2.0, 2.0, 9)[:, None].repeat(2, axis=1)
    out["checkpoint"] = max(
        relative(a, b) for a, b in zip(restored.predict_y(Xnew), trained.predict_y(Xnew))
    )
    return out


def cluster_fit(strategy):
    import tensorflow as tf

    import gpflow_fastvi as fv

    X, Y = binary_data()
    data = (tf.constant(X), tf.constant(Y))
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = build("VIJJ")
        pg = build("PolyaGammaSVGP")
    trace = fv.fit(model, data, max_iter=3)
    fv.fit(pg, data, max_iter=3, method="svi", batch_size=100)
    return {
        "replicas": 1 if strategy is None else strategy.num_replicas_in_sync,
        "objective": trace.rows[-1]["objective"],
        "VIJJ": [v.tolist() for v in values(model)],
        "PolyaGammaSVGP": [v.tolist() for v in values(pg)],
    }


def worker(index, port0, port1):
    os.environ["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"127.0.0.1:{port0}", f"127.0.0.1:{port1}"]},
            "task": {"type": "worker", "index": index},
        }
    )
    import tensorflow as tf

    return cluster_fit(tf.distribute.MultiWorkerMirroredStrategy())


if __name__ == "__main__":
    import gpflow

    gpflow.config.set_default_float(np.float64)
    command = sys.argv[1]
    if command == "two-devices":
        result = two_devices()
    elif command == "worker":
        result = worker(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        result = cluster_fit(None)
    print("RESULT " + json.dumps(result))
