"""Ways a run is carried out beyond one trajectory: ``candidates`` (N independent
trajectories of one task and a vote, ``RLMConfig.candidates``) and ``children``
(the child runs ``rlm_query`` starts, one level deeper).
"""
