"""The samples waiting for their label: each key's receipt, oldest first, in columns.

The group-robust post-processor keeps, for every keyed sample it has learned, what it needs to
correct the group risks when the sample's label arrives (:meth:`GroupLosses.correct
<streamfair.dro.group_losses.GroupLosses.correct>`): the update's :class:`~streamfair.dro.group_losses.Receipt`
and the first two moments of the policy's law for the sample.  There can be thousands of them, and
the daemon copies the whole state before every poll (to undo a poll that fails) and writes it at
every checkpoint.  So they are kept as arrays, one row per sample, with a dictionary from key to
row: a copy of the table is a few array copies, not one Python object per sample, and in a
checkpoint each sample takes ``8 (4 + K)`` bytes of binary (``8 (4 + 2 K)`` when the updater uses
the per-group step scales, which are zeros for the softmax updater and then not stored) besides
its key.

A key keeps its place in the arrival order when it is added again (its row is overwritten), and
beyond ``capacity`` keys the oldest are dropped, as in a dictionary trimmed from its front.

Examples
--------
>>> import numpy as np
>>> from streamfair.dro.group_losses import Receipts
>>> table = PendingLabels(n_groups=2, capacity=2)
>>> receipts = Receipts(np.array([0, 1, 2]), np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]),
...                     np.array([0.1, 0.2, 0.3]), np.zeros((3, 2)))
>>> table.add(["a", "b", "c"], receipts, np.zeros(3), np.ones(3))   # "a" is dropped: one expired
1
>>> len(table), "a" in table
(2, False)
>>> receipt, first, second = table.pop("b")
>>> receipt.index, receipt.tau.tolist(), receipt.loss, second
(1, [1.0, 0.0], 0.2, 1.0)
>>> sorted(table.state_dict())                                      # zero step scales are not stored
['first', 'index', 'keys', 'loss', 'second', 'tau']
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import islice

import numpy as np

from .group_losses import Receipt, Receipts

__all__ = ["PendingLabels", "rows_to_columns"]

#: Rows the table holds at least once it holds any (it grows by doubling, and compacts when full).
MIN_ROWS = 64


class PendingLabels:
    """Keyed samples waiting for their label, oldest first, at most ``capacity`` of them.

    Parameters
    ----------
    n_groups
        ``K``, the length of each receipt's ``tau`` and ``scale``.
    capacity
        The most samples kept; beyond it the oldest are dropped.
    """

    def __init__(self, n_groups: int, capacity: int):
        self.n_groups = n_groups
        self.capacity = capacity
        self._rows: dict[Hashable, int] = {}  # key -> its row in the columns, in arrival order
        self._used = 0  # rows written since the last compaction, live or not
        self._columns = _columns(0, n_groups)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._rows

    def add(self, keys: Sequence[Hashable], receipts: Receipts, first: np.ndarray, second: np.ndarray) -> int:
        """Keep sample ``i`` under ``keys[i]`` (distinct keys); drop the oldest beyond ``capacity``.

        ``receipts``, ``first`` and ``second`` have one row per key.  Returns how many were dropped.
        """
        self._reserve(len(keys))
        rows = np.empty(len(keys), dtype=np.int64)
        for i, key in enumerate(keys):
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = self._used
                self._used += 1
            rows[i] = row
        values = {**receipts._asdict(), "first": first, "second": second}
        for name, column in self._columns.items():
            column[rows] = values[name]
        oldest = list(islice(self._rows, max(0, len(self._rows) - self.capacity)))
        for key in oldest:
            del self._rows[key]
        return len(oldest)

    def pop(self, key: Hashable) -> tuple[Receipt, float, float] | None:
        """The receipt and the two moments kept under ``key``, now removed (``None``: not kept)."""
        row = self._rows.pop(key, None)
        if row is None:
            return None
        columns = self._columns
        receipt = Receipt(int(columns["index"][row]), columns["tau"][row].copy(), float(columns["loss"][row]),
                          columns["scale"][row].copy())  # unbound, and its loss its own: the row is no longer live
        return receipt, float(columns["first"][row]), float(columns["second"][row])

    def state_dict(self) -> dict:
        """The keys and their columns, oldest first (copies); ``scale`` only when not all zero."""
        live = self._live()
        state: dict = {"keys": list(self._rows), **{name: column[live] for name, column in self._columns.items()}}
        if not state["scale"].any():
            del state["scale"]
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (a :meth:`state_dict`, or :func:`rows_to_columns` of an older one)."""
        keys = list(state["keys"])
        n = len(keys)
        self._columns = _columns(n, self.n_groups)
        for name, column in self._columns.items():
            values = np.asarray(state.get(name, 0.0))
            if values.ndim and values.size != column.size:
                raise ValueError(f"state's pending {name} must have one row per key, shape {column.shape}, "
                                 f"got shape {values.shape}")
            column[...] = np.reshape(values, column.shape) if values.ndim else values
        self._rows = dict(zip(keys, range(n), strict=True))
        self._used = n

    def _live(self) -> np.ndarray:
        return np.fromiter(self._rows.values(), dtype=np.int64, count=len(self._rows))

    def _reserve(self, n: int) -> None:
        """Room for ``n`` more rows: the live rows moved to the front, in a table twice their need."""
        if self._used + n <= self._columns["index"].shape[0]:
            return
        live = self._live()
        columns = _columns(max(MIN_ROWS, 2 * (live.size + n)), self.n_groups)
        for name, column in columns.items():
            column[: live.size] = self._columns[name][live]
        self._columns = columns
        self._rows = dict(zip(self._rows, range(live.size), strict=True))
        self._used = live.size


def _columns(n: int, n_groups: int) -> dict[str, np.ndarray]:
    return {
        "index": np.zeros(n, dtype=np.int64),
        "tau": np.zeros((n, n_groups)),
        "loss": np.zeros(n),
        "scale": np.zeros((n, n_groups)),
        "first": np.zeros(n),
        "second": np.zeros(n),
    }


def rows_to_columns(rows: Sequence[Sequence]) -> dict:
    """The columns of pending samples saved as rows ``[key, [index, tau, loss, scale], first, second]``.

    That is how states written before the columns kept them; the result loads with
    :meth:`PendingLabels.load_state_dict`.

    >>> state = rows_to_columns([["a", [3, [0.5, 0.5], 0.2, [0.0, 0.0]], 0.1, 0.4]])
    >>> state["keys"], state["index"].tolist(), state["tau"].tolist(), state["second"].tolist()
    (['a'], [3], [[0.5, 0.5]], [0.4])
    """
    receipts = [row[1] for row in rows]
    return {
        "keys": [row[0] for row in rows],
        "index": np.array([receipt[0] for receipt in receipts], dtype=np.int64),
        "tau": np.array([receipt[1] for receipt in receipts], dtype=float),
        "loss": np.array([receipt[2] for receipt in receipts], dtype=float),
        "scale": np.array([receipt[3] for receipt in receipts], dtype=float),
        "first": np.array([row[2] for row in rows], dtype=float),
        "second": np.array([row[3] for row in rows], dtype=float),
    }
