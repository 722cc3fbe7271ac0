"""Which layers go where: plans and their memory fit, the devices of a node, the cost model, the
fastest split, the measurements it is planned from, and the split being edited.
"""
