from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "iris/model.joblib"}, "name": "iris"},
    runtime={"type": "mlserver"},
    threads={"workers": 2},
    batching={"maxBatchSize": 8, "maxQueueDelay": "5ms"},
)


def test_the_pod_runs_mlserver_from_its_image_set_by_environment() -> None:
    assert pod_container(SPEC) == {
        "image": "docker.io/seldonio/mlserver:1.7.1-sklearn",
        "command": ["mlserver", "start", "/models/source"],
        "env": [
            {"name": "MLSERVER_HTTP_PORT", "value": "8080"},
            {"name": "MLSERVER_GRPC_PORT", "value": "8081"},
            {"name": "MLSERVER_PARALLEL_WORKERS", "value": "2"},
            {"name": "MLSERVER_MODEL_NAME", "value": "iris"},
            {"name": "MLSERVER_MODEL_IMPLEMENTATION", "value": "mlserver_sklearn.SKLearnModel"},
            {"name": "MLSERVER_MODEL_URI", "value": "/models/source/iris/model.joblib"},
            {"name": "MLSERVER_MODEL_MAX_BATCH_SIZE", "value": "8"},
            {"name": "MLSERVER_MODEL_MAX_BATCH_TIME", "value": "0.005"},
        ],
    }


def test_a_local_replica_reads_the_same_settings_from_files_in_its_folder(tmp_path: Path) -> None:
    assert local_argv(SPEC, tmp_path, grpc_port=9001) == [
        str(Path(sys.executable).with_name("mlserver")),
        "start",
        str(tmp_path),
    ]
    settings = json.loads((tmp_path / "settings.json").read_text())
    metrics_port = settings.pop("metrics_port")
    assert settings == {"parallel_workers": 2, "http_port": 9000, "grpc_port": 9001, "load_models_at_startup": True}
    assert metrics_port not in (9000, 9001) and 1024 <= metrics_port <= 65535
    assert json.loads((tmp_path / "model-settings.json").read_text()) == {
        "name": "m",
        "implementation": "mlserver_sklearn.SKLearnModel",
        "max_batch_size": 8,
        "max_batch_time": 0.005,
        "parameters": {"uri": "/models/m.file"},
    }
