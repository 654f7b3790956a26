"""`check_prediction`: right, wrong (with the answer and the reason), or not answered yet."""

import numpy as np

from gpucourse.course import check_prediction


def test_not_answered_yet_gives_nothing_away(capsys):
    assert check_prediction(None, 42, why="because") is None
    out = capsys.readouterr().out
    assert "Not answered yet" in out and "42" not in out and "because" not in out


def test_right_number(capsys):
    assert check_prediction(4, 4, why="a warp reads 128 bytes") is True
    assert capsys.readouterr().out.startswith("✓ Right: 4. a warp reads 128 bytes")


def test_wrong_number_shows_the_answer_and_the_reason(capsys):
    assert check_prediction(32, 4, why="a warp reads 128 bytes") is False
    out = capsys.readouterr().out
    assert out.startswith("✗") and "you said 32" in out and "says 4" in out and "128 bytes" in out


def test_tolerance_is_relative():
    assert check_prediction(0.26, 0.25, why="", tolerance=0.05) is True
    assert check_prediction(0.3, 0.25, why="", tolerance=0.05) is False


def test_patterns_compare_element_by_element(capsys):
    assert check_prediction([0, 1, 2], np.array([0, 1, 2]), why="") is True
    assert "[0, 1, 2]" in capsys.readouterr().out
    assert check_prediction([0, 2, 1], np.array([0, 1, 2]), why="") is False


def test_a_guess_of_the_wrong_kind_is_wrong_not_an_error():
    assert check_prediction("four", 4, why="") is False
    assert check_prediction(4, "four", why="") is False


def test_a_tolerance_applies_to_each_element_of_a_sequence():
    assert check_prediction([2.02, 3.0], [2.0, 3.0], why="", tolerance=0.05)
    assert not check_prediction([2.2, 3.0], [2.0, 3.0], why="", tolerance=0.05)
    assert check_prediction([2, 3], np.array([2.0, 3.0], np.float32), why="", tolerance=0.01)
    assert not check_prediction([2.0], [2.0, 3.0], why="", tolerance=0.05)  # a missing element is wrong
    assert not check_prediction("serving", "training", why="") and check_prediction("serving", "serving", why="")
