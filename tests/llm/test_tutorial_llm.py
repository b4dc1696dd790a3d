"""The LLM tutorial (docs/tutorials/llm.md) run as written: the commands of its llama.cpp steps (serve the tiny
model, load-test it, profile it as a ProfileRun, replay a burst, stop the server), as one shell session (its
`kill %1` stops the server its first step started) in a folder of their own (tests/support/as_written.py) that
also links `hack/` (the suite has built llama-server already, as `make llama` does). Step 5 (`make demo-vllm`)
runs as written in tests/llm/test_vllm_runtime.py.

What each step prints depends on this machine's speed (another pytest worker runs beside this one), so the test
holds what does not: every answer's length, the server's own counts, the trials and stages the files list."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from pathlib import Path

from kaliper.report.schema import LoadTestResult, ProfileReport
from kaliper.report.status import status_from_report
from tests.support.as_written import workspace
from tests.support.controlplane import wait_for
from tests.support.docs_site import bash_blocks
from tests.support.llama import CHAT_TEMPLATE_TOKENS
from tests.support.paths import REPO

TUTORIAL = REPO / "docs" / "tutorials" / "llm.md"
PORT = 8080  # the tutorial's
ANSWER_TOKENS = 64  # every answer of the examples: max_tokens 64, ignore_eos, a model that never stops


def session(commands: list[str]) -> str:
    """One bash session running the commands in order (set -e), each one's output kept in step<i>.out/.err."""
    lines = ["set -e"]
    for i, command in enumerate(commands):
        lines.append(f"{{ {command}\n}} > step{i}.out 2> step{i}.err")
    return "\n".join(lines) + "\n"


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_the_llama_cpp_steps_run_as_written(tmp_path: Path) -> None:
    assert port_is_free(PORT), f"127.0.0.1:{PORT}, the tutorial's port, is taken before the tutorial starts"
    workspace(tmp_path, "examples/llm")
    (tmp_path / "hack").symlink_to(REPO / "hack")  # hack/llama/build.sh: the llama-server the suite built
    blocks = bash_blocks(TUTORIAL.read_text())
    commands = [command for block in blocks[:5] for command in block]
    assert commands[-1] == "kill %1" and blocks[5] == ["make demo-vllm"], blocks
    script = tmp_path / "tutorial.sh"
    script.write_text(session(commands))
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the server goes with it whatever happens
        env={key: value for key, value in os.environ.items() if key != "KUBECONFIG"},
    )
    try:
        printed, _ = process.communicate(timeout=900)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    outputs = [(tmp_path / f"step{i}.out", tmp_path / f"step{i}.err") for i in range(len(commands))]
    done = [i for i, (out, _) in enumerate(outputs) if out.exists()]
    failed = done[-1] if done else 0
    assert process.returncode == 0, (commands[failed], outputs[failed][1].read_text()[-3000:], printed)
    out = [o.read_text() for o, _ in outputs]
    err = [e.read_text() for _, e in outputs]

    # 1. The model, and the server ready on the tutorial's port.
    assert "wrote examples/local/models/tiny-llm/tiny.gguf" in out[0]

    # 2. Three stages of 64-token answers, every one counted by the server too.
    result = LoadTestResult.model_validate_json((tmp_path / "result.json").read_text())
    assert [stage.level for stage in result.stages] == [1.0, 4.0, 8.0]
    for stage in result.stages:
        tokens = stage.tokens
        assert stage.errors_by_kind == {} and tokens is not None, stage.errors_by_kind
        assert tokens.output_tokens == ANSWER_TOKENS * stage.requests
        check = tokens.server_check
        assert check is not None and check.source == "llama.cpp", check
        counted = {c.figure: c for c in check.comparisons}
        assert counted["outputTokens"].generator == ANSWER_TOKENS * (stage.requests - stage.drained)
    summary = err[3]
    for line in ("stage 0: 1 users", "stage 1: 4 users", "stage 2: 8 users", "server check (llama.cpp /metrics"):
        assert line in summary, summary[-2000:]

    # 3. The same endpoint as a ProfileRun: a trial per level, the token figures in the report and the status.
    report = ProfileReport.model_validate_json((tmp_path / "kaliper-reports/tiny-llm-chat/report.json").read_text())
    assert [(t.parameters["concurrency"], t.status) for t in report.trials] == [
        ("1", "Succeeded"),
        ("4", "Succeeded"),
        ("8", "Succeeded"),
    ]
    for trial in report.trials:  # prompts of 256 tokens as the server counts them, in its chat template
        assert trial.stage is not None and trial.stage.tokens is not None
        assert trial.stage.tokens.output_tokens == ANSWER_TOKENS * trial.stage.requests
        assert trial.stage.tokens.input_tokens == (256 + CHAT_TEMPLATE_TOKENS) * trial.stage.requests
    for line in ("trial 0 tokens: ttft p50/p99", "trial 2 tokens: ttft p50/p99", "verdict: "):
        assert line in out[4], out[4][-2000:]
    status = status_from_report(report)
    first = status.trials[0].tokens if status.trials else None
    assert first is not None and first.output_tokens == ANSWER_TOKENS * report.trials[0].stage.requests  # type: ignore[union-attr]
    assert first.ttft_p50_ms == report.trials[0].stage.tokens.ttft.at(50).value_ms  # type: ignore[union-attr]

    # 4. The trace's seconds 5 to 20 replayed on its clock, every request answered in full.
    trace = LoadTestResult.model_validate_json((tmp_path / "trace-result.json").read_text())
    (replayed,) = trace.stages
    assert replayed.errors_by_kind == {} and replayed.requests > 0
    assert "stopped: replayed the trace" in err[5], err[5][-2000:]

    # The server stops with `kill %1` (SIGTERM: it lets go of its port once it has shut down, a moment later).
    wait_for(lambda: port_is_free(PORT), timeout=30, what=f"llama-server to let go of {PORT} after `kill %1`")
