"""`tunedeck data inspect`: examples after training's exact preprocessing, and token statistics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tunedeck.cli.data_commands import (
    DATASET_HELP,
    LABEL_COLUMN_HELP,
    PROGRESS_MIN_ROWS,
    TEXT_SPLIT_HELP,
    column_map,
    err_console,
    file_progress,
    map_option,
)
from tunedeck.cli.errors import reported_errors
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.data.inspect import InspectedExample, InspectionReport, TokenView

console = Console()

TRAINED_STYLE = "bold green"
MASKED_STYLE = "grey50"
SPECIAL_STYLE = "bold magenta"
HISTOGRAM_WIDTH = 40


def inspect_command(
    file: Path = typer.Argument(..., help=DATASET_HELP),
    model: str = typer.Option(..., "--model", "-m", help="Model folder (or hub id) whose tokenizer to use."),
    max_length: int = typer.Option(..., "--max-length", help="Truncation length used in training."),
    n: int = typer.Option(5, "-n", help="Examples to show."),
    per_class: int | None = typer.Option(
        None, "--per-class", min=1,
        help="Classification: show the first N rows of each label instead of the first -n rows."),
    format: str = typer.Option("auto", "--format", help="Row format, or auto to detect it."),
    text_split: str = typer.Option("line", "--text-split", help=TEXT_SPLIT_HELP),
    label_column: str | None = typer.Option(None, "--label-column", help=LABEL_COLUMN_HELP),
    mapping: str | None = map_option(),
    train_on_inputs: bool = typer.Option(False, "--train-on-inputs",
                                         help="Also train on prompt/user tokens."),
    max_prompt_length: int | None = typer.Option(
        None, "--max-prompt-length", min=1,
        help="Preference rows: keep at most this many prompt tokens (its end), as training's max_prompt_length."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Show examples as training sees them: trained tokens in green, masked ones in grey.

    Preference rows show their prompt, then chosen and rejected (or the completion and its label).
    """
    from tunedeck.config.training import TrainingConfig
    from tunedeck.data.inspect import inspect_examples
    from tunedeck.data.loading import load_dataset
    from tunedeck.engine.models.model_loading import load_tokenizer
    from tunedeck.engine.models.model_source import ModelRef, resolve_model

    with reported_errors():
        with file_progress(file, "reading", not as_json) as progress:
            loaded = load_dataset(
                file, format, on_progress=progress, text_split=text_split, label_column=label_column,
                column_map=column_map(mapping),
            )
        if per_class is not None and loaded.kind != "classification":
            raise ConfigError([Issue("--per-class picks rows by label", field="per_class",
                                     expected="a classification dataset (text and label)",
                                     found=f"rows of kind {loaded.kind}")], title="cannot inspect")
        config = TrainingConfig.model_validate({"trust_remote_code": False})
        tokenizer = load_tokenizer(resolve_model(ModelRef(model)), config)
        # Tokenizing is one batched call with no progress to report: a spinner says it is working.
        with tokenizing_status(len(loaded.rows), not as_json):
            report = inspect_examples(loaded.rows, loaded.kind, tokenizer, max_length=max_length, n=n,
                                      train_on_inputs=train_on_inputs, row_numbers=loaded.line_numbers,
                                      per_class=per_class, max_prompt_length=max_prompt_length)
    if as_json:
        typer.echo(json.dumps({"file": str(file), **report.to_dict()}, ensure_ascii=False, indent=2))
        return
    render_report(report, str(file))


@contextmanager
def tokenizing_status(rows: int, enabled: bool = True) -> Iterator[None]:
    """A spinner on stderr while `rows` rows are tokenized, when there are enough to wait on."""
    if not enabled or rows < PROGRESS_MIN_ROWS:
        yield
        return
    with err_console.status(f"tokenizing {rows:,} rows"):
        yield


def render_report(report: InspectionReport, file: str) -> None:
    """Examples with coloured tokens, then the statistics table and length histogram."""
    console.print(f"[bold]{file}[/bold]: {report.truncation.total} rows of kind {report.kind}, "
                  f"max_length {report.max_length}"
                  + (f", chat masks from {report.chat_mask_method}" if report.chat_mask_method else ""))
    legend = Text("legend: ")
    legend.append("trained", TRAINED_STYLE)
    legend.append("  ")
    legend.append("masked", MASKED_STYLE)
    legend.append("  ")
    legend.append("<special>", SPECIAL_STYLE)
    legend.append("  ")
    legend.append("italic", "italic")
    legend.append(": a character split across trained and masked tokens  ✂ truncation point")
    console.print(legend)
    if report.per_class is not None:
        console.print(f"up to {report.per_class} example(s) of each label"
                      + "".join(f"; {label!r} has only {count}" for label, count in report.short_classes.items()))
    for example in report.examples:
        console.rule(_example_title(example))
        console.print(_example_text(example), soft_wrap=True)
    console.rule("statistics")
    console.print(_stats_table(report))
    console.print(_histogram(report))
    if report.truncation.refused_rows:
        console.print(f"[red]{len(report.truncation.refused_rows)} row(s) have no trained token and "
                      f"training would refuse them[/red] (rows "
                      f"{', '.join(str(i + 1) for i in report.truncation.refused_rows[:20])})")


def _example_title(example: InspectedExample) -> str:
    where = f"line {example.row_number}" if example.row_number is not None else f"row {example.index + 1}"
    parts = [where, f"{example.length} tokens"]
    if example.spans:
        parts.append(f"{example.trained_tokens} trained")
        if example.label is not None:
            parts.append(example.label)
    elif example.label is not None:
        parts.append(f"label {example.label!r}")
    else:
        parts.append(f"{example.trained_tokens} trained")
    if example.truncated:
        parts.append(f"truncated to {example.kept}")
    return ", ".join(parts)


def _example_text(example: InspectedExample) -> Text:
    if example.spans:
        return _spans_text(example)
    text = _tokens_text(example.tokens)
    if example.truncated:
        text.append(f" ✂ {example.length - example.kept} tokens cut", "bold red")
    return text


def _spans_text(example: InspectedExample) -> Text:
    """A preference row: each part on its own lines, with what truncation cut from it."""
    text = Text()
    for span in example.spans:
        text.append(f"\n{span.name}" if text else span.name, "bold")
        text.append(f" ({span.kept} tokens" + (f", {span.cut} cut" if span.cut else "") + ")\n")
        if span.cut and span.name == "prompt":
            text.append(f"✂ {span.cut} tokens cut ", "bold red")
        text.append_text(_tokens_text(span.tokens))
        if span.cut and span.name != "prompt":
            text.append(f" ✂ {span.cut} tokens cut", "bold red")
    return text


def _tokens_text(tokens: list[TokenView]) -> Text:
    text = Text()
    for token in tokens:
        if token.special:
            text.append(token.text, SPECIAL_STYLE + (" underline" if token.trained else ""))
            continue
        shown = token.text.replace("\n", "↵\n")
        text.append(shown, (TRAINED_STYLE if token.trained else MASKED_STYLE) + (" italic" if token.mixed else ""))
    return text


def _stats_table(report: InspectionReport) -> Table:
    table = Table(show_header=False, box=None)
    lengths = report.lengths
    table.add_row("token length p50 / p90 / p99 / max",
                  f"{lengths.p50} / {lengths.p90} / {lengths.p99} / {lengths.max}")
    table.add_row("truncated", f"{report.truncation.truncated} ({report.share_truncated:.1%})")
    if report.kind != "classification":
        table.add_row("lost part / all of the answer",
                      f"{report.truncation.lost_part_of_answer} / {report.truncation.lost_all_answer}")
        share = report.trainable_token_share or 0.0
        table.add_row("trained tokens", f"{report.truncation.trainable_tokens} ({share:.1%})")
    if report.label_distribution is not None:
        total = sum(report.label_distribution.values()) or 1
        table.add_row("labels", ", ".join(f"{label}: {count} ({count / total:.0%})"
                                          for label, count in report.label_distribution.items()))
    return table


def _histogram(report: InspectionReport) -> Text:
    text = Text("token lengths\n")
    peak = max((b["count"] for b in report.lengths.histogram), default=0) or 1
    for bucket in report.lengths.histogram:
        bar = "█" * round(HISTOGRAM_WIDTH * bucket["count"] / peak)
        over = bucket["end"] > report.max_length
        text.append(f"{bucket['start']:>7}–{bucket['end'] - 1:<7} ")
        text.append(bar, "red" if over else "cyan")
        text.append(f" {bucket['count']}\n")
    return text


def register(app: typer.Typer) -> None:
    """Add `inspect` to the `tunedeck data` group."""
    app.command("inspect")(inspect_command)
