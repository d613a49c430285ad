"""The tree (README.md, "A tour of the tree") as nodes that know their exact size and render bytes on demand."""
