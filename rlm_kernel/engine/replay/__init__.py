"""Replay: ``recording`` (a run's model exchanges, recorded as they happen and played
back without a model) and ``resume`` (continuing a run from one of its steps, that
step's code edited or not).
"""
