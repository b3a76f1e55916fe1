"""A batch's progress bar: tasks done of the total with tqdm's rate and ETA, and how many
are running, how many failed, and the USD spent so far.  ``tqdm.auto``: a text bar in
a terminal, a widget in a notebook."""

from __future__ import annotations

from typing import Any

__all__ = ["BatchProgress"]


class BatchProgress:
    """The bar of one batch.

    Args:
        total: tasks to run in this batch (those already in ``--out`` not counted).
        slots: tasks the cluster runs at once (its worker threads); submitted tasks
            beyond them are shown as queued.
        enabled: False: no bar (the counters are still kept).
        file: where a text bar is drawn (default ``sys.stderr``).

    Attributes:
        done / failed / running: tasks finished (failed ones included), finished
            without an answer, and submitted but not finished (running or queued).
        cost_usd: the finished tasks' cost, in USD.
    """

    def __init__(self, total: int, *, slots: int = 1, enabled: bool = True,
                 file: Any = None) -> None:
        self.total = total
        self.slots = max(1, slots)
        self.done = self.failed = self.running = 0
        self.cost_usd = 0.0
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, unit="task", desc="rlm batch", file=file,
                             dynamic_ncols=True)
            self._show()

    def _show(self) -> None:
        if self._bar is not None:
            running = min(self.running, self.slots)
            queued = f", queued {self.running - running}" if self.running > running else ""
            self._bar.set_postfix_str(f"running {running}{queued}, failed {self.failed}, "
                                      f"${self.cost_usd:.4f}", refresh=True)

    def submitted(self) -> None:
        """One more task is running."""
        self.running += 1
        self._show()

    def finished(self, *, answered: bool, cost_usd: float) -> None:
        """A task finished.

        Args:
            answered: it has an answer (else it counts as failed).
            cost_usd: what it cost, in USD.
        """
        self.running = max(0, self.running - 1)
        self.done += 1
        self.failed += 0 if answered else 1
        self.cost_usd += cost_usd
        if self._bar is not None:
            self._bar.update(1)
        self._show()

    def note(self, message: str) -> None:
        """A line printed above the bar (``tqdm.write``), or nothing without one."""
        if self._bar is not None:
            self._bar.write(message)

    def close(self) -> None:
        """Draw the bar a last time and release it."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
