"""Whether each configuration of a sweep fits its memory limit, decided before any trial starts: the runtime's
estimate of the server's peak (runtimes.memory) against resources.limits.memory. A configuration that cannot
fit is left out of the run with the arithmetic; one that fits by the estimate but whose server never came up
says so beside the server's own error, so each run checks the estimate against reality. Pure: the executor
reads the model's header (ShapeOf)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kaliper.api.model_shape import ModelShape
from kaliper.api.units import parse_quantity
from kaliper.profiling.plan import Configuration
from kaliper.runtimes import runtime_of
from kaliper.runtimes.memory import MemoryNeed, mib

ShapeOf = Callable[[Configuration], ModelShape | None]
"""The model a configuration serves, read from its file's header by the executor; None where it cannot be read
there (a model only the cluster holds) or the runtime has no estimate."""


def no_shapes(configuration: Configuration) -> ModelShape | None:
    return None


@dataclass(frozen=True)
class Fit:
    """A configuration's estimate against its memory limit."""

    need: MemoryNeed
    limit: int

    @property
    def fits(self) -> bool:
        return self.need.total <= self.limit

    def left_out(self) -> str:
        """Why the configuration was left out: the arithmetic and by how much."""
        return (
            f"cannot fit resources.limits.memory {mib(self.limit)}: the server needs {mib(self.need.total)} "
            f"({self.need.words()}), {mib(self.need.total - self.limit)} more; raise the limit, or lower the "
            "context, the slots or the KV cache's type"
        )

    def refused(self, error: str, longest: int = 2048) -> str:
        """The words of a trial whose configuration fits by the estimate but whose server never came up (said
        once: a run's status is read back on every step), at most `longest` characters (a status message's)."""
        note = f" (it fits by the estimate, {mib(self.need.total)} of {mib(self.limit)}: the server refused it anyway)"
        return error if error.endswith(note) else error[: longest - len(note)] + note


def fits(configurations: list[Configuration], shape_of: ShapeOf) -> dict[int, Fit]:
    """Each configuration's fit, by its index, where its runtime estimates memory and it has a memory limit."""
    found: dict[int, Fit] = {}
    for config in configurations:
        template = config.deployment
        limits = template.resources.limits if template is not None and template.resources else None
        if template is None or limits is None or not limits.memory:
            continue
        shape = shape_of(config)
        need = runtime_of(template).memory_need(template, shape) if shape is not None else None
        if need is not None:
            found[config.index] = Fit(need, int(parse_quantity(limits.memory)))
    return found
