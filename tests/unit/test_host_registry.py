"""A host is a registered plugin: a harness the report did not know reads through the registry alone."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from lmms_contam.cli import main
from lmms_contam.hosts import registry
from lmms_contam.hosts.base import Exporter, ExportRefused, Host, ReadOptions
from lmms_contam.report.inputs import Loaded, ModelBenchmark, ReportInputError, ScoredItem

SUFFIX = ".toyhost.jsonl"


class ToyExporter(Exporter):
    """Writes the benchmark's name and the family asked for to the file named."""

    help = "a toy harness's dataset"
    description = "One line naming the benchmark and its family."

    def add_arguments(self, parser) -> None:
        parser.add_argument("benchmark")
        parser.add_argument("--family", default="contam")
        parser.add_argument("--out", required=True)

    def export(self, args) -> list[str]:
        if args.family != "contam":
            raise ExportRefused(f"the toy harness takes no {args.family} family")
        Path(args.out).write_text(f"{args.benchmark} {args.family}\n")
        return [f"{args.benchmark} -> {args.out}"]


class ToyHost(Host):
    """One JSON line per scored item, in files named `<model>.toyhost.jsonl`."""

    name = "ToyHarness"
    key = "toy"
    outputs = "a toy harness's results (*.toyhost.jsonl)"
    exporter = ToyExporter()

    def wrote(self, path: Path) -> bool:
        return path.name.endswith(SUFFIX) if path.is_file() else any(path.rglob(f"*{SUFFIX}"))

    def run_file(self, path: Path) -> bool:
        return path.name.endswith(SUFFIX)

    def load(self, paths: Iterable[Path], options: ReadOptions) -> Loaded:
        files = sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob(f"*{SUFFIX}")))
        entries: dict[tuple[str, str], ModelBenchmark] = {}
        for file in files:
            for number, line in enumerate(file.read_text().splitlines(), 1):
                try:
                    row = json.loads(line)
                    item = ScoredItem(**{k: row[k] for k in ("benchmark", "item_id", "original_id", "variant",
                                                             "gold", "correct", "n_options", "response")})  # fmt: skip
                except (ValueError, KeyError, TypeError) as exc:
                    raise ReportInputError(f"{file}: line {number}: {exc}") from exc
                model = file.name.removesuffix(SUFFIX)
                entry = entries.setdefault(
                    (model, item.benchmark), ModelBenchmark(model, item.benchmark, host=self.name)
                )
                entry.items[item.item_id][item.variant] = item
                entry.sources[item.variant] = str(file)
        return Loaded(list(entries.values()), [])


@pytest.fixture
def toy_host():
    host = ToyHost()
    registry.add_host(host)
    yield host
    del registry.HOSTS[host.key]


def _write_run(folder: Path, model: str, pairs: list[tuple[int, int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, versions in enumerate(pairs):
        for variant, correct in zip(("original", "perturbed"), versions, strict=True):
            lines.append(json.dumps({"benchmark": "realworldqa", "item_id": f"q{i}", "original_id": f"q{i}",
                                     "variant": variant, "gold": "A" if variant == "original" else "B",
                                     "correct": correct, "n_options": 4, "response": "A"}))  # fmt: skip
    (folder / f"{model}{SUFFIX}").write_text("\n".join(lines) + "\n")


def test_the_report_reads_a_registered_host_with_no_other_change(toy_host, tmp_path, capsys):
    _write_run(tmp_path / "runs", "parrot", [(1, 0)] * 14 + [(1, 1)] * 6)
    _write_run(tmp_path / "runs", "thinker", [(1, 1)] * 15 + [(0, 1)] * 3 + [(0, 0)] * 2)
    out, markdown = tmp_path / "report.json", tmp_path / "report.md"
    assert main(["report", str(tmp_path / "runs"), "--json", str(out), "--markdown", str(markdown)]) == 0
    results = {r["model"]: r for r in json.loads(out.read_text())["results"]}
    assert {r["host"] for r in results.values()} == {"ToyHarness"}
    assert results["parrot"]["verdict"] == "contaminated" and results["parrot"]["delta"] == pytest.approx(-0.7)
    assert results["thinker"]["verdict"] == "no evidence" and results["thinker"]["delta"] == pytest.approx(0.15)
    assert "| parrot | realworldqa | ToyHarness |" in markdown.read_text()
    # The report may not write over the host's files, as for the built-in hosts.
    (victim,) = (tmp_path / "runs").glob(f"parrot{SUFFIX}")
    assert main(["report", str(tmp_path / "runs"), "--json", str(victim)]) == 2
    assert "is a file of the runs" in capsys.readouterr().err or victim.read_text().startswith('{"benchmark"')


def test_a_path_no_host_wrote_names_every_host_s_outputs(toy_host, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("nothing")
    assert main(["report", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert "lmms-eval output" in err and "VLMEvalKit work dir" in err and "toy harness's results" in err


def test_two_hosts_cannot_share_a_name(toy_host):
    with pytest.raises(ValueError, match="already listed"):
        registry.add_host(ToyHost())
    assert registry.host_named("toy") is toy_host
    with pytest.raises(ValueError, match="no host 'nope'"):
        registry.host_named("nope")


def test_a_registered_host_s_export_is_a_command(toy_host, tmp_path, capsys):
    """`lmms-contam export` lists every registered host with an exporter, and runs it with its own arguments."""
    out = tmp_path / "toy.txt"
    assert main(["export", "toy", "mmstar", "--out", str(out)]) == 0
    assert out.read_text() == "mmstar contam\n" and f"mmstar -> {out}" in capsys.readouterr().out
    assert main(["export", "toy", "mmstar", "--out", str(out), "--family", "perturbed"]) == 2
    assert capsys.readouterr().err.strip() == "lmms-contam export: the toy harness takes no perturbed family"
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    listed = capsys.readouterr().out
    assert "toy" in listed and "vlmevalkit" in listed and "lmms-eval" not in listed  # lmms-eval has no export
