"""Check 9 in the report: its title, appending it to a report of checks 1–8, and a skip that fails nothing."""

from __future__ import annotations

from tunedeck.engine.preflight.report import CHECK_TITLES, CheckResult, PreflightReport


def _report_of_eight_passes() -> PreflightReport:
    return PreflightReport(checks=[CheckResult(n, "pass", "fine") for n in range(1, 9)], hardware={}, seconds=10.0)


def test_check_9_is_the_interconnect() -> None:
    assert sorted(CHECK_TITLES) == list(range(1, 12))
    assert CHECK_TITLES[9] == ("interconnect", "all-reduce bandwidth and latency between the run's processes")
    document = CheckResult(9, "pass", "fine").to_dict()
    assert (document["number"], document["name"]) == (9, "interconnect")


def test_an_added_warning_makes_the_report_warn_in_number_order() -> None:
    report = _report_of_eight_passes()
    report.add_check(CheckResult(9, "warn", "slow link", {"busbw_gbps": 3.0}, ["check NVLink"], seconds=1.5))
    assert report.ok and report.status == "warn"
    assert [check["number"] for check in report.to_dict()["checks"]] == list(range(1, 10))
    assert report.check("interconnect").figures == {"busbw_gbps": 3.0}
    assert report.seconds == 11.5


def test_adding_a_check_again_replaces_it() -> None:
    report = _report_of_eight_passes()
    report.add_check(CheckResult(9, "warn", "first"))
    report.add_check(CheckResult(9, "pass", "again"))
    assert len(report.checks) == 9 and report.check(9).message == "again" and report.status == "pass"


def test_an_added_failure_fails_the_report() -> None:
    report = _report_of_eight_passes()
    report.add_check(CheckResult(9, "fail", "no link"))
    assert not report.ok and report.status == "fail"


def test_a_one_process_skip_of_the_interconnect_fails_nothing_but_other_skips_still_do() -> None:
    report = _report_of_eight_passes()
    report.add_check(CheckResult(9, "skip", "one process: nothing to measure"))
    assert report.ok and report.status == "pass"
    assert not report.check(9).blocks
    report.add_check(CheckResult(5, "skip", "check 1 failed"))
    assert report.check(5).blocks and not report.ok and report.status == "fail"
