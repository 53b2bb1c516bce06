"""What a job request's config is checked against before the job is made: the job it starts from, and where
each issue sits in the request body (`config.<key>`).

The native `POST /api/v1/jobs` and the OpenAI-compatible `POST /v1/fine_tuning/jobs` share it; neither
imports the other's routes.
"""

from __future__ import annotations

from tunedeck.api.auth import Principal
from tunedeck.api.context import Context
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import (
    ConfigError,
    Issue,
    IssueListError,
    MissingReferenceError,
)
from tunedeck.service.jobs.job_parents import check_parent

# Fields of the job itself (not of its config) that the job store can name, e.g. a sealed dataset on clone.
JOB_FIELDS = frozenset({"train_dataset_version_id", "validation_dataset_version_id"})


def issues_in_body(error: IssueListError) -> ConfigError:
    """The same issues, with config fields named by their place in the request body (`config.<key>`)."""
    issues = [
        i if i.field in JOB_FIELDS else Issue(**{**i.__dict__, "field": f"config.{i.field}" if i.field else "config"})
        for i in error.issues
    ]
    return ConfigError(issues, title=error.title)


def check_job_parent(context: Context, user: Principal, config: TrainingConfig, base_model_id: str) -> None:
    """The job `config` starts from (`init_from_job`) must be one of the caller's, with that model, on the same base.

    Its issues name `config.<key>`, as the request body holds the config there.
    """
    try:
        check_parent(context.jobs, context.artifacts, user, user.id, config, base_model_id)
    except MissingReferenceError as error:  # 404, as for any id the caller cannot see
        raise MissingReferenceError(issues_in_body(error).issues, title=error.title) from None
    except ConfigError as error:
        raise issues_in_body(error) from None
