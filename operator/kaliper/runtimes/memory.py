"""What a model server needs in memory, in parts a reader can check: the model's shape as its file's header
gives it, and each part of the need with the arithmetic behind it. Pure: reading a header is the runtime
module's (llamacpp.gguf_shape), comparing with a limit is the plan's (profiling.fit)."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 2**20


@dataclass(frozen=True)
class Part:
    name: str
    bytes: int
    how: str = ""
    """The arithmetic behind it, in words ("4,096 tokens x 8 layers x 2,048 elements at f16")."""

    def words(self) -> str:
        return f"{self.name} {mib(self.bytes)}" + (f" ({self.how})" if self.how else "")


@dataclass(frozen=True)
class MemoryNeed:
    """A server's memory at its peak under load, part by part."""

    parts: tuple[Part, ...]

    @property
    def total(self) -> int:
        return sum(p.bytes for p in self.parts)

    def words(self) -> str:
        return " + ".join(p.words() for p in self.parts)


def mib(size: float) -> str:
    """Bytes as MiB, to one decimal under 10 MiB (a tiny model's parts)."""
    value = size / MIB
    return f"{value:.1f} MiB" if value < 10 else f"{value:,.0f} MiB"
