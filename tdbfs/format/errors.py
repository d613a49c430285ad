"""The one error type of the format layer: it always says where in which file."""

from __future__ import annotations


class FormatError(Exception):
    """Bytes that do not decode as the structure the spec describes.

    `file` is the path of the file relative to the array root, `structure` the
    spec's name for what was being decoded, `offset` the byte offset where the
    problem was found (in the file, or in the decoded payload named by `within`).
    """

    def __init__(self, file: str, structure: str, offset: int, message: str, within: str = ""):
        self.file = file
        self.structure = structure
        self.offset = offset
        self.message = message
        self.within = within
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.within}, " if self.within else ""
        return f"{self.file}: {self.structure} at {where}byte {self.offset}: {self.message}"

    def as_problem(self) -> dict:
        problem = {
            "file": self.file,
            "structure": self.structure,
            "offset": self.offset,
            "message": self.message,
        }
        if self.within:
            problem["within"] = self.within
        return problem
