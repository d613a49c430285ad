"""The tree of VIEWS.md as nodes that know their exact size and render bytes on demand."""
