"""Array schemas."""

from __future__ import annotations

from ...format.datatypes import ARRAY_TYPES, DATA_ORDERS, LAYOUTS, VAR_NUM, enum_name
from ...format.schema import (CURRENT_DOMAIN_TYPES, ArraySchema, Attribute, CurrentDomain, Dimension, DimensionLabel,
                              decode_value, plain)
from .filters import describe_pipeline


def _cvn(n: int):
    return "var" if n == VAR_NUM else n


def _fill_value(attr: Attribute):
    """The attribute's fill value decoded for display (list/scalar/str/hex)."""
    dt = attr.datatype
    value = decode_value(attr.fill_value, dt, single=(attr.cell_val_num == 1 or attr.var_sized) or None)
    if value is None:
        return attr.fill_value.hex()
    return plain(value)


def _describe_dimension(d: Dimension, version: int) -> dict:
    out = {"name": d.name, "datatype": d.datatype.name, "cell_val_num": _cvn(d.cell_val_num)}
    if version >= 5:
        out["filters"] = describe_pipeline(d.filters)
    out["domain"] = None if d.domain is None else [plain(d.domain[0]), plain(d.domain[1])]
    out["domain_hex"] = d.domain_raw.hex()
    out["null_tile_extent"] = d.null_tile_extent
    out["tile_extent"] = plain(d.tile_extent)
    if not d.null_tile_extent:
        out["tile_extent_hex"] = d.tile_extent_raw.hex()
    return out


def _describe_attribute(a: Attribute, version: int) -> dict:
    out = {"name": a.name, "datatype": a.datatype.name, "cell_val_num": _cvn(a.cell_val_num),
           "filters": describe_pipeline(a.filters),
           "fill_value": _fill_value(a), "fill_value_hex": a.fill_value.hex()}
    if not a.fill_value_stored:
        out["fill_value_default"] = True      # not stored before v6: TileDB's default for the type
    if version >= 7:
        out["nullable"] = a.nullable
        out["fill_value_validity"] = a.fill_validity
    if version >= 17:
        out["order"] = enum_name(DATA_ORDERS, a.order)
    if version >= 20:
        out["enumeration"] = a.enumeration_name or None
    return out


def _describe_label(lb: DimensionLabel) -> dict:
    return {"dim_index": lb.dim_index, "name": lb.name, "uri_is_relative": lb.uri_is_relative,
            "uri": lb.uri, "label_attr_name": lb.label_attr_name,
            "label_order": enum_name(DATA_ORDERS, lb.label_order),
            "label_datatype": lb.label_datatype.name, "label_cell_val_num": _cvn(lb.label_cell_val_num),
            "is_external": lb.is_external}


def _describe_current_domain(cd: CurrentDomain, dims: tuple[Dimension, ...]) -> dict:
    out = {"version": cd.version, "empty": cd.empty}
    if not cd.empty:
        out["type"] = enum_name(CURRENT_DOMAIN_TYPES, cd.type)
        out["ranges"] = [{"dimension": d.name, "min": plain(r[0]), "max": plain(r[1])}
                         for d, r in zip(dims, cd.ranges)]
    return out


def describe_schema(schema: ArraySchema) -> dict:
    """Every stored field in spec order (fields the version lacks are left out), enums by name."""
    v = schema.version
    out: dict = {"version": v}
    if v >= 5:
        out["allows_dups"] = schema.allows_dups
    out["array_type"] = enum_name(ARRAY_TYPES, schema.array_type)
    out["tile_order"] = enum_name(LAYOUTS, schema.tile_order)
    out["cell_order"] = enum_name(LAYOUTS, schema.cell_order)
    out["capacity"] = schema.capacity
    out["coords_filters"] = describe_pipeline(schema.coords_filters)
    out["offsets_filters"] = describe_pipeline(schema.offsets_filters)
    if schema.validity_filters is not None:
        out["validity_filters"] = describe_pipeline(schema.validity_filters)
    domain: dict = {}
    if schema.domain_datatype is not None:
        domain["datatype"] = schema.domain_datatype.name
    domain["dimensions"] = [_describe_dimension(d, v) for d in schema.dimensions]
    out["domain"] = domain
    out["attributes"] = [_describe_attribute(a, v) for a in schema.attributes]
    if v >= 18:
        out["dimension_labels"] = [_describe_label(lb) for lb in schema.labels]
    if v >= 20:
        out["enumerations"] = [{"name": e.name, "file_name": e.file_name} for e in schema.enumerations]
    if schema.current_domain is not None:
        out["current_domain"] = _describe_current_domain(schema.current_domain, schema.dimensions)
    if schema.trailing_bytes:
        out["trailing_bytes"] = schema.trailing_bytes
    if schema.problems:
        out["problems"] = [p.as_problem().to_dict() for p in schema.problems]
    return out
