"""What `grade` makes of a submission's scores (statuses, notes, grades.csv) and what its options say."""

import pytest

from gpucourse.classroom.grade import Result, main, release_note
from gpucourse.classroom.submission import Graded, compare, last_error

NOTEBOOK = "a1"


def graded_with(report: dict, settle: str | None = None) -> Graded:
    """A submission whose gradebook has a test_shown (present, 1 point) and a test_deleted (absent: no score, to be
    graded by hand), compared with the clean room's ``report``."""
    graded = Graded("ann", scores={(NOTEBOOK, "test_shown"): (1.0, False), (NOTEBOOK, "test_deleted"): (None, True)})
    compare(graded, {NOTEBOOK: report}, settle)
    return graded


MISSING = {"autograded": {"test_shown": 1.0}, "clean_room": {"test_shown": 1.0, "test_deleted": 2.0}}


def test_a_test_the_notebook_lacks_needs_review_and_scores_0_until_settled():
    graded = graded_with(MISSING)
    assert graded.status == "needs review"
    assert graded.notes[0] == "test_deleted: not in the notebook, 2 in the clean room"
    assert graded.scores[NOTEBOOK, "test_deleted"] == (0.0, True)
    assert graded.clean_room_score == 3.0


@pytest.mark.parametrize("settle, score", [("clean-room", 2.0), ("notebook", 0.0)])
def test_a_settled_review_gives_a_missing_test_the_score_of_whose_scores_stand(settle, score):
    graded = graded_with(MISSING, settle)
    assert graded.status == "graded" and graded.scores[NOTEBOOK, "test_deleted"] == (score, False)
    assert graded.notes == [f"reviewed: the {settle}'s scores stand (1 test(s) differed)"]


def test_a_test_that_scores_more_in_the_clean_room_needs_review_too_and_the_clean_room_can_stand():
    higher = {"autograded": {"test_shown": 0.0, "test_deleted": 0.0},
              "clean_room": {"test_shown": 1.0, "test_deleted": 0.0}}
    assert graded_with(higher).status == "needs review"
    assert graded_with(higher).notes[0] == "test_shown: 0 in the notebook, 1 in the clean room"
    assert graded_with(higher, "clean-room").scores[NOTEBOOK, "test_shown"] == (1.0, False)


def test_grades_csv_writes_every_score_in_one_format():
    graded = graded_with({"autograded": {"test_shown": 0}, "clean_room": {"test_shown": 0, "test_deleted": 0}})
    row = Result("ann", clean_room_score=graded.clean_room_score).row(NOTEBOOK)
    assert [str(value) for value in row[2:5]] == ["0.0", "0.0", "0.0"]


def test_the_limits_are_explained_with_their_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--cell-timeout CELL_TIMEOUT seconds a cell may run; a cell past it is stopped (default: 300)",
                  "--notebook-timeout NOTEBOOK_TIMEOUT seconds a notebook may run; later cells are not run "
                  "(default: 1200)",
                  "--memory-limit MEMORY_LIMIT bytes of data a student's kernel may allocate (default: 8589934592)",
                  "--output-bytes OUTPUT_BYTES bytes an output keeps in the graded notebook and the feedback; the "
                  "rest is cut (default: 20000)"):
        assert words in text


def test_the_reason_a_submission_failed_is_the_traceback_s_last_line_not_nbgrader_s_lines_around_it():
    output = """[AutogradeApp | ERROR] There was an error processing assignment: /tmp/x/submitted/ann/a1
    Traceback (most recent call last):
    gpucourse.classroom.autograde.KernelDidNotStart: no student code ran, the grading machine failed: RuntimeError: x
[AutogradeApp | WARNING] Removing failed assignment: /tmp/x/autograded/ann/a1
[AutogradeApp | ERROR] There was an error processing assignment 'a1' for student 'ann'
[AutogradeApp | ERROR] Please see the the above traceback for details on the specific errors on the above failures.
"""
    assert last_error(output) == "KernelDidNotStart: no student code ran, the grading machine failed: RuntimeError: x"


def test_a_class_that_mixes_the_exchange_and_an_lms_is_told_how_to_release_its_feedback(tmp_path):
    def feedback(student, through_exchange):
        folder = tmp_path / "feedback" / student / "a1"
        folder.mkdir(parents=True)
        (folder / "a1.html").write_text("<html></html>")
        if through_exchange:
            (folder / "timestamp.txt").write_text("2026-11-30 12:00:00")

    assert release_note(tmp_path, "a1") == []
    feedback("ann", True)
    assert release_note(tmp_path, "a1") == []  # the exchange alone: release_feedback as usual
    feedback("bob", False)
    feedback("cy", False)
    assert release_note(tmp_path, "a1") == [
        "2 submission(s) came without the exchange (zip_collect): send those students their feedback/<student>/a1/"
        "*.html yourself; release the others' with nbgrader release_feedback a1 "
        "--CourseDirectory.student_id_exclude=bob,cy"]
    (tmp_path / "feedback" / "ann" / "a1" / "timestamp.txt").unlink()
    assert "release the others'" not in release_note(tmp_path, "a1")[0]  # nobody came through the exchange
