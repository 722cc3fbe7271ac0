"""Talking to a serving llama-server: the streaming chat client and the transcript that survives a
lost worker.
"""
