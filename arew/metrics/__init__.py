"""What training logs beside verl's own metrics: the ``selflock/*`` correlations, the readable rollout
rows, and whether W&B can be logged to. Imported by the trainer and the agent loop at training time;
the offline tools in :mod:`arew.reporting` read what these write."""
