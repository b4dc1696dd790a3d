"""Every kind of failure the load generator counts (kaliper.loadgen.faults) is a row of docs/fault-model.md, and
whether the target answered comes from the kind's type, not its name."""

from __future__ import annotations

import grpc

from kaliper.loadgen.faults import NO_CONNECTION, TIMEOUT, Family, Fault, Stream, grpc_status, http_status, transport
from kaliper.loadgen.grpc_calls import fault_kind
from tests.support.paths import REPO


def counted_as() -> set[str]:
    """The "counted as" column of the fault model's table, every row."""
    rows = [line.split("|") for line in (REPO / "docs" / "fault-model.md").read_text().splitlines()]
    return {row[3] for row in rows if len(row) == 7 and row[1].strip() not in ("what the server does", "---")}


def test_every_kind_is_a_row_of_the_fault_model() -> None:
    cells = counted_as()
    kinds = [kind.value for kind in Stream] + [TIMEOUT.name, NO_CONNECTION.name]
    # A family's kinds named by a pattern: a status, a code, an exception's name.
    kinds += ["HTTP <status>", "gRPC <CODE>", "ConnectionRefusedError", "ConnectionResetError"]
    missing = [kind for kind in kinds if not any(f"`{kind}`" in cell for cell in cells)]
    assert missing == []


def test_whether_the_target_answered_comes_from_the_kind() -> None:
    assert [kind.answered for kind in (http_status(503), grpc_status("UNAVAILABLE"), TIMEOUT)] == [True] * 3
    assert (NO_CONNECTION.answered, transport(ConnectionRefusedError()).answered) == (False, False)
    # The same exception after the answer began (a stream reset after its status line) was answered.
    assert transport(ConnectionResetError(), after_answer=True).answered is True
    assert all(kind.kind.answered and kind.kind.family == Family.STREAM for kind in Stream)
    assert transport(TimeoutError()) == TIMEOUT and Fault.of(ConnectionRefusedError("no")).answered is False


def test_a_grpc_unavailable_is_an_answer_unless_the_transport_says_no_connection() -> None:
    assert fault_kind(grpc.StatusCode.UNAVAILABLE, "overloaded, try later") == grpc_status("UNAVAILABLE")
    assert fault_kind(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses") == NO_CONNECTION
    assert fault_kind(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") == TIMEOUT
