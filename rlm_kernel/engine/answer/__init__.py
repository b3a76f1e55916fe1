"""A run's answer: what ``FINAL`` recorded, and what the host makes of it.

``final`` (the host's record of a step's ``FINAL``/``FINAL_VAR``, a ``FINAL`` written
in prose), ``checks`` (the host's checks of a ``FINAL`` before a run ends with it: the
type refusal, the one look back, the answer's source), ``text`` (the one guarded rendering of an answer: :func:`~.text.answer_text`; a
value's guarded repr is :func:`rlm_kernel.executors.guarded_repr`), ``types`` (typed answers: :class:`~.types.AnswerType`,
told to the model and checked by the host), ``nesting`` (how deep a value nests, found
without recursion: a typed answer too deep for its JSON form is refused with that
reason), ``grounding`` (whether a ``FINAL``'s
value came from the data), ``sources`` (``RLMResult.answer_source``: how the answer
was reached, in the words of each view: one table) and ``vote`` (candidate answers normalised, and the vote among them).
"""
