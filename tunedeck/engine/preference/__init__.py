"""Preference tuning (dpo, orpo, kto) on TRL's trainers, run inside the same `TrainingRun` as sft."""
