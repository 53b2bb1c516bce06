"""The model card (Markdown) delivered with every export, as the experiment method asks.

Sections: base model and exact revision, method and configuration, training data
(manifests only: names, hashes, row counts, never rows), results (baseline and final
metrics with deltas when both evaluations exist, else the training figures), observed
limits, environment, licences, and how to load the export. Built from the run documents
(`build_job_report` supplies the comparison and the limits), the base model's licence
(read from its files, `tunedeck.core.model_licence`) and the rights recorded for each
training dataset; the licence of the exported model itself is left for its owner to fill in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tunedeck.core.dataset_rights import describe_dataset_licence
from tunedeck.core.mlx_export import MlxExportOptions
from tunedeck.core.model_licence import ModelLicence, describe_recorded
from tunedeck.engine.export.source import RunDocuments
from tunedeck.engine.models.pinning import BasePin
from tunedeck.eval.comparison_render import fmt, fmt_delta
from tunedeck.eval.job_report import build_job_report, limit_sentences
from tunedeck.eval.markdown_text import md_text

SECTIONS = (
    "Base model",
    "Method and configuration",
    "Training data",
    "Results",
    "Observed limits",
    "Environment",
    "License",
    "How to load",
)
# What a dataset manifest may show: identity and counts, never content.
MANIFEST_FIELDS = ("role", "name", "kind", "format", "rows", "dropped", "split", "sealed", "sha256")
# The column of the training data table that comes from the dataset's recorded rights, not its manifest.
LICENCE_COLUMN = "licence"
_PACKAGES = ("torch", "transformers", "peft", "trl", "accelerate", "safetensors", "tokenizers", "datasets")


def build_model_card(
    *,
    title: str,
    documents: RunDocuments,
    pin: BasePin | None,
    export_format: str,
    source_label: str,
    full_model: bool,
    warnings: Sequence[str] = (),
    adapter_config: Mapping[str, Any] | None = None,
    base_licence: ModelLicence | None = None,
    datasets: Sequence[Mapping[str, Any]] = (),
    mlx: MlxExportOptions | None = None,
) -> str:
    """The Markdown model card of one export; `adapter_config` is the saved adapter's own settings when it has one.

    `base_licence`: the base model's licence as read from its files (None: the one the run recorded, if any).
    `datasets`: the training datasets' recorded rights (`role`, `name`, `version`, `sha256`, `licence`,
    `rights_note`), matched to the data manifest by content hash. `mlx`: an MLX export's options.
    """
    library = "peft" if export_format != "merged" and not full_model else "transformers"
    lines = _front_matter(pin, library="mlx" if mlx is not None else library)
    lines += [f"# {md_text(title)}", ""]
    what = "full fine-tuned model" if full_model else ("merged model" if export_format == "merged" else "LoRA adapter")
    if mlx is not None:
        what = _mlx_what(mlx, full_model)
    lines += [f"A {what} exported by tunedeck from the {_source_text(source_label)} of its training run.", ""]
    if full_model and export_format in ("adapter", "merged"):
        lines += [
            "This run fine-tuned every weight, so there is no adapter: the `adapter` and `merged` exports "
            "both hold the full model.",
            "",
        ]
    for warning in warnings:
        lines += [f"> **Warning:** {md_text(warning)}", ""]
    lines += _base_section(pin, documents)
    lines += _method_section(documents, adapter_config)
    lines += _data_section(documents, datasets)
    report = build_job_report(
        job_id=title,
        name=title,
        state=str(documents.results.get("status") or "unknown"),
        model={},
        config=documents.training_config,
        baseline=documents.baseline_eval,
        final=documents.final_eval,
        training_truncation=(documents.data_manifest.get("tokenization") or {}).get("train"),
    )
    lines += _results_section(documents, report.results)
    lines += _limits_section(documents, limit_sentences(report.limits), source_label)
    lines += _environment_section(documents)
    lines += _license_section(_base_licence_text(documents, base_licence), documents, datasets)
    lines += _mlx_loading_section(mlx) if mlx is not None else _loading_section(pin, export_format, full_model)
    return "\n".join(lines).rstrip() + "\n"


def _front_matter(pin: BasePin | None, library: str) -> list[str]:
    base = pin.model_id if pin and pin.source == "hub" else "local"
    return [
        "---",
        "license: null  # fill in: the license this model is released under",
        f"base_model: {json.dumps(base)}",
        f"library_name: {library}",
        "tags: [tunedeck]",
        "---",
        "",
    ]


def _source_text(label: str) -> str:
    return "final model" if label == "final" else f"checkpoint at step {label.removeprefix('step-')}"


def _base_section(pin: BasePin | None, documents: RunDocuments) -> list[str]:
    lines = ["## Base model", ""]
    if pin is None:
        return [*lines, "- not recorded: this export cannot be tied to a base model", ""]
    lines += [f"- **model:** `{pin.model_id}` ({pin.source})"]
    if pin.source == "hub":
        lines.append(f"- **revision (commit):** `{pin.revision}`")
    else:
        lines.append(f"- **content fingerprint (sha256 of weights, config and tokenizer):** `{pin.fingerprint}`")
    lines.append(f"- **tokenizer fingerprint:** `{pin.tokenizer_sha256 or 'not recorded'}`")
    chain = pin.describe_chain()
    if chain is not None:
        lines.append(f"- **started from another job's model; pin chain (base first):** {chain}")
        if pin.base_kind == "parent_weights":
            lines.append(
                "- this adapter was trained on top of the starting job's full weights: those weights, "
                "not the original base model, are the base to load it onto"
            )
    lines += [
        "- this export is pinned to exactly this base (`tunedeck_pin.json`); tunedeck refuses to load an adapter "
        "onto another one unless told to (`--allow-base-mismatch`)",
        "",
    ]
    return lines


def _method_section(documents: RunDocuments, adapter_config: Mapping[str, Any] | None) -> list[str]:
    config = documents.training_config
    model = documents.config.get("model") or {}
    derived = documents.config.get("derived") or {}
    if config.get("use_peft", True):
        # The adapter's own settings when saved with it: a run that continued another job's adapter
        # kept that adapter's rank and modules, whatever its config asked for.
        saved = adapter_config or {}
        targets = saved.get("target_modules") or config.get("lora_target_modules", "all-linear")
        method = (
            f"{str(config.get('peft_method', 'lora')).upper()}: rank {saved.get('r', config.get('lora_r'))}, alpha "
            f"{saved.get('lora_alpha', config.get('lora_alpha'))}, dropout "
            f"{saved.get('lora_dropout', config.get('lora_dropout'))}, target modules "
            f"{', '.join(sorted(targets)) if isinstance(targets, list | tuple | set) else targets}"
        )
    else:
        method = "full fine-tuning (every weight trained)"
    lines = ["## Method and configuration", "", f"- **method:** {method}", f"- **task:** {documents.task}"]
    if model.get("trainable_parameters"):
        lines.append(
            f"- **trainable parameters:** {model['trainable_parameters']:,} of {model.get('total_parameters', 0):,}"
        )
    for key in ("resolved_precision", "resolved_gradient_checkpointing", "effective_batch_size", "total_steps",
                "warmup_steps"):
        if key in derived:
            lines.append(f"- **{key.replace('_', ' ')}:** {derived[key]}")
    lines += ["", "The full training configuration (re-usable as is with `tunedeck train --config`):", ""]
    lines += ["```json", json.dumps(config, indent=2, sort_keys=True), "```", ""]
    return lines


def _data_section(documents: RunDocuments, rights: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["## Training data", ""]
    datasets = documents.data_manifest.get("datasets") or []
    if not datasets:
        return [*lines, "- the data manifest of this run was not available", ""]
    columns = (*MANIFEST_FIELDS, LICENCE_COLUMN)
    lines += ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for manifest in datasets:
        if isinstance(manifest, Mapping):
            cells = [_cell(manifest.get(key)) for key in MANIFEST_FIELDS]
            cells.append(md_text(describe_dataset_licence(_recorded_rights(manifest, rights).get("licence"))))
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Datasets are identified by the sha256 of their canonical content; no training row is shown.", ""]
    return lines


def _recorded_rights(manifest: Mapping[str, Any], rights: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The recorded rights of the dataset a manifest describes: same content hash, else same role; else its notes.

    A dataset registered with the CLI keeps its licence in its manifest's notes.
    """
    for key in ("sha256", "role"):
        for entry in rights:
            if manifest.get(key) and entry.get(key) == manifest.get(key):
                return entry
    notes = manifest.get("notes")
    return notes if isinstance(notes, Mapping) else {}


def _results_section(documents: RunDocuments, comparison: list[dict[str, Any]]) -> list[str]:
    lines = ["## Results", ""]
    if comparison:
        lines += ["| metric | baseline | final | delta | change |", "| --- | --- | --- | --- | --- |"]
        lines += [
            f"| {r['metric']} | {fmt(r['baseline'])} | {fmt(r['final'])} | {fmt_delta(r['delta'])} | "
            f"{r['change'] or '—'} |"
            for r in comparison
        ]
        lines.append("")
    else:
        lines += ["No baseline/final evaluation files were recorded for this run.", ""]
    results = documents.results
    figures = [
        ("status", results.get("status")),
        ("steps", f"{results.get('global_step')} of {results.get('total_steps')}" if results else None),
        ("first training loss", results.get("first_loss")),
        ("last training loss", results.get("last_loss")),
        ("mean training loss", results.get("train_loss")),
        ("best checkpoint metric", results.get("best_metric")),
        ("stopped early", results.get("stopped_early")),
    ]
    figures += sorted((key, value) for key, value in (results.get("eval_metrics") or {}).items())
    shown = [(name, value) for name, value in figures if value is not None]
    if shown:
        lines += ["Training run:", ""] + [f"- **{name}:** {fmt(value)}" for name, value in shown] + [""]
    return lines


def _limits_section(documents: RunDocuments, sentences: list[str], source_label: str) -> list[str]:
    found = list(sentences)
    if documents.baseline_eval is None:
        found.append("no baseline evaluation of the untrained model was recorded: improvement is not established")
    if source_label != "final":
        found.append(f"this is an intermediate checkpoint ({_source_text(source_label)}), not the end of training")
    results = documents.results
    if results.get("status") not in (None, "succeeded"):
        found.append(f"the run did not succeed (status {results.get('status')})")
    if results.get("stopped_early"):
        found.append("training stopped early on a plateau of the validation metric")
    for diagnosis in documents.diagnoses:
        found.append(f"diagnosis during training ({diagnosis.get('kind')}): {diagnosis.get('message')}")
    max_length = documents.training_config.get("max_length")
    if max_length:
        found.append(f"trained on sequences of at most {max_length} tokens; longer inputs were not seen")
    return ["## Observed limits", "", *[f"- {md_text(text)}" for text in found], ""]


def _environment_section(documents: RunDocuments) -> list[str]:
    env = documents.env
    if not env:
        return ["## Environment", "", "- the environment record of this run was not available", ""]
    hardware = env.get("hardware") or {}
    packages = env.get("packages") or {}
    tunedeck = env.get("tunedeck") or {}
    lines = ["## Environment", ""]
    lines += [
        f"- **accelerator:** {hardware.get('backend')} / {hardware.get('device_name')} (capability "
        f"{hardware.get('capability')}, CUDA {hardware.get('cuda_version')}, HIP {hardware.get('hip_version')})",
        f"- **python:** {env.get('python')} on {env.get('platform')}",
        f"- **tunedeck:** {tunedeck.get('version')} (commit `{tunedeck.get('commit')}`)",
    ]
    lines += [f"- **{name}:** {packages[name]}" for name in _PACKAGES if packages.get(name)]
    return [*lines, ""]


def _base_licence_text(documents: RunDocuments, read: ModelLicence | None) -> str:
    if read is not None:
        return read.describe()
    return describe_recorded((documents.config.get("model") or {}).get("licence"))


def _license_section(base_licence: str, documents: RunDocuments, rights: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "## License",
        "",
        "- **license of this model:** _to fill in_ (within the terms of the base model's licence and of the "
        "training data)",
        f"- **license of the base model (it applies to derived weights too):** {md_text(base_licence)}",
        "- **licenses and terms of the training data:**",
    ]
    manifests = [m for m in documents.data_manifest.get("datasets") or [] if isinstance(m, Mapping)]
    for manifest in manifests:
        recorded = _recorded_rights(manifest, rights)
        # The registered dataset's name and version when the rights came from it, else the manifest's.
        name = recorded.get("name") or manifest.get("name") or "unnamed"
        number = recorded.get("version") or manifest.get("version")
        version = f" v{number}" if number is not None else ""
        lines.append(
            f"  - {md_text(manifest.get('role') or 'dataset')}: {md_text(name)}{version}"
            f" — {md_text(describe_dataset_licence(recorded.get('licence')))}"
        )
        if recorded.get("rights_note"):
            lines.append(f"    - rights: {md_text(' '.join(str(recorded['rights_note']).split()))}")
    if not manifests:
        lines.append("  - the data manifest of this run was not available")
    lines += ["- **intended use and out-of-scope uses:** _to fill in_", ""]
    return lines


def _loading_section(pin: BasePin | None, export_format: str, full_model: bool) -> list[str]:
    lines = ["## How to load", "", "```python"]
    if full_model or export_format == "merged":
        lines += [
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            'model = AutoModelForCausalLM.from_pretrained("path/to/this/folder")',
            'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")',
        ]
    else:
        base = pin.model_id if pin else "the/base/model"
        revision = f', revision="{pin.revision}"' if pin and pin.revision else ""
        lines += [
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            f"base = AutoModelForCausalLM.from_pretrained({json.dumps(base)}{revision})",
            'model = PeftModel.from_pretrained(base, "path/to/this/folder")',
            'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")',
        ]
    lines += ["```", ""]
    if export_format == "bundle":
        lines += ["In the bundle, the model is in `model/`; `training_config.json` re-runs the training.", ""]
    return lines


def _mlx_what(options: MlxExportOptions, full_model: bool) -> str:
    weights = f"{options.quantize_bits}-bit quantised" if options.quantize_bits else options.dtype
    if options.contents == "adapter":
        return f"MLX model ({options.dtype} base model with its LoRA adapter in `adapter/`)"
    return f"MLX model ({'fine-tuned' if full_model else 'adapter merged into its base'}, {weights} weights)"


def _mlx_loading_section(options: MlxExportOptions) -> list[str]:
    adapter = ', adapter_path="path/to/this/folder/adapter"' if options.contents == "adapter" else ""
    lines = ["## How to load", "", "On a Mac with Apple silicon, with `mlx-lm` installed:", "", "```python",
             "from mlx_lm import generate, load",
             f'model, tokenizer = load("path/to/this/folder"{adapter})',
             'messages = [{"role": "user", "content": "Hello"}]',
             "prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)",
             "print(generate(model, tokenizer, prompt=prompt, max_tokens=128))",
             "```", ""]
    if options.contents == "adapter":
        lines += [
            "mlx-lm's LoRA trainer can continue training it (`--resume-adapter-file adapter/adapters.safetensors`).",
            "",
        ]
    return lines


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return md_text(value)
