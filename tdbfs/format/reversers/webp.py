"""WEBP (docs/format.md §3.3): each part is a WebP (RIFF) image of one whole tile.

Header `u32 nparts, nparts x u32 encoded_len`. TileDB decodes with libwebp's
WebPDecode{RGB,RGBA,BGR,BGRA} according to the filter's format option; here Pillow
(which links libwebp too) decodes, and the channels are put in the same order.
An image of `width x height` pixels restores `height` rows of `width * 3|4` bytes:
the tile's extents on dimension 0 (rows) and 1 (bytes per row).
"""

from __future__ import annotations

import io

import numpy as np

from .common import Stage, StageError, check_parts_cover, part_list
from .records import summarise

_DEPTH = {"RGB": 3, "BGR": 3, "RGBA": 4, "BGRA": 4}


def reverse_webp(spec, md, data, stage: Stage):
    from PIL import Image  # imported on first use: only WebP tiles need Pillow

    fmt = spec.options.get("format")
    if fmt not in _DEPTH:
        raise StageError(f"WEBP format option is {fmt!r}, not one of RGB, BGR, RGBA, BGRA", 0)
    if stage.datatype.size != 1:
        raise StageError(f"WEBP restores UINT8 pixels, not {stage.datatype.name}", 0)
    depth = _DEPTH[fmt]
    mode = "RGB" if depth == 3 else "RGBA"
    lens, pos = part_list(md, "WEBP")
    check_parts_cover(lens, data, "WEBP")
    outs = []
    images = []
    at = 0
    for i, ln in enumerate(lens):
        try:
            with Image.open(io.BytesIO(bytes(data[at:at + ln])), formats=["WEBP"]) as img:
                width, height = img.size
                if width * height * depth > stage.limit:
                    raise StageError(f"WEBP part {i} is a {width}x{height} image, more than the {stage.limit} bytes "
                                     "this chunk can hold", 0)
                images.append({"width": width, "height": height, "encoded_bytes": ln, "webp_mode": img.mode})
                pixels = np.asarray(img.convert(mode) if img.mode != mode else img, np.uint8)
        except StageError:
            raise
        except Exception as exc:  # Pillow raises many types on a broken image
            raise StageError(f"WEBP part {i} ({ln} bytes) does not decode: {exc}", 0) from None
        if fmt.startswith("BGR"):
            pixels = pixels[..., [2, 1, 0, 3][:depth]]
        outs.append(np.ascontiguousarray(pixels).tobytes())
        at += ln
    record = {"format": fmt, "lossless": spec.options.get("lossless"), "images": images[:65]}
    summarise(record, "images", len(images))
    return md[pos:], memoryview(b"".join(outs)), record
