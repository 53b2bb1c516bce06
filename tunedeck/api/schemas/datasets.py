"""Dataset responses: a dataset, its versions, previews and reports; the rights recorded for a dataset."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from tunedeck.api.schemas.common import SQL_INT_MAX, RequestBody
from tunedeck.config.training import Truncation
from tunedeck.core.dataset_rights import (
    LICENCE_HELP,
    LICENCE_MAX_LENGTH,
    LICENCE_PATTERN,
    RIGHTS_NOTE_HELP,
    RIGHTS_NOTE_MAX_LENGTH,
    RIGHTS_NOTE_PATTERN,
    check_licence,
    check_rights_note,
)
from tunedeck.core.dataset_vocabulary import (
    HUB_ID_PATTERN,
    HUB_PART_PATTERN,
    HUB_REVISION_PATTERN,
    NAME_PATTERN,
    SOURCE_FORMATS,
    known_source_format,
)

ReportName = Literal["validation", "dedup", "scan"]
# Checked by the one rule every way in shares (`tunedeck.core.dataset_rights`); empty text means not recorded.
Licence = Annotated[
    str | None,
    Field(description=LICENCE_HELP, json_schema_extra={"maxLength": LICENCE_MAX_LENGTH, "pattern": LICENCE_PATTERN}),
    AfterValidator(check_licence),
]
RightsNote = Annotated[
    str | None,
    Field(
        description=RIGHTS_NOTE_HELP,
        json_schema_extra={"maxLength": RIGHTS_NOTE_MAX_LENGTH, "pattern": RIGHTS_NOTE_PATTERN},
    ),
    AfterValidator(check_rights_note),
]


class DatasetVersionOut(BaseModel):
    """One immutable version of a dataset: canonical rows in artifact storage."""

    id: str
    version: int
    kind: str
    source_format: str
    rows: int
    sha256: str
    size_bytes: int
    dropped_rows: int = 0
    sealed: bool = Field(False, description="A held-out test set: read only by an explicit final evaluation.")
    column_map: dict[str, str] = Field(
        default_factory=dict, description="How the file's fields were renamed (target: source) before reading."
    )
    created_at: datetime
    purged_at: datetime | None = Field(None, description="When a retention policy deleted its stored rows.")
    raw_data_deleted_after: datetime | None = Field(
        None, description="When a retention policy will delete its stored rows (null: not scheduled)."
    )


class DatasetOut(BaseModel):
    """A named dataset and its newest version."""

    id: str
    name: str
    created_at: datetime
    latest: DatasetVersionOut | None = None
    versions: int = 0
    licence: str | None = Field(None, description="The licence its owner recorded (null: not recorded).")
    rights_note: str | None = Field(None, description="The note on its rights its owner recorded.")


class DatasetRightsIn(RequestBody):
    """The rights to record for a dataset; a field left out stays as it is, null or empty text clears it."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"minProperties": 1})

    licence: Licence = None
    rights_note: RightsNote = None

    @model_validator(mode="after")
    def _names_something(self) -> DatasetRightsIn:
        """At least one field: an empty body would change nothing."""
        if not self.model_fields_set:
            raise ValueError("expected at least one of licence, rights_note")
        return self

    def changes(self) -> dict[str, str | None]:
        """The fields the request set, with their new values."""
        return {key: getattr(self, key) for key in ("licence", "rights_note") if key in self.model_fields_set}


class DatasetPreviewOut(BaseModel):
    """The first rows of a dataset version, canonical form."""

    dataset_id: str
    version: int
    rows: list[dict[str, Any]]
    total_rows: int


class DatasetReportOut(BaseModel):
    """A report computed at upload: validation, dedup or PII/secret scan."""

    dataset_id: str
    version: int
    name: ReportName
    report: dict[str, Any] = Field(default_factory=dict)


class InspectionIn(RequestBody):
    """Inspect a dataset version after a base model's exact preprocessing (for the loss-mask view)."""

    model_config = ConfigDict(extra="forbid")

    base_model_id: str = Field(..., min_length=1, max_length=40)
    max_length: int = Field(512, ge=8, le=1_048_576, description="Tokens kept per example, as in training.")
    examples: int = Field(5, ge=1, le=50, description="Examples shown token by token.")
    train_on_inputs: bool = Field(False, description="Also train on prompt/user tokens, as the config key.")
    max_prompt_length: int | None = Field(
        None, ge=1, le=1_048_576, description="Preference rows: prompt tokens kept (its end), as the config key."
    )
    truncation: Truncation = Field(
        "refuse", description="What training does with a row left without a trained token, as the config key."
    )
    version: int | None = Field(None, ge=1, le=SQL_INT_MAX, description="Version number; the newest when absent.")


class TestSetAccessOut(BaseModel):
    """One logged read of a sealed test set."""

    __test__ = False  # not a pytest test class despite the name

    job_id: str | None
    user_id: str | None
    purpose: str
    time: datetime | None


class TestSetAccessesOut(BaseModel):
    """Every logged read of one dataset version, with the reuse warning once it was read more than once."""

    __test__ = False  # not a pytest test class despite the name

    dataset_id: str
    version: int
    version_id: str
    sealed: bool
    access_count: int
    accesses: list[TestSetAccessOut]
    warning: str | None = None


class HubDatasetIn(RequestBody):
    """One split of a Hugging Face Hub dataset to register; a worker fetches it, pinned to its commit."""

    model_config = ConfigDict(extra="forbid", strict=True)

    hub: str = Field(..., pattern=HUB_ID_PATTERN.pattern, description="The dataset's hub id, owner/name.")
    split: str = Field(..., pattern=HUB_PART_PATTERN.pattern, description="The split to register, such as train.")
    subset: str | None = Field(None, pattern=HUB_PART_PATTERN.pattern, description="The subset (config), if any.")
    revision: str | None = Field(
        None, pattern=HUB_REVISION_PATTERN.pattern, description="Branch, tag or commit (default: main)."
    )
    name: str | None = Field(None, pattern=NAME_PATTERN.pattern, description="Dataset name (default: the id's name).")
    format: str = Field(
        "auto", description="Row format, or auto to tell it from the rows.",
        json_schema_extra={"enum": ["auto", *SOURCE_FORMATS]},
    )
    label_column: str | None = Field(None, min_length=1, max_length=200)
    drop_invalid: bool = False
    scan_policy: Literal["warn", "block", "redact"] = "warn"
    licence: Licence = None
    rights_note: RightsNote = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        """A row format the ingestion reads, or `auto`; refused before anything is queued."""
        return known_source_format(value)
