"""The environment of every process model code runs in: an allow-list, not the host's.

The isolated executor's worker and a working folder's commands (``bash``, ``grep`` ...
started by :func:`~rlm_kernel.executors.commands.run_command`) get
:func:`model_code_environ`: the variables Python and the helpers need, and nothing else
of the host's, whatever the other variables are called (a ``DB_PASS`` or a
``SERVICE_URL`` with a password in it stays out as surely as ``OPENAI_API_KEY``):

* ``PATH``; ``LANG``, ``LANGUAGE`` and every ``LC_*`` (the locale: text encoding,
  sorting); ``TZ``; ``TERM``; ``LD_LIBRARY_PATH`` (an interpreter built against
  libraries outside the system's folders needs it, as the host's does);
* the ``PYTHON*`` variables that shape how the interpreter runs, :data:`PYTHON_VARIABLES`
  (``PYTHONPATH`` and ``PYTHONHOME`` find the packages; the isolated executor puts this
  package first in ``PYTHONPATH``).  Not ``PYTHONSTARTUP``, ``PYTHONBREAKPOINT`` or
  ``PYTHONINSPECT``: they run code of the host's choosing in the worker;
* ``HOME`` set to :data:`SAFE_HOME` (``/tmp``: the sandbox's private, writable ``/tmp``;
  the users' real homes are hidden there), never the host's;
* the variables the user passes by name: the ``pass_env`` setting (``RLM(pass_env=
  "DB_HOST,DB_USER")``, ``rlm run --pass-env``, ``c.RLM.pass_env``) and the names in
  the host's ``RLM_PASS_ENV`` (:data:`PASS_ENV_VARIABLE`), comma- or space-separated.
  Their names are kept in the child's ``RLM_PASS_ENV``, so the processes model code
  starts (a working folder's ``bash`` inside the sandbox) get them too.  A value passed
  so is still redacted wherever output leaves the run when its name looks secret or it
  is a known secret (:mod:`rlm_kernel.redaction`).

The in-process executor runs model code in the host's own process: it has the host's
whole ``os.environ`` by design (use the isolated executor, the default of ``rlm run``
and ``RLM.run``, to keep the environment out of reach).

The allow-list follows what sandboxes for untrusted code pass by default: bubblewrap's
``--clearenv`` then ``--setenv`` of chosen variables, and Flatpak's environment, which
keeps ``PATH``, the locale and the terminal and sets its own ``HOME``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["ALLOWED_VARIABLES", "ALLOWED_PREFIXES", "PASS_ENV_VARIABLE", "PYTHON_VARIABLES",
           "SAFE_HOME", "model_code_environ", "passed_names"]

PYTHON_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8",
                    "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE",
                    "PYTHONSAFEPATH", "PYTHONPLATLIBDIR")
"""The ``PYTHON*`` variables passed on: where the packages are and how text is encoded."""
ALLOWED_VARIABLES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH",
                     *PYTHON_VARIABLES)
"""Variables passed on by name, when the host has them."""
ALLOWED_PREFIXES = ("LC_",)
"""Variables passed on by the start of their name (the locale's ``LC_ALL``,
``LC_CTYPE`` ...)."""
SAFE_HOME = "/tmp"
"""``HOME`` of model code's processes: the sandbox's private ``/tmp`` (writable there;
the users' homes are hidden)."""
PASS_ENV_VARIABLE = "RLM_PASS_ENV"
"""The variable that names more variables to pass (comma- or space-separated)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def passed_names(names: str | Iterable[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> list[str]:
    """The names of the variables passed on beyond the allow-list.

    Args:
        names: the ``pass_env`` setting: names separated by commas or spaces, or an
            iterable of names; None: none.
        environ: the environment whose ``RLM_PASS_ENV`` names more (default
            ``os.environ``).

    Returns:
        The names, each once, sorted.

    Raises:
        ValueError: a name that is not a variable's name (letters, digits, ``_``, not
            starting with a digit).
    """
    env = os.environ if environ is None else environ
    given = [names] if isinstance(names, str) else list(names or ())
    given.append(env.get(PASS_ENV_VARIABLE, ""))
    found: set[str] = set()
    for text in given:
        for name in re.split(r"[,\s]+", str(text).strip()):
            if not name:
                continue
            if not _NAME.fullmatch(name):
                raise ValueError(f"pass_env: {name!r} is not the name of an environment "
                                 "variable")
            found.add(name)
    return sorted(found)


def model_code_environ(passed: str | Iterable[str] | None = None,
                       environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process model code runs in (the module docstring says
    which variables, and why).

    Args:
        passed: more names to pass on (the ``pass_env`` setting), as
            :func:`passed_names` takes them.
        environ: the environment to pick from (default ``os.environ``).

    Returns:
        A new dict: the allowed variables the environment has, ``HOME`` set to
        :data:`SAFE_HOME`, the passed variables it has and, when any name is passed,
        ``RLM_PASS_ENV`` listing them.

    Raises:
        ValueError: a passed name is not a variable's name.
    """
    env = os.environ if environ is None else environ
    names = passed_names(passed, env)
    out = {name: value for name, value in list(env.items())
           if name in ALLOWED_VARIABLES or name.startswith(ALLOWED_PREFIXES)}
    out["HOME"] = SAFE_HOME
    for name in names:
        if name in env:
            out[name] = env[name]
    if names:
        out[PASS_ENV_VARIABLE] = ",".join(names)
    return out
