"""The generation engines outside verl, and what the verl plugin's engines need patched.

:mod:`~arew.engines.hf_generation` (batched generation with transformers: ``arew eval``'s local models and
the CPU backend's hf rollout), :mod:`~arew.engines.tiny_models` (the random-weight models the smoke runs and
the tests build offline), :mod:`~arew.engines.vllm_cpu` (what vLLM's CPU build needs inside verl's training
loop; vLLM loads it in each engine process, so it imports neither verl nor vLLM at import time) and
:mod:`~arew.engines.source_guard` (a patch checks the source it patches first).
"""
