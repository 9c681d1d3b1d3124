"""Rebuilding the rig's committed models: torch training, the DFlash graph, training data and GGUF export.

Development code, not part of the installed evalsuite package: `evalsuite rig models --retrain`,
`--train-dflash` and `--train-smollm2-dflash` reach it from a checkout.  `learned` trains the model that has
learned half the fixture problems (`train` and its torch forward pass), `dflash_train` and `smollm2_dflash` the
DFlash drafters (`dflash_graph`, `llama_torch`), and `math_problems` writes their template math questions.
"""
