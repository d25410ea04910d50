"""The documentation's generated parts, written from the code's declarations (run from the repository root).

``python -m docgen.config_reference --write``: the commented defaults of ``arew/configs/base/arew.yaml`` and
``docs/reference/configuration.md`` (every setting and every installed task's options);
``python -m docgen.panel_docs``: the dashboard's panel list in ``docs/guides/dashboards.md``;
``python -m docgen.lab_publish RUN_DIR``: an ``arew lab`` run's tables in ``docs/reference/lab-results.md`` and
``docs/guides/lab.md``, and its records in ``docs/reference/lab-*-runs.json``; ``python -m docgen.recipe_resources``:
the table of every paper task's GPUs and memory in ``docs/guides/recipes.md`` (from the recipes' dry runs). They live outside
the ``arew`` package because they write the repository's files (and the configuration reference reads every
installed task package); the tests check that the pages match what they would write.
"""
