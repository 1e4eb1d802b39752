"""Indices made over HTTP: the Indices the service holds, documents in (JSON, CSV, PDF, the multipart form),
their owners and roots, reading them, and the admin's view."""
