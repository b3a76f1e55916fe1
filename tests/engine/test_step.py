"""One definition of a step cell's source, of the time-out wording and of FINAL regexes."""

from __future__ import annotations

import rlm_kernel.export.notebook as export
import rlm_kernel.jupyter.frontend as frontend
from rlm_kernel import termination
from rlm_kernel.engine import step
from rlm_kernel.executors import PlainExecutor
from rlm_kernel.executors.timeouts import timeout_message
from rlm_kernel.policies.termination import FinalPatternTerminationPolicy


def test_live_and_exported_cells_share_one_step_source():
    assert frontend.step_source is step.step_source
    assert export.step_source is step.step_source


def test_step_source_keeps_paragraphs_and_trims_code():
    assert step.step_source("First.\n\nThen.", "\nx = 1\n") == "# First.\n#\n# Then.\nx = 1"
    assert step.step_source("", "x = 1") == "x = 1"
    assert step.step_source("Only prose.", "") == "# Only prose."


def test_plain_executor_ends_a_timed_out_step_with_the_one_message():
    res = PlainExecutor().execute("import time\ntime.sleep(5)", timeout=0.3)
    assert not res.success
    assert res.stderr.endswith(timeout_message(0.3))


def test_policy_defaults_are_the_termination_modules_table():
    defaults = FinalPatternTerminationPolicy.get_default_config()["final_patterns"]
    assert defaults == list(termination.POLICY_FINAL_PATTERNS)
    # the spellings are shared with the termination table
    assert termination.FINAL_PATTERNS[1].pattern == defaults[0]
    assert termination.FINAL_VAR_PATTERNS[1].pattern == defaults[2]
