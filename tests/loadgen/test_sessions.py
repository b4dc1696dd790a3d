"""A chat session's memory (pure): what each turn carries, and when a session starts over."""

from __future__ import annotations

from kaliper.loadgen.generation import Session

Q1 = [{"role": "user", "content": "q1"}]
Q2 = [{"role": "user", "content": "q2"}]


def test_each_turn_keeps_the_question_and_the_answer_until_the_last_turn() -> None:
    session = Session(turns=3)
    session.advance(Q1, "a1")
    assert session.messages == [*Q1, {"role": "assistant", "content": "a1"}]
    session.advance(Q2, "a2")
    assert session.messages == [
        *Q1,
        {"role": "assistant", "content": "a1"},
        *Q2,
        {"role": "assistant", "content": "a2"},
    ]
    session.advance(Q1, "a3")  # the third turn was the last: a new session begins
    assert (session.messages, session.taken) == ([], 0)


def test_a_failed_turn_ends_its_session() -> None:
    session = Session(turns=5)
    session.advance(Q1, "a1")
    session.advance(Q2, None)
    assert (session.messages, session.taken) == ([], 0)


def test_the_history_carries_the_answer_without_its_thinking_unless_the_session_keeps_it() -> None:
    session = Session(turns=3)
    session.advance(Q1, " ti ser", " ka li")
    assert session.messages == [*Q1, {"role": "assistant", "content": " ti ser"}]
    keeping = Session(turns=3, keeps_reasoning=True)
    keeping.advance(Q1, " ti ser", " ka li")
    assert keeping.messages == [*Q1, {"role": "assistant", "content": " ti ser", "reasoning": " ka li"}]
