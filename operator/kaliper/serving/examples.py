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
