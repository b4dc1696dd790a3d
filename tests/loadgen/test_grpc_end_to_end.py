"""The load generator's gRPC calls end to end: `python -m kaliper.loadgen` calling ModelInfer on the
ground-truth server's gRPC face (its own records of every call) and on the built-in server (the model's real
answers and refusals), both on loopback."""

from __future__ import annotations

import ipaddress
import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hdrh.histogram import HdrHistogram

from kaliper.loadgen.config import LoadGenConfig, LoadGenError
from kaliper.loadgen.grpc_process import GrpcClientProcess
from kaliper.netutil import free_port
from kaliper.report.schema import LoadTestResult
from kaliper.serving.examples import make_iris
from kaliper.serving.oip_grpc import infer_request
from tests.support.builtin_server import serve
from tests.support.groundtruth import (
    binary,
    groundtruth,
    records,
    served_in_measured_window,
    wait_http,
    wait_served_for,
)
from tests.support.loadgen_run import run_loadgen

GRPC = {"protocol": "oip-v2-grpc", "modelName": "truth"}
BODY_JSON = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}
BODY = {"tensors": {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32"}], "distribution": "zeros"}}
SHORT = {"warmup": "1s", "minDuration": "3s", "maxDuration": "3s", "stopping": {"window": "1s"}}
IRIS_TENSORS = {"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 4], "datatype": "FP32"}]}}


def percentile(figures: Any, p: float) -> float:
    found = figures.at(p)
    assert found is not None and found.value_ms is not None
    return found.value_ms


def test_closed_loop_calls_agree_with_the_servers_own_records(tmp_path: Path) -> None:
    """Two Locust worker processes, each with its gRPC client process, 16 users and 2 connections."""
    with groundtruth("-median", "50ms", "-sigma", "0.3", "-fail-every", "50") as base:
        process, result = run_loadgen(
            tmp_path,
            {
                "url": base,
                "request": {**GRPC, "grpc": {"connections": 2}},
                "payload": BODY,
                "load": {"closedLoop": {"concurrency": 32}, "processes": 2, **SHORT},
            },
        )
        assert process.returncode == 0, process.stderr
        stage = result.stages[0]
        truth = served_in_measured_window(base, stage)
    assert result.generator.protocol == "oip-v2-grpc" and result.generator.connections == 2
    assert result.generator.processes == 2 and result.generator.workers == 2
    assert result.target == f"{base}/inference.GRPCInferenceService/ModelInfer"
    # The server's count of the calls it received in the measured window.
    assert len(truth) > 1000 and abs(len(truth) - stage.requests) <= 32  # the users
    assert stage.failure_time is not None
    assert (stage.latency.count, stage.failure_time.count) == (stage.requests - stage.errors, stage.errors)
    # Every 50th call fails with UNAVAILABLE in its trailers: counted by its status, never dropped.
    assert stage.errors_by_kind.keys() == {"gRPC UNAVAILABLE"}
    assert stage.errors == pytest.approx(stage.requests / 50, abs=3)
    # Every call is the same serialised ModelInferRequest (all-zero tensors); the answer is a 7-byte message.
    raw = infer_request({"inputs": [{**BODY_JSON["inputs"][0], "data": [0, 0]}]}, "truth").SerializeToString()
    assert stage.bytes_sent == stage.requests * len(raw)
    assert stage.bytes_received == (stage.requests - stage.errors) * 7
    # Loose (a loaded CI machine), yet tight enough to catch answers waiting to be noticed: when the calls were
    # made under gevent, with its default 10 threads to wait on 32 calls in flight, p10 read 17% high.
    recorded = HdrHistogram.decode(stage.latency.histogram)
    for p in (10, 50):
        measured_ms = recorded.get_value_at_percentile(p) / 1000
        assert measured_ms == pytest.approx(truth[int(len(truth) * p / 100)], rel=0.1)


def test_open_loop_calls_keep_their_schedule_on_one_connection(tmp_path: Path) -> None:
    with groundtruth("-median", "20ms", "-sigma", "0.3") as base:
        process, result = run_loadgen(
            tmp_path,
            {
                "url": base,
                "request": {**GRPC, "grpc": {"connections": 1, "streamsPerConnection": 16}},
                "payload": BODY,
                "load": {"openLoop": {"rate": 100}, **SHORT},
            },
        )
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    assert stage.load_model == "open" and result.generator.connections == 1
    assert stage.requests == pytest.approx(300, abs=15)  # 100 calls/s for 3 s, whatever the latency
    assert stage.errors == 0
    for p in (50, 90, 99):  # measured from the intended send time, never below the service time
        assert percentile(stage.latency, p) >= percentile(stage.service_time, p)


def most_in_flight(calls: list[tuple[float, float]]) -> int:
    """The most calls the server was serving at once, from its records of (completed at, service ms)."""
    edges = sorted([(done - ms / 1000, 1) for done, ms in calls] + [(done, -1) for done, _ in calls])
    return max(itertools.accumulate(change for _, change in edges))


def test_each_stage_runs_as_many_calls_at_once_as_it_has_users(tmp_path: Path) -> None:
    """Locust's users stand in for the gRPC client process's: the server sees their number change with the
    stages, up and down."""
    with groundtruth("-median", "50ms", "-sigma", "0") as base:
        process, result = run_loadgen(
            tmp_path,
            {
                "url": base,
                "request": {**GRPC, "grpc": {"connections": 2}},
                "payload": BODY,
                "levels": [2, 8, 3],
                "load": {"closedLoop": {"concurrency": 1}, **SHORT, "minDuration": "2s", "maxDuration": "2s"},
            },
        )
        assert process.returncode == 0, process.stderr
        served = records(base)[1]
    in_flight = []
    for stage in result.stages:
        start = stage.started_at.timestamp() + stage.warmup_s
        within = [(done, ms) for done, ms in served if start + ms / 1000 <= done <= start + stage.measured_s]
        in_flight.append(most_in_flight(within))
    assert in_flight == [2, 8, 3]


def grpc_client_processes(ancestor: int) -> list[int]:
    """The gRPC client processes among a process's descendants (read from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = int(fields[1])

    def descends(pid: int) -> bool:
        while pid in parents and pid != ancestor:
            pid = parents[pid]
        return pid == ancestor

    found = []
    for pid in parents:
        try:
            command = (Path("/proc") / str(pid) / "cmdline").read_bytes()
        except OSError:
            continue
        if b"kaliper.loadgen.grpc_process" in command and descends(pid):
            found.append(pid)
    return found


@pytest.mark.parametrize("processes", [1, 2])
def test_a_grpc_client_process_that_dies_ends_the_run_with_the_reason(tmp_path: Path, processes: int) -> None:
    config = tmp_path / "config.yaml"
    with groundtruth("-median", "5ms", "-sigma", "0") as base:
        load = {"closedLoop": {"concurrency": 2}, "processes": processes, "warmup": "1s", "maxDuration": "2m"}
        config.write_text(yaml.safe_dump({"url": base, "request": GRPC, "payload": BODY, "load": load}))
        out = tmp_path / "result.json"
        command = [sys.executable, "-m", "kaliper.loadgen", "run", str(config), "-o", str(out)]
        loadgen = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while len(records(base)[1]) < 50:  # the run's calls are flowing (the preflight makes one)
                assert time.monotonic() < deadline and loadgen.poll() is None
                time.sleep(0.05)
            children = grpc_client_processes(loadgen.pid)
            assert len(children) == processes
            os.kill(children[0], signal.SIGKILL)
            loadgen.wait(timeout=60)  # maxDuration was two minutes
        finally:
            loadgen.kill()
    result = LoadTestResult.model_validate_json(out.read_text())
    assert loadgen.returncode == 1
    reason = "the gRPC client process exited with code -9; its messages are on the generator's stderr"
    if processes == 1:
        assert result.error == reason
    else:
        assert result.error is not None and result.error.startswith("load-generator worker ")
        assert result.error.endswith(f": {reason}")


def test_a_grpc_client_process_that_dies_before_it_is_ready_is_reported_at_once_with_its_exit_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child that exits before its ready line (here `false` stands for the interpreter: it exits 1 without a
    word) is reported with its exit code, not as a start that timed out ("it did not start within 30s", which a
    run whose client process was killed before it was ready said)."""
    config = LoadGenConfig.model_validate(
        {"url": "http://127.0.0.1:9", "request": GRPC, "payload": BODY, "load": {"closedLoop": {"concurrency": 1}}}
    )
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    with pytest.raises(LoadGenError) as refused:
        GrpcClientProcess(config, (0, 1))
    assert str(refused.value) == (
        "the gRPC client process could not start: the gRPC client process exited with code 1; its messages are on "
        "the generator's stderr"
    )


@pytest.fixture(scope="module")
def iris(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_iris(tmp_path_factory.mktemp("models") / "iris.onnx")


@pytest.fixture(scope="module")
def builtin(iris: Path) -> Any:
    """The built-in server with its gRPC face: (its HTTP base URL, its gRPC URL)."""
    grpc_port = free_port()
    server, base = serve(iris, "--grpc-port", str(grpc_port))
    try:
        wait_http(f"{base}/v2/health/ready")
        yield base, f"http://127.0.0.1:{grpc_port}"
    finally:
        server.terminate()
        server.wait()


def builtin_counted(base: str, code: str) -> float:
    """The built-in server's own count of its ModelInfer calls over gRPC with a status code."""
    import urllib.request

    text = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    line = f'kaliper_server_grpc_requests_total{{code="{code}",model="iris"}} '
    return float(text.split(line)[1].split()[0]) if line in text else 0.0


def test_the_builtin_server_answers_every_call_and_counts_it(tmp_path: Path, builtin: tuple[str, str]) -> None:
    base, url = builtin
    before = {code: builtin_counted(base, code) for code in ("OK", "INVALID_ARGUMENT", "INTERNAL")}
    process, result = run_loadgen(
        tmp_path,
        {
            "url": url,
            "request": {"protocol": "oip-v2-grpc", "modelName": "iris"},
            "payload": IRIS_TENSORS,
            "load": {"closedLoop": {"concurrency": 2}, **SHORT},
        },
    )
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    assert stage.errors == 0 and stage.requests > 100
    # Every call the generator recorded (the preflight's, the warm-up's, the measured ones) reached the model and
    # was answered OK; the server also served the calls of the moments before the first window opened and after
    # the last one closed, which no window holds.
    assert builtin_counted(base, "OK") - before["OK"] >= 1 + sum(w.requests for w in stage.windows)
    assert [builtin_counted(base, code) for code in ("INVALID_ARGUMENT", "INTERNAL")] == [
        before["INVALID_ARGUMENT"],
        before["INTERNAL"],
    ]


@pytest.mark.parametrize(
    ("request_spec", "payload", "message"),
    [
        (
            {"protocol": "oip-v2-grpc", "modelName": "resnet"},
            IRIS_TENSORS,
            "does not serve model 'resnet' (gRPC NOT_FOUND: model 'resnet' is not served here; this server serves "
            "'iris'); set request.modelName",
        ),
        (
            {"protocol": "oip-v2-grpc", "modelName": "iris"},
            {"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 3], "datatype": "FP32"}]}},
            "refused the first ModelInfer call for model 'iris' with gRPC INVALID_ARGUMENT: inputs[0].shape: the "
            "model takes [-1, 4] for float_input (-1: any), not [1, 3]; every request of the run would be refused",
        ),
    ],
    ids=["unknown-model", "refused-shape"],
)
def test_calls_that_would_all_be_refused_stop_the_run_with_the_servers_reason(
    tmp_path: Path, builtin: tuple[str, str], request_spec: dict, payload: dict, message: str
) -> None:
    process, result = run_loadgen(
        tmp_path,
        {
            "url": builtin[1],
            "request": request_spec,
            "payload": payload,
            "load": {"closedLoop": {"concurrency": 1}, "maxDuration": "5m"},
        },
    )
    assert process.returncode == 1
    assert result is not None and result.stages == []
    assert message in result.error


def test_a_port_that_does_not_speak_grpc_is_named_as_such(tmp_path: Path) -> None:
    port = free_port()  # Python's HTTP/1.1-only web server, as a REST port given for the gRPC one would be
    listener = subprocess.Popen(
        ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        process, result = run_loadgen(
            tmp_path,
            {
                "url": f"http://127.0.0.1:{port}",
                "request": GRPC,
                "payload": BODY,
                "load": {"closedLoop": {"concurrency": 1}, "maxDuration": "5m"},
            },
        )
    finally:
        listener.terminate()
        listener.wait()
    assert process.returncode == 1
    assert f"http://127.0.0.1:{port} does not answer gRPC calls (gRPC UNAVAILABLE" in result.error
    assert "is this the server's gRPC port" in result.error


def test_a_grpc_target_that_goes_away_mid_run_ends_it_early(tmp_path: Path) -> None:
    port = free_port()
    target = subprocess.Popen(
        [str(binary()), "-addr", f"127.0.0.1:{port}", "-median", "5ms"], stderr=subprocess.DEVNULL
    )
    wait_http(f"http://127.0.0.1:{port}/_truth/records")

    def kill_once_it_served_calls() -> None:
        # Killed mid-run on a condition, not a timer: once the generator's calls had reached it for the 1 s warm-up
        # and a measured window (a count of calls lands in the warm-up or after it, as fast as the machine is),
        # counted from the client process's first call, not the preflight's two (metadata, then ModelInfer) before it.
        wait_served_for(f"http://127.0.0.1:{port}", 2, skip=2)
        target.kill()

    threading.Thread(target=kill_once_it_served_calls, daemon=True).start()
    started = time.monotonic()
    process, result = run_loadgen(
        tmp_path,
        {
            "url": f"http://127.0.0.1:{port}",
            "request": GRPC,
            "payload": BODY,
            "load": {
                "closedLoop": {"concurrency": 2},
                "warmup": "1s",
                "maxDuration": "2m",
                "stopping": {"window": "1s"},
            },
        },
    )
    target.wait()
    assert time.monotonic() - started < 60  # a hang guard: maxDuration was two minutes
    assert process.returncode == 1
    assert result.error.startswith(
        "stage 0 stopped early: the target answered nothing for 10 s: every request of the last 10 windows failed "
        "(gRPC UNAVAILABLE (no connection) x"
    ), result.error
    # The stage is kept with what it measured: the calls answered before the kill, then the refused ones.
    (stage,) = result.stages
    assert stage.requests - stage.errors > 50 and stage.errors > 0
    assert set(stage.errors_by_kind) == {"gRPC UNAVAILABLE (no connection)"}, stage.errors_by_kind


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, signed by its own key (as a test server's is)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert, key_file = directory / "cert.pem", directory / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert, key_file


def test_tls_and_metadata_from_the_environment_reach_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    flags = (
        "-median",
        "5ms",
        "-tls-cert",
        str(cert),
        "-tls-key",
        str(key),
        "-require-header",
        "authorization: Bearer s3cret",
    )
    config = {
        "request": GRPC,
        "payload": BODY,
        "envHeaders": {"Authorization": "KALIPER_TEST_TOKEN"},
        "load": {"closedLoop": {"concurrency": 2}, **SHORT},
    }
    with groundtruth(*flags) as base:
        assert base.startswith("https://")
        monkeypatch.setenv("KALIPER_TEST_TOKEN", "Bearer s3cret")
        process, result = run_loadgen(tmp_path, {"url": base, **config})
        assert process.returncode == 0, process.stderr
        assert result.stages[0].errors == 0 and result.stages[0].requests > 100
        # The same run with the wrong token: refused before any load, with the server's own reason.
        monkeypatch.setenv("KALIPER_TEST_TOKEN", "Bearer wrong")
        process, result = run_loadgen(tmp_path, {"url": base, **config})
    assert process.returncode == 1
    assert result.error == (
        f"{base} refused ModelMetadata for model 'truth' with gRPC UNAUTHENTICATED: groundtruth: missing or wrong "
        "authorization"
    )


@pytest.fixture(scope="module")
def mlserver(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """MLServer serving the iris classifier (scikit-learn): (gRPC URL, its own metrics endpoint)."""
    import json
    import sys

    from kaliper.serving.examples import make_iris_sklearn

    folder = tmp_path_factory.mktemp("mlserver")
    model = make_iris_sklearn(folder / "iris.joblib")
    http, grpc_port, metrics = free_port(), free_port(), free_port()
    settings = {"http_port": http, "grpc_port": grpc_port, "metrics_port": metrics, "parallel_workers": 0}
    (folder / "settings.json").write_text(json.dumps(settings))
    model_settings = {
        "name": "iris",
        "implementation": "mlserver_sklearn.SKLearnModel",
        "parameters": {"uri": str(model)},
    }
    (folder / "model-settings.json").write_text(json.dumps(model_settings))
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("mlserver")), "start", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{http}/v2/models/iris/ready", timeout=90)
        yield f"http://127.0.0.1:{grpc_port}", f"http://127.0.0.1:{metrics}/metrics"
    finally:
        process.terminate()
        process.wait(timeout=30)


def mlserver_counted(metrics_url: str, series: str) -> float:
    """A counter of MLServer's own metrics endpoint (0 before its first increment)."""
    import urllib.request

    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    return float(text.split(series + " ")[1].split()[0]) if series + " " in text else 0.0


# py-grpc-prometheus's count of the ModelInfer calls MLServer answered OK, and MLServer's own count of the
# inferences that failed (the former leaves aborted calls out).
GRPC_OK = (
    'grpc_server_handled_total{grpc_code="OK",grpc_method="ModelInfer",grpc_service="inference.GRPCInferenceService",'
    'grpc_type="UNARY"}'
)
INFER_FAILED = 'model_infer_request_failure_total{model="iris",version=""}'


IRIS_FP64 = {"tensors": {"inputs": [{"name": "predict", "shape": [-1, 4], "datatype": "FP64"}]}}


def test_mlserver_answers_every_call_and_counts_it(tmp_path: Path, mlserver: tuple[str, str]) -> None:
    url, metrics = mlserver
    before = mlserver_counted(metrics, GRPC_OK)
    process, result = run_loadgen(
        tmp_path,
        {
            "url": url,
            "request": {"protocol": "oip-v2-grpc", "modelName": "iris", "grpc": {"connections": 2}},
            "payload": IRIS_FP64,
            "load": {"closedLoop": {"concurrency": 4}, **SHORT},
        },
    )
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    assert stage.errors == 0 and stage.requests > 50 and result.warnings == []
    # As for the built-in server: every call recorded (the preflight's included) was answered OK by MLServer.
    assert mlserver_counted(metrics, GRPC_OK) - before >= 1 + sum(w.requests for w in stage.windows)


def test_a_shape_mlserver_cannot_take_is_measured_with_its_reason(tmp_path: Path, mlserver: tuple[str, str]) -> None:
    url, metrics = mlserver
    process, result = run_loadgen(
        tmp_path,
        {
            "url": url,
            "request": {"protocol": "oip-v2-grpc", "modelName": "iris"},
            "payload": {"tensors": {"inputs": [{"name": "predict", "shape": [-1, 3], "datatype": "FP64"}]}},
            "load": {"closedLoop": {"concurrency": 1}, **SHORT},
        },
    )
    # MLServer answers INTERNAL, not INVALID_ARGUMENT: an answer, measured as an error of its kind, and the
    # server's words on the first one lead the warnings.
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    assert stage.errors_by_kind.keys() == {"gRPC INTERNAL"} and stage.error_rate == 1
    assert result.warnings[0] == (
        "the first ModelInfer call failed with gRPC INTERNAL: X has 3 features, but LogisticRegression is expecting "
        "4 features as input."
    )
    assert mlserver_counted(metrics, INFER_FAILED) >= 1 + sum(w.requests for w in stage.windows)


def test_a_model_mlserver_does_not_serve_stops_the_run(tmp_path: Path, mlserver: tuple[str, str]) -> None:
    url, _ = mlserver
    process, result = run_loadgen(
        tmp_path,
        {
            "url": url,
            "request": {"protocol": "oip-v2-grpc", "modelName": "resnet"},
            "payload": IRIS_FP64,
            "load": {"closedLoop": {"concurrency": 1}, "maxDuration": "5m"},
        },
    )
    assert process.returncode == 1
    assert result.error == (
        f"{url} does not serve model 'resnet' (gRPC NOT_FOUND: Model resnet with version  not found); set "
        "request.modelName"
    )


def test_a_server_that_refuses_one_call_in_four_is_measured_at_its_pace(tmp_path: Path) -> None:
    """One user, every fourth call answered UNAVAILABLE: four single failures in a row never, so the user never
    waits (a wait sized for an outage after each would leave it waiting a third of the stage): the failures'
    share of the time is their share of the calls."""
    with groundtruth("-median", "20ms", "-sigma", "0.05", "-fail-every", "4") as base:
        load = {"closedLoop": {"concurrency": 1}, "warmup": "0s", "minDuration": "3s", "maxDuration": "3s"}
        process, result = run_loadgen(tmp_path, {"url": base, "request": GRPC, "payload": BODY, "load": load})
    assert process.returncode == 0, process.stderr
    (stage,) = result.stages
    assert stage.backoffs is None  # no wait at all
    failed = stage.errors_by_kind["gRPC UNAVAILABLE"]
    assert abs(failed - stage.requests / 4) <= 1
    assert stage.error_time_share == pytest.approx(0.25, abs=0.03)


def test_a_server_that_answers_unavailable_itself_is_up_and_measured(tmp_path: Path) -> None:
    """Every call answered with gRPC UNAVAILABLE and the server's own words (as a server sheds load): not "does
    not answer gRPC calls" before the load, nor a target down after 10 s of them; measured to maxDuration,
    counted by its status with the server's words kept."""
    with groundtruth("-median", "20ms", "-sigma", "0.05", "-fail-every", "1") as base:
        load = {"closedLoop": {"concurrency": 2}, "warmup": "0s", "minDuration": "11s", "maxDuration": "11s"}
        process, result = run_loadgen(tmp_path, {"url": base, "request": GRPC, "payload": BODY, "load": load})
    assert process.returncode == 0, process.stderr
    assert result.warnings[0] == (
        "the first ModelInfer call failed with gRPC UNAVAILABLE: groundtruth: failed as asked (-fail-every)"
    )
    (stage,) = result.stages
    assert stage.stop_reason == "reached maxDuration (11s)"
    # Two users backing off (from the second refusal in a row, waits of 50 ms to 2 s): a handful of calls, all
    # the time failing.
    assert stage.errors_by_kind == {"gRPC UNAVAILABLE": stage.requests} and stage.requests >= 10
    assert stage.error_time_share == 1.0
    assert stage.error_messages == {"gRPC UNAVAILABLE": ["groundtruth: failed as asked (-fail-every)"]}
