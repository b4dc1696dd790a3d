from decimal import Decimal

import pytest

from kaliper.api.units import UnitError, format_cpu, format_memory, parse_cpu, parse_duration, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("512Mi", Decimal(512 * 2**20)),
        ("2Gi", Decimal(2 * 2**30)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("1E-3", Decimal("0.001")),
        ("100k", Decimal(100_000)),
        (3, Decimal(3)),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "2GB", "-1", "1.2.3", "Gi", "1 Gi", "one"])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(UnitError, match="not a Kubernetes quantity"):
        parse_quantity(text)


def test_parse_cpu_accepts_cores_and_millicores_only() -> None:
    assert parse_cpu("250m") == Decimal("0.25")
    assert parse_cpu("4") == Decimal(4)
    with pytest.raises(UnitError, match="millicores"):
        parse_cpu("2Gi")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("500ms", 0.5), ("1m30s", 90), ("1h", 3600), ("1.5h", 5400), ("250us", 0.00025), ("0s", 0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "-5s", "5 s", "1d", "s", ""])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UnitError, match="not a duration"):
        parse_duration(text)


def test_format_round_trips() -> None:
    assert format_cpu(0.25) == "250m"
    assert format_cpu(2) == "2"
    assert format_cpu(1.5) == "1500m"
    assert format_memory(300 * 2**20 + 1) == "301Mi"
    assert format_memory(2 * 2**30) == "2Gi"
    assert parse_cpu(format_cpu(0.731)) == Decimal("0.731")
