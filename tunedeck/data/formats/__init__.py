"""Row formats: how each source shape is recognised, checked and turned into a canonical row.

Fifteen source formats map onto seven canonical kinds (the eight preference formats and their
`preference` and `unpaired_preference` rows are described in `preference`):

| source format       | recognised by                     | kind                | canonical row |
|---------------------|-----------------------------------|---------------------|---------------|
| `text`              | `text`                            | `text`              | `text` |
| `prompt_completion` | `prompt`, `completion`            | `prompt_completion` | `prompt`, `completion` (or chat) |
| `alpaca`            | `instruction`, `output`           | `chat`              | `messages`, `plain_prompt` |
| `chat`              | `messages` (OpenAI style)         | `chat`              | `messages` |
| `sharegpt`          | `conversations` of `from`/`value` | `chat`              | `messages` |
| `classification`    | `text`, `label` (or a named field)| `classification`    | `text`, `label` (a string) |
| `extraction`        | `input`, `output` (JSON object)   | `extraction`        | `input`, `output` |
| `preference` (+3)   | `chosen`, `rejected` (+ OpenAI's) | `preference`        | `prompt`, `chosen`, `rejected` |
| `unpaired_preference`(+3)| `prompt`, `completion`, `label` | `unpaired_preference` | `prompt`, `completion`, `label`|

One module per family reads its formats: `text`; `instruction` (prompt/completion, Alpaca,
extraction); `chat` (OpenAI messages, ShareGPT); `classification`; `preference` (the paired
and unpaired preference formats). `registry` tells a row's format, refuses the shapes training
cannot take, and dispatches to the family (`normalise`). `field_readers` holds how every
family reads one field; `row_text` gives the text of a canonical row of any kind.
The modules are imported by name: this package re-exports nothing.
"""
