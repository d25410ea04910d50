"""What a user reads after (or beside) a run, offline: the HTML report, the W&B dashboard and its panel list."""
