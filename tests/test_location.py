"""A location is parsed once, by the front end given it (tdbfs/location.py): what the store opens, and
the parts of an object store's URL, from the text as typed."""

from __future__ import annotations

import os

import pytest

from tdbfs.location import Location


@pytest.mark.parametrize("text, kind, path, scheme, bucket, key", [
    ("arr", "local", os.path.join(os.getcwd(), "arr"), None, None, None),
    ("/data/arr/", "local", "/data/arr", None, None, None),
    ("./a/../b", "local", os.path.join(os.getcwd(), "b"), None, None, None),
    ("http://host/arr", "local", os.path.join(os.getcwd(), "http:/host/arr"), None, None, None),  # not a store's
    ("s3://bucket/some/arr/", "s3", "s3://bucket/some/arr/", "s3", "bucket", "some/arr"),
    ("S3A://bucket", "s3", "S3A://bucket", "s3a", "bucket", ""),
    ("gs://b/x", "gcs", "gs://b/x", "gs", "b", "x"),
    ("gcs://b//x//y", "gcs", "gcs://b//x//y", "gcs", "b", "x//y"),
    ("az://container/arr", "az", "az://container/arr", "az", "container", "arr"),
    ("abfss://container/arr", "az", "abfss://container/arr", "abfss", "container", "arr"),
])
def test_a_location_is_parsed_from_what_was_typed(text, kind, path, scheme, bucket, key):
    loc = Location.parse(text)
    assert (loc.text, loc.kind, loc.path, loc.scheme, loc.bucket, loc.key) == (text, kind, path, scheme, bucket, key)
    assert loc.remote == (kind != "local")
    assert str(loc) == os.fspath(loc) == path
    assert Location.of(loc) is loc and Location.of(text) == loc


def test_a_location_is_a_value():
    loc = Location.parse("s3://bucket/arr")
    with pytest.raises(AttributeError):
        loc.path = "elsewhere"
    assert {loc, Location.parse("s3://bucket/arr")} == {loc}
