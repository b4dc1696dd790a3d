"""Kubernetes quantities ("500m", "2Gi") and Go-style durations ("30s", "1h30m").

Pure parsing functions shared by the API models (validation), the builders and the reports. The regular
expressions are also emitted into the CRD schemas, so the API server and `kaliper validate` accept exactly
the same strings.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# A non-negative Kubernetes quantity: a decimal number with an optional binary (Ki..Ei), decimal (n, u, m,
# k, M, G, T, P, E) or exponent suffix. Kubernetes also accepts a sign; a negative resource is never
# meaningful here, so the sign is left out.
QUANTITY_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
# CPU is counted in cores or millicores; "2Gi" of CPU is a typo worth catching.
CPU_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)m?$"
# Go's time.ParseDuration format without a sign (CEL's duration() reads the same strings).
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"

_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
_CPU_RE = re.compile(CPU_PATTERN)
_DURATION_RE = re.compile(DURATION_PATTERN)
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_DURATION_UNITS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


class UnitError(ValueError):
    """A quantity or duration string that does not parse; the message says what is accepted."""


def parse_quantity(value: str | int | float) -> Decimal:
    """The numeric value of a Kubernetes quantity: parse_quantity("1500m") == Decimal("1.5")."""
    text = _normalise(value)
    if not _QUANTITY_RE.match(text):
        raise UnitError(
            f"{text!r} is not a Kubernetes quantity; write a number with an optional suffix, "
            "such as 500m, 2, 512Mi, 2Gi or 1e9"
        )
    number, suffix = _split_suffix(text)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix.startswith(("e", "E")):
        return number * Decimal(10) ** int(suffix[1:])
    return number * _DECIMAL[suffix]


def parse_cpu(value: str | int | float) -> Decimal:
    """CPU cores as a number: parse_cpu("250m") == Decimal("0.25")."""
    text = _normalise(value)
    if not _CPU_RE.match(text):
        raise UnitError(f"{text!r} is not a CPU quantity; write cores (1, 0.5, 2) or millicores (500m, 250m)")
    return parse_quantity(text)


def parse_duration(value: str) -> float:
    """Seconds in a Go-style duration: parse_duration("1m30s") == 90.0."""
    text = str(value).strip()
    if not _DURATION_RE.match(text):
        raise UnitError(
            f"{text!r} is not a duration; write a number and a unit (ms, s, m, h), such as 500ms, 30s, 5m or 1h30m"
        )
    total = sum(
        (Decimal(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART_RE.findall(text)),
        Decimal(0),
    )
    return float(total)


def format_cpu(cores: float | Decimal) -> str:
    """The shortest conventional spelling of a CPU amount: 0.25 -> "250m", 2.0 -> "2"."""
    millicores = round(Decimal(str(cores)) * 1000)
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return f"{millicores}m"


def format_memory(num_bytes: float | Decimal) -> str:
    """Memory rounded up to a whole MiB (or GiB when exact), as Kubernetes users write it."""
    mib = -(-int(Decimal(str(num_bytes))) // 2**20)
    if mib % 1024 == 0 and mib:
        return f"{mib // 1024}Gi"
    return f"{mib}Mi"


def _normalise(value: str | int | float) -> str:
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a quantity")
    return str(value).strip()


def _split_suffix(text: str) -> tuple[Decimal, str]:
    match = re.match(r"^([0-9]*\.?[0-9]*)(.*)$", text)
    assert match is not None  # guaranteed by the pattern check in the caller
    number_text, suffix = match.groups()
    try:
        return Decimal(number_text), suffix
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits only valid decimals
        raise UnitError(f"{text!r} is not a number") from exc
