"""Quotas: every user reads their own; admins set everyone's limits and one user's."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from tunedeck.api.auth import AdminUser, CurrentUser
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.quotas import QuotaLimitsOut, QuotaOut, QuotaSettingsOut, QuotaUpdate, QuotaUseOut
from tunedeck.service.users.storage_quota import storage_meter
from tunedeck.store.quotas import EVERYONE, QuotaSettings

router = APIRouter(tags=["quotas"])
_ADMIN_ERRORS: dict[int | str, dict[str, object]] = {403: {"model": ErrorOut}, 404: {"model": ErrorOut}}


def _settings_out(settings: QuotaSettings) -> QuotaSettingsOut:
    return QuotaSettingsOut(**asdict(settings))


def quota_out(context: ApiContext, user_id: str, user_name: str) -> QuotaOut:
    """A user's limits, use (storage measured now) and own settings."""
    quotas = context.jobs.quotas
    use = quotas.usage(user_id, meter=storage_meter(context))
    return QuotaOut(
        user=user_name,
        limits=QuotaLimitsOut(**asdict(quotas.limits_for(user_id))),
        use=QuotaUseOut(
            running_jobs=use.running_jobs,
            queued_jobs=use.queued_jobs,
            storage_bytes=use.storage_bytes or 0,
            device_hours=round(use.device_hours, 4),
        ),
        own=_settings_out(quotas.settings(user_id)),
    )


@router.get("/me/quota", response_model=QuotaOut)
def my_quota(user: CurrentUser, context: Context) -> QuotaOut:
    """The signed-in user's limits and what they use now."""
    return quota_out(context, user.id, user.name)


@router.get("/users/{name}/quota", response_model=QuotaOut, responses=_ADMIN_ERRORS)
def user_quota(name: str, admin: AdminUser, context: Context) -> QuotaOut:
    """A user's limits and use (admins only)."""
    target = context.jobs.users.get_user_by_name(name)
    return quota_out(context, target.id, target.name)


@router.patch("/users/{name}/quota", response_model=QuotaOut, responses=_ADMIN_ERRORS)
def set_user_quota(name: str, body: QuotaUpdate, admin: AdminUser, context: Context) -> QuotaOut:
    """Set limits for one user (admins only); a field sent as null takes everyone's value again."""
    target = context.jobs.users.get_user_by_name(name)
    context.jobs.quotas.set(target.id, body.model_dump(include=body.model_fields_set), by=admin.id)
    return quota_out(context, target.id, target.name)


@router.get("/quotas/everyone", response_model=QuotaSettingsOut, responses={403: {"model": ErrorOut}})
def everyone_quota(admin: AdminUser, context: Context) -> QuotaSettingsOut:
    """The limits every user has unless set otherwise for them (admins only)."""
    return _settings_out(context.jobs.quotas.settings(EVERYONE))


@router.patch("/quotas/everyone", response_model=QuotaSettingsOut, responses={403: {"model": ErrorOut}})
def set_everyone_quota(body: QuotaUpdate, admin: AdminUser, context: Context) -> QuotaSettingsOut:
    """Set the limits every user has unless set otherwise for them (admins only); null removes one."""
    return _settings_out(context.jobs.quotas.set(EVERYONE, body.model_dump(include=body.model_fields_set), by=admin.id))
