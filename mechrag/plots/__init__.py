"""Paper-ready matplotlib figures; every function takes a result and returns a Figure."""

from mechrag.plots.sources import plot_source_scores, plot_token_scores, save_figure

__all__ = ["plot_source_scores", "plot_token_scores", "save_figure"]
