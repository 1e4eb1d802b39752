"""Serve deployments that host operator models: one replica loads its model once and serves batches."""
