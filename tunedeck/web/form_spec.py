"""The training-job form, generated from `TrainingConfig`'s JSON Schema so it never drifts from the contract.

Only the layout is written here: which section a key belongs to, and which keys
show only when another has some value. Types, bounds, choices, defaults and help
text all come from the schema. A key the layout does not place lands in the
"Other options" section, so a new config field appears in the form by itself.

The form's words (section titles, labels, help, option labels, recipe titles) stay English here and are
translated where the page shows them (`_(f.label)`, `_(f.help)`). The help is the schema's
description, so it has one source: the config model. Rather than copy those sentences into
literals, `form_words` lists every English text the form shows, and the catalogue test takes
them as messages of the pages: a new or reworded description then needs its translation, and
a translation nobody shows any more is stale.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tunedeck.config.loading import config_schema
from tunedeck.config.preference import DPO_LOSS_TYPES, KEY_TASKS, KTO_LOSS_TYPES
from tunedeck.config.recipes import list_recipes

# Drawn beside the model and the data: the task decides which data fits and which keys apply.
TOP_KEYS = ("task",)
BASIC_KEYS = ("learning_rate", "batch_size", "epochs", "max_length")
# A card of its own under the basic settings; each key shows only for the tasks it applies to.
PREFERENCE_SECTION = (
    "preference",
    "Preference tuning",
    (
        "beta",
        "loss_type",
        "loss_weights",
        "max_prompt_length",
        "reference_free",
        "desirable_weight",
        "undesirable_weight",
    ),
)
# Keys of the sft loss and its data that mean nothing to the other tasks: packing and the chunked loss
# are refused outside sft, the prompt tokens' loss and an answer schema belong to text generation.
SFT_ONLY_KEYS = ("packing", "chunked_cross_entropy", "train_on_inputs", "output_schema")
KEY_TASKS_IN_FORM: dict[str, tuple[str, ...]] = {**KEY_TASKS, **{key: ("sft",) for key in SFT_ONLY_KEYS}}
"""Each key that applies to some tasks only, and those tasks; the form hides (and does not send) it for others."""
# The loss_type values each task takes (the schema lists them all in one union).
LOSS_TYPES_BY_TASK: dict[str, frozenset[str]] = {"dpo": DPO_LOSS_TYPES, "kto": KTO_LOSS_TYPES}
# Advanced sections, in the order the job config contract lists them.
ADVANCED_SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "optimisation",
        "Optimisation",
        (
            "gradient_accumulation_steps",
            "mixed_precision",
            "gradient_checkpointing",
            "optim",
            "lr_scheduler",
            "warmup_ratio",
            "polynomial_power",
            "weight_decay",
            "max_grad_norm",
        ),
    ),
    (
        "peft",
        "Adapters (PEFT)",
        ("use_peft", "peft_method", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"),
    ),
    (
        "evaluation",
        "Evaluation",
        (
            "eval_strategy",
            "eval_steps",
            "validation_dataset_id",
            "load_best_model_at_end",
            "metric_for_best_model",
            "early_stopping_patience",
            "early_stopping_threshold",
            "eval_generation_each_eval",
            "eval_max_new_tokens",
            "output_schema",
        ),
    ),
    ("checkpointing", "Checkpointing", ("save_strategy", "save_steps")),
    ("start", "Starting model", ("init_from_job", "init_from_checkpoint")),
    (
        "distribution",
        "Devices and machines",
        ("devices", "processes", "machines", "strategy", "fsdp_cpu_offload", "fsdp_reshard_after_forward"),
    ),
    ("logging", "Logging and reproducibility", ("logging_steps", "report_to", "seed")),
)
OTHER_SECTION = ("other", "Other options")
# key -> (controlling key, values of it that show the key). Hidden keys are left out of the config sent.
SHOWN_WHEN: dict[str, tuple[str, tuple[Any, ...]]] = {
    "peft_method": ("use_peft", (True,)),
    "lora_r": ("use_peft", (True,)),
    "lora_alpha": ("use_peft", (True,)),
    "lora_dropout": ("use_peft", (True,)),
    "lora_target_modules": ("use_peft", (True,)),
    "polynomial_power": ("lr_scheduler", ("polynomial",)),
    "eval_steps": ("eval_strategy", ("steps",)),
    "save_steps": ("save_strategy", ("steps",)),
    "fsdp_cpu_offload": ("strategy", ("fsdp",)),
    "fsdp_reshard_after_forward": ("strategy", ("fsdp",)),
}
LABELS = {
    "learning_rate": "Learning rate",
    "batch_size": "Batch size",
    "max_length": "Max length (tokens)",
    "use_peft": "Use PEFT (train an adapter)",
    "peft_method": "PEFT method",
    "lora_r": "LoRA r (rank)",
    "lora_alpha": "LoRA alpha",
    "lora_dropout": "LoRA dropout",
    "lr_scheduler": "Learning-rate scheduler",
    "validation_dataset_id": "Validation dataset",
    "load_best_model_at_end": "Load best model at end",
    "eval_strategy": "Evaluation strategy",
    "save_strategy": "Save strategy",
    "devices": "Devices (GPUs) per machine",
    "processes": "Processes per machine",
    "fsdp_cpu_offload": "FSDP: offload to CPU memory",
    "fsdp_reshard_after_forward": "FSDP: reshard after forward",
    "task": "Task",
    "beta": "Beta (preference strength)",
    "loss_type": "Loss type",
    "loss_weights": "Loss weights",
    "max_prompt_length": "Max prompt length (tokens)",
    "reference_free": "Reference-free",
    "desirable_weight": "Desirable weight",
    "undesirable_weight": "Undesirable weight",
    "init_from_job": "Start from job",
    "init_from_checkpoint": "Start from that job's checkpoint (step)",
    "report_to": "Report to trackers",
}
# Shown with the option names (the schema's enum values are what is sent).
OPTION_LABELS = {"lora": "LoRA", "qlora": "QLoRA (4-bit base, CUDA or ROCm with bitsandbytes)", "no": "no"}
# The task select's options, by key (a value such as "sft" is also a loss type: labelled here only).
FIELD_OPTION_LABELS: dict[str, dict[str, str]] = {
    "task": {
        "sft": "sft — supervised fine-tuning (text, prompt/completion, chat)",
        "classification": "classification — a label per text",
        "dpo": "dpo — preference pairs, against a reference model",
        "orpo": "orpo — preference pairs, no reference model",
        "kto": "kto — answers marked desirable or undesirable",
    }
}


@dataclass
class FieldSpec:
    """One form control: how to draw it and the schema's constraints the browser checks."""

    key: str
    label: str
    kind: str  # number | integer | count | select | checkbox | text | list | dataset | json
    help: str
    default: Any
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    min_length: int | None = None
    options: list[tuple[str, str]] = field(default_factory=list)
    list_literal: str | None = None  # a list field's alternative single value, e.g. "all-linear"
    list_item: str = "text"  # what a list field's items are: text | number
    shown_when: tuple[str, list[Any]] | None = None
    tasks: list[str] | None = None  # the tasks the key applies to; None: every task
    task_choices: dict[str, list[str]] = field(default_factory=dict)  # one-or-several fields: values per task


@dataclass
class SectionSpec:
    """A group of fields: the basic group, or one part of the collapsed "Advanced" section."""

    id: str
    title: str
    fields: list[FieldSpec]


@dataclass
class FormSpec:
    """The whole form: the task, the basic fields, the preference keys, then the advanced sections."""

    basic: SectionSpec
    advanced: list[SectionSpec]
    top: SectionSpec = field(default_factory=lambda: SectionSpec("top", "Task", []))
    preference: SectionSpec = field(default_factory=lambda: SectionSpec(*PREFERENCE_SECTION[:2], []))

    def fields(self) -> list[FieldSpec]:
        """Every field, in display order."""
        sections = [self.top, self.basic, self.preference, *self.advanced]
        return [f for section in sections for f in section.fields]

    def to_client(self) -> dict[str, Any]:
        """What the form's script needs: each field's constraints, keyed by config key."""
        return {"fields": [asdict(f) for f in self.fields()]}


def _label(key: str) -> str:
    return LABELS.get(key) or key.replace("_", " ").capitalize()


def _variants(prop: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The non-null alternatives of a property, and whether null is allowed."""
    options = prop.get("anyOf") or [prop]
    concrete = [o for o in options if o.get("type") != "null"]
    return concrete, len(concrete) < len(options)


def field_from_schema(key: str, prop: dict[str, Any]) -> FieldSpec:
    """A form field for one JSON Schema property of the training config."""
    variants, nullable = _variants(prop)
    spec = FieldSpec(
        key=key, label=_label(key), kind="text", help=str(prop.get("description", "")), default=prop.get("default"),
        nullable=nullable,
    )
    types = {v.get("type") for v in variants}
    if key == "validation_dataset_id":
        spec.kind = "dataset"  # a reference to one of the user's datasets, chosen from a list
    elif key == "init_from_job":
        spec.kind = "job"  # one of the user's succeeded jobs, chosen from a list
    elif key == "loss_type":
        # One value, or several combined (dpo): typed, with each task's values offered.
        spec.kind = "choices"
        spec.task_choices = _choices_by_task(variants)
    elif "enum" in prop or (len(variants) == 1 and "enum" in variants[0]):
        spec.kind = "select"
        values = prop.get("enum") or variants[0]["enum"]
        labels = {**OPTION_LABELS, **FIELD_OPTION_LABELS.get(key, {})}
        spec.options = [(str(v), labels.get(str(v), str(v))) for v in values]
    elif types == {"boolean", "string"} and any("const" in v for v in variants):
        # A switch with an automatic setting (packing): three choices.
        spec.kind = "select"
        automatic = [str(v["const"]) for v in variants if "const" in v]
        spec.options = [(value, value) for value in automatic] + [("true", "on"), ("false", "off")]
    elif types == {"integer", "string"} and any("const" in v for v in variants):
        # A count with an automatic setting (devices, processes): "auto" or a whole number.
        spec.kind = "count"
        spec.list_literal = next(str(v["const"]) for v in variants if "const" in v)
    elif types == {"boolean"}:
        spec.kind = "checkbox"
    elif types == {"object"}:
        spec.kind = "json"  # a JSON object typed as text (e.g. output_schema)
    elif "array" in types:
        spec.kind = "list"
        literal = next((v for v in variants if "const" in v or "enum" in v), None)
        if literal is not None:
            spec.list_literal = str(literal.get("const", (literal.get("enum") or [""])[0]))
        items: dict[str, Any] = next((v.get("items", {}) for v in variants if v.get("type") == "array"), {})
        if items.get("type") in ("number", "integer"):
            spec.list_item = "number"
        # A list of names from a fixed set (report_to): the names are offered, and an empty list is valid.
        spec.options = [(str(v), str(v)) for v in items.get("enum") or []]
    elif types <= {"integer", "number"} and types:
        number = variants[0]
        spec.kind = "integer" if types == {"integer"} else "number"
        spec.minimum = number.get("minimum")
        spec.maximum = number.get("maximum")
        spec.exclusive_minimum = number.get("exclusiveMinimum")
        spec.exclusive_maximum = number.get("exclusiveMaximum")
    elif types == {"string"}:
        spec.min_length = variants[0].get("minLength")
    if key in SHOWN_WHEN:
        controller, values = SHOWN_WHEN[key]
        spec.shown_when = (controller, list(values))
    if key in KEY_TASKS_IN_FORM:
        spec.tasks = list(KEY_TASKS_IN_FORM[key])
    return spec


def _choices_by_task(variants: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each task's values of a one-or-several field, in the schema's order."""
    ordered: list[str] = []
    for variant in variants:
        for value in variant.get("enum") or variant.get("items", {}).get("enum") or []:
            if str(value) not in ordered:
                ordered.append(str(value))
    return {task: [v for v in ordered if v in allowed] for task, allowed in LOSS_TYPES_BY_TASK.items()}


def build_form_spec(schema: dict[str, Any] | None = None) -> FormSpec:
    """The job form for `schema` (default: the current `TrainingConfig` schema)."""
    properties: dict[str, Any] = (schema or config_schema())["properties"]
    placed: set[str] = set()

    def section(section_id: str, title: str, keys: tuple[str, ...]) -> SectionSpec:
        present = [k for k in keys if k in properties]
        placed.update(present)
        return SectionSpec(section_id, title, [field_from_schema(k, properties[k]) for k in present])

    top = section("top", "Task", TOP_KEYS)
    basic = section("basic", "Basic settings", BASIC_KEYS)
    preference = section(*PREFERENCE_SECTION)
    advanced = [section(*entry) for entry in ADVANCED_SECTIONS]
    rest = tuple(k for k in properties if k not in placed)
    if rest:
        advanced.append(section(*OTHER_SECTION, rest))
    return FormSpec(basic=basic, advanced=advanced, top=top, preference=preference)


def form_words(spec: FormSpec | None = None) -> set[str]:
    """Every English text of the form `spec` (default: the current one) that the page translates.

    Section titles, field labels and help, the option labels that are words rather than the
    value sent (a select of config values shows the values themselves), and the titles of the
    built-in recipes the form offers.
    """
    spec = spec or build_form_spec()
    sections = [spec.top, spec.basic, spec.preference, *spec.advanced]
    words = {section.title for section in sections}
    for f in spec.fields():
        words.update(text for text in (f.label, f.help) if text)
        words.update(label for value, label in f.options if label != value)
    words.update(recipe.title for recipe in list_recipes())
    return words
