"""NONE / NOOP: nothing to undo."""


def reverse_noop(spec, md, data, stage):
    return md, data, {}
