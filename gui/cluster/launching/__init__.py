"""Starting a model on the cluster: the launch request and its checks (the doctor), the launcher,
the placement check, the weights' transfer by the byte, and profiles that replay a launch.
"""
