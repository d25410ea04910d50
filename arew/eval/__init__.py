"""``arew eval``: any model on any task, through the same episode driver as training."""
