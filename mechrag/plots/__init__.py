"""Paper-ready matplotlib figures; every function takes a result and returns a Figure."""

from mechrag.plots.results import plot_scores, save_figure
from mechrag.plots.sources import plot_source_scores, plot_token_scores

__all__ = ["plot_scores", "plot_source_scores", "plot_token_scores", "save_figure"]
