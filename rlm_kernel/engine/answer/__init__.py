"""A run's answer: what ``FINAL`` recorded, and what the host makes of it.

``text`` (the one guarded rendering of a value: :func:`~.text.answer_text`,
:func:`~.text.value_repr`), ``types`` (typed answers: :class:`~.types.AnswerType`,
told to the model and checked by the host), ``grounding`` (whether a ``FINAL``'s
value came from the data), ``sources`` (``RLMResult.answer_source``: how the answer
was reached) and ``vote`` (candidate answers normalised, and the vote among them).
"""
