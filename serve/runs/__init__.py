"""A flow sent over HTTP, from its body to its run in the replica: the native bodies and top_k, the flow file and
spec it names, the deployment that serves a step, whether it can run now, the bounds of its steps and numbers, and
the replica's warm-up."""
