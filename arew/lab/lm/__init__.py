"""The self-locking lab with a language-model policy, trained by verl\x27s main_ppo on the CPU (``arew lm-lab``)."""
