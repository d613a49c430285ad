"""A listing's names kept joined by NUL (tdbfs/mount/joined_names.py): taken only where the joined bytes hold
exactly the names counted, none empty; indexed, sliced and iterated as the list of them would be."""

from __future__ import annotations

import pytest

from tdbfs.mount.joined_names import JoinedNames

EVEN = [b"__%d_%d_%032x_22" % (t, t, t) for t in range(1_732_550_000_000, 1_732_550_000_300)]
ODD_ONE = EVEN[:150] + [b"__1_1_%032x_22" % 1] + EVEN[150:]


@pytest.mark.parametrize("names, width", [(EVEN, len(EVEN[0])), (ODD_ONE, None), ([b"a", b"bb", b"c"], None),
                                          ([b"ab", b"c", b"def"], None),   # as long as names of width 2
                                          ([b"x" * 7], 7), ([], None), ([b"\xff\xfe", b"ab"], 2)])
def test_joined_names_are_the_names(names, width):
    joined = JoinedNames.of(b"\0".join(names), len(names))
    assert joined is not None and joined.width == width and len(joined) == len(names)
    assert [joined[i] for i in range(len(names))] == names
    assert [joined[-i] for i in range(1, len(names) + 1)] == names[::-1]
    for start, stop in ((0, None), (1, 5), (len(names) - 3, None), (5, 2), (0, 10**6)):
        assert joined[start:stop] == names[start:stop]
    assert joined[::2] == names[::2] and list(joined) == names
    assert joined.decoded() == [n.decode("utf-8", "surrogateescape") for n in names]
    with pytest.raises(IndexError):
        joined[len(names)]
    if width is not None:
        assert joined.span(2, 5) == b"\0".join(names[2:5])


@pytest.mark.parametrize("blob, count", [
    (b"a\0b", 3), (b"a\0b\0c", 2),        # a count the joints do not give
    (b"\0a", 2), (b"a\0", 2), (b"a\0\0b", 3), (b"", 1), (b"\0\0", 3),   # an empty name
    (b"ab\0\0cd", 3), (b"aa\0b\0\0c", 4), (b"a", 0),
])
def test_bytes_that_do_not_hold_the_names_counted_are_refused(blob, count):
    assert JoinedNames.of(blob, count) is None


def test_names_a_folder_cannot_hold_are_not_joined():
    assert JoinedNames.encode(["a", "b\0c"]) is None and JoinedNames.encode(["a", ""]) is None
    joined = JoinedNames.encode(["__1_1_a_22", "\udcff", "é"])
    assert list(joined) == [b"__1_1_a_22", b"\xff", "é".encode()]
