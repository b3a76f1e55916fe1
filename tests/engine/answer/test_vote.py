"""Answer normalisation and the vote over candidates (rlm_kernel.engine.answer.vote)."""

from __future__ import annotations

import pytest

from rlm_kernel.engine.answer.vote import Ballot, answer_key, tally


@pytest.mark.parametrize("a, b", [
    (42, 42.0), (42, "42"), (42, "42.0"), ("42.", 42), (" +42 ", 42), ("1,234", 1234),
    ("1,234.5", 1234.5), (0.1 + 0.2, 0.3), ("-3.5", -3.5), ("1e3", 1000), (1e20, 10**20),
])
def test_numbers_in_any_dress_are_one_answer(a, b):
    assert answer_key(a) == answer_key(b) is not None


@pytest.mark.parametrize("a, b", [
    ("Paris", "paris"), ('"Paris".', "PARIS"), ("'paris'", "Paris."), ("“Paris”", "paris"),
    ("  New \n York ", "new york"), ("encoder.py", "ENCODER.PY"),
])
def test_text_ignores_case_spaces_quotes_and_a_trailing_period(a, b):
    assert answer_key(a) == answer_key(b) is not None


@pytest.mark.parametrize("a, b", [("yes", True), ("True", True), ("no", False),
                                  ("FALSE.", False)])
def test_yes_no_true_false_are_bools(a, b):
    assert answer_key(a) == answer_key(b)


@pytest.mark.parametrize("a, b", [
    ({1, 2}, [2, 1]), ((1, 2), ["2", "1"]), (frozenset({"a", "B"}), ["b", "A"]),
    ({"a": 1, "b": [2, 3]}, {"B": (3, 2), "A": "1.0"}), ([[1, 2], [3]], [[3], [2, 1]]),
])
def test_collections_compare_by_normalised_members_in_any_order(a, b):
    assert answer_key(a) == answer_key(b) is not None


@pytest.mark.parametrize("a, b", [
    (True, 1), (41, 42), ("1,5", 15), ([1, 1, 2], [1, 2]), ("paris", "pariss"),
    (1.5, 2), ([1], 1),
])
def test_different_answers_stay_different(a, b):
    assert answer_key(a) != answer_key(b)


@pytest.mark.parametrize("value", [None, "", "   ", '""', "."])
def test_no_answer_casts_no_vote(value):
    assert answer_key(value) is None


def test_other_types_are_compared_by_their_guarded_text():
    class Loud:
        def __str__(self):
            return "  Forty-Two "

        def __eq__(self, other):  # pragma: no cover - must never be asked
            raise AssertionError("the vote ran the answer's own __eq__")

        __hash__ = None  # unhashable: the key must not hash the object itself

    class Text(str):
        pass

    assert answer_key(Loud()) == answer_key("forty-two")
    assert answer_key(Loud(), "42") == answer_key(42)  # the run's rendered text is used
    assert answer_key(Text("Paris")) == answer_key("paris")
    assert answer_key([Loud()]) == answer_key(["FORTY-TWO"])


def test_a_self_containing_list_is_compared_without_recursing_forever():
    a: list = [1]
    a.append(a)
    assert answer_key(a) is not None


def test_majority_wins_and_the_earliest_of_equal_evidence_stands_for_it():
    votes = tally([Ballot(1, answer_key(41)), Ballot(2, answer_key("42")),
                   Ballot(3, answer_key(42.0))])
    assert votes.winner == answer_key(42) and votes.chosen == 2
    assert votes.votes(answer_key(42)) == 2 and votes.votes(answer_key(41)) == 1
    assert votes.votes(None) == 0


def test_a_tie_goes_to_fewer_failed_steps_then_higher_confidence_then_earlier():
    a, b = answer_key("a"), answer_key("b")
    assert tally([Ballot(1, a, failed_steps=2), Ballot(2, b, failed_steps=0)]).chosen == 2
    assert tally([Ballot(1, a, confidence=0.4), Ballot(2, b, confidence=0.9)]).chosen == 2
    assert tally([Ballot(1, a), Ballot(2, b, confidence=0.1)]).chosen == 2  # None ranks lowest
    assert tally([Ballot(1, a), Ballot(2, b)]).chosen == 1
    # within the winning answer, its best-evidenced candidate stands for it
    votes = tally([Ballot(1, a, failed_steps=3), Ballot(2, b), Ballot(3, a, failed_steps=1)])
    assert votes.winner == a and votes.chosen == 3


def test_no_answer_at_all_keeps_the_best_evidenced_trajectory():
    votes = tally([Ballot(1, None, failed_steps=4), Ballot(2, None, failed_steps=1)])
    assert votes.winner is None and votes.chosen == 2 and not votes.decided(2)
    assert tally([]).chosen is None


@pytest.mark.parametrize("keys, total, decided", [
    ([42, 42], 3, True),  # 2 > 0 + 1
    ([42], 3, False),
    ([42, 41], 3, False),
    ([42, 42, 42], 5, True),  # 3 > 0 + 2
    ([42, 42], 5, False),  # 2 > 0 + 3 fails
    ([42, 41, 42], 5, False),  # 2 > 1 + 2 fails
    ([42, 41, 42, 42], 5, True),  # 3 > 1 + 1
    ([42], 1, True),
    ([None, None], 3, False),
])
def test_a_majority_is_certain_when_the_rest_cannot_change_it(keys, total, decided):
    votes = tally([Ballot(i, answer_key(k)) for i, k in enumerate(keys, 1)])
    assert votes.decided(total) is decided
