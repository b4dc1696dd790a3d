"""Dynamic batching: requests that arrive within max_queue_delay of each other run as one batch.

Rows are concatenated along the first axis (the batch dimension), run once, and the outputs are split back.
The first request of a batch never waits longer than the delay; a batch never exceeds max_batch_size rows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

Arrays = dict[str, np.ndarray]


@dataclass
class Timing:
    queue_s: float = 0.0
    inference_s: float = 0.0
    batch_rows: int = 0


@dataclass
class _Item:
    inputs: Arrays
    rows: int
    enqueued: float
    future: asyncio.Future = field(repr=False)


class DynamicBatcher:
    def __init__(
        self, infer: Callable[[Arrays], Arrays], max_batch_size: int, max_queue_delay_s: float, executor: Executor
    ) -> None:
        self._infer, self.max_rows, self.delay_s, self._executor = infer, max_batch_size, max_queue_delay_s, executor
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._held: _Item | None = None  # a request that did not fit the previous batch
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()

    async def infer(self, inputs: Arrays) -> tuple[Arrays, Timing]:
        rows = next(iter(inputs.values())).shape[0] if inputs else 0
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Item(inputs, rows, time.perf_counter(), future))
        return await future

    async def _next(self, timeout: float | None) -> _Item | None:
        if self._held is not None:
            item, self._held = self._held, None
            return item
        if timeout is None:
            return await self._queue.get()
        try:
            return await asyncio.wait_for(self._queue.get(), max(timeout, 0))
        except TimeoutError:
            return None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self._next(None)
            assert first is not None
            batch, rows = [first], first.rows
            deadline = first.enqueued + self.delay_s
            while rows < self.max_rows:
                item = await self._next(deadline - time.perf_counter())
                if item is None:
                    break
                if rows + item.rows > self.max_rows or not _compatible(first.inputs, item.inputs):
                    self._held = item
                    break
                batch.append(item)
                rows += item.rows
            started = time.perf_counter()
            try:
                outputs = await loop.run_in_executor(self._executor, self._infer, _concatenate(batch))
            except Exception as exc:  # the model failed: every request of the batch gets the error
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(exc)
                continue
            finished = time.perf_counter()
            offset = 0
            for item in batch:
                timing = Timing(started - item.enqueued, finished - started, rows)
                part = {name: _rows(array, offset, item.rows, rows) for name, array in outputs.items()}
                offset += item.rows
                if not item.future.done():
                    item.future.set_result((part, timing))


def _compatible(a: Arrays, b: Arrays) -> bool:
    return a.keys() == b.keys() and all(a[k].shape[1:] == b[k].shape[1:] and a[k].dtype == b[k].dtype for k in a)


def _concatenate(batch: list[_Item]) -> Arrays:
    if len(batch) == 1:
        return batch[0].inputs
    return {name: np.concatenate([item.inputs[name] for item in batch]) for name in batch[0].inputs}


def _rows(array: np.ndarray, offset: int, count: int, total: int) -> np.ndarray:
    """This request's rows of an output; outputs without a batch dimension go to everyone whole."""
    if array.ndim and array.shape[0] == total:
        return array[offset : offset + count]
    return array
