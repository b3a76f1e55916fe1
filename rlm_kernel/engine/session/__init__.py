"""What a task brings beyond its question, and what a session keeps between tasks:
``task`` (:class:`~.task.TaskSpec`: answer type, user tools, read-only inputs),
``user_tools`` (the user's functions, lent to a run without being handed over),
``conversation`` (the session's earlier tasks, told to the next one) and ``warmup``
(the first step's prompt prefilled before the first task).
"""
