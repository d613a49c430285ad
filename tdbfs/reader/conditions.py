"""Delete conditions on cells: which cells a `.del` commit keeps (`QueryCondition::apply_ast_node_sparse`
and `BinaryCmpNullChecks`, tiledb/sm/query/query_condition.cc).

TileDB stores the negation of the user's delete condition (`DeletesAndUpdates::dowork` writes
`negated_condition()`), so the stored condition is a keep filter: a cell it is false for is deleted.
It is evaluated on the fragment's own fields (the columns of store/tile_columns.py): a field the
fragment does not hold makes its node false for every cell; a null cell fails every comparison; strings
and var-sized values compare as their bytes (`std::string_view`, unsigned, a prefix first).
"""

from __future__ import annotations

from ..format.commits import ConditionExpression, ConditionValue
from ..lazy import np

LT, LE, GT, GE, EQ, NE, IN, NOT_IN = range(8)
AND, OR = 0, 1
_COMPARE = {LT: lambda a, b: a < b, LE: lambda a, b: a <= b, GT: lambda a, b: a > b,
            GE: lambda a, b: a >= b, EQ: lambda a, b: a == b, NE: lambda a, b: a != b}


class UnsupportedCondition(ValueError):
    """A condition this reader cannot evaluate (an operator TileDB never stores, a NOT node)."""


def keeps(node, columns: dict, n: int):
    """The cells of a tile the condition `node` is true for: bool array of n. `columns`: name -> Column."""
    if node is None:
        return np.ones(n, bool)
    if isinstance(node, ConditionExpression):
        parts = [keeps(child, columns, n) for child in node.children]
        if node.combination_op == AND:
            return np.logical_and.reduce(parts) if parts else np.ones(n, bool)
        if node.combination_op == OR:
            return np.logical_or.reduce(parts) if parts else np.zeros(n, bool)
        raise UnsupportedCondition(f"combination {node.op_name} at offset {node.offset}")
    return _value_node(node, columns, n)


def _value_node(node: ConditionValue, columns: dict, n: int):
    column = columns.get(node.field)
    if column is None:
        return np.zeros(n, bool)
    valid = column.validity if column.validity is not None else np.ones(n, bool)
    if node.op not in _COMPARE and node.op not in (IN, NOT_IN):
        raise UnsupportedCondition(f"operator {node.op_name} at offset {node.offset}")
    if not node.value and column.validity is not None and node.op in (EQ, NE):
        return ~valid if node.op == EQ else valid.copy()   # a null test
    if node.op in (IN, NOT_IN):
        members = set(node.members)
        inside = np.array([column.cell_bytes(i) in members for i in range(n)], bool)
        return valid & (inside if node.op == IN else ~inside)
    fixed_number = column.offsets is None and column.values.dtype.kind not in "SO" and column.per_cell == 1
    if fixed_number and len(node.value) == column.values.dtype.itemsize:
        value = np.frombuffer(node.value, column.values.dtype)[0]
        return valid & np.asarray(_COMPARE[node.op](column.values.reshape(-1), value), bool)
    compare = _COMPARE[node.op]
    if column.values.dtype.kind == "S":   # fixed strings compare with their stored bytes, padding included
        raw = [column.values[i].tobytes() for i in range(n)]
    else:
        raw = [column.cell_bytes(i) for i in range(n)]
    return valid & np.array([compare(r, node.value) for r in raw], bool)
