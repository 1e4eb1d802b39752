"""Embedding operators: text columns to dense vectors."""
