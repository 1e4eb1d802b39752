"""The FastAPI routers of the flow side, one module per resource: tasks, saved flows, search, chats about a task,
indices, API keys and the web UI; ``serve.api`` includes them all, and nothing else should import them."""
