"""
tf.distribute: a strategy's replicas share every pass over the data and agree with one device.

TensorFlow's devices must be configured before it first runs, so the checks run in processes of
their own (``distributed_checks.py``): two logical CPU devices under ``MirroredStrategy``, and two
worker processes on 127.0.0.1 under ``MultiWorkerMirroredStrategy``.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import gpflow
import numpy as np
import pytest

import gpflow_fastvi as fv

CHECKS = Path(__file__).with_name("distributed_checks.py")
AGREE = 1e-8
"""Relative agreement with one device: the replicas add the same terms in another order."""


def _run(*args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen(
        [sys.executable, str(CHECKS), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _result(process, timeout=1200):
    # Generous: a loaded two-core machine (the suite's other worker, other jobs) has taken more
    # than five minutes to start TensorFlow twice and run the checks.
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-4000:]
    line = [row for row in output.splitlines() if row.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def two_devices():
    return _result(_run("two-devices"))


@pytest.mark.slow
def test_each_replica_sums_its_half_of_the_points(two_devices):
    counts = two_devices["rows_per_replica"]
    assert two_devices["replicas"] == 2
    assert counts["arrays"] == [150, 151]  # 301 rows in contiguous blocks
    assert counts["arrays_in_batches"] == [150, 151]
    assert counts["dataset"] == [151, 150]  # seven batches of 50 and one of 1, alternately
    # A model's site rule, in one pass: each replica saw its own block, once.
    assert two_devices["site_rule_rows"] == [[0, 150], [1, 151]]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["VIJJ", "VITaylor", "KLCorrected", "PolyaGammaSVGP", "VIConcave"])
def test_a_model_built_in_the_scope_agrees_with_one_device(two_devices, name):
    checks = two_devices["models"][name]
    assert checks.pop("distributed_variables")
    for what, difference in checks.items():
        assert difference < AGREE, (what, difference)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["VITaylor", "PolyaGammaSVGP"])
def test_c_latent_gps_built_in_the_scope_agree_with_one_device(two_devices, name):
    """Three classes: per-class statistics summed over the replicas as one tuple."""
    for what, difference in two_devices["multiclass"][name].items():
        assert difference < AGREE, (what, difference)


@pytest.mark.slow
def test_a_stream_and_fits_strategy_argument_agree_with_one_device(two_devices):
    assert two_devices["unwhitened_mini_batch_loss_and_gradient"] < AGREE
    assert two_devices["batched_fit"] < AGREE
    assert two_devices["streamed_fit"] < AGREE
    assert two_devices["fit_with_strategy_argument"] < AGREE
    assert two_devices["no_strategy_after_fit"]
    assert "another tf.distribute strategy" in two_devices["other_strategy_error"]


@pytest.mark.slow
def test_gpflows_set_trainable_and_checkpoints_work_under_a_strategy(two_devices):
    # GPflow's Scipy and a Keras Adam loop, called outside the scope, agree with one device.
    assert two_devices["gpflow_scipy"] < AGREE and two_devices["gpflow_adam"] < AGREE
    assert two_devices["set_trainable_honoured"] and two_devices["variance_moved"]
    assert two_devices["checkpoint"] < 1e-12  # restored without the strategy, same predictions


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_worker_processes_agree_with_one():
    ports = [str(p) for p in _free_ports(2)]
    workers = [_run("worker", str(index), *ports) for index in range(2)]
    single = _result(_run("one-worker"))
    results = [_result(worker) for worker in workers]
    for result in results:
        assert result["replicas"] == 2
        for name in ("VIJJ", "PolyaGammaSVGP"):
            for got, want in zip(result[name], single[name]):
                got, want = np.asarray(got), np.asarray(want)
                assert np.max(np.abs(got - want)) < AGREE * max(1.0, np.max(np.abs(want)))
    # Both workers hold the same model: the all-reduce gives every worker the same sums.
    assert results[0]["VIJJ"] == results[1]["VIJJ"]


def test_fit_refuses_a_strategy_that_is_not_one(data):
    model = fv.VIJJ(gpflow.kernels.SquaredExponential(), None, data[0][:5], num_data=50)
    with pytest.raises(TypeError, match="tf.distribute.Strategy"):
        fv.fit(model, data, strategy="mirrored")
    assert model._passes.distribute_strategy is None


@pytest.mark.slow
def test_the_replicas_benchmark_times_configurations_that_agree(tmp_path):
    """``python -m experiments.replicas`` (small): every configuration is timed, and the pass's
    objective and the SVI steps' last ELBO agree across them."""
    out = tmp_path / "replicas.json"
    command = [sys.executable, "-m", "experiments.replicas", "--n", "1000"]
    command += ["--svi-batches", "200", "--repeats", "1", "--json", str(out)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    root = Path(__file__).parents[1]  # the experiments run from the repository root
    subprocess.run(command, check=True, capture_output=True, timeout=300, env=env, cwd=root)
    rows = json.loads(out.read_text())["rows"]
    assert [(r["what"], r["configuration"]) for r in rows] == [
        (what, label)
        for what in ("pass", "SVI step")
        for label in ("one device", "1 replica", "2 replicas")
    ]
    for what in ("pass", "SVI step"):
        results = [r["result"] for r in rows if r["what"] == what]
        np.testing.assert_allclose(results[1:], results[0], rtol=AGREE)
        assert all(r["seconds"] > 0 for r in rows)
