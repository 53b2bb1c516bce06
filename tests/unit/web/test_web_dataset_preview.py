"""The dataset preview's layout: conversations as one bubble per message, other rows as a table, in pages."""

from __future__ import annotations

import json

from tests.fixtures.app import AppHarness, sign_in, uploaded_id
from tunedeck.web.dataset_view import CELL_CHARS, PREVIEW_PAGE_ROWS, shape_preview


def _chat(i: int) -> dict[str, object]:
    return {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"What is {i} plus {i}?"},
            {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "add"}}], "weight": 0},
            {"role": "tool", "content": str(2 * i), "tool_call_id": "call_1"},
            {"role": "assistant", "content": f"It is {2 * i}."},
        ]
    }


def test_conversations_become_role_labelled_bubbles_with_their_raw_json() -> None:
    rows = [_chat(i) for i in range(3)]
    preview = shape_preview(rows, total=3, page=1)
    assert preview.layout == "chat" and preview.columns == []
    first = preview.rows[0]
    assert [m.role for m in first.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert [m.style for m in first.messages] == ["system", "user", "assistant", "tool", "assistant"]
    call = first.messages[2]
    assert call.content == "" and call.context_only and '"name": "add"' in call.extras
    assert first.messages[3].extras == json.dumps({"tool_call_id": "call_1"}, indent=1)
    assert json.loads(first.raw) == rows[0]


def test_other_rows_become_a_table_with_long_cells_cut_and_kept_whole() -> None:
    long = "word " * 100
    rows = [{"prompt": "short", "completion": long}, {"prompt": "p", "completion": "c", "label": ["a", "b"]}]
    preview = shape_preview(rows, total=2, page=1)
    assert preview.layout == "table"
    assert preview.columns == ["prompt", "completion", "label"]
    cut = preview.rows[0].cells[1]
    assert cut.text == long and cut.short is not None and len(cut.short) <= CELL_CHARS
    assert preview.rows[0].cells[0].short is None
    assert preview.rows[0].cells[2].text == ""  # a field the row lacks is an empty cell
    assert preview.rows[1].cells[2].text == '["a", "b"]'


def test_a_mix_of_conversations_and_other_rows_is_a_table() -> None:
    preview = shape_preview([_chat(0), {"text": "plain"}], total=2, page=1)
    assert preview.layout == "table" and preview.columns == ["messages", "text"]


def test_pages_count_the_stored_rows_and_the_version_total() -> None:
    rows = [{"text": f"row {i}"} for i in range(PREVIEW_PAGE_ROWS * 2 + 5)]
    second = shape_preview(rows, total=10_000, page=2)
    assert (second.first, second.last, second.pages) == (PREVIEW_PAGE_ROWS + 1, 2 * PREVIEW_PAGE_ROWS, 3)
    assert second.rows[0].number == PREVIEW_PAGE_ROWS + 1 and second.rows[0].cells[0].text == f"row {PREVIEW_PAGE_ROWS}"
    assert (second.stored, second.total) == (len(rows), 10_000)
    past_the_end = shape_preview(rows, total=10_000, page=99)
    assert past_the_end.page == 3 and past_the_end.last == len(rows)


def test_the_dataset_page_pages_through_the_preview(web: AppHarness) -> None:
    rows = [{"text": f"document number {i}"} for i in range(PREVIEW_PAGE_ROWS + 5)]
    answer = web.upload("alice", "".join(json.dumps(row) + "\n" for row in rows).encode(), name="pages")
    dataset_id = uploaded_id(answer)
    sign_in(web.client, web.tokens["alice"])
    first = web.client.get(f"/datasets/{dataset_id}").text
    assert f"Showing rows 1–{PREVIEW_PAGE_ROWS} of {len(rows)}" in first
    assert 'data-layout="table"' in first and "document number 0" in first
    assert 'href="?version=1&amp;rows_page=2#preview" rel="next"' in first and 'rel="prev"' not in first
    second = web.client.get(f"/datasets/{dataset_id}?rows_page=2").text
    assert f"Showing rows {PREVIEW_PAGE_ROWS + 1}–{len(rows)} of {len(rows)}" in second
    assert f"document number {PREVIEW_PAGE_ROWS}" in second and "document number 0<" not in second
    assert 'rel="prev"' in second and 'rel="next"' not in second
    # Another user's dataset stays unknown, whatever the page asked for.
    sign_in(web.client, web.tokens["bob"])
    assert web.client.get(f"/datasets/{dataset_id}?rows_page=2").status_code == 404
