"""Generating from a trained model (final or any checkpoint), beside its base model for comparison.

The prompt is built exactly as training and evaluation build it (`eval.decoding.build_prompts`):
messages go through the tokenizer's chat template with the generation prompt; a plain
prompt becomes a user turn for a model trained on chat data, and otherwise the tokens
training put before a completion. A model without a chat template trained on chat data was
trained on Alpaca rows through the Stanford template (`data.formats.instruction.alpaca_prompt`): its
user turn is the instruction there, after the system message when given. Decoding is greedy
unless `do_sample`; sampling is seeded, so the same request gives the same text. Decoding
stops at end-of-sequence, at the chat template's end-of-turn marker, at any of the `stop`
strings (the text is cut before it), or after `max_new_tokens`. `tools` (function
definitions) are handed to the chat template; a template that renders the same prompt
without them would drop them silently, so such a request is refused naming `tools`.

While decoding, `on_text` (when given) hears the answer so far each time it grows: always
a prefix of the final text (text that could still turn out to be the start of a stop
string or of the end-of-turn marker is held back), so a reader may send it on as it comes.

The base model's answer comes from the same weights with the adapter switched off (for a
LoRA adapter) or from the pinned base loaded beside it (for a full fine-tune), with the
same prompt tokens and seed.

`python -m tunedeck.engine.generation.generation --spec FILE` prints the result as one JSON line; a
worker instead keeps models loaded in `tunedeck.engine.generation_server`, which answers
many specs (`load_from_spec`, `run_from_spec`). Spec: the model (`run_dir` + `checkpoint`, or `model_dir` +
`label`, or `base_model` {name, revision} for a base model alone), `prompt` or `messages`, optional
`tools`, `base`, `compare_base`, `allow_base_mismatch`, `max_new_tokens`, `temperature`, `top_p`,
`do_sample`, `seed`, `stop`, `device`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.core.dataset_vocabulary import PLAIN_PROMPT_FIELD
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.data.chat_render import chat_template_of
from tunedeck.data.formats.instruction import alpaca_prompt
from tunedeck.engine.export.source import ModelFolder, locate_model_folder, model_folder_from_spec, read_run_documents
from tunedeck.engine.json_process import run_spec_main
from tunedeck.engine.models.model_source import HubResolver, ModelRef, ResolvedModel
from tunedeck.engine.models.pinning import default_base_ref, load_adapter_onto, resolve_base

ROLES = ("system", "user", "assistant", "tool")
DEFAULT_MAX_LENGTH = 2048
MAX_STOP_STRINGS = 4
BASE_LABEL = "base"
BaseSpec = ModelRef | ResolvedModel | str | Path


@dataclass(frozen=True)
class SamplingOptions:
    """How to decode: greedy by default; `do_sample` draws with `temperature` and `top_p`, seeded."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    do_sample: bool = False
    seed: int = 0
    stop: tuple[str, ...] = ()

    def check(self) -> None:
        """ConfigError naming each out-of-range option."""
        issues = []
        if len(self.stop) > MAX_STOP_STRINGS or not all(self.stop):
            expected = f"at most {MAX_STOP_STRINGS} non-empty strings"
            found = str(len(self.stop))
            issues.append(Issue("too many or empty stop strings", field="stop", expected=expected, found=found))
        if not 1 <= self.max_new_tokens <= 4096:
            found = str(self.max_new_tokens)
            issues.append(Issue("out of range", field="max_new_tokens", expected="1 to 4096", found=found))
        if self.temperature <= 0:
            issues.append(Issue("must be positive", field="temperature", found=str(self.temperature)))
        if not 0 < self.top_p <= 1:
            issues.append(Issue("out of range", field="top_p", expected="above 0, at most 1", found=str(self.top_p)))
        if issues:
            raise ConfigError(issues, title="invalid generation options")


@dataclass(frozen=True)
class Generation:
    """One answer: its text, how many tokens were generated, whether a stop token (not the cap) ended it."""

    text: str
    new_tokens: int
    stopped: bool


@dataclass
class GenerationResult:
    """The fine-tuned model's answer, and the base model's beside it when asked."""

    source: str
    prompt_tokens: int
    prompt_truncated: bool
    fine_tuned: Generation
    base: Generation | None
    options: SamplingOptions
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "source": self.source,
            "prompt_tokens": self.prompt_tokens,
            "prompt_truncated": self.prompt_truncated,
            "fine_tuned": asdict(self.fine_tuned),
            "base": asdict(self.base) if self.base is not None else None,
            "options": asdict(self.options),
            "warnings": self.warnings,
        }


class Generator:
    """A trained model loaded once for any number of generations."""

    def __init__(self, trained: Any, folder: ModelFolder, data_kind: str | None, max_length: int, base: Any) -> None:
        self.trained = trained
        self.folder = folder
        self.data_kind = data_kind
        self.max_length = max_length
        self._base = base  # a separately loaded base (full fine-tunes only), or None
        self.warnings: list[str] = []

    @classmethod
    def load(
        cls,
        folder: ModelFolder,
        *,
        base: BaseSpec | None = None,
        allow_base_mismatch: bool = False,
        compare_base: bool = False,
        device: str | None = None,
        hub: HubResolver | None = None,
    ) -> Generator:
        """Load `folder` (an adapter onto its pinned base, checked; or full weights) for generation."""
        from tunedeck.eval.trained_model import load_trained_model

        documents = read_run_documents(folder)
        if documents.task == "classification":
            raise ConfigError(
                [Issue("a classification model predicts labels and does not generate text", field="task")],
                title="cannot generate",
            )
        trust = bool(documents.training_config.get("trust_remote_code", False))
        reference = base or default_base_ref(folder.path)
        base_model = None
        if folder.is_adapter:
            if reference is None:
                raise ConfigError(
                    [Issue("the adapter records no base model", field="base", expected="the base model to load")],
                    title="cannot generate",
                )
            trained = load_adapter_onto(
                reference, folder.path, allow_mismatch=allow_base_mismatch, trust_remote_code=trust, hub=hub
            )
        else:
            trained = load_trained_model(folder.path, trust_remote_code=trust)
            if compare_base and reference is not None:
                base_model = load_trained_model(resolve_base(reference, hub).path, trust_remote_code=trust).model
        target = _device(device)
        trained.model.to(target)
        if base_model is not None:
            base_model.to(target)
        max_length = int(documents.training_config.get("max_length") or DEFAULT_MAX_LENGTH)
        return cls(trained, folder, documents.config.get("data_kind"), max_length, base_model)

    def run(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        options: SamplingOptions | None = None,
        compare_base: bool = False,
        tools: Sequence[Mapping[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> GenerationResult:
        """Answer `prompt` or `messages` with the fine-tuned model (and the base model when `compare_base`).

        `on_text` hears the fine-tuned model's answer as it grows (see the module's docstring).
        """
        options = options or SamplingOptions()
        options.check()
        tokenizer = self.trained.tokenizer
        ids, truncated = prompt_ids(tokenizer, prompt, messages, self.data_kind, self.max_length, tools=tools)
        fine_tuned = decode(self.trained.model, tokenizer, ids, options, on_text=on_text)
        base = None
        # This run's own list: a generator kept loaded answers many requests, whose warnings must not pile up.
        warnings = list(self.warnings)
        if compare_base:
            if self._base is not None:
                base = decode(self._base, tokenizer, ids, options)
            elif hasattr(self.trained.model, "disable_adapter"):
                with self.trained.model.disable_adapter():
                    base = decode(self.trained.model, tokenizer, ids, options)
            else:
                warnings.append("the base model is not available for comparison (no pinned base recorded)")
        return GenerationResult(self.folder.label, len(ids), truncated, fine_tuned, base, options, warnings)

    def memory_bytes(self) -> int:
        """The bytes of the loaded weights (parameters and buffers), the base loaded beside them included."""
        return sum(_tensor_bytes(model) for model in (self.trained.model, self._base) if model is not None)


def generate(
    model_source: Path | str,
    prompt: str | None = None,
    *,
    messages: Sequence[Mapping[str, Any]] | None = None,
    checkpoint: int | None = None,
    base: BaseSpec | None = None,
    compare_base: bool = False,
    allow_base_mismatch: bool = False,
    max_new_tokens: int = 128,
    temperature: float = 1.0,
    top_p: float = 1.0,
    do_sample: bool = False,
    seed: int = 0,
    device: str | None = None,
) -> GenerationResult:
    """Generate once from a run directory (final model, or `checkpoint`) or a model folder."""
    folder = locate_model_folder(Path(model_source), checkpoint)
    generator = Generator.load(
        folder, base=base, allow_base_mismatch=allow_base_mismatch, compare_base=compare_base, device=device
    )
    options = SamplingOptions(max_new_tokens, temperature, top_p, do_sample, seed)
    return generator.run(prompt, messages=messages, options=options, compare_base=compare_base)


def prompt_ids(
    tokenizer: Any,
    prompt: str | None,
    messages: Sequence[Mapping[str, Any]] | None,
    data_kind: str | None,
    max_length: int,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[list[int], bool]:
    """The prompt's token ids as training built them, cut to the last `max_length`; and whether it was cut."""
    from tunedeck.eval.decoding import build_prompts

    if (prompt is None) == (messages is None):
        raise ConfigError([Issue("give exactly one of prompt or messages", field="prompt")], title="cannot generate")
    if tools and messages is None:
        raise ConfigError([Issue("tools need messages", field="tools", expected="messages, not a prompt")],
                          title="cannot generate")  # fmt: skip
    if messages is None and data_kind == "chat":
        messages = [{"role": "user", "content": prompt}]
    if messages is not None:
        conversation = _checked_messages(messages)
        # build_prompts takes the final assistant turn as the reference and prompts with what precedes it.
        rows: list[dict[str, Any]] = [{"messages": [*conversation, {"role": "assistant", "content": ""}]}]
        if tools:
            refuse_unused_tools(tokenizer, conversation, tools)
            rows[0]["tools"] = [dict(tool) for tool in tools]
        if data_kind == "chat" and chat_template_of(tokenizer) is None:
            rows[0][PLAIN_PROMPT_FIELD] = _plain_prompt(conversation)
        built = build_prompts(rows, "chat", tokenizer, max_length=max_length)[0]
    else:
        rows = [{"prompt": str(prompt), "completion": ""}]
        built = build_prompts(rows, "prompt_completion", tokenizer, max_length=max_length)[0]
    return list(built.ids), built.truncated


def refuse_unused_tools(
    tokenizer: Any, conversation: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> None:
    """ConfigError naming `tools` when the chat template renders the conversation the same without them.

    Such a template never shows the model the tools: answering anyway would drop them silently.
    """
    refused = ConfigError(
        [Issue("this model's chat template does not use tools", field="tools",
               expected="no tools, or a model whose chat template renders them")],
        title="cannot generate",
    )  # fmt: skip
    if chat_template_of(tokenizer) is None:
        raise refused
    messages = [dict(message) for message in conversation]
    with_tools = tokenizer.apply_chat_template(
        messages, tools=[dict(tool) for tool in tools], tokenize=False, add_generation_prompt=True
    )
    without = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if with_tools == without:
        raise refused


@dataclass(frozen=True)
class AnswerText:
    """The answer in generated tokens `row`: the tokens kept, its text, and whether a stop (not the cap) ended it."""

    kept: list[int]
    text: str
    stopped: bool


def answer_text(
    tokenizer: Any, row: Sequence[int], stop_ids: Sequence[int], marker: str | None, stops: Sequence[str],
    *, final: bool = True,
) -> AnswerText:  # fmt: skip
    """The answer in `row`: cut at the first stop token, then before the end-of-turn marker or a stop string.

    With `final` false (generation goes on), text that may still become a stop string or the
    marker is held back, as is a character whose bytes are not all decoded yet; the text is
    then a prefix of the final answer's.
    """
    end = next((index for index, token in enumerate(row) if token in set(stop_ids)), None)
    kept = list(row if end is None else row[:end])
    text = str(tokenizer.decode(kept, skip_special_tokens=True))
    stopped = end is not None
    cuts = [text.find(stop) for stop in [*([marker] if marker else []), *stops] if stop in text]
    if cuts:  # a marker of several tokens, or a stop string, shows up in the text
        text, stopped = text[: min(cuts)], True
    elif not final:
        longest = max((len(stop) for stop in [*([marker] if marker else []), *stops]), default=1)
        text = text[: max(0, len(text) - (longest - 1))]
        text = text.rstrip("\ufffd")
    return AnswerText(kept, text.strip(), stopped)


def decode(
    model: Any, tokenizer: Any, ids: list[int], options: SamplingOptions,
    *, on_text: Callable[[str], None] | None = None,
) -> Generation:  # fmt: skip
    """Generate after `ids`; cut at the first stop token, the end-of-turn marker or a stop string."""
    import torch
    from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList, set_seed

    from tunedeck.eval.decoding import end_of_turn_marker, stop_token_ids

    marker = end_of_turn_marker(tokenizer)
    stops = stop_token_ids(model, tokenizer, marker)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stops or [0])[0]
    sampling = {"temperature": options.temperature, "top_p": options.top_p} if options.do_sample else {}
    settings = GenerationConfig(
        max_new_tokens=options.max_new_tokens,
        do_sample=options.do_sample,
        num_beams=1,
        pad_token_id=pad,
        eos_token_id=stops or None,
        **sampling,
    )
    device = next(model.parameters()).device
    input_ids = torch.tensor([ids], device=device)

    class WatchAnswer(StoppingCriteria):  # type: ignore[misc]
        """After each token: pass the answer so far on, and stop once the marker or a stop string shows up."""

        def __init__(self) -> None:
            self.told = ""

        def __call__(self, sequences: Any, scores: Any, **kwargs: Any) -> Any:
            answer = answer_text(tokenizer, sequences[0, len(ids) :].tolist(), stops, marker, options.stop, final=False)
            if on_text is not None and answer.text != self.told:
                self.told = answer.text
                on_text(answer.text)
            return torch.full((sequences.shape[0],), answer.stopped, dtype=torch.bool, device=sequences.device)

    set_seed(options.seed)  # the same request draws the same tokens; greedy ignores it
    with torch.no_grad():
        output = model.generate(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids), generation_config=settings,
            stopping_criteria=StoppingCriteriaList([WatchAnswer()]),
        )  # fmt: skip
    answer = answer_text(tokenizer, output[0, len(ids) :].tolist(), stops, marker, options.stop)
    return Generation(answer.text, len(answer.kept), answer.stopped)


def _plain_prompt(conversation: Sequence[Mapping[str, Any]]) -> str:
    """The Stanford prompt of a conversation, for a model trained on Alpaca rows without a chat template.

    Such a model only ever saw one instruction, after an optional system prompt.
    """
    roles = [message["role"] for message in conversation]
    if roles not in (["user"], ["system", "user"]):
        raise ConfigError(
            [Issue("this model has no chat template and was trained on single Alpaca instructions",
                   field="messages", expected="one user message, after an optional system message",
                   found=" → ".join(roles))],
            title="cannot generate",
        )
    system = str(conversation[0]["content"]) if roles[0] == "system" else ""
    return alpaca_prompt(str(conversation[-1]["content"]), "", system)


def _checked_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    issues = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in ROLES or not isinstance(
            message.get("content"), str
        ):
            issues.append(
                Issue("malformed message", field=f"messages[{index}]", expected=f"role in {ROLES} and text content")
            )
    if not messages:
        issues.append(Issue("empty conversation", field="messages", expected="at least one user message"))
    elif not issues and messages[-1]["role"] == "assistant":
        issues.append(
            Issue("the conversation already ends with an answer", field="messages", expected="a last user turn")
        )
    if issues:
        raise ConfigError(issues, title="cannot generate")
    return [dict(message) for message in messages]


def _device(requested: str | None) -> str:
    import torch

    if requested and requested != "auto":
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_from_spec(spec: Mapping[str, Any]) -> Generator:
    """Load the model a process spec names (see the module's docstring) for generation."""
    base_model = spec.get("base_model")
    if base_model:  # a base model alone: its own weights, no adapter and no run
        resolved = resolve_base(ModelRef(base_model["name"], base_model.get("revision")))
        return Generator.load(ModelFolder(resolved.path, BASE_LABEL), device=spec.get("device"))
    base = spec.get("base")
    return Generator.load(
        model_folder_from_spec(dict(spec)),
        base=ModelRef(base["name"], base.get("revision")) if base else None,
        allow_base_mismatch=bool(spec.get("allow_base_mismatch", False)),
        compare_base=bool(spec.get("compare_base", False)),
        device=spec.get("device"),
    )


def run_from_spec(
    generator: Generator, spec: Mapping[str, Any], *, on_text: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Answer the prompt or messages of a process spec with a loaded generator; the result as JSON.

    `on_text` hears the answer as it grows (see the module's docstring).
    """
    defaults = SamplingOptions()
    options = SamplingOptions(
        max_new_tokens=int(spec.get("max_new_tokens") or defaults.max_new_tokens),
        temperature=float(spec.get("temperature") or defaults.temperature),
        top_p=float(spec.get("top_p") or defaults.top_p),
        do_sample=bool(spec.get("do_sample", False)),
        seed=int(spec.get("seed") or 0),
        stop=tuple(str(stop) for stop in spec.get("stop") or ()),
    )
    compare = bool(spec.get("compare_base", False))
    return generator.run(
        spec.get("prompt"), messages=spec.get("messages"), options=options, compare_base=compare,
        tools=spec.get("tools") or None, on_text=on_text,
    ).to_dict()  # fmt: skip


def _tensor_bytes(model: Any) -> int:
    # Tied weights are one tensor seen twice: count each storage once.
    seen: dict[int, int] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        seen[tensor.data_ptr()] = tensor.numel() * tensor.element_size()
    return sum(seen.values())


def _handle(spec: dict[str, Any]) -> dict[str, Any]:
    return run_from_spec(load_from_spec(spec), spec)


if __name__ == "__main__":
    sys.exit(run_spec_main("python -m tunedeck.engine.generation.generation", _handle, None))
