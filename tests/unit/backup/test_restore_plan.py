"""What a restore will let in, said in one line before anything is written."""

from __future__ import annotations

from tunedeck.backup.restore_plan import RestorePlan


def test_the_plan_names_the_admins_and_counts_each_users_tokens() -> None:
    plan = RestorePlan({"alice": "user", "root": "admin"}, {"alice": 2, "root": 1})
    assert plan.describe() == "creates 2 users (admins: root) and 3 API tokens (alice 2, root 1)"
    assert RestorePlan({"solo": "user"}, {}).describe() == "creates 1 user (no admin) and 0 API tokens"
