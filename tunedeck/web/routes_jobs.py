"""Job pages: the list (filters, progress, ETA, best metric), one job (live charts, actions), the new-job form.

Cancel, pause and resume are plain forms (CSRF field) so they work without
JavaScript; the job form is sent by the browser to the JSON API, which
validates it with the same `TrainingConfig` as every other client.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from tunedeck.api.auth import Principal
from tunedeck.api.schemas.common import SQL_INT_MAX
from tunedeck.config.config_warnings import FEW_STEPS
from tunedeck.config.recipes import list_recipes
from tunedeck.core.errors import IssueListError, StateTransitionError
from tunedeck.core.states import TERMINAL_STATES, JobState
from tunedeck.service.jobs.job_log import LEVELS, LogLine, highlighted, log_lines
from tunedeck.service.models.base_model_facts import base_model_facts
from tunedeck.service.privacy.retention_dates import job_schedule
from tunedeck.service.users.storage_quota import storage_meter, stored_bytes_if_limited
from tunedeck.store.early_stop import evaluated_metric
from tunedeck.store.job_progress import progress_for
from tunedeck.store.job_tags import MAX_TAG_LENGTH, MAX_TAGS, TagError, tags_from_text
from tunedeck.store.jobs import JobSort, job_duration
from tunedeck.store.quotas import QuotaExceededError
from tunedeck.web.compare_view import CompareRequestError, compare_page, parse_job_ids
from tunedeck.web.form_spec import build_form_spec
from tunedeck.web.job_listing import JobListing
from tunedeck.web.job_view import (
    ACTIONS_BY_STATE,
    CHART_POINTS,
    CHECK_STATUS_LABELS,
    client_charts,
    export_choices,
    job_page_data,
    steps_per_epoch,
)
from tunedeck.web.locales.catalogue import Message, marked
from tunedeck.web.locales.early_stop_words import early_stop_message
from tunedeck.web.page_deps import CheckedForm, DashboardDep, SessionDep, page_lookup
from tunedeck.web.playground_view import CHAT_PATH, SamplingLimits, playground_models
from tunedeck.web.precision_hint import auto_precision_note
from tunedeck.web.rendering import format_duration
from tunedeck.web.retention_view import retention_line

router = APIRouter(include_in_schema=False)
TAG_NOTICES = frozenset({"tags", "bad_tags"})
PAGE_SIZE = 50
FULL_LOG_LINES = 5000  # the most lines the full-log page lists; its download has every one
NOTICES: dict[str, str | Message] = {
    "conflict": marked("That action is not possible in the job's current state (it may have changed meanwhile)."),
    "bad_step": marked("There is no checkpoint at that step to resume from."),
    "pause": marked("Pause requested: the job writes a checkpoint, then stops."),
    "cancel": marked("Cancel requested."),
    "resume": marked("The job is queued again and resumes from its newest committed checkpoint."),
    "tags": marked("Tags saved."),
    "bad_tags": Message(
        marked("Tags not saved: each tag is 1 to {longest} letters, digits, '-', '_' or '.', at most {count} of them."),
        {"longest": MAX_TAG_LENGTH, "count": MAX_TAGS},
    ),
    "quota": marked(
        "One of your quotas does not allow another queued job now: your Account page shows them and their use."
    ),
}


@router.get("/jobs")
def jobs_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    state: list[JobState] | None = Query(None),
    name: str | None = Query(None, max_length=200),
    dataset: str | None = Query(None, max_length=40),
    base_model: str | None = Query(None, max_length=40),
    tag: str | None = Query(None, max_length=32),
    sort: JobSort = Query(JobSort.CREATED),
    order: Literal["asc", "desc"] = Query("desc"),
    cursor: str | None = Query(None, max_length=200),
) -> Response:
    """The user's jobs, newest first or sorted by a column, filtered by state, name, dataset, base model and tag."""
    store = dashboard.context.jobs
    filters: dict[str, Any] = {
        "state": state,
        "name": name or None,
        "dataset_id": dataset or None,
        "base_model_id": base_model or None,
        "tag": tag or None,
    }
    with page_lookup():
        try:
            page = store.jobs.list(
                session.user, **filters, sort=sort, descending=order == "desc", limit=PAGE_SIZE, cursor=cursor
            )
        except IssueListError:  # an undecodable cursor: start from the first page
            page = store.jobs.list(session.user, **filters, sort=sort, descending=order == "desc", limit=PAGE_SIZE)
    progress = progress_for(store, page.items)
    kept: dict[str, str | list[str]] = {
        "state": [s.value for s in state or []],
        "name": name or "",
        "dataset": dataset or "",
        "base_model": base_model or "",
        "tag": tag or "",
    }
    listing = JobListing(kept, sort, order)
    return dashboard.renderer.page(
        request,
        "jobs.html",
        title=marked("Training jobs"),
        nav="jobs",
        user=session.user,
        csrf_token=session.csrf,
        jobs=page.items,
        progress=progress,
        early_stops={job_id: early_stop_message(p.early_stop) for job_id, p in progress.items() if p.early_stop},
        durations={job.id: job_duration(job) for job in page.items},
        next_cursor=page.next_cursor,
        next_href=listing.href(cursor=page.next_cursor) if page.next_cursor else None,
        columns=listing.columns(),
        states=list(JobState),
        selected_states={s.value for s in state or []},
        name=name or "",
        filtering=any(kept.values()),
        sort=sort.value,
        order=order,
        datasets=store.datasets.list_datasets(session.user),
        base_models=store.base_models.list(session.user),
        tags=store.jobs.tags_in_use(session.user),
        selected={"dataset": dataset or "", "base_model": base_model or "", "tag": tag or ""},
    )


def _form_context(dashboard: DashboardDep, session: SessionDep, clone: str | None) -> dict[str, Any]:
    store = dashboard.context.jobs
    datasets = []
    for dataset in store.datasets.list_datasets(session.user):
        versions = store.datasets.list_versions(session.user, dataset.id)
        if versions:
            datasets.append(
                {
                    "id": dataset.id,
                    "name": dataset.name,
                    "rows": versions[-1].rows,
                    "version": versions[-1].version,
                    "version_id": versions[-1].id,
                }
            )
    source = None
    if clone:
        with page_lookup():
            source = store.jobs.get(session.user, clone)
    # The jobs a new job may start from (init_from_job): the user's finished, successful ones.
    succeeded = store.jobs.list(session.user, state=[JobState.SUCCEEDED], limit=PAGE_SIZE).items
    jobs = [{"id": job.id, "name": job.name, "task": (job.config or {}).get("task", "sft")} for job in succeeded]
    spec = build_form_spec()
    values = {f.key: f.default for f in spec.fields()}
    base_models = store.base_models.list(session.user)
    roots = dashboard.context.settings.resolved_model_roots()
    if source is not None:
        values.update(source.config or {})
    return {
        "spec": spec,
        "values": values,
        "base_models": base_models,
        # One line per model for the picker: what its files say, read without loading it.
        "model_facts": {m.id: base_model_facts(m, roots)[1] for m in base_models},
        "experiments": store.experiments.list(session.user),
        "datasets": datasets,
        "jobs": jobs,
        "recipes": [{"name": r.name, "title": r.title, "values": r.values} for r in list_recipes()],
        "source": source,
    }


@router.get("/jobs/new")
def new_job_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    clone: str | None = Query(None, max_length=40),
) -> Response:
    """The training-job form, every job config key (or a copy of an existing job's config, `?clone=<job id>`)."""
    context = _form_context(dashboard, session, clone)
    return dashboard.renderer.page(
        request,
        "job_new.html",
        title=marked("Clone training job") if context["source"] else marked("New training job"),
        nav="new",
        user=session.user,
        csrf_token=session.csrf,
        client_spec={
            **context["spec"].to_client(),
            "defaults": {f.key: f.default for f in context["spec"].fields()},
            "recipes": context["recipes"],
            "datasets": context["datasets"],
            "clone_of": context["source"].id if context["source"] else None,
            "few_steps": FEW_STEPS,  # the schedule warnings' threshold, shown as the form is filled
            "check_status_labels": CHECK_STATUS_LABELS,
        },
        # Shown in the page's language beside the precision (the form's script reads it from there).
        auto_precision=auto_precision_note(dashboard.context.jobs, session.user),
        **context,
    )


@router.get("/jobs/compare")
def compare_jobs_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    ids: list[str] = Query([]),
) -> Response:
    """Two to ten of the user's jobs side by side: overlaid curves per metric, config differences, final metrics.

    `ids` is a comma-separated list of job ids (or the parameter repeated, as the jobs list's form sends it).
    """
    try:
        job_ids = parse_job_ids(ids)
    except CompareRequestError as error:
        return dashboard.renderer.page(
            request,
            "error.html",
            422,
            title=marked("Cannot compare these jobs"),
            message=str(error),
            user=session.user,
            nav="jobs",
        )
    context = dashboard.context
    with page_lookup():
        jobs = [context.jobs.jobs.get(session.user, job_id) for job_id in job_ids]
        page = compare_page(context, session.user, jobs)
    return dashboard.renderer.page(
        request,
        "compare.html",
        title=marked("Compare runs"),
        nav="jobs",
        user=session.user,
        csrf_token=session.csrf,
        page=page,
        client_data={"jobs": page.client_jobs, "metrics": page.chart_names, "max_points": CHART_POINTS},
    )


@router.get("/jobs/{job_id}")
def job_page(
    request: Request,
    job_id: str,
    session: SessionDep,
    dashboard: DashboardDep,
    notice: str | None = Query(None, max_length=20),
) -> Response:
    """One job: state, live charts, timeline, logs, checkpoints, playground, exports, config and environment."""
    context = dashboard.context
    with page_lookup():
        job = context.jobs.jobs.get(session.user, job_id)
        checkpoints = context.jobs.checkpoints.list_for_job(session.user, job_id)
        data = job_page_data(context, job, session.user)
        models = playground_models(context, session.user, job)
    progress = progress_for(context.jobs, [job])[job.id]
    newest_committed = max((c.step for c in checkpoints if c.state == "committed"), default=None)
    best_checkpoint = next((c for c in checkpoints if c.is_best and c.state == "committed"), None)
    waiting_for = (
        context.jobs.quotas.waiting_reason(job.owner_id, storage_meter(context))
        if job.state == JobState.QUEUED.value
        else None
    )
    return dashboard.renderer.page(
        request,
        "job.html",
        title=Message(marked("Job {name}"), {"name": job.name}),
        nav="jobs",
        user=session.user,
        csrf_token=session.csrf,
        job=job,
        progress=progress,
        checkpoints=checkpoints,
        newest_committed=newest_committed,
        best_checkpoint=best_checkpoint,
        best_checkpoint_metric=evaluated_metric(progress.best_metric),
        export_formats=export_choices(job.config),
        playground_models=models,
        sampling=SamplingLimits(),
        chat_path=CHAT_PATH,
        waiting_for=waiting_for,
        early_stop_text=early_stop_message(progress.early_stop) if progress.early_stop else None,
        retention_entries=job_schedule(context, job.id),
        retention_line=retention_line,
        data=data,
        # What became of the tags form is said beside it; the page's notice is about the job's state.
        notice=None if notice in TAG_NOTICES else NOTICES.get(notice or ""),
        tags_notice=NOTICES[notice] if notice in TAG_NOTICES else None,
        client_data={
            "job_id": job.id,
            "state": job.state,
            "charts": client_charts(data, dashboard.renderer.words(request, session.user).gettext),
            "steps_per_epoch": steps_per_epoch(job.config, progress.total_steps),
            "last_event_id": data.last_event_id,
            "max_points": CHART_POINTS,
            "total_steps": progress.total_steps,
            "actions_by_state": {state.value: list(actions) for state, actions in ACTIONS_BY_STATE.items()},
            "actions": list(data.actions),
            "terminal_states": [state.value for state in TERMINAL_STATES],
            "system": {series.key: series.points for series in data.system},
            "system_origin": data.system_origin.isoformat() if data.system_origin else None,
        },
    )


@router.get("/jobs/{job_id}/log")
def job_log_page(
    request: Request,
    job_id: str,
    session: SessionDep,
    dashboard: DashboardDep,
    q: str = Query("", max_length=200),
    level: str = Query("", max_length=20),
) -> Response:
    """The job's whole log: the lines holding `q` (any case, marked) at `level`, with how many of all match."""
    store = dashboard.context.jobs
    with page_lookup():
        job = store.jobs.get(session.user, job_id)
    shown: list[tuple[LogLine, list[tuple[str, bool]]]] = []
    total = matched = 0
    levels = set(LEVELS)
    for line in log_lines(store.telemetry, session.user, job.id):
        total += 1
        levels.add(line.level)
        if line.matches(q, level or None):
            matched += 1
            if len(shown) < FULL_LOG_LINES:  # the download holds the rest: the page stays light
                shown.append((line, highlighted(line.message, q)))
    return dashboard.renderer.page(
        request,
        "job_log.html",
        title=Message(marked("Log of {name}"), {"name": job.name}),
        nav="jobs",
        user=session.user,
        csrf_token=session.csrf,
        job=job,
        lines=shown,
        total=total,
        matched=matched,
        q=q,
        level=level,
        levels=sorted(levels),
        limit=FULL_LOG_LINES,
    )


@router.get("/jobs/{job_id}/progress")
def job_progress(job_id: str, session: SessionDep, dashboard: DashboardDep) -> Response:
    """Where the job stands, for its page to follow: state, steps, and the time left as the page writes it."""
    store = dashboard.context.jobs
    with page_lookup():
        job = store.jobs.get(session.user, job_id)
    progress = progress_for(store, [job])[job.id]
    return JSONResponse(
        {
            "state": job.state,
            "requested_action": job.requested_action,
            "step": progress.step,
            "total_steps": progress.total_steps,
            "eta_seconds": progress.eta_seconds,
            "eta": format_duration(progress.eta_seconds),
        },
        headers={"Cache-Control": "no-store"},
    )


@router.get("/jobs/{job_id}/step-times")
def job_step_times(job_id: str, session: SessionDep, dashboard: DashboardDep) -> Response:
    """When the job logged its steps (step, epoch seconds), for charts drawn against wall-clock time."""
    with page_lookup():
        times = dashboard.context.jobs.telemetry.step_times(session.user, job_id, max_points=CHART_POINTS)
    return JSONResponse({"points": [[step, when] for step, when in times]}, headers={"Cache-Control": "no-store"})


@router.post("/jobs/{job_id}/tags")
def job_tags_form(job_id: str, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """Replace the job's tags from the job page's tag field (commas or spaces between them)."""
    with page_lookup():
        try:
            dashboard.context.jobs.jobs.set_tags(session.user, job_id, tags_from_text(str(form.get("tags") or "")))
        except TagError:
            return RedirectResponse(f"/jobs/{job_id}?notice=bad_tags#tags", status_code=303)
    return RedirectResponse(f"/jobs/{job_id}?notice=tags#tags", status_code=303)


@router.post("/jobs/{job_id}/{action}")
def job_action(job_id: str, action: str, session: SessionDep, dashboard: DashboardDep, _form: CheckedForm) -> Response:
    """Cancel, pause or resume from a plain form, then back to the job page."""
    repo = dashboard.context.jobs.jobs

    from_step = str(_form.get("from_step") or "")

    def resume(user: Principal, job_id: str) -> object:
        owner = repo.get(user, job_id).owner_id  # whose quota applies, even when an admin resumes it
        stored_bytes = stored_bytes_if_limited(dashboard.context, owner)
        if not from_step:
            return repo.resume(user, job_id, stored_bytes=stored_bytes)
        # "Resume from here": later checkpoints and their metric points go, with the resume, in one transaction.
        job, dropped = repo.resume_from(user, job_id, int(from_step), stored_bytes=stored_bytes)
        for prefix in dropped:
            dashboard.context.artifacts.delete_prefix(prefix)
        return job

    operations = {"cancel": repo.request_cancel, "pause": repo.request_pause, "resume": resume}
    operation = operations.get(action)
    if operation is None:
        with page_lookup():
            repo.get(session.user, job_id)
        return RedirectResponse(f"/jobs/{job_id}", status_code=303)
    if action == "resume" and from_step and not (from_step.isdigit() and int(from_step) <= SQL_INT_MAX):
        return RedirectResponse(f"/jobs/{job_id}?notice=bad_step", status_code=303)
    with page_lookup():
        try:
            operation(session.user, job_id)
        except StateTransitionError:
            return RedirectResponse(f"/jobs/{job_id}?notice=conflict", status_code=303)
        except QuotaExceededError:
            return RedirectResponse(f"/jobs/{job_id}?notice=quota", status_code=303)
    return RedirectResponse(f"/jobs/{job_id}?notice={action}", status_code=303)
