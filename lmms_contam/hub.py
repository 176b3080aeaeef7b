"""Publishing a perturbed set on the Hugging Face hub, in the layout the tasks load by hub id.

One commit holds the parquet (as `data/test-...` so `load_dataset(repo, split="test")` finds it),
the manifest and a dataset card whose YAML names that split. The set is checked against the
schema before anything is sent, and the local manifest records the commit only once the hub has
accepted it. The token is huggingface_hub's own (`HF_TOKEN` or a saved login); it is never printed.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from lmms_contam.atomic import atomic_path
from lmms_contam.schema import PerturbedSetError, validate
from lmms_contam.set_locations import SetLocation, read_location

DATA_IN_REPO = "data/test-00000-of-00001.parquet"
MANIFEST = "data.manifest.json"


def _set_files(folder: Path) -> tuple[Path, Path, dict, int]:
    """The set's parquet and manifest, checked: (parquet, manifest path, manifest, rows)."""
    parquet, manifest_path = folder / "data.parquet", folder / MANIFEST
    for path in (parquet, manifest_path):
        if not path.is_file():
            raise PerturbedSetError(f"{path}: not found; push a folder written by `perturb` or `import mm-perturb`")
    try:
        manifest = json.loads(manifest_path.read_text())
        benchmark = manifest["benchmark"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise PerturbedSetError(
            f"{manifest_path}: not a perturbed set's manifest ({type(exc).__name__}: {exc})"
        ) from exc
    dataset = read_location(SetLocation("parquet", str(parquet), "push"))  # as the tasks will read it
    validate(dataset, benchmark, str(parquet))
    return parquet, manifest_path, manifest, dataset.num_rows


def dataset_card(manifest: dict, rows: int) -> str:
    """The card: YAML that maps the parquet to split `test`, then what the set is and how it was made."""
    header = {
        "configs": [{"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*.parquet"}]}],
        "tags": ["lmms-contam", "contamination-detection", "counterfactual"],
    }
    made_by = manifest.get("kind", "lmms-contam")
    benchmark = manifest["benchmark"]
    return (
        f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n"
        f"# {benchmark}: semantically perturbed items\n\n"
        f"{rows} items in the lmms-contam perturbed-set schema (version {manifest.get('schema_version')}), made by "
        f"`{made_by}`. Each row keeps the original question, options, answer and image beside the counterfactual "
        "image and its new answer. `data.manifest.json` records the recipe, model ids and revisions, prompt hashes, "
        "seeds, counts at every stage and cost.\n\n"
        f"Evaluate with lmms-eval and the lmms-contam plugin: set `LMMS_CONTAM_DATASET_{benchmark.upper()}` "
        f"to this repository's id and run `--tasks {benchmark}_contam` (original and perturbed items "
        "with the paired contamination metrics).\n"
    )


def push_perturbed_set(folder: str | Path, repo_id: str, private: bool = False) -> str:
    """Upload the set in `folder` to the dataset repo `repo_id` (created if missing); returns the commit id."""
    from huggingface_hub import CommitOperationAdd, HfApi

    folder = Path(folder)
    parquet, manifest_path, manifest, rows = _set_files(folder)
    published = {key: value for key, value in manifest.items() if key != "hub"}  # not an earlier push's record
    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    commit = api.create_commit(
        repo_id,
        [
            CommitOperationAdd(DATA_IN_REPO, str(parquet)),
            CommitOperationAdd(MANIFEST, (json.dumps(published, indent=2) + "\n").encode()),
            CommitOperationAdd("README.md", dataset_card(manifest, rows).encode()),
        ],
        repo_type="dataset",
        commit_message=f"lmms-contam: {manifest['benchmark']} perturbed set, {rows} items",
    )
    recorded = {**published, "hub": {"repo_id": repo_id, "commit": commit.oid, "url": commit.commit_url}}
    with atomic_path(manifest_path) as tmp:
        tmp.write_text(json.dumps(recorded, indent=2) + "\n")
    return commit.oid
