"""Uploading with a column mapping: a file's own column names read as a format's fields, or a 422 naming the column."""

from __future__ import annotations

import json
import re

from tests.fixtures.app import API, AppHarness, sign_in, uploaded_id


def test_a_csv_with_its_own_column_names_ingests_through_a_mapping(api: AppHarness) -> None:
    rows = b"Question,Reply,topic\nWhat is 2+2?,4,maths\nCapital of France?,Paris,places\n"
    answer = api.upload("alice", rows, filename="faq.csv", name="faq", format="alpaca",
                        column_map="instruction=Question,output=Reply")  # fmt: skip
    dataset_id = uploaded_id(answer)
    latest = api.client.get(f"{API}/datasets/{dataset_id}", headers=api.auth("alice")).json()["latest"]
    assert latest["source_format"] == "alpaca" and latest["rows"] == 2
    assert latest["column_map"] == {"instruction": "Question", "output": "Reply"}
    preview = api.client.get(f"{API}/datasets/{dataset_id}/preview", headers=api.auth("alice")).json()
    messages = preview["rows"][0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["content"] == "What is 2+2?" and messages[1]["content"] == "4"


def test_a_mapped_column_the_csv_lacks_is_a_422_naming_it(api: AppHarness) -> None:
    rows = b"Question,Reply\nWhat is 2+2?,4\n"
    answer = api.upload("alice", rows, filename="faq.csv", format="alpaca",
                        column_map="instruction=Question,output=Answer")  # fmt: skip
    assert answer.status_code == 422, answer.text
    issue = answer.json()["issues"][0]
    assert issue["field"] == "Answer"
    assert "output=Answer" in issue["expected"] and "Question" in issue["found"]
    assert api.client.get(f"{API}/datasets", headers=api.auth("alice")).json() == []


def test_a_mapped_field_no_json_row_has_is_a_422_naming_it(api: AppHarness) -> None:
    rows = json.dumps([{"q": "What is 2+2?", "a": "4"}]).encode()
    answer = api.upload("alice", rows, filename="faq.json", column_map="prompt=q,completion=answer")
    assert answer.status_code == 422, answer.text
    named = [issue for issue in answer.json()["issues"] if issue.get("field") == "answer"]
    assert named, answer.json()["issues"]
    assert named and "completion=answer" in named[0]["expected"]


def test_the_upload_form_carries_each_formats_fields_for_the_column_choices(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/datasets")
    found = re.search(r'<script type="application/json" id="format-fields">(.*?)</script>', page.text, re.S)
    assert found is not None
    info = json.loads(found.group(1))
    assert info["fields"]["alpaca"] == {
        "required": ["instruction", "output"],
        "optional": ["system", "input", "history"],
    }
    assert info["fields"]["sharegpt"]["required"] == ["conversations"]
    # Most specific first, as the ingestion tells a format: a preference row is not read as a plain one.
    order = [name for name, _ in info["signatures"]]
    assert order.index("sharegpt_preference") < order.index("sharegpt") < order.index("text")
    assert 'id="upload-mapping"' in page.text
