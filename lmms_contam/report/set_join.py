"""Every scored record joined to the set it names, by item and version: the gold a harness scored a reply
against must be the one the set gives that version. A record of an item the set lacks, or scored against
another gold (a run of another set under the same manifest, a samples file or result rows edited), is refused.

A harness's own run of a benchmark in leaderboard mode is matched to the perturbed records by content when it
is paired (hosts/), and so to the set. A record naming another set's manifest than the one here is refused;
where no set resolves here, nothing is joined, and the report's sentence on the set says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from lmms_contam.records import CONTAM, ContamRecord
from lmms_contam.report.inputs import Loaded, ReportInputError
from lmms_contam.schema import PerturbedSetError
from lmms_contam.set_locations import env_var, load_perturbed_set, manifest_sha256, resolve
from lmms_contam.versions import item_versions

TEXT_COLUMNS = ("item_id", "original_id", "options", "original_answer", "new_answer")


def _scored(loaded: Loaded) -> dict[str, list[tuple[str, str, ContamRecord]]]:
    """Per benchmark, (source file, task family, record) of every record the plugin's tasks or exports wrote
    (VLMEvalKit's own CircularEval of a benchmark covers the benchmark's items, not the set's: not joined)."""
    found: dict[str, list[tuple[str, str, ContamRecord]]] = defaultdict(list)
    for entry in loaded.benchmarks:
        for versions in entry.items.values():
            for variant, record in versions.items():
                found[entry.benchmark].append((entry.sources.get(variant, ""), CONTAM, record))
    for run in loaded.detectors:
        if not run.of_the_set:
            continue
        found[run.benchmark] += [(run.source, run.detector, record) for record in run.records]
    return found


def _golds(benchmark: str, family: str, row: dict) -> dict[str, str]:
    """The gold of every version a task of `family` asks of `row` (CircularEval with and without the items it
    would leave out rotated)."""
    versions = item_versions(benchmark, family, row)
    if family != CONTAM:
        versions += item_versions(benchmark, family, row, rotate_all=True)
    return {version.variant: version.gold for version in versions}


def join(benchmark: str, scored: Iterable[tuple[str, str, ContamRecord]]) -> None:
    """Refuse a record whose item the set here lacks, or whose gold is not the set's for its version."""
    location = resolve(benchmark, fetch=False)
    rows = load_perturbed_set(benchmark, fetch=False).select_columns(list(TEXT_COLUMNS))
    by_id = {row["item_id"]: row for row in rows}
    golds: dict[tuple[str, str], dict[str, str]] = {}
    for source, family, record in scored:
        row = by_id.get(record.item_id)
        if row is None or row["original_id"] != record.original_id:
            raise ReportInputError(
                f"{source}: item {record.item_id} (original {record.original_id}) is not an item of the set that "
                f"was scored ({location.value})"
            )
        if (record.item_id, family) not in golds:
            golds[record.item_id, family] = _golds(benchmark, family, row)
        gold = golds[record.item_id, family].get(record.variant)
        if gold is None or gold != record.gold:
            raise ReportInputError(
                f"{source}: item {record.item_id} ({record.variant}) was scored against gold {record.gold!r}, but "
                f"the set that was scored ({location.value}) gives {gold!r}: the run asked another set's item"
            )


def join_all(loaded: Loaded) -> None:
    """Join every benchmark's records to the set that resolves here; a record naming another set's manifest is
    refused, whichever run it is in (one foreign record must not turn the join off for the others). A
    benchmark with no set here is left unjoined."""
    for benchmark, scored in _scored(loaded).items():
        try:
            location = resolve(benchmark, fetch=False)
        except PerturbedSetError:
            continue
        here = manifest_sha256(location)
        for source, _, record in scored:
            if record.set_manifest not in (None, here):
                found = f"manifest SHA-256 {here[:12]}" if here else "no manifest"
                raise ReportInputError(
                    f"{source}: scored the set whose manifest has SHA-256 {record.set_manifest[:12]}, but the set "
                    f"that resolves here, {location.value}, has {found}; point {env_var(benchmark)} at the set that "
                    "was scored, or report each set's runs apart"
                )
        if scored:
            join(benchmark, scored)
