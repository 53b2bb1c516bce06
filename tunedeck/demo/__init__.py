"""What the demo and the test suite train on without downloading anything: tiny models and a built-in corpus.

`tiny_models` builds small, real architectures (Llama, GPT-2, ...) with a tokenizer trained on
`tiny_corpus`; `tunedeck models tiny` and `tunedeck demo` use them, and so do the tests and benchmarks.
"""
