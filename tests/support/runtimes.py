"""A runtime's command line on both paths, as the tests in tests/runtimes read it: the serving container of
the Deployment the builders make, and the argv of a local replica."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import server_command
from kaliper.manifests.modeldeployment import build_deployment


def deployment(**fields: Any) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate(fields)


def pod_container(spec: ModelDeploymentSpec, name: str = "m") -> dict[str, Any]:
    """The serving container's command, args and env (the keys it has)."""
    container = build_deployment(name, "ml", "uid", spec, "kaliper:test")["spec"]["template"]["spec"]["containers"][0]
    return {k: container[k] for k in ("image", "command", "args", "env") if k in container}


def local_argv(spec: ModelDeploymentSpec, workdir: Path, grpc_port: int | None = None) -> list[str]:
    return server_command(spec, Path("/models/m.file"), "m", 9000, workdir, grpc_port).argv()


def help_flags(command: list[str], indent: int = 0) -> frozenset[str]:
    """Every flag a server's --help lists: each option line (starting at `indent` spaces: 0 for llama.cpp's, 2
    for argparse's) begins with its spellings ("-c,    --ctx-size N"; "--max-num-seqs MAX_NUM_SEQS, -n ..."),
    separated by commas, before the gap to its description."""
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120)
    flags = set()
    for line in (shown.stdout + shown.stderr).splitlines():
        body = line[indent:]
        if line[:indent].strip() or not body.startswith("-") or body.startswith("--help=") or body.startswith("---"):
            continue
        spellings = re.split(r"(?<![,\s])\s{2,}", body, maxsplit=1)[0]
        flags |= {part.split()[0] for part in spellings.split(",") if part.strip().startswith("-")}
    return frozenset(flags)
