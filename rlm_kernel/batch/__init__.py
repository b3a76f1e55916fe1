"""Many tasks, each an independent RLM run, on a Dask cluster (``rlm batch``) or any
``concurrent.futures`` executor (:meth:`RLM.map <rlm_kernel.engine.RLM.map>`).

- ``tasks`` (the tasks file: :class:`TaskRow`, :func:`read_tasks`),
- ``worker`` (what a worker runs for one task: :func:`run_row`),
- ``results`` (the results file, one line per finished task, told from any other file
  by its lines: :class:`ResultsFile`),
- ``cluster`` (``local:N`` or a scheduler address: :func:`open_cluster`;
  :func:`local_executor`),
- ``mapping`` (:meth:`RLM.map`'s runner, :func:`map_runs`, and one task as a worker runs
  it, :func:`run_task`), ``contexts`` (a context read where the task runs:
  :class:`ContextRef`), ``sending`` (what a worker sends back: :func:`sendable`),
- ``progress`` (the bar: :class:`BatchProgress`),
- ``runner`` (submission through Dask, ``--max-cost``, ``--export``: :func:`run_batch`),
- ``rollouts`` (``--rollouts K``: each attempt in its own copy of the task's folder,
  :func:`run_attempt`, one line each, :func:`rollout_line`) and ``rewards`` (an
  attempt's score after its loop: :func:`score`).

Dask is imported when a cluster is opened, not with this package.
"""

from .cluster import (
    CLUSTER_EXTRA,
    ClusterMissing,
    ClusterSpecError,
    local_executor,
    open_cluster,
    parse_cluster,
)
from .contexts import ContextRef, load_context
from .mapping import map_runs, run_task
from .progress import BatchProgress
from .results import RESULT_KEYS, ResultsFile, ResultsFileError, result_line
from .rewards import Reward, RewardSpec, score
from .rollouts import AttemptOutcome, attempt_id, rollout_line, run_attempt
from .runner import BatchReport, batch_token, notebook_path, run_batch, task_key
from .sending import plain_data, sendable
from .tasks import TaskFileError, TaskRow, read_tasks
from .worker import TaskOutcome, run_row, worker_name

__all__ = [
    "CLUSTER_EXTRA", "ClusterMissing", "ContextRef", "load_context", "local_executor",
    "map_runs", "plain_data", "run_task", "sendable", "worker_name",
    "BatchProgress", "BatchReport", "batch_token", "ClusterSpecError", "RESULT_KEYS", "ResultsFile",
    "ResultsFileError", "TaskFileError",
    "TaskOutcome", "TaskRow", "notebook_path", "open_cluster", "parse_cluster", "read_tasks",
    "result_line", "run_batch", "run_row", "task_key", "Reward", "RewardSpec", "score",
    "AttemptOutcome", "attempt_id", "rollout_line", "run_attempt",
]
