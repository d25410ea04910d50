"""The self-locking lab: a CPU testbed where a tiny agent plays the project's PE environment
through text and is trained with verl's estimators, with and without AReW (``arew lab``;
see docs/guides/lab.md)."""
