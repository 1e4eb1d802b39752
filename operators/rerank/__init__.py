"""Rerankers: rescore the top candidates of every query with a stronger model."""
