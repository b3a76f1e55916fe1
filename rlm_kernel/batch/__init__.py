"""Many tasks, each an independent RLM run, on a Dask cluster (``rlm batch``).

- ``tasks`` (the tasks file: :class:`TaskRow`, :func:`read_tasks`),
- ``worker`` (what a worker runs for one task: :func:`run_row`),
- ``results`` (the results file, one line per finished task, told from any other file
  by its lines: :class:`ResultsFile`),
- ``cluster`` (``local:N`` or a scheduler address: :func:`open_cluster`),
- ``progress`` (the bar: :class:`BatchProgress`),
- ``runner`` (submission through Dask, ``--max-cost``, ``--export``: :func:`run_batch`).

Dask is imported when a cluster is opened, not with this package.
"""

from .cluster import ClusterSpecError, open_cluster, parse_cluster
from .progress import BatchProgress
from .results import RESULT_KEYS, ResultsFile, ResultsFileError, result_line
from .runner import BatchReport, batch_token, notebook_path, run_batch, task_key
from .tasks import TaskFileError, TaskRow, read_tasks
from .worker import TaskOutcome, run_row

__all__ = [
    "BatchProgress", "BatchReport", "batch_token", "ClusterSpecError", "RESULT_KEYS", "ResultsFile",
    "ResultsFileError", "TaskFileError",
    "TaskOutcome", "TaskRow", "notebook_path", "open_cluster", "parse_cluster", "read_tasks",
    "result_line", "run_batch", "run_row", "task_key",
]
