"""The plugin's task YAMLs and their `!function` module, written from the registry.

Each task is its benchmark's built-in lmms-eval task (prompt, generation settings, model-specific blocks
and metrics, read from the installed lmms-eval with its `include`s and relative `!function`s resolved),
with the plugin's documents, scoring and metrics put in. `lmms-contam tasks generate` writes them into
the package, where plain `lmms-eval` and an installed wheel find them; tests/integration/test_task_files.py writes
them again and fails on any difference, so an lmms-eval upgrade that changes a prompt shows up there.
"""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lmms_contam.atomic import atomic_path
from lmms_contam.detectors.registry import DETECTORS
from lmms_contam.hosts.lmms_eval import scanned, scoring
from lmms_contam.hosts.lmms_eval.bindings import BINDINGS
from lmms_contam.hosts.lmms_eval.scoring import (
    GROUP_SCHEMES,
    PAIRED_METRICS,
    SINGLE_METRICS,
    Metric,
    detector_metrics,
)
from lmms_contam.records import CONTAM, ORIGINAL, PERTURBED
from lmms_contam.registry.base import BenchmarkSpec
from lmms_contam.registry.specs import SPECS

PACKAGE = Path(__file__).resolve().parents[2]  # lmms_contam/
FUNCTIONS_MODULE = "lmms_contam.hosts.lmms_eval.task_functions"
FUNCTIONS_FILE = Path(__file__).resolve().parent / "task_functions.py"
LOCATOR = "dataset_locator.jsonl"
SCANNED = "scanned"
PAIRED_GROUP = "contam_paired"
METADATA = [{"version": 1.0}]  # the report reads tasks of this version
# Blocks every task takes from its built-in task as they are; the plugin supplies the rest.
PROMPT_KEYS = (
    "output_type",
    "doc_to_visual",
    "doc_to_text",
    "doc_to_messages",
    "doc_to_target",
    "model_specific_target_kwargs",
    "generation_kwargs",
    "lmms_eval_specific_kwargs",
    "model_specific_generation_kwargs",
)
HUB_KEYS = ("dataset_path", "dataset_name", "dataset_kwargs", "test_split")  # the *_scanned tasks'
REPLACED_KEYS = ("task", "tag", "group", "process_results", "metric_list", "metadata")
ABOUT = {
    ORIGINAL: "The original {label} items restricted to the kept subset, so both sides score the same items.",
    PERTURBED: "The counterfactual versions of the kept {label} items, scored exactly as the built-in task.",
    CONTAM: "Both versions of every kept {label} item: accuracies, delta, CI, McNemar.",
    SCANNED: "{label} as lmms-eval's own task scores it, plus contamination flags per item joined from the scan "
    "folder ($LMMS_CONTAM_SCANS; see lmms_contam/hosts/lmms_eval/scanned.py and the README's 'Scanned tasks').",
}
BY_GROUP = (
    "Its built-in aggregations assert every row in order, or every pair; these compute the same scores "
    "by group id, so subsets, --limit and sets that kept one question of a pair work."
)


class TaskFileError(ValueError):
    pass


class Function(str):
    """A `!function` target: the dotted path of a callable."""


class _Reader(yaml.SafeLoader):
    """Reads a task YAML without importing the functions it names."""


class _Writer(yaml.SafeDumper):
    pass


_Reader.add_constructor("!function", lambda loader, node: Function(loader.construct_scalar(node)))
_Writer.add_representer(Function, lambda dumper, target: dumper.represent_scalar("!function", str(target)))
# Prompts keep their escapes on one line ("\nAnswer with..."), as lmms-eval's YAMLs write them.
_Writer.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"' if "\n" in text else None),
)


def builtin_tasks_dir() -> Path:
    found = importlib.util.find_spec("lmms_eval")
    if found is None or found.origin is None:
        raise TaskFileError("lmms-eval is not installed: the tasks are built from its task YAMLs")
    return Path(found.origin).parent / "tasks"


def base_yaml(spec: BenchmarkSpec) -> Path:
    """The task YAML a benchmark's tasks are built from: lmms-eval's, or the package's own."""
    bound = BINDINGS[spec.name]
    if bound.builtin_yaml:
        return builtin_tasks_dir() / bound.builtin_yaml
    if bound.own_task_yaml:
        return PACKAGE / bound.own_task_yaml
    raise TaskFileError(f"{spec.name} names no task YAML (builtin_yaml or own_task_yaml): it can have no tasks")


def read_task_yaml(path: Path) -> dict:
    """A task YAML as lmms-eval merges it (the first include listed wins, the file itself over all), with each
    `!function` that lmms-eval would find as a file beside it (`utils.f`) made an absolute module path."""
    if not path.is_file():
        raise TaskFileError(f"{path}: no such task YAML (is the installed lmms-eval the one the registry names?)")
    config = yaml.load(path.read_text(), Loader=_Reader) or {}
    includes = config.pop("include", [])
    merged: dict = {}
    for include in reversed([includes] if isinstance(includes, str) else includes):
        merged.update(read_task_yaml(Path(include) if Path(include).is_absolute() else path.parent / include))
    merged.update(_absolute(config, path.parent))
    return merged


def _absolute(value: object, folder: Path) -> object:
    if isinstance(value, Function):
        module, name = value.rsplit(".", 1)
        if not (folder / f"{module}.py").is_file():  # lmms-eval's own test: else it imports `module`
            return value
        for root in (builtin_tasks_dir().parent.parent, PACKAGE.parent):
            if folder.is_relative_to(root):
                return Function(".".join((*folder.relative_to(root).parts, module, name)))
        raise TaskFileError(f"{folder}/{module}.py is in no package lmms-eval could import it from")
    if isinstance(value, dict):
        return {key: _absolute(item, folder) for key, item in value.items()}
    if isinstance(value, list):
        return [_absolute(item, folder) for item in value]
    return value


@dataclass
class GeneratedTask:
    benchmark: str
    path: str  # in the tasks folder
    about: str
    source: str  # where its built-in blocks come from
    config: dict
    functions: dict[str, str] = field(default_factory=dict)  # name in the function module -> Python expression


def _metric_entries(metrics: tuple[Metric, ...], module: str) -> list[dict]:
    return [
        {"metric": m.name, "aggregation": Function(f"{module}.{m.aggregation}"), "higher_is_better": m.higher_is_better}
        for m in metrics
    ]


class _Benchmark:
    """One spec's tasks, from its base YAML."""

    def __init__(self, spec: BenchmarkSpec, module: str):
        self.spec, self.module, path = spec, module, base_yaml(spec)
        self.bound = bound = BINDINGS[spec.name]
        self.base = read_task_yaml(path)
        self.source = (
            f"lmms-eval's {bound.builtin_yaml}" if bound.builtin_yaml else f"lmms_contam/{bound.own_task_yaml}"
        )
        unknown = set(self.base) - {*PROMPT_KEYS, *HUB_KEYS, *REPLACED_KEYS, *bound.applied_by_scorer}
        if unknown:  # a block this generator would drop silently: say so instead
            raise TaskFileError(f"{path}: the task generator does not know how to carry {sorted(unknown)}")
        self.prompt = {key: self.base[key] for key in PROMPT_KEYS if key in self.base}
        default = (self.prompt.get("lmms_eval_specific_kwargs") or {}).get("default") or {}
        if bound.letter_request_in_post_prompt and not default.get("post_prompt"):
            raise TaskFileError(f"{path}: no default post_prompt, where its binding says the letter is asked for")
        if bound.doc_to_target:
            self.prompt["doc_to_target"] = bound.doc_to_target
        builtin = self.base.get("metric_list", [])
        scheme = GROUP_SCHEMES.get(spec.group_scheme or "")
        self.builtin_metrics = _metric_entries(scheme.metrics, module) if scheme else builtin
        self.about_extra = f" {BY_GROUP}" if scheme else ""

    def task(self, family: str, tags: list[str], config: dict, functions: dict[str, str]) -> GeneratedTask:
        name = f"{self.spec.name}_{family}"
        folder = SCANNED if family == SCANNED else self.spec.name
        head = {"task": name, **({"tag": tags} if tags else {})}
        hooks = {
            "process_docs": Function(f"{self.module}.{name}_docs"),
            "process_results": Function(f"{self.module}.{name}_results"),
        }
        blocks = {key: value for key, value in config.items() if key not in ("metric_list", "metadata")}
        config = {**head, **blocks, **hooks, "metric_list": config["metric_list"], "metadata": METADATA}
        about = (DETECTORS[family].about if family in DETECTORS else ABOUT[family]).format(label=self.spec.label)
        return GeneratedTask(
            benchmark=self.spec.name,
            path=f"{folder}/{name}.yaml",
            about=about,
            source=self.source,
            config=config,
            functions={f"{name}_{key}": value for key, value in functions.items()},
        )

    def local(self, family: str, tags: list[str], metrics: list[dict]) -> GeneratedTask:
        """A task over the resolved perturbed set (lmms-eval loads the locator line first)."""
        prompt = dict(self.prompt)
        name = json.dumps(self.spec.name)
        functions = {
            "docs": f"documents.task_docs({name}, {json.dumps(family)})",
            "results": f"scoring.task_results({name}, {json.dumps(family)})",
        }
        if family in DETECTORS and DETECTORS[family].instruction:
            prompt.update(asking_for_text(prompt, DETECTORS[family].instruction))
        if family in DETECTORS and DETECTORS[family].withholds_image:
            # The image the document may withhold: its own doc_to_visual, and no message builder (MMMU's
            # doc_to_messages reads the image itself); chat loaders then build messages from text and visuals.
            functions["visual"] = f"documents.text_only_visual({name}, {json.dumps(prompt['doc_to_visual'])})"
            prompt["doc_to_visual"] = Function(f"{self.module}.{self.spec.name}_{family}_visual")
            prompt.pop("doc_to_messages", None)
        config = {
            "dataset_path": "json",
            "dataset_kwargs": {"data_files": {"test": f"../{LOCATOR}"}},
            "test_split": "test",
            **prompt,
            "metric_list": metrics,
        }
        return self.task(family, tags, config, functions)

    def tasks(self) -> Iterator[GeneratedTask]:
        spec, module = self.spec, self.module
        from_hub = spec.scannable  # the sets a user builds or fetches: the tag groups over benchmarks
        detectors = [f"{spec.name}_detectors"] if spec.option_layout else []
        if spec.perturbable:
            for family, tag in ((ORIGINAL, "contam_original"), (PERTURBED, "contam_perturbed")):
                metrics = [*self.builtin_metrics, *_metric_entries(SINGLE_METRICS, module)]
                task = self.local(family, [tag] if from_hub else [], metrics)
                task.about += self.about_extra
                yield task
            yield self.local(CONTAM, detectors, _metric_entries(PAIRED_METRICS, module))
        if spec.option_layout:
            for detector in DETECTORS.values():
                if detector.instruction and not self.bound.letter_request_in_post_prompt:
                    continue
                yield self.local(detector.name, detectors, _metric_entries(detector_metrics(detector), module))
        if spec.scannable:
            hub = {key: self.base[key] for key in HUB_KEYS if key in self.base}
            metrics = [*self.builtin_metrics, *_metric_entries(scanned.SCANNED_METRIC_LIST, module)]
            name = json.dumps(spec.name)
            task = self.task(
                SCANNED,
                ["contam_scanned"],
                {**hub, **self.prompt, "metric_list": metrics},
                {"docs": f"scanned.scanned_docs({name})", "results": f"scanned.scanned_results({name})"},
            )
            task.about += self.about_extra
            yield task


TEXT_ANSWER_TOKENS = 32  # at least, for a detector asking for an option's text


def asking_for_text(prompt: dict, instruction: str) -> dict:
    """The prompt blocks of a task asking for a text answer: the default post-prompt replaced by `instruction`,
    model-specific prompts dropped (they ask for a letter), room for a few words in the reply."""
    kwargs = prompt["lmms_eval_specific_kwargs"]
    generation = dict(prompt.get("generation_kwargs") or {})
    generation["max_new_tokens"] = max(int(generation.get("max_new_tokens", 0)), TEXT_ANSWER_TOKENS)
    return {
        "lmms_eval_specific_kwargs": {"default": {**kwargs["default"], "post_prompt": instruction}},
        "generation_kwargs": generation,
    }


def _yaml(task: GeneratedTask) -> str:
    header = (
        f"Generated by `lmms-contam tasks generate` from lmms_contam/registry/specs.py, "
        f"hosts/lmms_eval/bindings.py and {task.source}; "
        "do not edit (tests/integration/test_task_files.py fails on any difference). " + task.about
    )
    return _comment(header) + _dump(task.config)


def _dump(config: dict) -> str:
    text = yaml.dump(config, Dumper=_Writer, sort_keys=False, allow_unicode=True, width=10**6)
    return re.sub(r"!function '([^']*)'", r"!function \1", text)  # the emitter quotes tagged scalars


def _comment(text: str, width: int = 110) -> str:
    return textwrap.fill(text, width, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False) + "\n"


def _aggregation_sources() -> dict[str, str]:
    ours = {key: f"scoring.AGGREGATIONS[{json.dumps(key)}]" for key in scoring.AGGREGATIONS}
    theirs = {key: f"scanned.AGGREGATIONS[{json.dumps(key)}]" for key in scanned.AGGREGATIONS}
    assert not ours.keys() & theirs.keys(), "one aggregation name in two tables"
    return {**ours, **theirs}


def _functions_source(tasks: list[GeneratedTask], module: str) -> str:
    sources = _aggregation_sources()
    named = {
        str(m["aggregation"]).rsplit(".", 1)[1]
        for task in tasks
        for m in task.config.get("metric_list", [])
        if str(m["aggregation"]).startswith(f"{module}.")
    }
    lines = [
        '"""Every `!function` target of the plugin\'s task YAMLs, by the name the YAMLs give.',
        "",
        "Generated by `lmms-contam tasks generate` from lmms_contam/registry/specs.py and bindings.py; do not edit",
        '(tests/integration/test_task_files.py fails on any difference)."""',
        "",
        "from lmms_contam.hosts.lmms_eval import documents, scanned, scoring",
        "",
        "# Aggregations named by the tasks' metric lists",
        *(f"{name} = {sources[name]}" for name in sources if name in named),
    ]
    benchmark = None
    for task in tasks:
        if task.benchmark != benchmark:
            benchmark = task.benchmark
            lines += ["", f"# {benchmark}"]
        lines += [_assignment(name, expression) for name, expression in task.functions.items()]
    return "\n".join(lines) + "\n"


def _assignment(name: str, expression: str, width: int = 120) -> str:
    """One line, or the call's arguments on a line of their own where it is too long (as ruff formats it)."""
    line = f"{name} = {expression}"
    if len(line) <= width:
        return line
    call, arguments = expression.split("(", 1)
    return f"{name} = {call}(\n    {arguments[:-1]}\n)"


def generated(module: str = FUNCTIONS_MODULE) -> tuple[dict[str, str], str]:
    """The tasks folder's files (relative path -> text) and the source of the function module `module`."""
    tasks = [task for name in BINDINGS for task in _Benchmark(SPECS[name], module).tasks()]
    files = {task.path: _yaml(task) for task in tasks}
    paired = [f"{name}_{CONTAM}" for name in BINDINGS if SPECS[name].perturbable and SPECS[name].scannable]
    files[f"{PAIRED_GROUP}.yaml"] = _comment(
        "Generated by `lmms-contam tasks generate`; do not edit. The paired contamination tasks of every benchmark "
        f"built from the hub, in one run: --tasks {PAIRED_GROUP}"
    ) + _dump({"group": PAIRED_GROUP, "task": paired})
    files[LOCATOR] = (
        json.dumps(
            {
                "note": "lmms-eval loads this line first; the task's process_docs replaces it with "
                "the resolved perturbed set (see `lmms-contam datasets`)."
            }
        )
        + "\n"
    )
    return files, _functions_source(tasks, module)


def _present(tasks_dir: Path) -> dict[str, str]:
    return {
        path.relative_to(tasks_dir).as_posix(): path.read_text()
        for path in sorted(tasks_dir.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def differences(tasks_dir: Path, functions_file: Path, module: str = FUNCTIONS_MODULE) -> list[str]:
    """What differs from a fresh generation: missing, changed and stray files."""
    files, functions = generated(module)
    present = _present(tasks_dir) if tasks_dir.is_dir() else {}
    changed = [
        f"{tasks_dir / path}" for path in sorted(files.keys() | present.keys()) if files.get(path) != present.get(path)
    ]
    if not functions_file.is_file() or functions_file.read_text() != functions:
        changed.append(str(functions_file))
    return changed


def write(tasks_dir: Path, functions_file: Path, module: str = FUNCTIONS_MODULE) -> list[str]:
    """Write what differs, and remove the tasks folder's stray files (the folder is the generator's alone)."""
    changed = differences(tasks_dir, functions_file, module)
    files, functions = generated(module)
    wanted = {str(tasks_dir / path): text for path, text in files.items()}
    wanted[str(functions_file)] = functions
    for path in changed:
        if path in wanted:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as temporary:
                temporary.write_text(wanted[path])
        else:
            Path(path).unlink()
    for folder in sorted((p for p in tasks_dir.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    return changed
