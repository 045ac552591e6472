"""traceql.parallel: results in input order whatever order the tasks finish in, a failure kept with its item,
the same here and on a cluster; no Dask at all when the work stays in this process."""

from __future__ import annotations

import operator
import subprocess
import sys
import threading

import pytest

from tests.paths import DDP_TRACE, ROOT
from traceql.errors import OptionError
from traceql.parallel import Pool, TaskError, check, run_tasks

ITEMS = [{"k": 1}, {}, {"k": 3}, {"k": 4}]


def _as_text(results: list) -> list[str]:
    return [f"{type(r).__name__}: {r}" for r in results]


def test_failures_stay_with_their_item(dask_scheduler: str) -> None:
    serial = run_tasks(operator.getitem, ITEMS, common="k")
    assert serial[::2] == [1, 3] and serial[3] == 4
    assert isinstance(serial[1], TaskError) and str(serial[1]).startswith("{}: internal error (KeyError: 'k')")
    done: list[int] = []
    remote = run_tasks(operator.getitem, ITEMS, common="k", scheduler=dask_scheduler,
                       progress=lambda n, total, name: done.append(n))
    assert _as_text(remote) == _as_text(serial)
    assert sorted(done) == [1, 2, 3, 4]


def _slow_first(item: dict, key: str) -> int:
    """The first item's task ends last: its result still comes first."""
    import time

    time.sleep(0.2 if item.get(key) == 1 else 0.0)
    return operator.getitem(item, key)


def test_tasks_two_at_a_time_here_come_in_order_with_their_failures() -> None:
    serial = run_tasks(_slow_first, ITEMS, common="k")
    done: list[tuple[int, str]] = []
    with Pool() as pool:
        paired = list(pool.map(_slow_first, ITEMS, common="k", at_once=2, name=str,
                               progress=lambda n, total, name: done.append((n, name))))
    assert [item for item, _ in paired] == ITEMS
    assert _as_text([r for _, r in paired]) == _as_text(serial)
    assert done == [(i, str(item)) for i, item in enumerate(ITEMS, 1)]
    with Pool() as pool:
        where = [r for _, r in pool.map(lambda _item, _c: threading.current_thread().name, ITEMS, at_once=2)]
        alone = [r for _, r in pool.map(lambda _item, _c: threading.current_thread().name, ITEMS)]
    assert all(w.startswith("traceql-task") for w in where) and set(alone) == {"MainThread"}


@pytest.mark.parametrize("workers,scheduler,phrase", [(0, None, "at least 1"), (2, "tcp://h:1", "exclude each other"),
                                                      (1, " ", "give the scheduler's address")])
def test_options(workers: int, scheduler: str | None, phrase: str) -> None:
    with pytest.raises(OptionError, match=phrase):
        check(workers, scheduler)


def test_serial_work_never_loads_dask() -> None:
    code = ("import sys; from traceql.commands.detect import detect; "
            f"detect({str(DDP_TRACE)!r}); print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
