from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from kaliper.optimize.flops import FlopsEstimate, NodeFlops
from kaliper.optimize.profile import kernel_times, profile_from, profile_model
from kaliper.report.optimization import ModelProfile, OperatorTime, OperatorTypeTime
from tests.support.cpu import NCHWC_BLOCK
from tests.support.graphs import cnn_model


def _node(name: str, op: str, ts: int, dur: int) -> dict[str, Any]:
    """A Node event as ONNX Runtime 1.32 writes it (args trimmed to a few of the real ones)."""
    args = {"op_name": op, "provider": "CPUExecutionProvider", "node_index": "0", "parameter_size": "0"}
    return {
        "cat": "Node",
        "pid": 7,
        "tid": 7,
        "dur": dur,
        "ts": ts,
        "ph": "X",
        "name": f"{name}_kernel_time",
        "args": args,
    }


def _session(name: str, ts: int, dur: int) -> dict[str, Any]:
    return {"cat": "Session", "pid": 7, "tid": 7, "dur": dur, "ts": ts, "ph": "X", "name": name, "args": {}}


# Three inferences: a warm-up then two measured ones; each node event is followed, as ONNX Runtime writes
# them, by its run's SequentialExecutor::Execute and model_run. The If's time holds its branch's node.
TRACE = [
    _session("model_loading_uri", 4, 2977),
    _session("session_initialization", 4596, 9717),
    _node("r_nchwc", "Conv", 14773, 215),
    _node("fc", "Gemm", 15099, 26),
    _session("SequentialExecutor::Execute", 14770, 362),
    _session("model_run", 14749, 391),
    _node("r_nchwc", "Conv", 15581, 48),
    _node("inner_neg", "Neg", 15655, 11),
    _node("branch", "If", 15650, 30),
    _node("fc", "Gemm", 15687, 22),
    _session("SequentialExecutor::Execute", 15580, 134),
    _session("model_run", 15570, 148),
    _node("r_nchwc", "Conv", 15761, 37),
    _node("inner_relu", "Relu", 15805, 9),
    _node("branch", "If", 15800, 25),
    _node("fc", "Gemm", 15853, 18),
    _session("SequentialExecutor::Execute", 15760, 116),
    _session("model_run", 15756, 123),
]


def test_kernel_times_average_the_last_runs() -> None:
    times = kernel_times(TRACE, 2)
    assert times == {
        "r_nchwc": ("Conv", 42.5),  # (48 + 37) / 2
        "inner_neg": ("Neg", 5.5),  # 11 / 2: ran in one of the two
        "fc": ("Gemm", 20.0),  # (22 + 18) / 2
        "inner_relu": ("Relu", 4.5),  # 9 / 2
    }
    assert list(times) == ["r_nchwc", "inner_neg", "fc", "inner_relu"]


def test_kernel_times_over_every_run() -> None:
    times = kernel_times(TRACE, 3)
    assert times["r_nchwc"] == ("Conv", 100.0)  # (215 + 48 + 37) / 3
    assert times["fc"] == ("Gemm", 22.0)  # (26 + 22 + 18) / 3


def test_kernel_times_refuse_more_runs_than_the_trace_holds() -> None:
    with pytest.raises(ValueError, match="3 inferences"):
        kernel_times(TRACE, 4)
    with pytest.raises(ValueError):
        kernel_times(TRACE, 0)


def _save_cnn(folder: Path) -> Path:
    path = folder / "model.onnx"
    onnx.save(cnn_model(), path)
    return path


def _options(level: ort.GraphOptimizationLevel = ort.GraphOptimizationLevel.ORT_ENABLE_ALL) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = level
    return options


def test_kernel_times_on_a_real_trace(tmp_path: Path) -> None:
    options = _options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "trace")
    session = ort.InferenceSession(str(_save_cnn(tmp_path)), options, providers=["CPUExecutionProvider"])
    for _ in range(4):
        session.run(None, {"x": np.ones((1, 3, 32, 32), np.float32)})
    trace = json.loads(Path(session.end_profiling()).read_text())
    assert sum(1 for e in trace if e["name"] == "model_run") == 4
    times = kernel_times(trace, 3)
    assert [(node, op) for node, (op, _) in times.items()] == [
        ("conv", "Conv"),
        ("relu", "Relu"),
        ("pool", "MaxPool"),
        ("flatten", "Flatten"),
        ("fc", "Gemm"),
    ]
    assert times["conv"][1] > 0
    assert all(time >= 0 for _, time in times.values())


EXAMPLE = FlopsEstimate(
    nodes=[
        NodeFlops("conv", "Conv", 450560),
        NodeFlops("relu", "Relu", 8192),
        NodeFlops("pool", "MaxPool", 8192),
        NodeFlops("flatten", "Flatten", 0),
        NodeFlops("fc", "Gemm", 40970),
    ],
    total=507914,
    by_op_type={"Conv": 450560, "Relu": 8192, "MaxPool": 8192, "Flatten": 0, "Gemm": 40970},
    without_estimate=[],
)


def test_profile_from_times_and_estimate() -> None:
    # What ONNX Runtime ran: Conv+Relu as one NCHWc Conv, its MaxPool, a reorder it added, Flatten, Gemm.
    times = {
        "r_nchwc": ("Conv", 40.0),
        "p_nchwc": ("MaxPool", 10.0),
        "ReorderOutput": ("ReorderOutput", 15.0),
        "flatten": ("Flatten", 5.0),
        "fc": ("Gemm", 20.0),
    }
    profile = profile_from("original", EXAMPLE, 20714, times, runs=20, batch_size=1)
    assert profile == ModelProfile(
        model="original",
        batch_size=1,
        runs=20,
        parameters=20714,
        flops=507914,
        nodes_without_estimate=[],
        kernel_time_us=90.0,
        operators=[
            OperatorTime(node="r_nchwc", op_type="Conv", time_us=40.0, time_percent=44.44),  # 40 / 90
            OperatorTime(node="fc", op_type="Gemm", time_us=20.0, time_percent=22.22, flops=40970),
            OperatorTime(node="ReorderOutput", op_type="ReorderOutput", time_us=15.0, time_percent=16.67),
            OperatorTime(node="p_nchwc", op_type="MaxPool", time_us=10.0, time_percent=11.11),
            OperatorTime(node="flatten", op_type="Flatten", time_us=5.0, time_percent=5.56, flops=0),
        ],
        operator_types=[
            OperatorTypeTime(op_type="Conv", nodes=1, time_us=40.0, time_percent=44.44, flops=450560),
            OperatorTypeTime(op_type="Gemm", nodes=1, time_us=20.0, time_percent=22.22, flops=40970),
            OperatorTypeTime(op_type="ReorderOutput", nodes=1, time_us=15.0, time_percent=16.67),
            OperatorTypeTime(op_type="MaxPool", nodes=1, time_us=10.0, time_percent=11.11, flops=8192),
            OperatorTypeTime(op_type="Flatten", nodes=1, time_us=5.0, time_percent=5.56, flops=0),
            OperatorTypeTime(op_type="Relu", nodes=1, flops=8192),  # fused away: no time
        ],
        graph_nodes=[
            OperatorTime(node="conv", op_type="Conv", flops=450560),
            OperatorTime(node="relu", op_type="Relu", flops=8192),
            OperatorTime(node="pool", op_type="MaxPool", flops=8192),
            OperatorTime(node="flatten", op_type="Flatten", time_us=5.0, time_percent=5.56, flops=0),
            OperatorTime(node="fc", op_type="Gemm", time_us=20.0, time_percent=22.22, flops=40970),
        ],
    )


def test_profile_from_a_fused_node_keeping_its_name() -> None:
    times = {"conv": ("FusedConv", 3.0), "pool": ("MaxPool", 1.0), "Gemm_4": ("Gemm", 1.0)}
    profile = profile_from("graph", EXAMPLE, 20714, times, runs=5)
    assert profile.operators == [
        OperatorTime(node="conv", op_type="FusedConv", time_us=3.0, time_percent=60.0, flops=450560),
        OperatorTime(node="Gemm_4", op_type="Gemm", time_us=1.0, time_percent=20.0),
        OperatorTime(node="pool", op_type="MaxPool", time_us=1.0, time_percent=20.0, flops=8192),
    ]
    assert [(t.op_type, t.nodes, t.time_us) for t in profile.operator_types] == [
        ("FusedConv", 1, 3.0),
        ("Gemm", 1, 1.0),
        ("MaxPool", 1, 1.0),
        ("Conv", 1, None),
        ("Relu", 1, None),
        ("Flatten", 1, None),
    ]


def _check_structure(profile: ModelProfile) -> None:
    times = [o.time_us for o in profile.operators]
    assert all(t is not None and t >= 0 for t in times)
    assert times == sorted(times, reverse=True)
    assert abs(sum(o.time_percent or 0 for o in profile.operators) - 100) <= 0.005 * len(profile.operators)
    assert profile.kernel_time_us == pytest.approx(sum(times), abs=0.001 * len(times))
    typed = [t.time_us for t in profile.operator_types if t.time_us is not None]
    assert typed == sorted(typed, reverse=True)
    assert abs(sum(t.time_percent or 0 for t in profile.operator_types) - 100) <= 0.005 * len(profile.operators)


def test_profile_model_without_graph_optimizations(tmp_path: Path) -> None:
    options = _options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    feeds = {"x": np.ones((2, 3, 32, 32), np.float32)}
    profile = profile_model(_save_cnn(tmp_path), "original", feeds, runs=5, session_options=options, batch_size=2)
    _check_structure(profile)
    assert (profile.model, profile.runs, profile.batch_size) == ("original", 5, 2)
    assert profile.parameters == 20714
    assert profile.flops == 1015828  # 2 * 507914: the feeds' batch of 2
    assert (profile.layout, profile.nchwc_block_size) == ("NCHW", None)  # on every CPU: no layout change
    assert profile.nodes_without_estimate == []
    expected = {"conv": 901120, "relu": 16384, "pool": 16384, "flatten": 0, "fc": 81940}
    assert {o.node: o.flops for o in profile.operators} == expected
    assert [(n.node, n.flops) for n in profile.graph_nodes] == list(expected.items())
    assert all(n.time_us is not None for n in profile.graph_nodes)
    assert {(t.op_type, t.nodes) for t in profile.operator_types} == {
        ("Conv", 1),
        ("Relu", 1),
        ("MaxPool", 1),
        ("Flatten", 1),
        ("Gemm", 1),
    }
    assert all(t.time_us is not None for t in profile.operator_types)


# The CNN's conv (3->8 channels, 3x3, on 32x32) as ONNX Runtime runs it, per NCHWc block: the layout the
# profile reports, its block, and the conv's FLOPs.
CNN_CONV_BY_LAYOUT = {
    # 8 output channels fill one 8-channel block: 2*(8*32*32)*3*3*3 + 8*32*32 = 450560
    8: ("NCHWc", 8, 450560),
    # padded to one 16-channel block: 2*(16*32*32)*3*3*3 + 16*32*32 = 901120
    16: ("NCHWc", 16, 901120),
    # no NCHWc (ARM): a FusedConv on the model's 8 channels, 450560
    None: ("NCHW", None, 450560),
}


def _conv_flops(by_type: dict[str, int | None]) -> int:
    return sum(by_type.get(t) or 0 for t in ("Conv", "FusedConv"))


def test_profile_model_with_onnx_runtime_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(traces))
    path = _save_cnn(tmp_path)
    options = _options()
    profile = profile_model(
        path, "original", {"x": np.ones((1, 3, 32, 32), np.float32)}, runs=3, session_options=options
    )
    _check_structure(profile)
    # The graph ONNX Runtime runs, as it saves it with the same settings: each of its op types was timed.
    saved = _options()
    saved.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), saved, providers=["CPUExecutionProvider"])
    kept = {node.op_type for node in onnx.load(saved.optimized_model_filepath).graph.node}
    assert {t.op_type for t in profile.operator_types if t.time_us is not None} == kept
    assert {o.op_type for o in profile.operators} == kept
    assert profile.flops == 507914  # the stored graph's: the same on every CPU
    assert profile.graph_nodes[0].flops == 450560
    # Per type, FLOPs of the graph ONNX Runtime ran, which depend on the CPU's layout: the ReLU is fused into
    # the conv, whose 8 output channels are padded to a whole NCHWc block.
    by_type = {t.op_type: t.flops for t in profile.operator_types if t.time_us is not None}
    assert (by_type["Gemm"], by_type["MaxPool"]) == (40970, 8192)
    assert (profile.layout, profile.nchwc_block_size, _conv_flops(by_type)) == CNN_CONV_BY_LAYOUT[NCHWC_BLOCK]
    assert [n.node for n in profile.graph_nodes] == ["conv", "relu", "pool", "flatten", "fc"]
    # The caller's options are as they were, and the trace is gone.
    assert not options.enable_profiling
    assert options.profile_file_prefix == "onnxruntime_profile_"
    assert list(traces.iterdir()) == []
