"""DeepSpeed ZeRO support: presets and config checks (config.py), the worker side
(runtime.py), checkpoint consolidation (consolidate.py) and memory estimates (estimate.py).
Named ``zero`` because a package named ``deepspeed`` would shadow the library."""
