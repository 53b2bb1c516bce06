"""User text in Markdown reports stays literal text: no HTML, no markup that escapes its place."""

from __future__ import annotations

from tests.unit.eval.report_data import BASELINE, REFERENCE_CONFIG, evaluation, three_variants
from tunedeck.eval.comparison_render import comparison_markdown
from tunedeck.eval.experiment_report import ExperimentData, build_comparison
from tunedeck.eval.guards import parse_guards
from tunedeck.eval.job_report import build_job_report
from tunedeck.eval.markdown_text import md_code, md_fence, md_text

HOSTILE = '<img src=x onerror="alert(1)"> **bold** | cell\n# heading [link](http://x) `code`'


def test_text_loses_its_html_and_markup_but_keeps_its_characters() -> None:
    text = md_text(HOSTILE)
    assert "<img" not in text and "&lt;img" in text
    assert "\n" not in text  # one line: it cannot start a heading or a table row
    assert r"\*\*bold\*\*" in text and r"\| cell" in text and r"\[link\]" in text and r"\`code\`" in text
    assert md_text("# title").startswith(r"\#") and md_text("> quote").startswith(r"\>")
    assert md_text("1. first") == r"1\. first" and md_text("- item") == r"\- item"
    assert md_text("per_class.promo.f1 >= baseline") == "per_class.promo.f1 >= baseline"  # readable as it was
    assert md_text("a & b") == "a &amp; b"


def test_code_spans_and_blocks_outlast_the_backticks_inside() -> None:
    assert md_code("plain") == "`plain`"
    assert md_code("a ``b`` c") == "```a ``b`` c```"
    assert md_code("`edge") == "`` `edge ``"
    assert md_fence('{"x": "```"}', "json") == ["````json", '{"x": "```"}', "````"]


def test_a_job_report_shows_hostile_names_as_text() -> None:
    report = build_job_report(
        job_id="job_x", name=HOSTILE, state="succeeded", model={"base_model": "<script>alert(1)</script>"},
        config={"note": "```\n<b>out of the block</b>"}, baseline=BASELINE,
        final=evaluation(0.9, 0.3, {"ham": 0.9, "spam": 0.9, "promo": 0.9}),
        experiment={"id": "exp_1", "name": "<i>exp</i>", "hypothesis": "<iframe src=//x>"},
    )  # fmt: skip
    markdown = report.to_markdown()
    for tag in ("<img", "<script", "<i>", "<iframe"):
        assert tag not in markdown, tag
    assert "&lt;script&gt;" not in markdown and "&lt;script>" in markdown
    heading = markdown.splitlines()[0]
    assert heading.startswith("# Job report: &lt;img") and "(`job_x`)" in heading
    fence_lines = [line for line in markdown.splitlines() if line.startswith("```")]
    assert fence_lines == ["````json", "````"]  # the config's own backticks cannot close the block


def test_an_experiment_comparison_shows_hostile_names_as_text() -> None:
    variants = three_variants()
    variants[1].name = "<img src=x onerror=alert(1)>|rank"
    data = ExperimentData(
        experiment_id="exp_1", name="<b>sweep</b>", hypothesis=HOSTILE, reference_config=REFERENCE_CONFIG,
        variants=variants, guards=parse_guards(["accuracy >= 0.5"]),
    )  # fmt: skip
    markdown = comparison_markdown(build_comparison(data), embed_plot=False)
    assert "<img" not in markdown and "<b>" not in markdown
    assert r"&lt;img src=x onerror=alert(1)>\|rank" in markdown
    variant_rows = [line for line in markdown.splitlines() if "&lt;img" in line and line.startswith("| ")]
    # The name's own pipe is escaped: every row of the variants table keeps its eight cells.
    assert variant_rows and all(line.replace(r"\|", "").count("|") == 9 for line in variant_rows[:1])
