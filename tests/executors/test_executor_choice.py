"""Which executor a run gets: :func:`rlm_kernel.executors.executor_for`, the one place
that turns settings into an executor (``RLM.run``, an ``rlm_query`` child run and a
notebook task all ask it)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from rlm_kernel.executors import PlainExecutor, executor_for
from rlm_kernel.executors.isolated import IsolatedExecutor
from tests.replies import block
from tests.scripted import scripted_rlm


def _recording(made: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Constructors of the two kinds that record what they were given."""
    def isolated(**options: Any) -> PlainExecutor:
        made.append(("isolated", options))
        return PlainExecutor()

    def in_process(**options: Any) -> PlainExecutor:
        made.append(("in-process", options))
        return PlainExecutor()

    return {"isolated": isolated, "in_process": in_process}


def test_the_settings_kind_is_made_with_the_folder_and_its_own_options(tmp_path):
    made: list[tuple[str, dict[str, Any]]] = []
    options = {"memory_limit": 1 << 30, "pass_env": ("HOME",)}
    for kind in ("isolated", "in-process"):
        executor_for(kind, workdir=tmp_path, isolated_options=options, **_recording(made))
    executor_for("in-process", isolated_options=options, **_recording(made))
    assert made == [("isolated", {"workdir": tmp_path, **options}),
                    ("in-process", {"workdir": tmp_path}),
                    ("in-process", {})]


def test_without_a_kind_a_child_takes_its_parents_and_a_top_level_run_is_isolated():
    class Walled:  # an executor behind the process wall, as far as the choice reads
        in_process = False

    made: list[tuple[str, dict[str, Any]]] = []
    executor_for(None, **_recording(made))
    executor_for(None, parent=PlainExecutor(), **_recording(made))
    executor_for(None, parent=Walled(), **_recording(made))  # type: ignore[arg-type]
    executor_for("isolated", parent=PlainExecutor(), **_recording(made))  # the settings win
    assert [kind for kind, _ in made] == ["isolated", "in-process", "isolated", "isolated"]


def test_an_unknown_kind_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown executor 'remote': one of isolated, "
                                         "in-process"):
        executor_for("remote")


def test_the_plain_executor_runs_in_process_in_its_folder(tmp_path):
    executor = executor_for("in-process", workdir=tmp_path)
    assert isinstance(executor, PlainExecutor) and executor.in_process
    assert executor.execute("import os\nprint(os.getcwd())").stdout.strip() == str(tmp_path)
    executor.close()  # holds nothing; the namespace stays the caller's
    assert executor.execute("x = 1").success


@pytest.mark.skipif(sys.platform != "linux", reason="Linux process limits")
def test_the_default_kind_is_the_isolated_executor_and_close_ends_its_worker():
    executor = executor_for(None, isolated_options={"max_processes": 8})
    assert isinstance(executor, IsolatedExecutor) and not executor.in_process
    assert executor.pid is not None
    executor.close()
    executor.close()  # idempotent
    assert executor.pid is None


@pytest.mark.skipif(sys.platform != "linux", reason="Linux process limits")
@pytest.mark.parametrize("setting,parent,child", [
    (None, "in-process", "in-process"),
    (None, "isolated", "isolated"),
    ("in-process", "isolated", "in-process"),  # the settings' kind wins, as before
])
def test_a_child_run_runs_where_its_parent_runs_unless_the_settings_say(setting, parent,
                                                                        child):
    replies = [block("FINAL(rlm_query('where do you run?'))"),
               block("import os\nFINAL(str(os.getpid()))")]  # the child's step
    rlm, _ = scripted_rlm(replies, max_depth=1, executor=setting)
    executor = executor_for(parent, isolated_options={"max_processes": 8})
    try:
        res = rlm.run("q", context="x", executor=executor)
    finally:
        executor.close()
    assert res.answer is not None and res.answer.isdigit()  # the child answered
    assert (res.answer == str(os.getpid())) == (child == "in-process")
