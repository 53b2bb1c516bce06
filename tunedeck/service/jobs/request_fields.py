"""Where each issue of a job request's config sits in the request body (`config.<key>`), and the check of the
job the config starts from, with its issues named that way.

The native `POST /api/v1/jobs` and the OpenAI-compatible `POST /v1/fine_tuning/jobs` both hold the
config under `config`, and both reach it through the job services.
"""

from __future__ import annotations

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import (
    ConfigError,
    Issue,
    IssueListError,
    MissingReferenceError,
)
from tunedeck.service.context import ServiceContext
from tunedeck.service.jobs.job_parents import check_parent
from tunedeck.store.access import Actor

# Fields of the job itself (not of its config) that the job store can name, e.g. a sealed dataset on clone.
JOB_FIELDS = frozenset({"train_dataset_version_id", "validation_dataset_version_id"})


def issues_in_body(error: IssueListError) -> ConfigError:
    """The same issues, with config fields named by their place in the request body (`config.<key>`)."""
    issues = [
        i if i.field in JOB_FIELDS else Issue(**{**i.__dict__, "field": f"config.{i.field}" if i.field else "config"})
        for i in error.issues
    ]
    return ConfigError(issues, title=error.title)


def check_job_parent(context: ServiceContext, user: Actor, config: TrainingConfig, base_model_id: str) -> None:
    """The job `config` starts from (`init_from_job`) must be one of the caller's, with that model, on the same base.

    Its issues name `config.<key>`, as the request body holds the config there.
    """
    try:
        check_parent(context.jobs, context.artifacts, user, user.id, config, base_model_id)
    except MissingReferenceError as error:  # 404, as for any id the caller cannot see
        raise MissingReferenceError(issues_in_body(error).issues, title=error.title) from None
    except ConfigError as error:
        raise issues_in_body(error) from None
