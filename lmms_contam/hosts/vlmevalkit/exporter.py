"""`lmms-contam export vlmevalkit`: a resolved perturbed set as a VLMEvalKit custom multiple-choice dataset.

Declared here without importing the export itself (pandas, VLMEvalKit's loader): the command line lists every
host's export when it starts."""

from __future__ import annotations

import argparse

from lmms_contam.hosts.base import Exporter, ExportRefused
from lmms_contam.registry.specs import perturbable


class VlmEvalKitExporter(Exporter):
    help = "a VLMEvalKit custom multiple-choice dataset (a TSV in $LMUData)"
    description = (
        "Write the set the tasks resolve for BENCHMARK (its verified subset when there is one) as "
        "<LMUData>/<Name>_contam.tsv, which VLMEvalKit runs as a custom multiple-choice dataset with its own model "
        "loaders, prompt and answer matching: python -m vlmeval --data MMStar_contam --model ... --judge "
        "exact_matching. One row per version of every kept item (split = original | perturbed), with the ids "
        "`lmms-contam report` pairs them by; a manifest beside it records the set and its verification. "
        "--family writes one version (perturbed: pair it with an existing VLMEvalKit run of the benchmark) or a "
        "peer detector's (option_shuffle, text_only), each under a name of its own. MME and NaturalBench are "
        "refused with the reason: VLMEvalKit cannot score their yes/no questions from a TSV of ours; so is "
        "masked_option: VLMEvalKit cannot ask for an option's text and match it exactly."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("benchmark", choices=perturbable())  # MME and NaturalBench: refused with the reason
        parser.add_argument(
            "--family",
            default="contam",
            help="which versions of the items: contam (the default: both), perturbed, original, "
            "option_shuffle or text_only",
        )
        parser.add_argument("--lmudata", help="VLMEvalKit's data folder (default $LMUData, else ~/LMUData)")

    def export(self, args: argparse.Namespace) -> list[str]:
        from lmms_contam.hosts.vlmevalkit.export import export_set
        from lmms_contam.schema import PerturbedSetError

        try:
            exported = export_set(args.benchmark, args.family, args.lmudata)
        except (PerturbedSetError, ValueError) as exc:
            raise ExportRefused(exc) from exc
        except OSError as exc:  # the TSV or its manifest could not be written: neither was published
            raise ExportRefused(f"cannot write the export ({exc}); nothing was exported") from exc
        record = exported.verification or {}
        verified = (
            f"verified: kept {record.get('kept')} of {record.get('of')}"
            if record.get("verified")
            else "NOT verified: run `lmms-contam verify` first, or read a negative delta with care"
        )
        return [
            f"{exported.benchmark}: {exported.items} items, {exported.rows} rows -> {exported.tsv} ({verified})",
            *(f"  left out {item}: {why}" for item, why in exported.left_out.items()),
            f"run it: python -m vlmeval --data {exported.dataset} --model MODEL --judge exact_matching "
            f"(with LMUData={exported.tsv.parent}); then: lmms-contam report WORK_DIR",
        ]


EXPORTER = VlmEvalKitExporter()
