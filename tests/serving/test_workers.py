"""threads.workers for the built-in server: several processes on one port, each serving, none outliving the
first."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from kaliper.netutil import free_port
from kaliper.serving.examples import make_iris
from tests.support.controlplane import wait_for

BODY = {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}


def server_side_owner(server_port: int, client_port: int, pids: list[int]) -> int | None:
    """Which process holds the server end of the connection from client_port (from /proc/net/tcp's inode
    and each process's open sockets)."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
            inode = fields[9]
    if inode is None:
        return None
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def served_by(port: int, pids: list[int]) -> int | None:
    """Send one request on a new connection and say which process answered it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/v2/models/iris/infer", json.dumps(BODY), {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["model_name"] == "iris"
        return server_side_owner(port, connection.sock.getsockname()[1], pids)
    finally:
        connection.close()


def test_two_workers_share_the_port_and_die_with_the_first(tmp_path: Path) -> None:
    model = make_iris(tmp_path / "iris.onnx")
    port = free_port()
    command = [sys.executable, "-m", "kaliper.serving", "--model", str(model), "--name", "iris"]
    server = subprocess.Popen([*command, "--port", str(port), "--workers", "2"])
    try:
        wait_for(lambda: len(children(server.pid)) == 1 and ready(port), 60, "the server ready, with one worker")
        (worker,) = children(server.pid)
        pids = [server.pid, worker]
        answered: set[int | None] = set()
        wait_for(lambda: answered.add(served_by(port, pids)) or answered >= set(pids), 60, "both processes serving")
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        wait_for(lambda: not alive(worker), 10, "the worker gone after the first process was killed")
    finally:
        if server.poll() is None:
            server.kill()
