"""Preference and KTO rows: each source shape → TRL's canonical row; bad rows → located errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.data import write_jsonl
from tunedeck.data.dedup import dedup_text
from tunedeck.data.formats.registry import detect_format, normalise
from tunedeck.data.loading import load_dataset
from tunedeck.data.task_kinds import kind_issue
from tunedeck.data.validation import validate_file

SKY_PROMPT = [{"role": "user", "content": "What color is the sky?"}]
BLUE = [{"role": "assistant", "content": "It is blue."}]
GREEN = [{"role": "assistant", "content": "It is green."}]

# One row of each source shape, as its documentation shows it (TRL's dataset formats guide,
# OpenAI's preference fine-tuning guide, LLaMA-Factory's data README), with its canonical row.
SAMPLES: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "trl standard": (
        {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
        "preference",
        {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
    ),
    "trl conversational": (
        {"prompt": SKY_PROMPT, "chosen": BLUE, "rejected": GREEN},
        "preference",
        {"prompt": SKY_PROMPT, "chosen": BLUE, "rejected": GREEN},
    ),
    "trl implicit conversational": (
        {"chosen": [*SKY_PROMPT, *BLUE], "rejected": [*SKY_PROMPT, *GREEN]},
        "preference",
        {"prompt": SKY_PROMPT, "chosen": BLUE, "rejected": GREEN},
    ),
    "trl implicit standard": (
        {"chosen": "The sky is blue.", "rejected": "The sky is green."},
        "preference",
        {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
    ),
    "openai": (
        {
            "input": {
                "messages": [{"role": "user", "content": "Hello, can you tell me how cold San Francisco is today?"}],
                "tools": [],
                "parallel_tool_calls": True,
            },
            "preferred_output": [{"role": "assistant", "content": "Today in San Francisco, it is not quite cold."}],
            "non_preferred_output": [{"role": "assistant", "content": "It is not particularly cold today."}],
        },
        "openai_preference",
        {
            "prompt": [{"role": "user", "content": "Hello, can you tell me how cold San Francisco is today?"}],
            "chosen": [{"role": "assistant", "content": "Today in San Francisco, it is not quite cold."}],
            "rejected": [{"role": "assistant", "content": "It is not particularly cold today."}],
        },
    ),
    "llama-factory sharegpt": (
        {
            "conversations": [{"from": "human", "value": "Name a primary colour."}],
            "chosen": {"from": "gpt", "value": "Red."},
            "rejected": {"from": "gpt", "value": "Purple."},
            "system": "Answer in one word.",
        },
        "sharegpt_preference",
        {
            "prompt": [{"role": "system", "content": "Answer in one word."},
                       {"role": "user", "content": "Name a primary colour."}],
            "chosen": [{"role": "assistant", "content": "Red."}],
            "rejected": [{"role": "assistant", "content": "Purple."}],
        },
    ),
    "llama-factory alpaca": (
        {"instruction": "Translate to English", "input": "bonjour", "chosen": "hello", "rejected": "goodbye",
         "history": [["Translate to English: merci", "thank you"]]},
        "alpaca_preference",
        {
            "prompt": [{"role": "user", "content": "Translate to English: merci"},
                       {"role": "assistant", "content": "thank you"},
                       {"role": "user", "content": "Translate to English\nbonjour"}],
            "chosen": [{"role": "assistant", "content": "hello"}],
            "rejected": [{"role": "assistant", "content": "goodbye"}],
        },
    ),
    "trl unpaired": (
        {"prompt": "The sky is", "completion": " green.", "label": False},
        "unpaired_preference",
        {"prompt": "The sky is", "completion": " green.", "label": False},
    ),
    "trl unpaired conversational": (
        {"prompt": SKY_PROMPT, "completion": BLUE, "label": True},
        "unpaired_preference",
        {"prompt": SKY_PROMPT, "completion": BLUE, "label": True},
    ),
    "llama-factory sharegpt kto": (
        {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Go away."}], "kto_tag": False},
        "sharegpt_kto",
        {"prompt": [{"role": "user", "content": "Hi"}], "completion": [{"role": "assistant", "content": "Go away."}],
         "label": False},
    ),
    "llama-factory kto demo (messages and label)": (
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Go away."}], "label": False},
        "chat_kto",
        {"prompt": [{"role": "user", "content": "Hi"}], "completion": [{"role": "assistant", "content": "Go away."}],
         "label": False},
    ),
    "llama-factory alpaca kto": (
        {"instruction": "Say hello", "output": "Hello!", "kto_tag": True},
        "alpaca_kto",
        {"prompt": [{"role": "user", "content": "Say hello"}],
         "completion": [{"role": "assistant", "content": "Hello!"}], "label": True},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_source_shape_makes_its_canonical_row(name: str, tmp_path: Path) -> None:
    raw, source_format, expected = SAMPLES[name]
    assert detect_format(raw) == source_format
    assert normalise(raw, source_format) == (expected, [])
    loaded = load_dataset(write_jsonl(tmp_path / "d.jsonl", [raw, raw]))
    kind = "unpaired_preference" if "label" in expected else "preference"
    assert (loaded.kind, loaded.rows) == (kind, [expected, expected])
    assert kind_issue(loaded.kind, "kto") is None
    # A written canonical row reads back as itself (split files, registered versions).
    again = load_dataset(write_jsonl(tmp_path / "again.jsonl", loaded.rows))
    assert again.rows == loaded.rows and again.kind == kind


def test_a_chat_whose_label_is_not_a_mark_stays_a_chat_and_a_kto_chat_must_end_on_the_answer() -> None:
    chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}
    assert detect_format({**chat, "label": "greeting"}) == "chat"  # a class name, not a desirability mark
    row, issues = normalise({"messages": chat["messages"][:1], "label": True}, "chat_kto")
    assert row is None and issues[0].field == "messages" and "assistant turn" in issues[0].message


def test_implicit_prompt_follows_trl_extract_prompt() -> None:
    from trl.data_utils import extract_prompt

    for raw in ({"chosen": "The sky is blue.", "rejected": "The sky is green."},
                {"chosen": "I think: yes", "rejected": "I think: no"},
                {"chosen": [*SKY_PROMPT, *BLUE], "rejected": [*SKY_PROMPT, *GREEN]}):
        assert normalise(raw, "preference") == (extract_prompt(raw), [])


def test_tools_reach_conversational_rows() -> None:
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
    row, issues = normalise({"prompt": SKY_PROMPT, "chosen": BLUE, "rejected": GREEN, "tools": tools}, "preference")
    assert not issues and row is not None and row["tools"] == tools


BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "empty chosen": ({"prompt": "q", "chosen": " ", "rejected": "b"}, "chosen", "empty text"),
    "rejected not text": ({"prompt": "q", "chosen": "a", "rejected": 3}, "rejected", "wrong type"),
    "same answers": ({"prompt": "q", "chosen": "a", "rejected": "a"}, "rejected", "chosen and rejected are the same"),
    "mixed forms": ({"prompt": "q", "chosen": BLUE, "rejected": GREEN}, "prompt",
                    "standard and conversational fields mixed"),
    "answer by the user": ({"prompt": SKY_PROMPT, "chosen": SKY_PROMPT, "rejected": GREEN}, "chosen[0].role",
                           "answer is not an assistant message"),
    "nothing shared": ({"chosen": "yes", "rejected": "no"}, "chosen, rejected", "share no prompt"),
    "nothing left": ({"chosen": [*SKY_PROMPT, *BLUE], "rejected": SKY_PROMPT}, "chosen, rejected",
                     "nothing is left of an answer"),
    "kto label a word": ({"prompt": "q", "completion": "a", "label": "maybe"}, "label", "wrong type"),
    "kto tag missing": ({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}],
                         "kto_tag": None}, "kto_tag", "wrong type"),
    "sharegpt ends on gpt": ({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}],
                              "chosen": {"from": "gpt", "value": "a"}, "rejected": {"from": "gpt", "value": "b"}},
                             "conversations", "does not end on a human turn"),
    "openai rejected by user": ({"input": {"messages": SKY_PROMPT}, "preferred_output": BLUE,
                                 "non_preferred_output": SKY_PROMPT}, "non_preferred_output[0].role",
                                "answer is not an assistant message"),
    "alpaca chosen missing": ({"instruction": "x", "chosen": None, "rejected": "b"}, "chosen", "wrong type"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_rows_name_file_line_and_field(name: str, tmp_path: Path) -> None:
    bad, field, message = BAD[name]
    # A word as label makes a prompt/completion row with an extra field, unless the file is KTO.
    source_format = "unpaired_preference" if name == "kto label a word" else detect_format(bad)
    assert source_format is not None
    path = write_jsonl(tmp_path / "bad.jsonl", [bad])
    report = validate_file(path, source_format)
    assert report.issue_count >= 1 and not report.ok
    issue = report.issues[0]
    assert (issue.file, issue.line, issue.field) == (str(path), 1, field) and message in issue.message, issue
    assert issue.expected and issue.found


def test_a_label_of_one_is_read_as_desirable_in_a_kto_file(tmp_path: Path) -> None:
    rows = [{"prompt": "q", "completion": "a", "label": True}, {"prompt": "q", "completion": "b", "label": 0}]
    loaded = load_dataset(write_jsonl(tmp_path / "kto.jsonl", rows))
    assert [row["label"] for row in loaded.rows] == [True, False]


def test_kto_in_csv(tmp_path: Path) -> None:
    path = tmp_path / "kto.csv"
    path.write_text("prompt,completion,label\nq,a,True\nq,b,False\n", encoding="utf-8")
    loaded = load_dataset(path)
    assert loaded.kind == "unpaired_preference" and [r["label"] for r in loaded.rows] == [True, False]


def test_mixed_kinds_and_forms_in_one_file_are_located(tmp_path: Path) -> None:
    rows = [
        {"prompt": "q", "chosen": "a", "rejected": "b"},
        {"prompt": "q", "completion": "a", "label": True},  # a KTO row in a preference file
        {"prompt": SKY_PROMPT, "chosen": BLUE, "rejected": GREEN},  # conversational after standard
        {"prompt": "q2", "chosen": "a", "rejected": "b"},
    ]
    report = validate_file(write_jsonl(tmp_path / "mixed.jsonl", rows))
    assert report.kind == "preference" and report.rows_valid == 2
    first, second = report.issues
    assert first.line == 2 and "another format" in first.message and first.field == "format"
    assert second.line == 3 and "standard and conversational preference rows" in second.message


def test_preference_files_train_preference_tasks_only(tmp_path: Path) -> None:
    loaded = load_dataset(write_jsonl(tmp_path / "p.jsonl", [SAMPLES["trl standard"][0]]))
    issue = kind_issue(loaded.kind, "sft")
    assert issue is not None and "dpo" in issue.message
    assert kind_issue(loaded.kind, "dpo") is None and kind_issue(loaded.kind, "orpo") is None


def test_dedup_reads_every_side_and_the_label() -> None:
    pair = {"prompt": [{"role": "system", "content": "sys"}, *SKY_PROMPT], "chosen": BLUE, "rejected": GREEN}
    assert dedup_text(pair) == "What color is the sky?\nIt is blue.\nIt is green."
    good = {"prompt": "q", "completion": "a", "label": True}
    assert dedup_text(good) != dedup_text({**good, "label": False})


def test_multimodal_preference_rows_stay_refused(tmp_path: Path) -> None:
    row = {"prompt": SKY_PROMPT, "chosen": BLUE, "rejected": GREEN, "images": ["sky.png"]}
    report = validate_file(write_jsonl(tmp_path / "mm.jsonl", [row]))
    assert report.issue_count == 1 and "multimodal" in report.issues[0].message


def test_scans_read_prompt_and_every_answer() -> None:
    from tunedeck.data.scan_policy import redact_rows, scan_rows

    row = {"prompt": SKY_PROMPT, "chosen": BLUE,
           "rejected": [{"role": "assistant", "content": "Mail me at jane.doe@example.com"}]}
    report = scan_rows([row])
    assert [(f.type, f.field) for f in report.findings] == [("email", "rejected[0].content")]
    (redacted,) = redact_rows([row])
    assert "jane.doe" not in redacted["rejected"][0]["content"] and redacted["chosen"] == BLUE


def test_split_and_dedup_work_by_row(tmp_path: Path) -> None:
    from tunedeck.data.dedup import find_duplicates
    from tunedeck.data.split import split_dataset, write_split

    rows = [{"prompt": f"Question number {i}?", "chosen": f"Answer {i}.", "rejected": f"No idea about {i}."}
            for i in range(20)]
    loaded = load_dataset(write_jsonl(tmp_path / "pairs.jsonl", [*rows, rows[0]]))
    parts = split_dataset(loaded, (0.8, 0.1, 0.1))
    assert sum(len(part.rows) for part in parts.values()) == 21
    assert all(part.kind == "preference" for part in parts.values())
    write_split(parts, tmp_path / "out")
    assert load_dataset(tmp_path / "out" / "train.jsonl").kind == "preference"
    report = find_duplicates({"train": loaded})
    assert report.counts()["exact_within"] == 1
