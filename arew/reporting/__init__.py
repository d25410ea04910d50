"""What a user watches of a run: the dashboard's panels (W&B and offline) and the rollout tables."""
