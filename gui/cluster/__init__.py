"""herd's core, free of Qt: what the desktop app and the headless ``herd`` commands share.

Its rooms, from the floor up (a room imports only from rooms below it):

- :mod:`gui.cluster.llama`: facts about llama.cpp: the engine, what a GGUF holds, llama-server's
  command line, running it and reading its log.
- :mod:`gui.cluster.chat`: talking to a serving llama-server; the transcript that survives a loss.
- :mod:`gui.cluster.nodes`: the worker nodes: discovery, the pairing store, health, the encrypted
  RPC tunnel, telemetry.
- :mod:`gui.cluster.planning`: which layers go where: plans, the memory fit, the cost model, the
  fastest split, the measurements it is planned from, the split being edited.
- :mod:`gui.cluster.models`: getting a model: the hub, generated demo models, the demo's weights.
- :mod:`gui.cluster.launching`: a launch request, its checks, starting it, verifying the placement,
  the weights' transfer, profiles.
- :mod:`gui.cluster.failover`: keeping a launch serving when a worker is lost.
- :mod:`gui.cluster.workspace` (the app's state) and :mod:`gui.cluster.demo_cluster` (a whole
  cluster on one PC) sit on top.
"""
