"""The one error type of the format layer: it always says where in which file."""

from __future__ import annotations

from ..errors import TdbfsError
from ..problem import Problem


class FormatError(TdbfsError):
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

    def as_problem(self) -> Problem:
        return Problem(self.file, self.structure, self.offset, self.message, within=self.within)


def safety_net(structure: str, *, file_arg: str = "file", offset_arg: str | None = None,
               base_arg: str | None = None):
    """Decorate a public parser so that nothing but FormatError leaves it, whatever the bytes.

    Lengths are checked where they are read; this is the last resort for a check that is
    missing: the stray exception becomes a FormatError at the structure's start (`offset_arg`,
    plus `base_arg`, or 0) whose message names the exception, so the fault stays visible.
    """
    import functools
    import inspect

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except FormatError:
                raise
            except Exception as exc:  # noqa: BLE001 - the point: only FormatError may leave a parser
                try:
                    bound = sig.bind(*args, **kwargs)
                    bound.apply_defaults()
                    arguments = bound.arguments
                except TypeError:
                    raise exc from None   # a caller's mistake, not the bytes'
                offset = arguments.get(offset_arg, 0) if offset_arg else 0
                offset += arguments.get(base_arg, 0) if base_arg else 0
                within = arguments.get("within")
                named = arguments.get("structure")
                raise FormatError(str(arguments.get(file_arg, "")), named if isinstance(named, str) else structure,
                                  offset if type(offset) is int else 0,
                                  f"undecodable ({type(exc).__name__}: {exc})",
                                  within if isinstance(within, str) else "") from exc
        return guarded
    return wrap
