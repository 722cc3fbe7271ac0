"""herd-agent: the worker daemon. Advertises the node over mDNS, pairs with a master by PIN and
runs llama.cpp's RPC worker on its behalf. Imports nothing from ``gui``."""

__version__ = "0.1.0"
