"""`check_prediction`: right, wrong (with the answer and the reason), or not answered yet; it prints, and
returns nothing (a cell that ends with it shows the verdict alone)."""

import numpy as np
import pytest

from gpucourse.course import check_prediction


def verdict(capsys, guess, actual, **options) -> bool:
    """Whether ``check_prediction`` called ``guess`` right, from what it printed."""
    assert check_prediction(guess, actual, why=options.pop("why", ""), **options) is None
    out = capsys.readouterr().out
    assert out.startswith(("✓ Right", "✗ Not quite")), out
    return out.startswith("✓")


def test_not_answered_yet_gives_nothing_away(capsys):
    assert check_prediction(None, 42, why="because") is None
    out = capsys.readouterr().out
    assert "Not answered yet" in out and "42" not in out and "because" not in out


def test_right_number(capsys):
    check_prediction(4, 4, why="a warp reads 128 bytes")
    assert capsys.readouterr().out.startswith("✓ Right: 4. a warp reads 128 bytes")


def test_wrong_number_shows_the_answer_and_the_reason(capsys):
    check_prediction(32, 4, why="a warp reads 128 bytes")
    out = capsys.readouterr().out
    assert out.startswith("✗") and "you said 32" in out and "says 4" in out and "128 bytes" in out


def test_a_whole_number_computed_as_a_float_reads_as_an_integer(capsys):
    check_prediction(8, np.float64(4.0), why="")
    assert "the run says 4." in capsys.readouterr().out
    check_prediction(8, 2.5, why="")
    assert "the run says 2.5." in capsys.readouterr().out


def test_tolerance_is_relative(capsys):
    assert verdict(capsys, 0.26, 0.25, tolerance=0.05)
    assert not verdict(capsys, 0.3, 0.25, tolerance=0.05)


def test_patterns_compare_element_by_element(capsys):
    check_prediction([0, 1, 2], np.array([0, 1, 2]), why="")
    out = capsys.readouterr().out
    assert out.startswith("✓") and "[0, 1, 2]" in out
    assert not verdict(capsys, [0, 2, 1], np.array([0, 1, 2]))


def not_answered(capsys, guess, actual, **options) -> str:
    """What ``check_prediction`` printed for a ``guess`` it takes as not answered yet (asserted), with nothing of the
    answer ``actual`` or the reason in it."""
    check_prediction(guess, actual, why="BECAUSE", **options)
    out = capsys.readouterr().out
    assert out.startswith("Not answered yet: you wrote ") and "BECAUSE" not in out and "the run says" not in out, out
    return out


def test_a_guess_of_the_wrong_kind_is_no_error(capsys):
    not_answered(capsys, "four", 4)
    assert not verdict(capsys, 4, "four")


def test_a_tolerance_applies_to_each_element_of_a_sequence(capsys):
    assert verdict(capsys, [2.02, 3.0], [2.0, 3.0], tolerance=0.05)
    assert not verdict(capsys, [2.2, 3.0], [2.0, 3.0], tolerance=0.05)
    assert verdict(capsys, [2, 3], np.array([2.0, 3.0], np.float32), tolerance=0.01)
    assert not verdict(capsys, [2.0], [2.0, 3.0], tolerance=0.05)  # a missing element is wrong
    assert not verdict(capsys, "serving", "training") and verdict(capsys, "serving", "serving")
    assert verdict(capsys, " Serving", "serving")  # a word's case and spaces do not count
    assert verdict(capsys, "above 80", "above 80%") and verdict(capsys, "50 TO 80 %", "50 to 80%")  # nor % signs
    assert not verdict(capsys, "above 50", "above 80%")


def test_a_guess_off_by_a_power_of_1000_is_told_to_check_the_unit(capsys):
    check_prediction(0.21, 210.0, why="", tolerance=0.05)  # ms for µs
    assert "1,000 times too small: check the unit" in capsys.readouterr().out
    check_prediction(2.1e8, 210.0, why="")
    assert "1,000,000 times too large" in capsys.readouterr().out
    check_prediction(300, 210.0, why="")
    assert "check the unit" not in capsys.readouterr().out
    check_prediction(2**24, 16, why="")  # bytes in MiB: 2^20, not "1,000,000", times too large
    assert "1,048,576 times too large: check the unit" in capsys.readouterr().out
    check_prediction(4 * 1024, 4, why="", tolerance=0.01)
    assert "1,024 times too large" in capsys.readouterr().out


def test_a_guess_that_is_no_number_where_the_answer_is_one_is_told_to_write_a_number(capsys):
    for guess, actual in (("twelve", 12), ("many", 0)):
        assert "the answer is a number: write it alone, such as 12 or 0.5" in not_answered(capsys, guess, actual)
    for guess in ([12], True, np.array([12])):
        assert "the answer is one number: write it as one" in not_answered(capsys, guess, 12)
    check_prediction("12", 12, why="Counted.")  # a number in quotes is one
    assert capsys.readouterr().out.startswith("✓ Right: 12.")


def test_a_number_written_with_its_unit_or_as_a_percent_shows_nothing_of_the_answer(capsys):
    """Lectures 1b, 2b: '4 sectors', '2-way', '4 threads' (right, with the unit of the comment) and '25%' (the
    fraction 0.25) were told "Not quite ... the run says 4": a slip of form gave the answer away."""
    for guess, actual in (("4 sectors", 4), ("2-way", 2), ("4 threads", 4), ("25%", 0.25), ("1/4", 0.25),
                          ("210 µs", 209.7), ("(1, 20, 60, 5)", (1, 20, 60, 5))):
        out = not_answered(capsys, guess, actual)
        assert "write" in out and "then run this cell again" in out


def test_true_or_false_is_answered_by_a_bool_only(capsys):
    assert verdict(capsys, False, False) and verdict(capsys, True, np.bool_(True))
    assert not verdict(capsys, True, False)
    for guess in ("False", 0, "True"):
        out = not_answered(capsys, guess, False)
        assert "the answer is True or False: write one of them, without quotes" in out
    assert "you wrote 'False';" in not_answered(capsys, "False", False)  # the quotes show why it is not answered


def test_one_number_where_the_answer_is_several_is_told_to_write_a_list(capsys):
    assert "the answer is 2 numbers: write them as a list, such as [1.5, 2]" in not_answered(capsys, 2, [2.0, 3.0])
    not_answered(capsys, 4, np.array([4, 4]))  # an array of several elements against one number
    check_prediction([2, 2], [2.0, 3.0], why="")
    out = capsys.readouterr().out
    assert out.startswith("✗ Not quite") and "write them as a list" not in out


def test_a_count_off_by_an_element_size_is_asked_about_elements_and_bytes(capsys):
    for guess in (4480, 71680, 8960):  # 17,920 bytes: a quarter, 4 times, half
        check_prediction(guess, 17920, why="", unit="bytes")
        assert "elements where the question counts bytes, or the other way round?" in capsys.readouterr().out
    check_prediction(4481, 17920, why="", unit="bytes")
    assert "elements where" not in capsys.readouterr().out
    check_prediction(0.5, 2.0, why="", unit="bytes")  # not whole counts: no such guess
    assert "elements where" not in capsys.readouterr().out


def test_a_count_of_something_else_off_by_two_is_not_asked_about_bytes(capsys):
    """Blocks per SM (lecture 7: 1 for 2), where an fp16 sum stops (lecture 6: 2048 for 1024), a loss scale (8 for
    16), cp.async copies (8 for 4), sectors (24 for 12): no bytes in the question, and the note misled."""
    for guess, actual in ((1, 2), (2048, 1024.0), (8, 16), (8, 4), (24, 12)):
        check_prediction(guess, actual, why="")
        out = capsys.readouterr().out
        assert out.startswith("✗ Not quite") and "bytes" not in out and "elements" not in out, out


def test_a_guess_that_is_none_of_the_choices_is_asked_to_pick_one_and_shown_nothing(capsys):
    for guess in ("serve", "inference", True, 1):
        check_prediction(guess, "serving", why="1.49x for serving", choices=("training", "serving"))
        out = capsys.readouterr().out
        assert out.startswith("Not answered yet") and '"training" or "serving"' in out, out
        assert "1.49" not in out and "the run says" not in out
    assert verdict(capsys, " Serving", "serving", choices=("training", "serving"))
    assert not verdict(capsys, "training", "serving", choices=("training", "serving"))
    assert verdict(capsys, "above 80", "above 80%", choices=("below 50%", "50 to 80%", "above 80%"))
    assert verdict(capsys, "above 80%", "above 80%", choices={"below 50%", "50 to 80%", "above 80%"})  # any iterable
    check_prediction("x", "yes", why="", choices=["yes"])
    assert 'write "yes" in place of it' in capsys.readouterr().out  # one choice alone
    with pytest.raises(ValueError, match="the answer 'maybe' is not one of the choices"):
        check_prediction("yes", "maybe", why="", choices=("yes", "no"))


def test_several_numbers_written_as_text_are_told_to_write_a_list(capsys):
    assert "the answer is 2 numbers: write them as a list" in not_answered(capsys, "2, 3", [2.0, 3.0])


def test_strides_guessed_in_bytes_where_they_count_elements_are_asked_about_elements_and_bytes(capsys):
    """Lecture 2a: NumPy's strides count bytes, the course's elements; (4, 80, 240, 20) for (1, 20, 60, 5)."""
    check_prediction((4, 80, 240, 20), (1, 20, 60, 5), why="", unit="elements")
    assert "each 4 times too large: elements where the question counts bytes" in capsys.readouterr().out
    for guess, unit in (((4, 80, 240, 21), "elements"), ((4, 80, 240, 20), None), ((5, 20, 60, 1), "elements")):
        check_prediction(guess, (1, 20, 60, 5), why="", unit=unit)
        out = capsys.readouterr().out
        assert out.startswith("✗ Not quite") and "bytes" not in out, out


def test_a_mapping_compares_its_values_and_a_set_its_members(capsys):
    check_prediction({"a": 1}, {"a": 2}, why="")
    assert "Not quite" in capsys.readouterr().out
    check_prediction({"a": 1.0, "b": [2]}, {"b": [2], "a": 1}, why="")
    check_prediction({"x", "y", "z"}, {"z", "y", "x"}, why="")
    check_prediction(["x", "y", "z"], {"z", "y", "x"}, why="")  # a list is not the set
    verdicts = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert verdicts == ["✓ Right", "✓ Right", "✗ Not quite"]


def test_a_percent_given_for_a_fraction_is_named(capsys):
    check_prediction(25, 0.25, why="a quarter of the lanes")
    assert "(Your number is 100 times too large: a percent where the question asks for a fraction? 25% is 0.25.)" \
        in capsys.readouterr().out
    check_prediction(200, 2, why="")  # a count of 2 is no fraction
    assert "percent" not in capsys.readouterr().out
