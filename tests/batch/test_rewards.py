"""score(): a rollout attempt's reward from held-back tests, run after the loop on the
host's terms (rlm_kernel.batch.rewards).  Each test builds a tiny real project in
tmp_path: the pristine folder, the attempt's folder (a copy the "model" edited) and the
held-back tests."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlm_kernel.batch.rewards import Reward, RewardSpec, score

GOOD = "def add(a, b):\n    return a + b\n"
BUGGY = "def add(a, b):\n    return a - b\n"
HELD = textwrap.dedent("""\
    from calc import add

    def test_small():
        assert add(1, 2) == 3

    def test_zero():
        assert add(0, 0) == 0

    def test_negative():
        assert add(-1, -2) == -3
""")
VISIBLE = "from calc import add\n\ndef test_visible():\n    assert add(2, 2) == 4\n"


def _task(tmp_path: Path, code: str) -> tuple[Path, Path, RewardSpec]:
    """(attempt folder, pristine folder, spec): the attempt's calc.py is ``code``."""
    pristine = tmp_path / "pristine"
    pristine.mkdir(parents=True)
    (pristine / "calc.py").write_text(BUGGY)
    (pristine / "test_visible.py").write_text(VISIBLE)
    held = tmp_path / "held"
    held.mkdir()
    (held / "test_calc.py").write_text(HELD)
    attempt = tmp_path / "attempt"
    shutil.copytree(pristine, attempt)
    (attempt / "calc.py").write_text(code)
    return attempt, pristine, RewardSpec(held_back=str(held), timeout=60)


def test_a_fixed_attempt_scores_one_and_a_broken_one_scores_the_share_passing(tmp_path):
    attempt, pristine, spec = _task(tmp_path / "a", GOOD)
    assert not (attempt / "test_calc.py").exists()  # held back until scoring
    reward = score(attempt, spec, pristine=pristine)
    assert isinstance(reward, Reward)
    assert reward.value == 1.0 and reward.error is None, reward.output
    assert reward.metrics["passed"] == 3 and reward.metrics["total"] == 3
    assert reward.metrics["walled"] is True  # bubblewrap is installed by make setup
    assert set(reward.to_dict()) == {"value", "metrics", "error", "output"}

    attempt, pristine, spec = _task(tmp_path / "b", BUGGY)
    reward = score(attempt, spec, pristine=pristine)
    # a - b passes only add(0, 0) == 0
    assert reward.value == pytest.approx(1 / 3)
    assert reward.metrics["failed"] == 2 and reward.error is None


def test_a_test_file_the_model_edited_is_put_back(tmp_path):
    attempt, pristine, _ = _task(tmp_path, BUGGY)
    (attempt / "test_visible.py").write_text("def test_visible():\n    assert True\n")
    command = f"{sys.executable} -m pytest -q --disable-plugin-autoload test_visible.py"
    reward = score(attempt, RewardSpec(command=command, timeout=60), pristine=pristine)
    assert reward.value == 0.0, reward.output  # the real test fails on a - b
    assert reward.metrics["failed"] == 1
    assert "test_visible.py" in reward.metrics["restored"]
    assert (attempt / "test_visible.py").read_text() == VISIBLE


def test_a_removed_test_file_comes_back(tmp_path):
    attempt, pristine, _ = _task(tmp_path, BUGGY)
    (attempt / "test_visible.py").unlink()
    command = f"{sys.executable} -m pytest -q --disable-plugin-autoload test_visible.py"
    reward = score(attempt, RewardSpec(command=command, timeout=60), pristine=pristine)
    assert reward.metrics["failed"] == 1 and reward.value == 0.0


FORCE_PASS = textwrap.dedent("""\
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome = "passed"
        report.longrepr = None
""")


def test_an_added_conftest_or_plugin_that_forces_passes_is_neutralised(tmp_path):
    attempt, pristine, spec = _task(tmp_path, BUGGY)
    (attempt / "conftest.py").write_text(FORCE_PASS)
    (attempt / "sub").mkdir()
    (attempt / "sub" / "conftest.py").write_text(FORCE_PASS)
    (attempt / "pytest.ini").write_text("[pytest]\naddopts = -p forcepass\n")
    (attempt / "forcepass.py").write_text(FORCE_PASS)
    dist = attempt / "forcepass-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: forcepass\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nforcepass = forcepass\n")
    (attempt / "__pycache__").mkdir()
    (attempt / "__pycache__" / "test_calc.cpython-311-pytest-9.2.0.pyc").write_bytes(b"x")
    # the task's own metadata folder, which the model extends with a plugin
    for folder in (pristine, attempt):
        (folder / "calc.egg-info").mkdir()
        (folder / "calc.egg-info" / "PKG-INFO").write_text("Name: calc\nVersion: 1\n")
    (attempt / "calc.egg-info" / "entry_points.txt").write_text(
        "[pytest11]\nforcepass = forcepass\n")
    reward = score(attempt, spec, pristine=pristine)
    assert reward.value == pytest.approx(1 / 3), reward.output
    restored = set(reward.metrics["restored"])
    assert {"conftest.py", "sub/conftest.py", "pytest.ini", "forcepass-1.0.dist-info",
            "__pycache__", "calc.egg-info"} <= restored
    assert not (attempt / "conftest.py").exists()
    assert sorted(p.name for p in (attempt / "calc.egg-info").iterdir()) == ["PKG-INFO"]


def test_model_code_that_patches_pytest_reports_to_pass_scores_zero(tmp_path):
    code = BUGGY + textwrap.dedent("""\
        import _pytest.reports as reports

        _real = reports.TestReport.from_item_and_call.__func__

        def _forged(cls, item, call):
            report = _real(cls, item, call)
            report.outcome, report.longrepr = "passed", None
            return report

        reports.TestReport.from_item_and_call = classmethod(_forged)
    """)
    attempt, pristine, spec = _task(tmp_path, code)
    reward = score(attempt, spec, pristine=pristine)
    assert reward.value == 0.0 and "forged" in (reward.error or ""), reward
    assert sorted(p.name for p in attempt.glob("test_*.py")) == ["test_calc.py",
                                                                 "test_visible.py"]


def test_a_reward_or_report_file_the_model_wrote_changes_nothing(tmp_path):
    attempt, pristine, spec = _task(tmp_path, BUGGY)
    forged = ('<testsuites><testsuite name="pytest" tests="3" failures="0" errors="0" '
              'skipped="0"/></testsuites>')
    for name in ("junit.xml", "report.xml", "reward.json", "reward.txt"):
        (attempt / name).write_text(forged if name.endswith("xml") else '{"reward": 1.0}')
    reward = score(attempt, spec, pristine=pristine)
    assert reward.value == pytest.approx(1 / 3)


def test_a_held_back_path_the_model_made_a_link_writes_nothing_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_calc.py").write_text("host's file\n")
    attempt, pristine, spec = _task(tmp_path / "t", GOOD)
    (attempt / "test_calc.py").symlink_to(outside / "test_calc.py")
    (attempt / "test_visible.py").unlink()
    (attempt / "test_visible.py").symlink_to(outside / "test_calc.py")
    reward = score(attempt, spec, pristine=pristine)
    assert reward.value == 1.0, reward.output
    assert (outside / "test_calc.py").read_text() == "host's file\n"
    assert not (attempt / "test_calc.py").is_symlink()
    assert (attempt / "test_visible.py").read_text() == VISIBLE


def test_the_scored_code_runs_behind_the_wall(tmp_path):
    marker = tmp_path / "written-by-model-code"
    pristine_code = tmp_path / "pristine" / "calc.py"
    code = GOOD + textwrap.dedent(f"""\
        for path in ({str(marker)!r}, {str(pristine_code)!r}):
            try:
                open(path, "w").write("escaped")
            except OSError:
                pass
    """)
    attempt, pristine, spec = _task(tmp_path, code)
    reward = score(attempt, spec, pristine=pristine)
    assert reward.metrics["walled"] is True and reward.value == 1.0, reward.output
    assert not marker.exists()  # written in the sandbox's own /tmp, if at all
    assert pristine_code.read_text() == BUGGY


def test_a_hanging_attempt_is_killed_at_the_timeout(tmp_path):
    code = "import time\ntime.sleep(600)\n" + GOOD
    attempt, pristine, spec = _task(tmp_path, code)
    spec = RewardSpec(held_back=spec.held_back, timeout=2)
    start = time.monotonic()
    reward = score(attempt, spec, pristine=pristine)
    assert time.monotonic() - start < 30
    assert reward.value == 0.0 and reward.metrics["timed_out"] is True
    assert "time limit" in (reward.error or "")


def test_an_attempt_that_exits_before_the_report_scores_zero(tmp_path):
    attempt, pristine, spec = _task(tmp_path, "import os\nos._exit(0)\n")
    reward = score(attempt, spec, pristine=pristine)
    assert reward.value == 0.0 and "no report" in (reward.error or "")


def test_bad_specs_and_folders_are_refused_readably(tmp_path):
    with pytest.raises(ValueError, match="command or a held_back"):
        RewardSpec()
    with pytest.raises(ValueError, match="timeout"):
        RewardSpec(command="true", timeout=0)
    with pytest.raises(FileNotFoundError, match="attempt's folder"):
        score(tmp_path / "missing", RewardSpec(command="true"), pristine=tmp_path)


def test_a_command_that_is_not_pytest_scores_by_its_exit_status(tmp_path):
    attempt, pristine, _ = _task(tmp_path, GOOD)
    ok = score(attempt, RewardSpec(command="true"), pristine=pristine)
    bad = score(attempt, RewardSpec(command="false"), pristine=pristine)
    assert (ok.value, bad.value) == (1.0, 0.0)
    assert ok.metrics["total"] is None


# -- real input: the task library's tasks (bench/rollout_tasks.py) ------------------------

def test_the_task_library_is_fetched_by_setup_and_matches_its_lock():
    from bench.rollout_tasks import SDIST_SHA256, find_sdist

    sdist = find_sdist()  # FileNotFoundError saying "run `make setup`" when it is missing
    lock = (Path(__file__).parents[2] / "requirements" / "tasks.lock").read_text()
    assert sdist.name.startswith("inflection-0.5.1") and SDIST_SHA256 in lock


def test_a_missing_or_altered_sdist_says_to_run_setup(tmp_path, monkeypatch):
    import bench.rollout_tasks as rollout_tasks

    monkeypatch.setattr(rollout_tasks, "TASKS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="run `make setup`"):
        rollout_tasks.find_sdist()
    (tmp_path / rollout_tasks.SDIST_NAME).write_bytes(b"not the sdist")
    with pytest.raises(ValueError, match="not the locked"):
        rollout_tasks.find_sdist()


def test_a_built_task_scores_the_bug_below_one_and_the_release_one(tmp_path):
    from bench.rollout_tasks import HELD_BACK_FILE, MODULE, TEST_FILE, build_tasks

    (row,) = build_tasks(1, 7, tmp_path / "tasks")
    lines = (tmp_path / "tasks" / "tasks.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0]) == row
    assert set(row) == {"id", "question", "workdir", "held_back", "reward", "test_command"}
    workdir, held = Path(row["workdir"]), Path(row["held_back"])
    mutation = json.loads((workdir.parent / "mutation.json").read_text())
    # the held-back tests are nowhere in the model's folder, and the report names a
    # symptom, not the change
    visible = (workdir / TEST_FILE).read_text()
    assert not (workdir / HELD_BACK_FILE).exists()
    for name in mutation["held_back_tests"]:
        assert f"def {name}(" not in visible
        assert f"def {name}(" in (held / HELD_BACK_FILE).read_text()
    assert mutation["after"] not in row["question"] and "line" not in row["question"]

    spec = RewardSpec(held_back=str(held), timeout=60)
    untouched = tmp_path / "untouched"
    shutil.copytree(workdir, untouched)
    bug = score(untouched, spec, pristine=workdir)
    assert bug.value < 1.0 and bug.metrics["failed"] >= 1, bug.output

    fixed = tmp_path / "fixed"
    shutil.copytree(workdir, fixed)
    shutil.copy2(workdir.parent / "reference" / MODULE, fixed / MODULE)
    (fixed / TEST_FILE).write_text("def test_nothing():\n    pass\n")  # put back
    good = score(fixed, spec, pristine=workdir)
    assert good.value == 1.0 and good.error is None, good.output
    assert good.metrics["total"] == bug.metrics["total"] > 0
