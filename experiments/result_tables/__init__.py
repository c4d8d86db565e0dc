"""The generated tables of ``experiments/RESULTS.md``, one module per family of tables
(each registers its own in its ``TABLES``; ``make_results.py`` gathers them in order);
:mod:`result_tables.common` holds what the families share."""
