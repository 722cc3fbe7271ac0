"""The worker nodes: finding them (mDNS and by address), what the master knows of each and the
certificates it pinned at pairing, their health during a launch, the encrypted RPC tunnel, the
telemetry stream, and network failures in words.
"""
