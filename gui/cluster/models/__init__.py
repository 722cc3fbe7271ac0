"""Getting a model: the model hub, generated demo models in the shapes people run, and the
demo's real weights.
"""
