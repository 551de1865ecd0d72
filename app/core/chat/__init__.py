"""Conversations: the store and its recovery, trash, versions, export, chat templates and their sandbox,
unsent text, reasoning, saved KV caches."""
