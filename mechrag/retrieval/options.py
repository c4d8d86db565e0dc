"""The names of the retriever explanation's options, in a module without torch or captum, so
that the command line offers them as choices before anything heavy loads.

Their meaning is documented where they are used: :mod:`mechrag.retrieval.integrated_gradients`
(the baselines, the integration methods) and :mod:`mechrag.retrieval.rag_e` (the retriever scores).
"""

BASELINES = ("unk", "pad", "mask", "zero", "zero_all")
INTEGRATION_METHODS = ("gausslegendre", "riemann_trapezoid")
RETRIEVER_SCORES = ("position", "similarity")
