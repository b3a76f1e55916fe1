"""The user's tools are the user's: model code that rewrites a tool in place (its
``__code__``, defaults, closure, the module globals it reads) changes nothing the user
keeps (fault case x23; behind the process wall, x24).  Both executors."""

from __future__ import annotations

import json

from rlm_kernel.engine.session.user_tools import LentTools
from tests.replies import block

from .helpers import THOUGHT, scripted_run


def parse_log(line, prefix="log"):
    """Parse one log line."""
    return json.dumps({prefix: line})


def _counter():
    count = [0]

    def tick():
        """Count calls."""
        count[0] += 1
        return count[0]
    return tick


def helper(x):
    return f"<{x}>"


def wrap(x):
    """Wrap a value."""
    return helper(str(x))


TAMPER = ("parse_log.__code__ = (lambda line, prefix='log': 'TAMPERED').__code__\n"
          "parse_log.__defaults__ = ('evil',)\n"
          "parse_log.__globals__['json'] = None\n"
          "parse_log.__globals__['helper'] = lambda x: 'EVIL'\n"
          "wrap.__globals__['str'] = lambda x: 'SHADOWED'\n"
          "parse_log.owner = 'model'\n"
          "print(parse_log('x'), wrap(1))")


def run(*codes, tools):
    rlm, _ = scripted_run([block(c, THOUGHT) for c in codes], step_timeout=10, tools=tools)
    return rlm.run("q", context="x")


def test_a_tool_rewritten_in_place_is_the_users_again_after_the_run(executor_kind):
    """Shared fault cases x23 (in-process) and x24 (isolated)."""
    res = run(TAMPER, "FINAL(parse_log('y') + wrap(2))", tools=[parse_log, wrap])
    assert parse_log("x") == '{"log": "x"}' and parse_log.__defaults__ == ("log",)
    assert globals()["json"] is json and globals()["helper"] is helper
    assert "str" not in globals() and not hasattr(parse_log, "owner")  # added, removed
    assert wrap(3) == "<3>"
    if executor_kind == "in-process":  # the run's later steps use the tool as written
        assert res.answer == '{"log": "y"}<2>'
        assert "tool of the user's and read-only" in res.history.entries[0].output \
            or "tools of the user's" in res.history.entries[0].output


def test_a_closure_of_a_tool_is_put_back(executor_kind):
    tick = _counter()
    tick()
    res = run("tick.__closure__[0].cell_contents = None\nprint(tick)",
              "FINAL(tick())", tools=[tick])
    assert res.answer == "2" and tick() == 3  # the model's call counted, the cell is the list


def test_the_users_function_object_is_back_under_its_name_in_the_namespace(executor_kind):
    rlm, _ = scripted_run([block("print(parse_log('z'))", THOUGHT),
                           block("FINAL('ok')", THOUGHT)], tools=[parse_log])
    from rlm_kernel.executors import new_executor

    ex = new_executor(executor_kind)
    try:
        res = rlm.run("q", context="x", executor=ex)
        assert res.answer == "ok"
        assert ex.namespace["parse_log"] is parse_log
    finally:
        getattr(ex, "close", lambda: None)()


def test_a_tool_that_keeps_global_state_keeps_it():
    """Names a tool writes itself (``global``) are its state, not put back."""
    ns = {"calls": 0}
    exec("def tool():\n    global calls\n    calls += 1\n    return calls", ns)  # noqa: S102
    lent = LentTools({"tool": ns["tool"]})
    assert lent.bound["tool"] is not ns["tool"]
    lent.bound["tool"]()
    assert lent.restore() == [] and ns["calls"] == 1


def test_lending_copies_only_plain_functions_and_methods():
    class Box:
        def get(self):
            """Get."""
            return 1

    box = Box()
    lent = LentTools({"get": box.get, "length": len, "parse_log": parse_log})
    assert lent.bound["length"] is len and lent.bound["parse_log"] is not parse_log
    assert lent.bound["get"].__self__ is box and lent.bound["get"]() == 1
    assert lent.bound["get"].__func__ is not Box.get
    assert lent.bound["parse_log"].__doc__ == parse_log.__doc__
    assert not hasattr(lent.bound["parse_log"], "__wrapped__")
