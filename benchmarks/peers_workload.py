"""The peers benchmark's shared work: a 32,000-token tokenizer, a 4 × 256 Llama, skewed chat rows, their ids.

Everything is built here, nothing downloaded:

* `build_tokenizer`: a byte-level BPE of `vocab_size` tokens trained with `tokenizers` on
  generated text (pseudo-words drawn with a Zipf law, so the merges reach a real-sized
  vocabulary), with the chat template of tunedeck's tiny models (assistant turns inside
  `{% generation %}`, so the loss falls on assistant tokens only).
* `build_model`: a random-init Llama from its config, saved as safetensors with the tokenizer.
* `write_chat_rows`: `messages` rows whose token lengths have a long tail (most answers one
  sentence, a few many), p99/median near 14.
* `shared_ids`: the rows tokenized once by tunedeck's data layer (the call `run_training`
  makes), written as JSON so every tool trains on these very ids and labels.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path
from typing import Any

SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "de", "va", "zu", "ri", "to", "ma", "ge", "fi",
             "no", "su", "be", "ya", "qu", "lin", "dar", "mor", "pel", "tis", "gra", "ven", "col", "hup")


def pseudo_words(count: int, seed: int = 0) -> list[str]:
    """`count` distinct made-up words of 1 to 5 syllables."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 5))))
    return sorted(words)


class TextMaker:
    """Sentences of pseudo-words, frequent words drawn far more often (a Zipf law, like real text)."""

    def __init__(self, words: list[str], seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = words
        # Cumulative once: `choices` with plain weights re-adds them all on every call.
        self.cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))

    def sentence(self, length: int) -> str:
        """One capitalised sentence of `length` words."""
        chosen = self.rng.choices(self.words, cum_weights=self.cumulative, k=length)
        return " ".join(chosen).capitalize() + self.rng.choice((".", ".", "!", "?"))


def build_tokenizer(vocab_size: int, *, seed: int = 0) -> Any:
    """A byte-level BPE of `vocab_size` tokens trained on generated text, as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from tunedeck.demo.tiny_models import BOS, CHAT_TEMPLATE, EOS, MASK, MAX_POSITIONS, PAD, ROLE_TOKENS, UNK

    maker = TextMaker(pseudo_words(max(vocab_size * 2, 1000), seed), seed)
    # Every word at least once (so the merges can reach the vocabulary size), then Zipf-drawn text.
    corpus = [" ".join(maker.words[i:i + 64]) for i in range(0, len(maker.words), 64)]
    corpus += [maker.sentence(maker.rng.randint(6, 24)) for _ in range(20_000)]
    specials = [PAD, BOS, EOS, UNK, MASK, *ROLE_TOKENS]
    core = Tokenizer(models.BPE(unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(corpus, trainer=trainer)
    bos_id = core.token_to_id(BOS)
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                        special_tokens=[(BOS, bos_id)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                        unk_token=UNK, mask_token=MASK, additional_special_tokens=list(ROLE_TOKENS),
                                        model_max_length=MAX_POSITIONS)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(folder: Path, *, layers: int, width: int, vocab_size: int, seed: int = 0) -> dict[str, Any]:
    """Save a random-init Llama (`layers` × `width`) and a `vocab_size` tokenizer into `folder`; its facts."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from tunedeck.demo.tiny_models import MAX_POSITIONS

    tokenizer = build_tokenizer(vocab_size, seed=seed)
    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=width, intermediate_size=width * 8 // 3 // 64 * 64 or 4 * width, num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64), num_key_value_heads=max(1, width // 128),
        max_position_embeddings=MAX_POSITIONS, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
    )
    model = AutoModelForCausalLM.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return {"vocab_size": len(tokenizer), "parameters": sum(p.numel() for p in model.parameters()),
            "layers": layers, "hidden_size": width}


def write_chat_rows(path: Path, count: int, *, seed: int = 0, tail_share: float = 0.03,
                    tail_sentences: tuple[int, int] = (22, 36)) -> None:
    """`messages` rows: a one-sentence question, an answer of one sentence or (a `tail_share`) many."""
    rng = random.Random(seed + 1)
    maker = TextMaker(pseudo_words(4000, seed), seed + 2)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(count):
            long = rng.random() < tail_share
            answer = " ".join(maker.sentence(rng.randint(8, 14))
                              for _ in range(rng.randint(*tail_sentences) if long else 1))
            messages = [{"role": "user", "content": maker.sentence(rng.randint(4, 10))},
                        {"role": "assistant", "content": answer}]
            handle.write(json.dumps({"messages": messages}) + "\n")


def shared_ids(model_dir: Path, rows_path: Path, max_length: int, out: Path) -> dict[str, Any]:
    """Tokenize the rows with tunedeck's data layer once; write `{"input_ids", "labels"}` to `out`; their facts."""
    from transformers import AutoTokenizer

    from benchmarks.harness import percentile
    from tunedeck.data.loading import load_dataset
    from tunedeck.data.tokenize import tokenize_rows

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    loaded = load_dataset(rows_path)
    tokenized = tokenize_rows(loaded.rows, loaded.kind, tokenizer, max_length=max_length)
    ids = [list(map(int, row)) for row in tokenized.input_ids]
    labels = [list(map(int, row)) for row in tokenized.labels]
    out.write_text(json.dumps({"input_ids": ids, "labels": labels}), encoding="utf-8")
    lengths = sorted(len(row) for row in ids)
    median = lengths[len(lengths) // 2]
    return {"examples": len(ids), "tokens": sum(lengths), "loss_tokens": sum(sum(x != -100 for x in r) for r in labels),
            "median": median, "p99": percentile(lengths, 0.99), "max": lengths[-1],
            "p99_over_median": percentile(lengths, 0.99) / median, "sha256": ids_digest(ids, labels)}


def ids_digest(ids: list[list[int]], labels: list[list[int]]) -> str:
    """A fingerprint of token ids and labels, to show two tools trained on the same ones."""
    return hashlib.sha256(json.dumps([ids, labels], separators=(",", ":")).encode()).hexdigest()[:16]
