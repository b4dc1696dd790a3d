"""Where a model's time goes: ONNX Runtime's own profiler per node, with the graph's FLOPs estimate beside it.

The profiler writes a Chrome trace: a JSON list of complete events. Each inference is a `model_run` event
("cat": "Session"), and each node it ran a "cat": "Node" event named `<node>_kernel_time` whose args carry
`op_name`, all on the same microsecond clock. Its kernel times depend on the thread settings, so the caller
passes the session options the model is served with. On GPU providers a node's kernel time is what the host
spent on it (mostly launching), not the device's time.
"""

from __future__ import annotations

import bisect
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from kaliper.optimize.flops import FlopsEstimate, estimate, parameter_count
from kaliper.optimize.layout import graph_layout, nchwc_block_size
from kaliper.report.optimization import ModelProfile, OperatorTime, OperatorTypeTime

# Untimed inferences before the profiled ones: the first run grows the memory arena and pre-packs weights.
WARMUP_RUNS = 3
KERNEL_SUFFIX = "_kernel_time"
# Their kernel time contains the nodes of their subgraphs, which the trace times on their own (ONNX
# Runtime's own profile_result_processor leaves them out too).
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def kernel_times(trace: list[dict[str, Any]], runs: int) -> dict[str, tuple[str, float]]:
    """Mean kernel time per inference, microseconds, and op type of each node, over the last `runs`
    inferences of the trace; earlier ones are warm-ups (the first also pays for arena growth and weight
    pre-packing). A node's events are summed per inference (subgraph nodes may run 0 or many times), then
    divided by `runs`. Nodes come in the order they first ran."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in trace if e.get("name") == "model_run")
    if len(windows) < runs:
        raise ValueError(f"the trace holds {len(windows)} inferences, fewer than the {runs} to average")
    windows = windows[-runs:]
    starts = [start for start, _ in windows]
    totals: dict[str, tuple[str, float]] = {}
    for event in trace:
        name, args = event.get("name", ""), event.get("args", {})
        if event.get("cat") != "Node" or not name.endswith(KERNEL_SUFFIX) or args.get("op_name") in CONTROL_FLOW:
            continue
        run = bisect.bisect_right(starts, event["ts"]) - 1
        if run < 0 or event["ts"] > windows[run][1]:
            continue
        node = name.removesuffix(KERNEL_SUFFIX)
        op_type, total = totals.get(node, (args.get("op_name", ""), 0.0))
        totals[node] = (op_type, total + event["dur"])
    return {node: (op_type, total / runs) for node, (op_type, total) in totals.items()}


def profile_model(
    path: Path,
    model_id: str,
    feeds: dict[str, np.ndarray],
    runs: int = 20,
    session_options: ort.SessionOptions | None = None,
    providers: list[str] | None = None,
    batch_size: int = 1,
) -> ModelProfile:
    """Profile `runs` inferences of the model at `path` on `feeds` (after WARMUP_RUNS untimed ones). The
    FLOPs are estimated at the feeds' shapes, on the stored graph (the model's total and `graphNodes`) and on
    the graph ONNX Runtime ran after its own optimizations (the per-node and per-type rows, whose names and
    types are the profiler's; with its layout, on which those FLOPs depend). The given options are used as
    they are, with profiling turned on for this session only: they are restored afterwards, and the trace
    is deleted."""
    model = onnx.load(str(path), load_external_data=False)
    shapes = {name: array.shape for name, array in feeds.items()}
    flops = estimate(model, batch_size, input_shapes=shapes)
    trace, ran_model = _trace(path, feeds, WARMUP_RUNS + runs, session_options or ort.SessionOptions(), providers)
    ran = estimate(ran_model, batch_size, input_shapes=shapes) if ran_model is not None else None
    profile = profile_from(model_id, flops, parameter_count(model), kernel_times(trace, runs), runs, batch_size, ran)
    if ran_model is not None:
        profile.layout = graph_layout(ran_model)
        profile.nchwc_block_size = nchwc_block_size() if profile.layout == "NCHWc" else None
    return profile


def profile_from(
    model_id: str,
    flops: FlopsEstimate,
    parameters: int,
    times: Mapping[str, tuple[str, float]],
    runs: int,
    batch_size: int = 1,
    ran: FlopsEstimate | None = None,
) -> ModelProfile:
    """Assemble the profile. Nodes ONNX Runtime ran take the FLOPs of the node of the same name in the graph
    it ran (`ran`; without it, the stored graph: ONNX Runtime keeps the name when it fuses into a node, so a
    FusedConv gets its Conv's count), and stored nodes take the time of the run node of the same name. Per
    op type, `nodes` counts the nodes that were timed, or for a type with no time, the graph's nodes; its
    FLOPs are those of the graph it ran."""
    total = sum(time for _, time in times.values())
    # Where the graph ONNX Runtime ran has a node the estimate does not know (a contrib operator without a
    # rule), a node or type falls back to the stored graph's figure for the same name.
    stored_by_name = {n.name: n.flops for n in flops.nodes}
    ran_by_name = {n.name: n.flops for n in ran.nodes} if ran is not None else {}
    stored = {name: ran_by_name.get(name) or stored_by_name.get(name) for name in times}
    operators = [
        OperatorTime(
            node=node, op_type=op, time_us=_us(time), time_percent=_percent(time, total), flops=stored.get(node)
        )
        for node, (op, time) in times.items()
    ]
    graph_nodes = [
        OperatorTime(
            node=n.name,
            op_type=n.op_type,
            time_us=_us(times[n.name][1]) if n.name in times else None,
            time_percent=_percent(times[n.name][1], total) if n.name in times else None,
            flops=n.flops,
        )
        for n in flops.nodes
    ]
    return ModelProfile(
        model=model_id,
        batch_size=batch_size,
        runs=runs,
        parameters=parameters,
        flops=flops.total,
        nodes_without_estimate=flops.without_estimate,
        kernel_time_us=_us(total),
        operators=sorted(operators, key=lambda o: (-(o.time_us or 0.0), o.node)),
        operator_types=_by_op_type(ran or flops, flops, times, total),
        graph_nodes=graph_nodes,
    )


def _by_op_type(
    ran: FlopsEstimate, stored_graph: FlopsEstimate, times: Mapping[str, tuple[str, float]], total: float
) -> list[OperatorTypeTime]:
    timed: dict[str, tuple[int, float]] = {}
    for op, time in times.values():
        count, summed = timed.get(op, (0, 0.0))
        timed[op] = (count + 1, summed + time)
    counted: dict[str, int] = {}
    for n in ran.nodes:
        counted[n.op_type] = counted.get(n.op_type, 0) + 1
    rows = []
    for op in timed.keys() | counted.keys():
        count, time = timed[op] if op in timed else (counted[op], None)
        rows.append(
            OperatorTypeTime(
                op_type=op,
                nodes=count,
                time_us=None if time is None else _us(time),
                time_percent=None if time is None else _percent(time, total),
                flops=ran.by_op_type.get(op, stored_graph.by_op_type.get(op)),
            )
        )
    return sorted(rows, key=lambda r: (r.time_us is None, -(r.time_us or 0.0), -(r.flops or 0), r.op_type))


def _us(time: float) -> float:
    return round(time, 3)


def _percent(time: float, total: float) -> float:
    return round(100 * time / total, 2) if total > 0 else 0.0


def _trace(
    path: Path, feeds: dict[str, np.ndarray], inferences: int, options: ort.SessionOptions, providers: list[str] | None
) -> tuple[list[dict[str, Any]], onnx.ModelProto | None]:
    """Run the model `inferences` times with profiling on; return the trace and the graph ONNX Runtime ran
    (saved as it optimized it; None when it could not save it)."""
    # SessionOptions cannot be copied, so the caller's are switched for this session and restored.
    saved = options.enable_profiling, options.profile_file_prefix, options.optimized_model_filepath
    severity = options.log_severity_level
    try:
        # Saving the NCHWc graph warns that it only runs on this CPU: true, and beside the point here.
        options.log_severity_level = 3
        with tempfile.TemporaryDirectory(prefix="kaliper-profile-") as folder:
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(folder) / "ort")
            options.optimized_model_filepath = str(Path(folder) / "ran.onnx")
            session = ort.InferenceSession(str(path), sess_options=options, providers=providers)
            for _ in range(inferences):
                session.run(None, feeds)
            trace = json.loads(Path(session.end_profiling()).read_text())
            ran = Path(folder) / "ran.onnx"
            return trace, onnx.load(str(ran), load_external_data=False) if ran.exists() else None
    finally:
        options.enable_profiling, options.profile_file_prefix, options.optimized_model_filepath = saved
        options.log_severity_level = severity
