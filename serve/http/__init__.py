"""The ingress's HTTP plumbing: the error shape and its handlers, the pure ASGI middlewares (JSON refusals,
the drain), the path convertor, the worker threads and what happens when a client goes away."""
