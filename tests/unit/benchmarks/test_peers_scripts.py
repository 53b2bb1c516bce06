"""The peers benchmarks' CPU-side logic: options, which arms run and why others are skipped, the shared work."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from benchmarks import peers, peers_llamafactory, peers_venv
from benchmarks.gpu import peers_throughput as gpu_peers
from benchmarks.peers_workload import pseudo_words, write_chat_rows


def test_cpu_options_default_to_every_arm_and_refuse_unknown_ones() -> None:
    args = peers.parse_args([])
    assert args.arms == list(peers.ALL_ARMS) and args.modes == ["lora", "full"]
    assert (args.rows, args.vocab, args.layers, args.width) == (600, 32_000, 4, 256)
    quick = peers.parse_args(["--rows", "96", "--repeats", "1", "--modes", "full", "--arms", "tunedeck_auto"])
    assert (quick.rows, quick.repeats, quick.modes, quick.arms) == (96, 1, ["full"], ["tunedeck_auto"])
    for wrong in (["--arms", "axolotl"], ["--modes", "qlora"], ["--repeats", "0"]):
        with pytest.raises(SystemExit):
            peers.parse_args(wrong)


def test_llamafactory_arms_are_skipped_with_the_reason_and_the_others_keep_their_order() -> None:
    wanted = ["trl_padded", "llamafactory_neat_packing", "tunedeck_auto"]
    arms, skipped = peers.select_arms(wanted, "no LLaMA-Factory environment at X")
    assert arms == ["tunedeck_auto", "trl_padded"]
    assert skipped == {"llamafactory_neat_packing": "no LLaMA-Factory environment at X"}
    arms, skipped = peers.select_arms(wanted, None)
    assert arms == ["tunedeck_auto", "trl_padded", "llamafactory_neat_packing"] and skipped == {}


def test_loss_gap_compares_curves_step_by_step_only_when_they_line_up() -> None:
    assert peers.loss_gap([1.0, 2.0, 3.0], [1.0, 2.5, 2.9]) == pytest.approx(0.5)
    assert peers.loss_gap([1.0, 2.0], [1.0]) is None  # whole-dataset packing takes other steps
    assert peers.loss_gap([], []) is None


def test_arm_commands_use_llamafactorys_own_python_and_tunedecks_for_the_rest(tmp_path: Path) -> None:
    lf = peers.arm_command("llamafactory_padded", "lora", tmp_path, tmp_path / "o.json", tmp_path / "r")
    assert lf[0] == str(peers_venv.venv_python()) and lf[1].endswith("peers_llamafactory.py")
    ours = peers.arm_command("tunedeck_packed", "full", tmp_path, tmp_path / "o.json", tmp_path / "r")
    assert ours[1:3] == ["-m", "benchmarks.peers_arms"] and ours[5:7] == ["--mode", "full"]


def test_llamafactory_packed_rows_are_a_multiple_of_eight_and_hold_the_longest_example() -> None:
    for max_length in (64, 511, 512, 2048):
        cutoff = peers_llamafactory.cutoff_length(max_length)
        assert cutoff >= max_length and (cutoff + 1) % 8 == 0 and cutoff - max_length < 8


def test_llamafactory_environment_recipe_pins_torch_and_reports_a_missing_environment(tmp_path: Path) -> None:
    steps = peers_venv.install_steps(tmp_path / "venv", "2.13.0", tmp_path / "c.txt")
    flat = [" ".join(step) for step in steps]
    assert flat[0].endswith(f"-m venv {tmp_path / 'venv'}")
    assert flat[1].endswith("install -q torch==2.13.0")
    assert f"-c {tmp_path / 'c.txt'} llamafactory=={peers_venv.LLAMAFACTORY_VERSION}" in flat[2]
    assert any("uninstall -y -q torchvision" in step for step in flat)
    assert "no LLaMA-Factory environment" in (peers_venv.llamafactory_status(tmp_path / "venv") or "")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("", encoding="utf-8")
    assert "did not finish installing" in (peers_venv.llamafactory_status(tmp_path / "venv") or "")
    (tmp_path / "venv" / ".installed").write_text("0.9.5\n", encoding="utf-8")
    assert peers_venv.llamafactory_status(tmp_path / "venv") is None


def test_chat_rows_have_a_long_tail_of_answer_lengths(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    write_chat_rows(path, 600)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 600 and all([m["role"] for m in r["messages"]] == ["user", "assistant"] for r in rows)
    words = sorted(len(r["messages"][1]["content"].split()) for r in rows)
    assert words[int(0.99 * len(words))] / statistics.median(words) > 10
    assert len(set(pseudo_words(500))) == 500


def test_gpu_options_bound_the_run_and_refuse_unknown_arms() -> None:
    args = gpu_peers.parse_args([])
    assert args.time_budget_s <= 480 and args.arms == list(gpu_peers.ARM_NAMES)
    dry = gpu_peers.parse_args(["--dry-run"])
    assert dry.steps <= 3 and dry.max_length == 64
    with pytest.raises(SystemExit):
        gpu_peers.parse_args(["--arms", "tunedeck_packed,unsloth"])


def test_gpu_arms_skip_what_is_missing_with_a_reason() -> None:
    everything = list(gpu_peers.ARM_NAMES)
    arms, skipped = gpu_peers.select_arms(everything, on_gpu=False, installed=lambda name: True)
    assert {"tunedeck_packed_flash", "trl_padding_free_flash", "tunedeck_packed_liger"} <= set(skipped)
    assert "CUDA" in skipped["tunedeck_packed_flash"]
    names = [arm.name for arm in arms]
    assert names[:3] == ["hf_padded", "tunedeck_auto", "tunedeck_packed"] and "trl_padding_free_sdpa" in names

    arms, skipped = gpu_peers.select_arms(everything, on_gpu=True, installed=lambda name: name == "trl",
                                          fused=True, llamafactory_problem="cannot import llamafactory")
    assert skipped["tunedeck_packed_flash"] == "flash_attn is not installed"
    assert skipped["trl_padding_free_flash"] == "flash_attn is not installed"
    assert skipped["tunedeck_packed_liger"] == "liger_kernel is not installed"
    assert skipped["llamafactory_neat_packing"] == "cannot import llamafactory"
    assert "trl_padding_free_sdpa" in [arm.name for arm in arms]

    arms, skipped = gpu_peers.select_arms(everything, on_gpu=True, installed=lambda name: True, fused=False,
                                          llamafactory_problem=None)
    assert "tunedeck_packed_foreach_adamw" in skipped
    assert {arm.optim for arm in arms} == {gpu_peers.FOREACH}  # no fused kernel: every arm on the same optimizer
    assert len(arms) == len(everything) - 1


@pytest.mark.slow
def test_gpu_dry_run_trains_the_cpu_arms_and_lists_the_skipped_ones(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    gpu_peers.main(["--dry-run", "--modes", "full", "--arms", "hf_padded,tunedeck_packed,trl_padding_free_sdpa,"
                    "tunedeck_packed_flash", "--results-dir", str(tmp_path)])
    data = json.loads((tmp_path / "gpu_peers_throughput_dry_run.json").read_text(encoding="utf-8"))
    arms = data["checks"]["arms"]
    assert set(arms) == {"full/hf_padded", "full/tunedeck_packed", "full/trl_padding_free_sdpa"}
    # TRL's padding-free collator and the padded baseline train the same examples: the same tokens.
    assert arms["full/trl_padding_free_sdpa"]["tokens"] == arms["full/hf_padded"]["tokens"]
    assert all(figures["tokens_per_s"] > 0 for figures in arms.values())
    assert data["parameters"]["skipped_arms"] == {"tunedeck_packed_flash": "flash-attention needs a CUDA GPU"}
    assert {c["key"] for c in data["comparisons"]} == {"full_tunedeck_packed", "full_trl_padding_free_sdpa"}


def test_cpu_benchmark_summarises_alternated_runs_into_target_ratios(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Training replaced by fixed figures: the order of runs, the medians, the ratios and the loss check."""
    rates = {"tunedeck_unpacked": 100.0, "tunedeck_auto": 300.0, "tunedeck_packed": 400.0, "trl_padded": 90.0,
             "trl_padding_free": 100.0, "llamafactory_padded": 80.0, "llamafactory_neat_packing": 200.0}
    rss = {"tunedeck_auto": 1000.0, "tunedeck_packed": 1100.0, "llamafactory_neat_packing": 2000.0}
    calls: list[tuple[str, str]] = []

    def fake_run(arm: str, mode: str, work: Path, scratch: Path, index: int) -> dict[str, object]:
        calls.append((mode, arm))
        if arm == "llamafactory_padded":
            return {"error": "exit 1: boom"}
        packed = arm in ("tunedeck_packed", "llamafactory_neat_packing")
        losses = [2.0, 1.5] if packed else [3.0, 2.5, 2.0 + (0.01 if arm == "trl_padded" else 0.0)]
        return {"tokens_per_s": rates[arm] * (1 + index / 1000), "tokens_per_cpu_s": rates[arm], "seconds": 1.0,
                "wall_s": 5.0, "peak_rss_mib": rss.get(arm, 1500.0), "steps": len(losses), "losses": losses}

    settings = {"batch_size": 8, "learning_rate": 1e-4, "max_length": 512, "lora_r": 16, "lora_alpha": 32,
                "model": {}, "lengths": {"p99_over_median": 14.0, "sha256": "abc"}}
    monkeypatch.setattr(peers, "llamafactory_problem", lambda args: None)
    monkeypatch.setattr(peers, "prepare_work", lambda args: (tmp_path, settings))
    monkeypatch.setattr(peers, "run_one", fake_run)
    result = peers.main(["--repeats", "2", "--modes", "full", "--results-dir", str(tmp_path)])
    assert calls == [("full", arm) for arm in peers.ALL_ARMS] * 2  # A B C … A B C …
    ratios = {c.key: c.median_ratio() for c in result.comparisons}
    assert ratios["full_auto_vs_trl_padding_free"] == pytest.approx(3.0, rel=0.01)
    assert ratios["full_packed_vs_llamafactory_neat"] == pytest.approx(2.0, rel=0.01)
    assert ratios["full_packed_vs_llamafactory_neat_rss"] == pytest.approx(0.55)
    assert ratios["full_packed_vs_auto_rss"] == pytest.approx(1.1)
    agreement = result.checks["full_loss_agreement"]
    assert agreement["max_abs_difference"]["tunedeck_auto"] == 0.0
    assert agreement["max_abs_difference"]["trl_padded"] == pytest.approx(0.01)
    assert agreement["max_abs_difference"]["llamafactory_padded"] is None and agreement["ok"] is False
    assert "boom" in result.checks["arms"]["full"]["llamafactory_padded"]["error"]
    assert json.loads((tmp_path / "peers.json").read_text(encoding="utf-8"))["benchmark"] == "peers"
