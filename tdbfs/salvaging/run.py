"""The salvage itself: plan, then build the new array in a folder beside DEST, renamed to DEST at the end
(a failure leaves no half array). The source is only ever read, through its store.

Order of the build (why: tiledb-py writes with the newest schema the array holds, tiledb/sm/query/
writers/writer_base.cc `array_schema_latest`): the enumerations; then each schema file, oldest first,
followed by the rewrites of the damaged fragments whose footer names it, so that each is written with its
own schema; then the metadata, the delete conditions and the sound fragments, byte for byte.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from .copy import copy_file, copy_fragment, write_file
from ..store.array_store import LABELS_DIR
from .plan import DAMAGED, MISSING, SalvageError, make_plan
from .report import COPIED, LOST, REPORT_FILE, REWRITTEN, FragmentOutcome, Report


def salvage_store(store, dest: str, t: int | None = None, progress=None) -> Report:
    """Salvage the array of `store` (read at `t`, ms; None: now) into the new local folder `dest`.
    SalvageError (nothing written) when `dest` exists, its parent does not, or the schema in force does
    not decode."""
    say = progress or (lambda what: None)
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    if os.path.lexists(dest):
        raise SalvageError(f"{dest} exists: salvage writes a new array")
    if not os.path.isdir(parent):
        raise SalvageError(f"{parent} is not a folder")
    source = str(getattr(store, "path", ""))
    if source and "://" not in source:
        inside = os.path.realpath(source)
        if os.path.realpath(parent) == inside or os.path.realpath(parent).startswith(inside + os.sep):
            raise SalvageError(f"{dest} is inside the source {source}, which salvage never writes")
    say("checking")
    plan = make_plan(store, t)
    labels = _label_plans(store, plan.t)
    report = _report(store, dest, plan)
    if any(f.state == DAMAGED for p in [plan] + [lp for _, _, lp in labels if lp is not None] for f in p.fragments):
        from .rewrite import tiledb_module, tiledb_version
        tiledb_module()
        report.tiledb_version = tiledb_version()
    work = tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.salvage-", dir=parent)
    try:
        _build(store, plan, work, report, say)
        for name, label_store, label_plan in labels:
            where = f"{LABELS_DIR}/{name}"
            if label_plan is None:   # its schema does not decode: why is in the report
                report.lost_files.append(label_store)
                continue
            sub = _report(label_store, os.path.join(dest, where), label_plan)
            _build(label_store, label_plan, os.path.join(work, where), sub, say)
            report.labels[name] = sub
        write_file(work, REPORT_FILE, report.yaml().encode("utf-8"))
        if os.path.lexists(dest):
            raise SalvageError(f"{dest} appeared while the copy was built: it is left as it is")
        os.rename(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return report


def _report(store, dest: str, plan) -> Report:
    return Report(getattr(store, "path", ""), dest, plan.t, plan.schema, list(plan.schemas),
                  len(plan.enumerations), list(plan.metadata), [c.rel for c in plan.conditions],
                  [p.printable().line() for p in plan.lost_files])


def _label_plans(store, t: int) -> list:
    """(name, store, plan) of each dimension label: an array of its own under __labels/ (format_spec/
    array_file_hierarchy.md), salvaged as one into the same place of the copy. A label whose schema does
    not decode: (name, the problem line, None)."""
    out = []
    for name in store.label_names() if store.has_labels() else ():
        try:
            label = store.label_store(name)
            out.append((name, label, make_plan(label, t)))
        except Exception as exc:  # noqa: BLE001 -- NotAnArrayError, SalvageError: the label is lost
            out.append((name, f"{LABELS_DIR}/{name}: the dimension label is lost: {exc}", None))
    return out


def _build(store, plan, work: str, report: Report, say) -> None:
    outcomes: dict[str, FragmentOutcome] = {}
    for rel in plan.enumerations:
        copy_file(store, rel, work)
    schema = store.schema(plan.schema)
    allows_duplicates, dense = bool(schema.allows_dups), bool(schema.dense)
    pending = [f for f in plan.fragments if f.state == DAMAGED]
    for rel in plan.schemas:
        copy_file(store, rel, work)
        for f in [f for f in pending if f.schema == rel]:
            say(f"rewriting {f.rel}")
            outcomes[f.rel] = _rewrite(store, f, work, plan.t, allows_duplicates, dense)
        pending = [f for f in pending if f.schema != rel]
    for f in pending:   # its schema is not among those kept: its metadata does not decode
        outcomes[f.rel] = _lost(f, _first(f.problems))
    for rel in plan.metadata:
        copy_file(store, rel, work)
    for c in plan.conditions:
        if c.source is not None:
            copy_file(store, c.source, work)
        else:
            write_file(work, c.rel, c.data)
    for f in plan.fragments:
        if f.state == MISSING:
            outcomes[f.rel] = _lost(f, _first(f.problems))
        elif f.state != DAMAGED:
            say(f"copying {f.rel}")
            frag = store.fragment(f.rel)
            copy_fragment(store, f.rel, work)
            outcomes[f.rel] = FragmentOutcome(f.rel, COPIED, cells=_cells(frag), note=_note(frag, plan.t))
    report.fragments = [outcomes[f.rel] for f in plan.fragments]


def _rewrite(store, f, work: str, t: int, allows_duplicates: bool, dense: bool) -> FragmentOutcome:
    from .rewrite import rewrite_fragment

    frag = store.fragment(f.rel)
    problems = tuple(p.printable().line() for p in f.problems)
    try:
        r = rewrite_fragment(frag, work, t, store.key.reveal() if store.key is not None else None,
                             allows_duplicates, f.problems, dense)
    except SalvageError:
        raise
    except Exception as exc:  # noqa: BLE001 -- its metadata does not decode, or TileDB refused the write
        return FragmentOutcome(f.rel, LOST, problems=problems, why=_why(exc, f))
    return FragmentOutcome(f.rel, REWRITTEN, problems=problems, written=r.written, cells_kept=r.cells_kept,
                           cells_lost=r.cells_lost, lost_tiles=r.lost_tiles, lost_detail=r.lost_detail,
                           not_read=r.not_read)


def _why(exc: Exception, f) -> str:
    from ..store.problems import problem_of
    return problem_of(exc, f.rel, "fragment").printable().line()


def _first(problems) -> str:
    return problems[0].printable().line() if problems else "unknown"


def _lost(f, why: str) -> FragmentOutcome:
    return FragmentOutcome(f.rel, LOST, problems=tuple(p.printable().line() for p in f.problems), why=why)


def _cells(frag) -> int:
    """The cells a reader takes from the fragment: a dense one's non-empty domain (its tiles also hold
    padding), a sparse one's cell count."""
    try:
        if frag.dense:
            count = 1
            for lo, hi in frag.non_empty_domain():
                count *= int(hi) - int(lo) + 1
            return count
        return int(frag.cell_count())
    except Exception:  # noqa: BLE001 -- sound: it decodes
        return 0


def _note(frag, t: int) -> str:
    n = frag.parsed_name
    if n.t2 > t:
        return (f"holds cells written up to {n.t2}, after the time read ({t}): open the copy at {t} to read "
                "what the source returned then")
    return ""
