"""Every reason the operator, the optimizer and the status builders can write into a condition or an Event is in
the catalogue (kaliper/api/reasons.py, docs/reference/reasons.md), and the catalogue holds nothing the code cannot
write. The reasons are read from the code itself: the string literals at every place a reason is given."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from kaliper.api.reasons import REASONS, reasons_reference_markdown
from tests.support.paths import REPO

PACKAGE = REPO / "operator" / "kaliper"
CAMEL_CASE = re.compile(r"^[A-Z][a-zA-Z]+$")
# A call by this name -> the position of its reason argument (conditions, Events, failures, kstatus readiness).
REASON_ARGUMENT = {
    "condition": 2,  # condition(type, ok, reason, message)
    "_condition": 2,
    "status_condition": 2,  # a ModelDeployment's
    "with_condition": 3,  # with_condition(conditions, type, ok, reason, ...)
    "fail": 0,  # fail(reason, message)
    "failed": 1,  # a Cleanup's failed(message, reason)
    "event": 0,  # event(reason, message)
    "_tell": 1,
    "KStatus": 1,  # KStatus(state, reason, message)
    "FailedGate": 0,
    "OptimizationFailed": 0,  # the optimizer's failure, its report's reason
    "PredictionScore": 1,  # PredictionScore(holds, reason, message, ...)
    "not_scored": 0,  # a prediction check that scored nothing: not_scored(reason, message)
    "NotScored": 0,  # NotScored(reason, message): nothing to score, from metrics/production.py
}
# Calls by those names that give no reason: kopf's decorators, and the step-failure counters (a message, counted).
NOT_REASONS = {"kopf.on.event", "self.failures.failed", "self.failure_log.failed"}
EVENTS = {"kopf.info", "kopf.warn", "kopf.event", "kopf.exception"}  # reason=...
# What a reason position may hold besides literals: a reason passed through from where it was written (each of
# those places is scanned). Anything else (an f-string, a lookup) would hide a reason from the catalogue.
PASSED_THROUGH = {
    "reason",
    "readiness.reason",
    "found.reason",
    "failure.reason",
    "report.reason",
    "complete.reason",
    "checked.reason",  # a prediction check's: PredictionScore's or not_scored's
    "exc.reason",  # a NotScored's
    "progressing.reason",
    # kstatus's fallback when no condition gives a reason yet: the phase, "Pending" before the first step (a
    # finished phase has its Complete condition's reason, a running one its Progressing condition's).
    "phase",
}


def strings(node: ast.expr) -> Iterator[str | ast.expr]:
    """The literals an expression can evaluate to, and what else it can (to be judged)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):
        yield from strings(node.body)
        yield from strings(node.orelse)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from strings(value)
    else:
        yield node


def call_reasons(node: ast.Call) -> list[ast.expr]:
    called = ast.unparse(node.func)
    if called in NOT_REASONS:
        return []
    if called in EVENTS:
        return [k.value for k in node.keywords if k.arg == "reason"]
    position = REASON_ARGUMENT.get(called.rsplit(".", 1)[-1])
    if position is None or len(node.args) <= position or isinstance(node.args[position], ast.Starred):
        return []
    return [node.args[position]]


def given_reasons(node: ast.AST) -> list[ast.expr]:
    """The expressions a node gives as reasons: a call's reason argument; in a function that passes a variable
    named `reason` on, what it assigns to it; the optimizer's `report.reason`; a ModelDeployment's decided
    conditions and a run's Degraded condition."""
    if isinstance(node, ast.Call):
        return call_reasons(node)
    given: list[ast.expr] = []
    if isinstance(node, ast.FunctionDef):
        calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
        if any(isinstance(g, ast.Name) and g.id == "reason" for c in calls for g in call_reasons(c)):
            given += [a.value for a in ast.walk(node) if isinstance(a, ast.Assign)
                      for t in a.targets if isinstance(t, ast.Name) and t.id == "reason"]  # fmt: skip
        if node.name == "degraded_condition":  # returns (ok, reason, message)
            returned = [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
            given += [r.elts[1] for r in returned if isinstance(r, ast.Tuple)]
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            given += [v for t, v in zip(target.elts, value.elts, strict=True) if ast.unparse(t) == "report.reason"]
        elif ast.unparse(target) == "report.reason":
            given.append(value)
        if isinstance(target, ast.Name) and target.id == "decided" and isinstance(value, ast.List):
            given += [row.elts[2] for row in value.elts if isinstance(row, ast.Tuple)]  # (type, ok, reason)
    return given


def reasons_in_code() -> tuple[dict[str, list[str]], list[str]]:
    """Each literal reason with where it is written, and the reason positions holding anything unexpected."""
    found: dict[str, list[str]] = {}
    unexpected: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            for given in given_reasons(node):
                for value in strings(given):
                    where = f"{path.relative_to(PACKAGE)}:{given.lineno}"
                    if isinstance(value, str):
                        if CAMEL_CASE.match(value):
                            found.setdefault(value, []).append(where)
                    elif ast.unparse(value) not in PASSED_THROUGH:
                        unexpected.append(f"{where}: {ast.unparse(value)}")
    return found, unexpected


def test_every_reason_the_code_writes_is_in_the_catalogue_and_nothing_else() -> None:
    found, unexpected = reasons_in_code()
    assert unexpected == []
    assert sorted(set(found) - set(REASONS)) == []
    assert sorted(set(REASONS) - set(found)) == []
    # The scan sees each way a reason is written (a few of each, literally).
    assert "controllers/profilerun.py" in found["WaitingForTarget"][0]
    assert {"TrialFailed", "TrialSkipped", "TrialSucceeded", "RolloutStuck", "MetricsUnavailable"} <= set(found)
    assert "optimize/engine.py" in found["Interrupted"][0] and "profiling/outcome.py" in found["Regressed"][0]
    assert len(REASONS) == 60


def test_a_reason_hidden_in_an_f_string_is_found(tmp_path: Path) -> None:
    module = ast.parse('self.event(f"Trial{report.status}", "message")\nkopf.warn(body, reason=word, message="m")')
    given = [ast.unparse(value) for node in ast.walk(module) for g in given_reasons(node) for value in strings(g)]
    assert given == ["f'Trial{report.status}'", "word"]


def test_the_reference_page_lists_every_reason_under_its_resource() -> None:
    page = reasons_reference_markdown()
    assert page.count("\n| `") == 61  # Succeeded is under ProfileRun and ModelOptimization both
    assert "| `RolloutStuck` | Degraded=True, Stalled=True |" in page
    assert "| `SlowerThanProfiled` | PredictionHolds=False; a Warning Event when it changes |" in page
    assert "## Every kind\n" in page and "## Cleanup\n" in page
