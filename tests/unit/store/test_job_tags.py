"""The tag rules: short labels of letters, digits and - _ ., at most sixteen a job, each bad one named."""

from __future__ import annotations

import pytest

from tunedeck.store.job_tags import MAX_TAGS, TagError, tags_from_text, validated_tags


def test_valid_tags_keep_their_order_and_drop_repeats() -> None:
    assert validated_tags(["baseline", "lr-1e.4", "v_2", "baseline"]) == ["baseline", "lr-1e.4", "v_2"]
    assert validated_tags([]) == []
    assert validated_tags(["x" * 32]) == ["x" * 32]


@pytest.mark.parametrize("bad", ["", "x" * 33, "has space", "semi;colon", "ümlaut", "slash/"])
def test_a_bad_tag_is_named_by_its_place(bad: str) -> None:
    with pytest.raises(TagError) as raised:
        validated_tags(["good", bad])
    issue = raised.value.issues[0]
    assert issue.field == "tags[1]"
    assert "32" in (issue.expected or "")


def test_a_tag_that_is_not_text_is_refused() -> None:
    with pytest.raises(TagError) as raised:
        validated_tags(["good", 7])
    assert raised.value.issues[0].found == "int"


def test_more_than_sixteen_distinct_tags_are_refused() -> None:
    assert len(validated_tags([f"t{i}" for i in range(MAX_TAGS)])) == MAX_TAGS
    with pytest.raises(TagError) as raised:
        validated_tags([f"t{i}" for i in range(MAX_TAGS + 1)])
    assert raised.value.issues[0].field == "tags"
    assert f"at most {MAX_TAGS}" in (raised.value.issues[0].expected or "")


def test_typed_tags_split_on_commas_and_spaces() -> None:
    assert tags_from_text(" baseline, sweep-3  lr.high,,") == ["baseline", "sweep-3", "lr.high"]
    assert tags_from_text("") == []
    with pytest.raises(TagError):
        tags_from_text("ok, not/ok")
