"""Deprecated (0.3): the sweep command's helpers live in :mod:`mechrag.cli.sweep`; this path
works for one release. It is a command-line module: no library module imports it."""

import warnings

from mechrag.cli.sweep import (  # noqa: F401 - re-exported from the old path
    add_backend_arguments,
    add_data_arguments,
    backend_from,
    config_from,
    data_options,
    parse_option,
    print_summary,
    run_with_args,
)

warnings.warn(
    "mechrag.sweep.cli moved to mechrag.cli.sweep; the old path goes in 0.4",
    DeprecationWarning,
    stacklevel=2,
)
