"""Problems: one type (tdbfs.problem.Problem), one log (store/problems.py), one dedup."""

from __future__ import annotations

import threading

from tdbfs.format.errors import FormatError
from tdbfs.problem import ERROR, WARNING, Problem, unique
from tdbfs.store.problems import ProblemLog, problem_of
from tdbfs.store.storage import NotRegularError


def test_a_format_error_carries_its_problem():
    exc = FormatError("__fragments/f/a0.tdb", "tile 3", 1234, "checksum does not match", within="chunk 0")
    p = exc.as_problem()
    assert p == Problem("__fragments/f/a0.tdb", "tile 3", 1234, "checksum does not match", ERROR, "chunk 0")
    assert problem_of(exc, "other", "other") == p
    assert p.to_dict() == {"file": "__fragments/f/a0.tdb", "structure": "tile 3", "offset": 1234,
                           "message": "checksum does not match", "severity": "error", "within": "chunk 0"}
    assert p.line() == "__fragments/f/a0.tdb:1234: tile 3 (chunk 0, payload byte 1234): checksum does not match"


def test_other_exceptions_become_problems_of_what_was_being_built():
    assert problem_of(FileNotFoundError(2, "gone", "__meta/x"), "f", "s") == Problem("__meta/x", "file", None,
                                                                                       "file missing")
    p = problem_of(NotRegularError("__schema/x", "FIFO"), "f", "s")
    assert (p.file, p.structure, p.offset) == ("__schema/x", "file", None) and "FIFO" in p.message
    p = problem_of(ValueError("bad"), "__commits/c.con", "consolidated commits")
    assert p == Problem("__commits/c.con", "consolidated commits", None, "ValueError: bad")
    assert "without" not in p.to_dict() and "within" not in p.to_dict()
    assert p.line() == "__commits/c.con:-: consolidated commits: ValueError: bad"


def test_names_that_are_not_utf8_are_escaped_when_printed_only():
    name = b"__fragments/\xff".decode("utf-8", "surrogateescape")
    p = Problem(name, "fragment name", 0, "not a fragment name")
    assert p.file == name                       # kept as found, so the store can open it
    assert "\\xff" in p.line() and "\\xff" in p.printable().file
    p.line().encode("utf-8")                    # printable: never a UnicodeEncodeError


def test_one_dedup_ignores_severity_and_keeps_first_order():
    a = Problem("x", "s", 1, "m")
    b = Problem("y", "s", None, "m", WARNING)
    again = Problem("x", "s", 1, "m", WARNING)
    assert unique([a, b], [again, a], []) == [a, b]
    log = ProblemLog()
    for p in (a, b, again, a):
        log.add(p)
    assert log.items == [a, b]
    log.clear()
    assert log.items == [] and (log.add(again) or log.items == [again])


def test_the_log_records_what_attempt_catches_once_even_from_many_threads():
    log = ProblemLog()

    def fail():
        raise FormatError("f", "footer", 8, "footer length exceeds the file")

    assert log.attempt(lambda: 41 + 1, "f", "footer") == 42
    threads = [threading.Thread(target=lambda: [log.attempt(fail, "f", "footer") for _ in range(200)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert log.items == [Problem("f", "footer", 8, "footer length exceeds the file")]
