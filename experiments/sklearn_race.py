"""
``GPClassifier`` against scikit-learn's ``GaussianProcessClassifier``, as a scikit-learn user
would run them: each with its defaults on scikit-learn's ``make_classification``.

``python -m experiments.sklearn_race`` draws, for each n of ``--sizes`` (default 500, 1000,
2000, 5000), n training points and ``--test`` test points of ``make_classification(n_features=
--features, n_informative=--features // 2, n_classes=--classes, random_state=--seed)``, and fits
``make_pipeline(StandardScaler(), GaussianProcessClassifier(ConstantKernel() * RBF()))``
(scikit-learn's Laplace approximation of the full GP, one L-BFGS-B run over the kernel's
hyperparameters; one-vs-rest for more than two classes) and ``GPClassifier(random_state=--seed)``
(``VIConcave``, 100 k-means inducing inputs, every default). Then ``GPClassifier`` alone at each n
of ``--large`` (default 100,000; ``--large ''`` for none), where ``GaussianProcessClassifier``
needs an n × n matrix per class and more.

Each row gives the seconds of ``fit``, the test accuracy and log loss, and the ratio of
``GaussianProcessClassifier``'s seconds to ``GPClassifier``'s at the same n. One process, the
classifiers in turn: on a shared machine the seconds are rough, the ratios less so.
"""

import argparse
import time
from typing import Any, Dict, List, Optional, Sequence

from sklearn.datasets import make_classification
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.metrics import accuracy_score, log_loss
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpflow_fastvi.benchmarks.cli_args import add_record
from gpflow_fastvi.benchmarks.pages import write_printed_table
from gpflow_fastvi.sklearn import GPClassifier

HEADER = "| n | classifier | seconds | test accuracy | test log loss | GPC's seconds / ours |"


def sizes(text: str) -> List[int]:
    """``"500,1000"`` -> ``[500, 1000]``; ``""`` -> ``[]``."""
    return [int(float(s)) for s in text.split(",") if s.strip()]


def measure(classifier: Any, train: Any, test: Any) -> Dict[str, float]:
    """Seconds to fit ``classifier`` on ``train``, and its test accuracy and log loss."""
    began = time.perf_counter()
    classifier.fit(*train)
    seconds = time.perf_counter() - began
    p = classifier.predict_proba(test[0])
    return {
        "seconds": seconds,
        "accuracy": accuracy_score(test[1], classifier.classes_[p.argmax(axis=1)]),
        "log_loss": log_loss(test[1], p, labels=classifier.classes_),
    }


def row(n: int, name: str, result: Dict[str, float], ratio: str) -> str:
    return (
        f"| {n} | {name} | {result['seconds']:.2f} | {result['accuracy']:.4f} | "
        f"{result['log_loss']:.4f} | {ratio} |"
    )


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.sklearn_race",
        description="GPClassifier against scikit-learn's GaussianProcessClassifier.",
    )
    parser.add_argument(
        "--sizes",
        type=sizes,
        default=sizes("500,1000,2000,5000"),
        help="n for both, comma-separated",
    )
    parser.add_argument("--large", type=sizes, default=sizes("100000"), help="GPClassifier alone")
    parser.add_argument("--test", type=int, default=2000, help="test points")
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--classes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    add_record(parser)
    args = parser.parse_args(argv)

    def data(n: int) -> Any:
        X, y = make_classification(
            n + args.test,
            n_features=args.features,
            n_informative=args.features // 2,
            n_classes=args.classes,
            random_state=args.seed,
        )
        return (X[:n], y[:n]), (X[n:], y[n:])

    rows: List[str] = []
    print(HEADER + "\n|---|---|---:|---:|---:|---:|", flush=True)
    for n in args.sizes:
        train, test = data(n)
        theirs = measure(
            make_pipeline(
                StandardScaler(),
                GaussianProcessClassifier(ConstantKernel() * RBF(), random_state=args.seed),
            ),
            train,
            test,
        )
        ours = measure(GPClassifier(random_state=args.seed), train, test)
        rows.append(row(n, "GaussianProcessClassifier", theirs, "1"))
        rows.append(row(n, "GPClassifier", ours, f"{theirs['seconds'] / ours['seconds']:.1f}"))
        print("\n".join(rows[-2:]), flush=True)
    for n in args.large:
        train, test = data(n)
        rows.append(
            row(n, "GPClassifier", measure(GPClassifier(random_state=args.seed), train, test), "")
        )
        print(rows[-1], flush=True)
    if args.record:
        write_printed_table(
            args.record,
            "experiments.sklearn_race",
            argv,
            HEADER,
            rows,
        )


if __name__ == "__main__":
    main()
