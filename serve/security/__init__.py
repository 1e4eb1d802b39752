"""Who may call and what a caller may name: API keys and their revocation, the loopback browser guard, the spec
guard, and the service's files kept private."""
