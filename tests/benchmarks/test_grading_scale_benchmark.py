"""benchmarks/grading_scale.py: its checks of grades.csv, its count of task starts and its projection (no run)."""

import pytest

from conftest import load_benchmark
from gpucourse.classroom import trial


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark("grading_scale", "grading_scale_benchmark")
    yield module
    unload()


def rows(bench, class_, max_score=27.0):
    result = []
    for student, kind in class_.items():
        score, status = trial.expected(kind, max_score)
        result.append({"student": student, "assignment": bench.ASSIGNMENT, "score": str(score),
                       "max_score": str(max_score), "status": status, "notes": ""})
    return result


def test_the_class_is_half_solutions_half_releases(bench):
    class_ = trial.students(6)
    assert len(class_) == 6 and sorted(class_.values()).count("solution") == 3


def test_a_right_grades_file_passes_and_every_kind_of_wrong_one_is_named(bench):
    class_ = trial.students(4)
    good = rows(bench, class_)
    assert trial.check_grades(good, bench.ASSIGNMENT, class_, 27.0) == []
    other = {**good[0], "assignment": "02_other"}  # another assignment's row is not this run's
    assert trial.check_grades([*good, other], bench.ASSIGNMENT, class_, 27.0) == []

    lost, doubled = good[1:], [*good, good[0]]
    wrong = [{**good[0], "score": "20.0"}, *good[1:]]
    release_graded = [good[0], {**good[1], "status": "graded"}, *good[2:]]
    stranger = [*good, {**good[0], "student": "nobody"}]
    assert trial.check_grades(lost, bench.ASSIGNMENT, class_, 27.0) == ["student000: missing"]
    assert trial.check_grades(doubled, bench.ASSIGNMENT, class_, 27.0) == ["student000: 2 rows"]
    assert trial.check_grades(stranger, bench.ASSIGNMENT, class_, 27.0) == ["nobody: not in the class"]
    for broken in (wrong, release_graded):
        (problem,) = trial.check_grades(broken, bench.ASSIGNMENT, class_, 27.0)
        assert "expected" in problem


def test_starts_count_each_move_to_processing(bench):
    story = [("a", "released", "waiting", {}, "s1", 0.0), ("a", "waiting", "processing", {}, "s2", 1.0),
             ("b", "queued", "processing", {}, "s3", 1.0), ("a", "processing", "released", {}, "s4", 2.0),
             ("a", "waiting", "processing", {}, "s5", 3.0), ("b", "processing", "memory", {}, "s6", 4.0)]
    assert bench.starts(story) == {"a": 2, "b": 1}


def test_projection_is_rounds_of_the_median_plus_the_overhead(bench):
    assert bench.projection(10.0, 30.0, 16) == 32 * 10.0 + 30.0  # ceil(500 / 16) = 32 rounds
    assert bench.projection(10.0, 30.0, 256) == 2 * 10.0 + 30.0
    assert bench.projection(10.0, 0.0, 500) == 10.0


def test_the_report_says_what_was_killed_what_started_twice_and_projects(bench, tmp_path):
    task = lambda student, worker, start, stop: {  # noqa: E731
        "key": f"grade-{bench.ASSIGNMENT}-{student}", "worker": worker,
        "startstops": [{"action": "transfer", "start": start - 1, "stop": start},
                       {"action": "compute", "start": start, "stop": stop}]}
    tasks = [task("student000", "tcp://a", 110, 120), task("student001", "tcp://b", 110, 122),
             task("student002", "tcp://b", 122, 136), task("student003", "tcp://b", 136, 150)]
    key = lambda s: f"grade-{bench.ASSIGNMENT}-{s}"  # noqa: E731
    run = bench.Run(trial.students(4), 27.0, 60.0, [3.0, 5.0], "tcp://a", 21.0, ["student000"], ["student002"],
                    {key("student000"): 1, key("student001"): 1, key("student002"): 2, key("student003"): 1},
                    tasks, 100.0, 160.0, [], "summary")
    text = bench.section(run)
    assert "median 13.0, mean 12.5; fixed overhead 20 s" in text  # 10 s before the first task, 10 s after the last
    assert "student002 (2x)" in text and "1 given once" in text and "every check passed" in text
    assert "| `tcp://a` (killed) | 1 | 10.0 | 10.0 |" in text
    assert f"| 16 | 32 | {32 * 13 + 20} |" in text
    path = tmp_path / "run.json"
    path.write_text(bench.json.dumps(bench.dataclasses.asdict(run)))
    assert bench.Run(**bench.json.loads(path.read_text())) == run
