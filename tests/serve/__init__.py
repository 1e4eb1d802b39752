"""Serve tests: one package, so that they share one running Serve app (conftest.serve_app)."""
