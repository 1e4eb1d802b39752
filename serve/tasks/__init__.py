"""Tasks on Ray: the task store (tasks, chats, the rows of the indices) and its database, the task workers and
their registry, an upload's ingestion, what a task answers, retention, and the spare workers."""
