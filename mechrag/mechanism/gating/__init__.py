"""Gating: gates on heads and MLPs (:mod:`~.gates`), the rules that choose them from a
localisation (:mod:`~.rules`), decoding with gates that fire at low-echo steps
(:mod:`~.decoding`), and the side-by-side comparison ``mechrag gate`` reports
(:mod:`~.comparison`, the workflow on top: it builds the gated response's case)."""
