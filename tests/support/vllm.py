"""A real vLLM (the CPU build hack/vllm/venv.sh installs, cached by version; `make test` installs it before
pytest starts) serving a model made here (kaliper.serving.hf_llm), started with the command line Kaliper's
vllm runtime builds, so every flag it writes meets the real server. One per test module that needs it:
ready in 25-50 s on this machine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import server_command
from kaliper.netutil import free_port
from tests.support.builds import run_build
from tests.support.groundtruth import wait_http
from tests.support.paths import REPO


def vllm_installed() -> Path:
    """The cached `vllm` program (installed now if it is not: about 2 minutes)."""
    script = REPO / "hack" / "vllm" / "venv.sh"
    built = run_build(["bash", str(script)], check=True, capture_output=True, text=True)
    return Path(built.stdout.strip().splitlines()[-1])


def vllm_spec(model: Path, name: str, **llm: Any) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate(
        {"model": {"file": str(model), "name": name}, "runtime": {"type": "vllm"}, "llm": llm}
    )


@contextmanager
def vllm_server(spec: ModelDeploymentSpec, workdir: Path, cpus: set[int] | None = None) -> Iterator[str]:
    """Serve the spec's model on loopback with the runtime's own command line (pinned to `cpus`, as `kaliper
    run` pins a trial's server, where given); yields the base URL. Stopped with everything it started (its
    process group), its temporary folder removed with `workdir`."""
    os.environ["KALIPER_VLLM"] = str(vllm_installed())
    assert spec.model.file is not None and spec.model.name is not None
    port = free_port()
    tmpdir = workdir / "tmp"  # the caller's folder: removed with it
    tmpdir.mkdir()
    command = server_command(spec, Path(spec.model.file), spec.model.name, port, workdir, cpus=cpus, tmpdir=tmpdir)
    log = workdir / "vllm.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command.argv(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **command.env},
            start_new_session=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
    try:
        try:
            wait_http(f"http://127.0.0.1:{port}/health", timeout=240)
        except OSError:
            raise AssertionError(f"vLLM did not become ready:\n{log.read_text(errors='replace')[-3000:]}") from None
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
