"""Keeping a launch serving when a worker is lost: the supervisor, its events as data, and the
same events in the user's words.
"""
