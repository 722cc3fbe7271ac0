"""Serving the cluster to the household: the front door in front of llama-server and its keys (#34)."""
