"""Example models made here, never downloaded: scikit-learn models converted to ONNX with skl2onnx."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np


def _to_onnx(estimator: object, features: int, path: Path, zipmap: bool = False) -> Path:
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    options = {id(estimator): {"zipmap": False}} if hasattr(estimator, "predict_proba") and not zipmap else None
    onnx_model = to_onnx(
        estimator, initial_types=[("float_input", FloatTensorType([None, features]))], options=options, target_opset=17
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(onnx_model.SerializeToString())
    return path


def make_iris(path: Path) -> Path:
    """A logistic-regression iris classifier: 4 float features, tiny and fast."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    return _to_onnx(LogisticRegression(max_iter=500).fit(x.astype(np.float32), y), 4, path)


def make_iris_sklearn(path: Path) -> Path:
    """The same iris classifier as a scikit-learn model saved with joblib (what MLServer's sklearn runtime
    serves)."""
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(LogisticRegression(max_iter=500).fit(x, y), path)
    return path


def make_cpu_heavy(path: Path, hidden: int = 512, layers: int = 4, features: int = 64) -> Path:
    """An MLP regressor whose inference is dominated by matrix multiplies: CPU-bound, for limit benchmarks."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPRegressor

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, features)).astype(np.float32)
    y = x @ rng.normal(size=features)
    with warnings.catch_warnings():
        # A few iterations are enough: the model exists to cost CPU per inference, not to be accurate.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPRegressor(hidden_layer_sizes=(hidden,) * layers, max_iter=5, random_state=0).fit(x, y)
    return _to_onnx(model, features, path)


def make_iris_pipeline(directory: Path) -> list[Path]:
    """What examples/pipeline.yaml and examples/modeloptimization.yaml read from their `models` volume: an
    iris classifier wide enough that its matrix multiplies dominate (two hidden layers of 512, so int8
    quantization has something to speed up), as iris/model.joblib and iris/model.onnx, and the labelled
    rows iris/rows.jsonl (one {"inputs": {"float_input": [...]}, "label": n} per line)."""
    import json

    import joblib
    from sklearn.datasets import load_iris
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPClassifier(hidden_layer_sizes=(512, 512), max_iter=300, random_state=0).fit(x, y)
    folder = directory / "iris"
    folder.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, folder / "model.joblib")
    rows = folder / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"inputs": {"float_input": [float(v) for v in row]}, "label": int(label)}) + "\n"
            for row, label in zip(x, y, strict=True)
        )
    )
    return [folder / "model.joblib", _to_onnx(model, 4, folder / "model.onnx"), rows]
