"""The tree (docs/tour.md) as nodes that know their exact size and render bytes on demand."""
